/**
 * What the queue tests need around the engine (docs/contact-center.md): a number whose plan puts callers in a queue
 * of agents, each agent a member with a browser device (registered and kept present with the core functions the API
 * uses, as the phone library would through the API); agents' states set as operation 58 sets them; offers read,
 * accepted and declined as operations 63-65 do; the events of a call or an agent.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import { agentOf } from '../../core/agents/agent-states.ts';
import { inTransaction } from '../../core/database.ts';
import { registerDevice, renewPresence } from '../../core/devices/devices.ts';
import { acceptOffer, declineOffer, type OfferRow, waitingOffers } from '../../core/devices/offers.ts';
import { createMember } from '../../core/identity/members.ts';
import { setStateByPerson } from '../../core/queues/entries.ts';
import { createQueue, type QueueFields } from '../../core/queues/queues.ts';
import { type Line, numberRunning, workspaceApi } from './phone-lines.ts';
import type { TestService } from './service.ts';
import { until } from './until.ts';

export interface Agent {
  memberId: string;
  deviceId: string;
}

export interface QueueLine {
  line: Line;
  workspaceId: string;
  queueId: string;
  agents: Agent[];
}

/**
 * A number whose plan is `q` (a queue step, with `priority` when given) then, on overflow, `full` (hangup); the
 * queue's agents each with one browser device whose presence is renewed every 20 s while the test runs, and the
 * queue's hold prompt and announcements as `settings` has them. Agents start `offline`.
 */
export async function queueLine(
  t: ExecutionContext,
  service: TestService,
  options: {
    agents: number;
    wrapUpSecs?: number;
    maxWaitSecs?: number;
    offerCallback?: boolean;
    priority?: number;
    settings?: Pick<QueueFields, 'holdPrompt' | 'announcePosition' | 'announceExpectedWait' | 'announceIntervalSecs'>;
  },
): Promise<QueueLine> {
  const tenant = await workspaceApi(service);
  const workspaceId = tenant.setup.workspace.id as string;
  const agents: Agent[] = [];
  for (let index = 0; index < options.agents; index += 1) {
    const member = await createMember(service.pool, {
      workspaceId,
      email: `agent${index}-${randomUUID()}@example.com`,
      scopes: ['calls:*', 'devices:*'],
    });
    const registered = await registerDevice(
      service.pool,
      workspaceId,
      { memberId: member.id },
      { kind: 'browser', name: `agent ${index}`, clientId: null },
    );
    if (registered.outcome !== 'created') throw new Error(`device: ${registered.outcome}`);
    agents.push({ memberId: member.id, deviceId: registered.device.id });
  }
  const presence = setInterval(() => {
    for (const agent of agents) void renewPresence(service.pool, agent.deviceId).catch(() => {});
  }, 20_000);
  t.teardown(() => clearInterval(presence));
  const queue = await createQueue(service.pool, workspaceId, {
    name: 'Support',
    strategy: 'longest_idle',
    wrapUpSecs: options.wrapUpSecs ?? 0,
    memberIds: agents.map((agent) => agent.memberId),
    ...options.settings,
  });
  const line = await numberRunning(
    t,
    service,
    {
      entry: 'q',
      steps: {
        q: {
          type: 'queue',
          queueId: queue.id,
          maxWaitSecs: options.maxWaitSecs ?? 300,
          overflow: 'full',
          offerCallback: options.offerCallback ?? false,
          ...(options.priority === undefined ? {} : { priority: options.priority }),
        },
        full: { type: 'hangup', message: null },
      },
    },
    tenant,
  );
  return { line, workspaceId, queueId: queue.id, agents };
}

/** The agent makes themself available, as operation 58 does with a member token. */
export async function setAvailable(service: TestService, workspaceId: string, agent: Agent): Promise<void> {
  const set = await setStateByPerson(service.pool, {
    workspaceId,
    memberId: agent.memberId,
    state: 'available',
    reason: null,
    actor: `member:${agent.memberId}`,
  });
  if (set.outcome !== 'changed') throw new Error(`available: ${set.outcome}`);
}

export async function agentState(service: TestService, workspaceId: string, agent: Agent) {
  return (await agentOf(service.pool, workspaceId, agent.memberId))?.state;
}

/** The device's first waiting offer that is not one of `seen`, read as operation 63 reads them. */
export function nextOffer(service: TestService, agent: Agent, seen: readonly string[] = []): Promise<OfferRow> {
  return until('an offer', async () => {
    const offers = await waitingOffers(service.pool, agent.deviceId, { limit: 10 });
    return offers.find((offer) => !seen.includes(offer.id));
  });
}

/** Accepts the offer with the browser's SDP answer, as operation 64 does. */
export async function accept(service: TestService, agent: Agent, offer: OfferRow, sdp: string): Promise<void> {
  const decided = await inTransaction(service.pool, (db) =>
    acceptOffer(db, offer.workspace_id, { memberId: agent.memberId }, offer.id, sdp),
  );
  if (decided.outcome !== 'done') throw new Error(`accept: ${decided.outcome}`);
}

/** Declines the offer, as operation 65 does. */
export async function decline(service: TestService, agent: Agent, offer: OfferRow): Promise<void> {
  const decided = await inTransaction(service.pool, (db) =>
    declineOffer(db, offer.workspace_id, { memberId: agent.memberId }, offer.id),
  );
  if (decided.outcome !== 'done') throw new Error(`decline: ${decided.outcome}`);
}

export interface StoredEvent {
  type: string;
  payload: Record<string, unknown>;
}

/** The events of a stream (`call:<id>`, `agent:<memberId>`), in order. */
export async function streamEvents(service: TestService, stream: string): Promise<StoredEvent[]> {
  const result = await service.pool.query<{ type: string; payload: string }>(
    'SELECT type, payload::text AS payload FROM events WHERE stream_key = $1 ORDER BY sequence',
    [stream],
  );
  return result.rows.map((row) => ({ type: row.type, payload: JSON.parse(row.payload) as Record<string, unknown> }));
}

/** A call's events as `type` (queue events as `type:state`). */
export async function callTimeline(service: TestService, callId: string): Promise<string[]> {
  return (await streamEvents(service, `call:${callId}`)).map((event) =>
    event.type.startsWith('queue.') ? `${event.type}:${(event.payload.queue as { state: string }).state}` : event.type,
  );
}

/** An agent's state changes as `previous>state:actor` (and `:reason` when there is one). */
export async function agentTimeline(service: TestService, agent: Agent): Promise<string[]> {
  return (await streamEvents(service, `agent:${agent.memberId}`)).map((event) => {
    const { state, previousState, actor, reason } = event.payload.agent as Record<string, string | null>;
    return `${previousState}>${state}:${actor}${reason === null ? '' : `:${reason}`}`;
  });
}

/** The first call to the number (held by `engineOwner` when given), once there is one. */
export async function callTo(service: TestService, e164: string, engineOwner?: string): Promise<string> {
  return until('the call', async () => {
    const result = await service.pool.query<{ id: string }>(
      'SELECT id FROM calls WHERE to_number = $1 AND ($2::text IS NULL OR engine_owner = $2) ORDER BY started_at',
      [e164, engineOwner ?? null],
    );
    return result.rows[0]?.id;
  });
}

export async function callRow(service: TestService, callId: string) {
  const result = await service.pool.query<{
    state: string;
    end_reason: string | null;
    ended_at: Date | null;
    steps_taken: string[];
    engine_owner: string;
  }>('SELECT state, end_reason, ended_at, steps_taken, engine_owner FROM calls WHERE id = $1', [callId]);
  return result.rows[0];
}

/** The call's row once it has ended (its `call.ended` written). */
export async function endedCall(service: TestService, callId: string) {
  return until('the call to end', async () => {
    const row = await callRow(service, callId);
    return row?.ended_at === null ? undefined : row;
  });
}

export async function entryOf(service: TestService, callId: string) {
  const result = await service.pool.query<{
    id: string;
    state: string;
    callback_number: string | null;
    connected_at: Date | null;
  }>('SELECT id, state, callback_number, connected_at FROM queue_entries WHERE call_id = $1', [callId]);
  return result.rows[0];
}
