/**
 * Agents for the contact-center API tests (test/api/agents.test.ts, realtime.test.ts): members of a workspace made
 * as `switchboard members create` makes them, each with a live browser device unless told otherwise and a member
 * token signed with the service's own key; and the `agent.state_changed` events of a member, in order. For the core
 * tests of distribution and ringing: members, their availability and their desk phones' registrations.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { mintToken } from '../../api/tokens.ts';
import { registerDevice } from '../../core/devices/devices.ts';
import { applyRegistration } from '../../core/devices/sip-bindings.ts';
import { createMember } from '../../core/identity/members.ts';
import { setStateByPerson } from '../../core/queues/entries.ts';
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

/** A new member of the workspace (a unique email starting with `name`), with `calls:*`; its id. */
export async function newMember(pool: pg.Pool, workspaceId: string, name = 'agent'): Promise<string> {
  const member = await createMember(pool, {
    workspaceId,
    email: `${name}-${randomUUID()}@example.com`,
    scopes: ['calls:*'],
  });
  return member.id;
}

/** Each member set `available` by the application, in order (operation 58's core); throws unless each changed. */
export async function makeAvailable(pool: pg.Pool, workspaceId: string, memberIds: readonly string[]): Promise<void> {
  for (const memberId of memberIds) {
    const set = await setStateByPerson(pool, {
      workspaceId,
      memberId,
      state: 'available',
      reason: null,
      actor: 'application',
    });
    if (set.outcome !== 'changed') throw new Error(`available: ${set.outcome}`);
  }
}

/** A REGISTER of a `sip` device applied as the registrar applies it: one contact from 192.0.2.7:`port` over UDP. */
export async function bindDeskPhone(
  pool: pg.Pool,
  binding: { deviceId: string; username: string; uri: string; port: number; now: Date; expiresSecs: number },
): Promise<void> {
  const done = await applyRegistration(pool, {
    deviceId: binding.deviceId,
    username: binding.username,
    callId: randomUUID(),
    cseq: 1,
    source: { protocol: 'udp', address: '192.0.2.7', port: binding.port },
    engineOwner: 'engine-test',
    now: binding.now,
    contacts: [{ uri: binding.uri, expiresSecs: binding.expiresSecs }],
    maxBindings: 5,
  });
  if (done.outcome !== 'registered') throw new Error(`register: ${done.outcome}`);
}
