/**
 * Agents for the contact-center API tests (test/api/agents.test.ts, realtime.test.ts): members of a workspace made
 * as `switchboard members create` makes them, each with a live browser device unless told otherwise and a member
 * token signed with the service's own key; and the `agent.state_changed` events of a member, in order.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { mintToken } from '../../api/tokens.ts';
import { registerDevice } from '../../core/devices/devices.ts';
import { createMember } from '../../core/identity/members.ts';
import type { Scope } from '../../core/scopes.ts';
import type { WorkspaceSetup } from './service.ts';

export interface TestAgent {
  id: string;
  email: string;
  /** A member token of the agent, with the scopes asked for. */
  token: string;
}

export async function addAgent(
  pool: pg.Pool,
  tokenKey: Uint8Array,
  setup: WorkspaceSetup,
  options: { device?: boolean; scopes?: Scope[]; name?: string } = {},
): Promise<TestAgent> {
  const scopes = options.scopes ?? ['calls:*'];
  const email = `agent-${randomUUID()}@example.com`;
  const member = await createMember(pool, {
    workspaceId: setup.workspace.id,
    email,
    scopes,
    ...(options.name === undefined ? {} : { name: options.name }),
  });
  if (options.device !== false) {
    await registerDevice(
      pool,
      setup.workspace.id,
      { memberId: member.id },
      { kind: 'browser', name: null, clientId: null },
    );
  }
  const { token } = await mintToken(tokenKey, {
    kind: 'member',
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    externalWorkspaceId: setup.workspace.externalWorkspaceId,
    subjectId: member.id,
    externalUserId: null,
    scopes,
  });
  return { id: member.id, email, token };
}

/** The member's `agent.state_changed` events as `previous>state:actor[:reason]`, oldest first. */
export async function agentEvents(pool: pg.Pool, memberId: string): Promise<string[]> {
  const result = await pool.query<{ type: string; payload: string }>(
    'SELECT type, payload::text AS payload FROM events WHERE stream_key = $1 ORDER BY sequence',
    [`agent:${memberId}`],
  );
  return result.rows.map((row) => {
    if (row.type !== 'agent.state_changed') return row.type;
    const { agent } = JSON.parse(row.payload) as {
      agent: { state: string; previousState: string | null; actor: string; reason: string | null };
    };
    return `${agent.previousState}>${agent.state}:${agent.actor}${agent.reason === null ? '' : `:${agent.reason}`}`;
  });
}
