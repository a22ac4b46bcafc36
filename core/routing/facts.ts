/**
 * What the validator checks a definition against (validate.ts `WorkspaceFacts`), read from the workspace. Inside a
 * save or publish the queues, schedules and AI agents a definition names are share-locked until commit, so a delete
 * of one of them either commits first (the definition then names an unknown one and is refused) or waits for the
 * save and then finds the plan using it (409 `in_use`): never a saved or published plan pointing at a deleted one.
 */
import type { Queryable } from '../database.ts';
import { isUuid } from '../ids.ts';
import type { PlanReferences, WorkspaceFacts } from './validate.ts';

export async function workspaceFacts(
  db: Queryable,
  workspaceId: string,
  references: PlanReferences,
  lock: boolean,
): Promise<WorkspaceFacts> {
  const ids = (list: string[]) => list.filter(isUuid);
  const share = lock ? 'FOR SHARE' : '';
  // One after another: inside a transaction they share one connection.
  const queues = await db.query<{ id: string }>(
    `SELECT id FROM queues WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids(references.queueIds)],
  );
  const schedules = await db.query<{ id: string }>(
    `SELECT id FROM schedules WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids(references.scheduleIds)],
  );
  const agents = await db.query<{ id: string; provider: string }>(
    `SELECT id, provider FROM ai_agents WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids(references.aiAgentIds)],
  );
  const members = await db.query<{ id: string }>(
    'SELECT id FROM members WHERE workspace_id = $1 AND id = ANY ($2::uuid[])',
    [workspaceId, ids(references.memberIds)],
  );
  const users = await db.query<{ id: string }>(
    'SELECT id FROM app_users WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) AND removed_at IS NULL',
    [workspaceId, ids(references.userIds)],
  );
  const workspace = await db.query<{ destination_policy: WorkspaceFacts['destinationPolicy'] }>(
    'SELECT destination_policy FROM workspaces WHERE id = $1',
    [workspaceId],
  );
  // PostgreSQL answers ids in lower case; a definition may write them in upper case (both are the same UUID).
  const asWritten = (found: { id: string }[], written: string[]) => {
    const known = new Set(found.map((row) => row.id));
    return new Set(written.filter((id) => known.has(id.toLowerCase())));
  };
  const providers = new Map(agents.rows.map((row) => [row.id, row.provider]));
  return {
    queues: asWritten(queues.rows, references.queueIds),
    schedules: asWritten(schedules.rows, references.scheduleIds),
    aiAgents: new Map(
      references.aiAgentIds.flatMap((id) => {
        const provider = providers.get(id.toLowerCase());
        return provider === undefined ? [] : [[id, provider] as const];
      }),
    ),
    members: asWritten(members.rows, references.memberIds),
    users: asWritten(users.rows, references.userIds),
    destinationPolicy: workspace.rows[0]?.destination_policy ?? { allowedPrefixes: [], blockedPrefixes: [] },
  };
}
