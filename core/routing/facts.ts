/**
 * What the validator checks a definition against (validate.ts `WorkspaceFacts`), read from the workspace through the
 * modules of its tables. Inside a save or publish the queues, schedules and AI agents a definition names are
 * share-locked until commit, so a delete of one of them either commits first (the definition then names an unknown
 * one and is refused) or waits for the save and then finds the plan using it (409 `in_use`): never a saved or
 * published plan pointing at a deleted one.
 */
import type { Queryable } from '../database.ts';
import { memberIdsIn } from '../identity/members.ts';
import { userIdsIn } from '../identity/users.ts';
import { destinationPolicyOf } from '../identity/workspaces.ts';
import { isUuid } from '../ids.ts';
import { aiAgentProvidersIn } from './ai-agents.ts';
import { queueIdsIn } from '../queues/queues.ts';
import { scheduleIdsIn } from './schedules.ts';
import type { PlanReferences, WorkspaceFacts } from './validate.ts';

export async function workspaceFacts(
  db: Queryable,
  workspaceId: string,
  references: PlanReferences,
  lock: boolean,
): Promise<WorkspaceFacts> {
  const ids = (list: string[]) => list.filter(isUuid);
  // One after another: inside a transaction they share one connection.
  const queues = await queueIdsIn(db, workspaceId, ids(references.queueIds), lock);
  const schedules = await scheduleIdsIn(db, workspaceId, ids(references.scheduleIds), lock);
  const agents = await aiAgentProvidersIn(db, workspaceId, ids(references.aiAgentIds), lock);
  const members = await memberIdsIn(db, workspaceId, ids(references.memberIds));
  const users = await userIdsIn(db, workspaceId, ids(references.userIds));
  const destinationPolicy = await destinationPolicyOf(db, workspaceId);
  // PostgreSQL answers ids in lower case; a definition may write them in upper case (both are the same UUID).
  const asWritten = (found: { id: string }[], written: string[]) => {
    const known = new Set(found.map((row) => row.id));
    return new Set(written.filter((id) => known.has(id.toLowerCase())));
  };
  const providers = new Map(agents.map((row) => [row.id, row.provider]));
  return {
    queues: asWritten(queues, references.queueIds),
    schedules: asWritten(schedules, references.scheduleIds),
    aiAgents: new Map(
      references.aiAgentIds.flatMap((id) => {
        const provider = providers.get(id.toLowerCase());
        return provider === undefined ? [] : [[id, provider] as const];
      }),
    ),
    members: asWritten(members, references.memberIds),
    users: asWritten(users, references.userIds),
    destinationPolicy: destinationPolicy ?? { allowedPrefixes: [], blockedPrefixes: [] },
  };
}
