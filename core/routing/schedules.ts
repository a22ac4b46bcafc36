/**
 * The `schedules` table: business hours of a workspace (the rules are in schedule.ts), written by the REST API
 * (operations 39-43), read by routing plans' checks (facts.ts) and by the `hours` step of a running call.
 */
import type { Queryable } from '../database.ts';
import { type PageWindow, workspacePage, workspaceRow } from '../rows.ts';
import type { ScheduleHours } from './opening-hours.ts';

export interface ScheduleRow {
  id: string;
  workspace_id: string;
  name: string;
  timezone: string;
  weekly_hours: ScheduleHours['weeklyHours'];
  exceptions: ScheduleHours['exceptions'];
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns = `id, workspace_id, name, timezone, weekly_hours, exceptions, created_at, updated_at,
  created_at::text AS cursor_ts`;

const scheduleTable = { table: 'schedules', columns, name: 'schedule' };

export async function createSchedule(
  db: Queryable,
  workspaceId: string,
  name: string,
  hours: ScheduleHours,
): Promise<ScheduleRow> {
  const result = await db.query<ScheduleRow>(
    `INSERT INTO schedules (workspace_id, name, timezone, weekly_hours, exceptions) VALUES ($1, $2, $3, $4, $5)
         RETURNING ${columns}`,
    [workspaceId, name, hours.timezone, JSON.stringify(hours.weeklyHours), JSON.stringify(hours.exceptions)],
  );
  return result.rows[0] as ScheduleRow;
}

export function listSchedules(db: Queryable, workspaceId: string, window: PageWindow): Promise<ScheduleRow[]> {
  return workspacePage<ScheduleRow>(db, scheduleTable, workspaceId, window);
}

/** The workspace's schedule, or 404; with `lock`, locked until commit (FOR UPDATE). */
export function scheduleById(db: Queryable, workspaceId: string, id: string, lock = false): Promise<ScheduleRow> {
  return workspaceRow<ScheduleRow>(db, scheduleTable, id, workspaceId, lock);
}

export async function updateSchedule(
  db: Queryable,
  id: string,
  name: string,
  hours: ScheduleHours,
): Promise<ScheduleRow> {
  const result = await db.query<ScheduleRow>(
    `UPDATE schedules SET name = $2, timezone = $3, weekly_hours = $4, exceptions = $5,
                updated_at = clock_timestamp()
          WHERE id = $1 RETURNING ${columns}`,
    [id, name, hours.timezone, JSON.stringify(hours.weeklyHours), JSON.stringify(hours.exceptions)],
  );
  return result.rows[0] as ScheduleRow;
}

export async function deleteSchedule(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM schedules WHERE id = $1', [id]);
}

/** The hours of the workspace's schedule `id` (written in any case), for a running call's `hours` step. */
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

/** Of `ids` (UUIDs), the workspace's schedules; with `lock`, share-locked until commit (facts.ts). */
export async function scheduleIdsIn(
  db: Queryable,
  workspaceId: string,
  ids: readonly string[],
  lock: boolean,
): Promise<{ id: string }[]> {
  const share = lock ? 'FOR SHARE' : '';
  const result = await db.query<{ id: string }>(
    `SELECT id FROM schedules WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids],
  );
  return result.rows;
}
