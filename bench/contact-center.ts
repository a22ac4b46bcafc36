/**
 * The contact center `npm run bench` measures operation 81 on (bench/run.ts): in one workspace, 20 queues of 10
 * agents each (200 members, each with a live browser device), 500 callers waiting, agents in every state; and a
 * history the live figures must not read: 20,000 ended calls and 20,000 queue entries that left over the past two
 * days (about a hundred of them in the last 15 minutes).
 *
 * The live rows are made with the core functions (enterQueue, distribute, answerEntry, setStateByPerson), as the
 * engine and the API make them; the history is inserted in bulk.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { startCall } from '../core/calls/calls.ts';
import { registerDevice } from '../core/devices/devices.ts';
import { createMember } from '../core/identity/members.ts';
import { answerEntry, enterQueue, setStateByPerson } from '../core/queues/entries.ts';
import { distribute } from '../core/queues/distribution.ts';
import { createQueue } from '../core/queues/queues.ts';

export const shape = { queues: 20, agentsPerQueue: 10, waiting: 500, history: 20_000 };

async function newCall(pool: pg.Pool, applicationId: string, workspaceId: string) {
  return startCall(pool, {
    applicationId,
    workspaceId,
    direction: 'inbound',
    from: '+14155550100',
    to: '+14155550199',
    phoneNumberId: null,
    routingPlanId: null,
    routingPlanVersion: null,
    engineOwner: 'bench',
    sipCallId: randomUUID(),
  });
}

export async function seedContactCenter(pool: pg.Pool, applicationId: string, workspaceId: string): Promise<void> {
  const queueIds: string[] = [];
  // Per queue: 3 callers answered (agents on a call), 2 offered (agents offered), the rest of the 500 waiting. Each
  // queue is made whole before the next, so that its agents' presence leases (60 s) are live while it distributes.
  const perQueue = shape.waiting / shape.queues + 3;
  for (let q = 0; q < shape.queues; q += 1) {
    const memberIds: string[] = [];
    for (let a = 0; a < shape.agentsPerQueue; a += 1) {
      const member = await createMember(pool, {
        workspaceId,
        email: `agent-${q}-${a}@example.com`,
        scopes: ['calls:*'],
      });
      const device = { kind: 'browser' as const, name: null, clientId: null };
      const registered = await registerDevice(pool, workspaceId, { memberId: member.id }, device);
      if (registered.outcome !== 'created') throw new Error(`bench: device ${registered.outcome}`);
      memberIds.push(member.id);
      // Seven of ten agents sign in; one of them goes away; three stay offline.
      if (a < 7) {
        const set = await setStateByPerson(pool, {
          workspaceId,
          memberId: member.id,
          state: a === 6 ? 'away' : 'available',
          reason: null,
          actor: 'application',
        });
        if (set.outcome !== 'changed') throw new Error(`bench: agent state ${set.outcome}`);
      }
    }
    const queue = await createQueue(pool, workspaceId, {
      name: `Queue ${String(q).padStart(2, '0')}`,
      strategy: 'longest_idle',
      wrapUpSecs: 0,
      memberIds,
    });
    queueIds.push(queue.id);
    for (let index = 0; index < perQueue; index += 1) {
      const call = await newCall(pool, applicationId, workspaceId);
      await enterQueue(pool, { callId: call.id, queueId: queue.id, engineOwner: 'bench' });
    }
    for (let index = 0; index < 5; index += 1) {
      const offered = await distribute(pool, queue.id);
      if (offered === undefined) throw new Error(`bench: nobody to offer a caller to (queue ${q}, offer ${index})`);
      if (index < 3) await answerEntry(pool, offered.entry.id, offered.memberIds[0] as string);
    }
  }
  // The history: ended calls, and entries that left over the last two days (the figures read the last 15 minutes).
  await pool.query(
    `INSERT INTO calls (application_id, workspace_id, direction, from_number, to_number, state, engine_owner,
                        started_at, ended_at, end_reason, created_at)
     SELECT $1, $2, 'inbound', '+14155550100', '+14155550199', 'ended', 'bench',
            now() - make_interval(secs => n * 8.64), now() - make_interval(secs => n * 8.64 - 60), 'caller_hangup',
            now() - make_interval(secs => n * 8.64)
       FROM generate_series(1, $3) AS n`,
    [applicationId, workspaceId, shape.history],
  );
  await pool.query(
    `INSERT INTO queue_entries (queue_id, call_id, workspace_id, state, engine_owner, enqueued_at, connected_at, left_at)
     SELECT q.queue_ids[1 + n % array_length(q.queue_ids, 1)], c.id, $1,
            CASE WHEN n % 5 = 0 THEN 'abandoned' ELSE 'connected' END, 'bench', c.started_at,
            CASE WHEN n % 5 = 0 THEN NULL ELSE c.started_at + make_interval(secs => n % 40) END,
            c.started_at + make_interval(secs => n % 40)
       FROM (SELECT id, started_at, row_number() OVER (ORDER BY id) AS n FROM calls
              WHERE workspace_id = $1 AND state = 'ended') AS c,
            (SELECT $2::uuid[] AS queue_ids) AS q`,
    [workspaceId, queueIds],
  );
  await pool.query('ANALYZE calls; ANALYZE queue_entries; ANALYZE agent_states; ANALYZE queues');
}
