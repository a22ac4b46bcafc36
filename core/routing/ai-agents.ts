/**
 * The `ai_agents` table: the voice bots an `ai_answer` step hands callers to, written by the REST API (operations
 * 44-48; the provider's API key arrives here sealed), read by routing plans' checks (facts.ts).
 */
import type { Queryable } from '../database.ts';
import { type PageWindow, workspacePage, workspaceRow } from '../rows.ts';

export interface AgentRow {
  id: string;
  workspace_id: string;
  name: string;
  provider: string;
  connection: Record<string, unknown>;
  api_key: string | null;
  minute_cap: number | null;
  seconds_used: string;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns = `id, workspace_id, name, provider, connection, api_key, minute_cap, seconds_used, created_at, updated_at,
  created_at::text AS cursor_ts`;

const agentTable = { table: 'ai_agents', columns, name: 'AI agent' };

export interface AgentFields {
  name: string;
  provider: string;
  connection: unknown;
  /** Sealed (core/sealing.ts); null: none. */
  apiKey: string | null;
  minuteCap: number | null;
}

export async function createAiAgent(db: Queryable, workspaceId: string, fields: AgentFields): Promise<AgentRow> {
  const result = await db.query<AgentRow>(
    `INSERT INTO ai_agents (workspace_id, name, provider, connection, api_key, minute_cap)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${columns}`,
    [workspaceId, fields.name, fields.provider, JSON.stringify(fields.connection), fields.apiKey, fields.minuteCap],
  );
  return result.rows[0] as AgentRow;
}

export function listAiAgents(db: Queryable, workspaceId: string, window: PageWindow): Promise<AgentRow[]> {
  return workspacePage<AgentRow>(db, agentTable, workspaceId, window);
}

/** The workspace's AI agent, or 404; with `lock`, locked until commit (FOR UPDATE). */
export function aiAgentById(db: Queryable, workspaceId: string, id: string, lock = false): Promise<AgentRow> {
  return workspaceRow<AgentRow>(db, agentTable, id, workspaceId, lock);
}

export async function updateAiAgent(db: Queryable, id: string, fields: AgentFields): Promise<AgentRow> {
  const result = await db.query<AgentRow>(
    `UPDATE ai_agents SET name = $2, provider = $3, connection = $4, api_key = $5, minute_cap = $6,
                updated_at = clock_timestamp()
          WHERE id = $1 RETURNING ${columns}`,
    [id, fields.name, fields.provider, JSON.stringify(fields.connection), fields.apiKey, fields.minuteCap],
  );
  return result.rows[0] as AgentRow;
}

export async function deleteAiAgent(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM ai_agents WHERE id = $1', [id]);
}

/** Of `ids` (UUIDs), the workspace's AI agents with their providers; with `lock`, share-locked until commit. */
export async function aiAgentProvidersIn(
  db: Queryable,
  workspaceId: string,
  ids: readonly string[],
  lock: boolean,
): Promise<{ id: string; provider: string }[]> {
  const share = lock ? 'FOR SHARE' : '';
  const result = await db.query<{ id: string; provider: string }>(
    `SELECT id, provider FROM ai_agents WHERE workspace_id = $1 AND id = ANY ($2::uuid[]) ${share}`,
    [workspaceId, ids],
  );
  return result.rows;
}
