/**
 * The schedules table (business hours of a workspace). What a schedule means (open or closed at an instant) is pure
 * code in `schedule.ts`; this module reads the stored hours.
 */
import type { Queryable } from '../database.ts';
import type { ScheduleHours } from './schedule.ts';

/** A workspace's schedule as a plan's `hours` step reads it; undefined when there is none with that id. */
export async function scheduleHours(
  db: Queryable,
  workspaceId: string,
  id: string,
): Promise<ScheduleHours | undefined> {
  const result = await db.query<{
    timezone: string;
    weekly_hours: ScheduleHours['weeklyHours'];
    exceptions: ScheduleHours['exceptions'];
  }>('SELECT timezone, weekly_hours, exceptions FROM schedules WHERE id = $1::uuid AND workspace_id = $2', [
    id.toLowerCase(),
    workspaceId,
  ]);
  const row = result.rows[0];
  return row === undefined
    ? undefined
    : { timezone: row.timezone, weeklyHours: row.weekly_hours, exceptions: row.exceptions };
}
