/**
 * Distribution under races on the real engine (docs/contact-center.md): sipp callers in a queue, agents with browser
 * devices. An agent going away while their device rings stops the ringing at once and the caller goes to the other
 * agent; a caller hanging up while an agent's device rings withdraws the offer and frees the agent without a missed
 * offer; two agents made available at once for one caller: one offer, to one of them. Every agent change has its
 * event; no entry is offered to two agents at once.
 */
import test from 'ava';
import { setStateByPerson } from '../../../../../core/queues/entries.ts';
import {
  accept,
  agentState,
  agentTimeline,
  callRow,
  callTimeline,
  callTo,
  endedCall,
  entryOf,
  nextOffer,
  queueLine,
  setAvailable,
} from '../../../../helpers/queue-lines.ts';
import type { TestService } from '../../../../helpers/service.ts';
import { runSipp } from '../../../../helpers/sipp.ts';
import { answerOffer } from '../../../../helpers/webrtc-browser.ts';
import { exitPastWrtc, sippFailed, startEngineService } from '../../../../helpers/engine-service.ts';
import { until } from '../../../../helpers/until.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

async function offerState(offerId: string) {
  const result = await service.pool.query<{ state: string }>('SELECT state FROM offers WHERE id = $1', [offerId]);
  return result.rows[0]?.state;
}

test('an agent going away while their device rings: the ringing stops at once, the caller goes to the other agent', async (t) => {
  const center = await queueLine(t, service, { agents: 2 });
  const [first, second] = center.agents as [(typeof center.agents)[0], (typeof center.agents)[0]];
  await setAvailable(service, center.workspaceId, first);
  await setAvailable(service, center.workspaceId, second);
  const sipp = runSipp({ scenario: 'answered', sipPort, dialed: center.line.e164.slice(1), timeoutSeconds: 120 });
  const callId = await callTo(service, center.line.e164);
  // The agent idle longest is offered the caller.
  const offer = await nextOffer(service, first);
  t.is(await agentState(service, center.workspaceId, second), 'available');
  const away = await setStateByPerson(service.pool, {
    workspaceId: center.workspaceId,
    memberId: first.memberId,
    state: 'away',
    reason: 'break',
    actor: `member:${first.memberId}`,
  });
  t.like(away, { outcome: 'changed', previous: 'offered' });
  // Withdrawn before its time was up: the engine heard the entry stop being offered.
  await until('the offer withdrawn', async () => ((await offerState(offer.id)) === 'withdrawn' ? true : undefined));
  const decided = await service.pool.query<{ early: boolean }>(
    'SELECT decided_at < expires_at AS early FROM offers WHERE id = $1',
    [offer.id],
  );
  t.true(decided.rows[0]?.early, 'withdrawn before it expired');
  const next = await nextOffer(service, second);
  t.is(next.call_id, callId);
  t.is(next.ring_seq, 2);
  const browser = await answerOffer(next.sdp_offer);
  try {
    await accept(service, second, next, browser.answer);
    await browser.connected();
    await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
    const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
    t.is(hungUp.status, 200, hungUp.text);
  } finally {
    browser.close();
  }
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  t.deepEqual(await agentTimeline(service, first), [
    `offline>available:member:${first.memberId}`,
    'available>offered:system',
    `offered>away:member:${first.memberId}:break`,
  ]);
  await until('the second agent free', async () =>
    (await agentTimeline(service, second)).length === 4 ? true : undefined,
  );
  t.deepEqual(await agentTimeline(service, second), [
    `offline>available:member:${second.memberId}`,
    'available>offered:system',
    'offered>on_call:system',
    'on_call>available:system',
  ]);
  await endedCall(service, callId);
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'call.ringing',
    'queue.left:connected',
    'call.connected',
    'call.ended',
  ]);
});

test('the caller hangs up while the agent is offered the call: the offer is withdrawn, the agent free, no offer missed', async (t) => {
  const center = await queueLine(t, service, { agents: 1 });
  const agent = center.agents[0]!;
  await setAvailable(service, center.workspaceId, agent);
  // The caller hangs up 3 s after the answer, while the agent's device rings (15 s).
  const sipp = runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { HOLD_MS: '3000' },
  });
  const offer = await nextOffer(service, agent);
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  await endedCall(service, offer.call_id);
  await until('the offer withdrawn', async () => ((await offerState(offer.id)) === 'withdrawn' ? true : undefined));
  t.is((await entryOf(service, offer.call_id))?.state, 'abandoned');
  t.deepEqual(await agentTimeline(service, agent), [
    `offline>available:member:${agent.memberId}`,
    'available>offered:system',
    'offered>available:system',
  ]);
  const missed = await service.pool.query<{ missed_offers: number }>(
    'SELECT missed_offers FROM agent_states WHERE member_id = $1',
    [agent.memberId],
  );
  t.is(missed.rows[0]?.missed_offers, 0);
  t.deepEqual(await callTimeline(service, offer.call_id), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'queue.left:abandoned',
    'call.ended',
  ]);
});

test('two agents become available at once for one waiting caller: one of them is offered it, the other stays available', async (t) => {
  const center = await queueLine(t, service, { agents: 2, maxWaitSecs: 10 });
  const sipp = runSipp({ scenario: 'answered', sipPort, dialed: center.line.e164.slice(1), timeoutSeconds: 60 });
  const callId = await callTo(service, center.line.e164);
  await until('in line', async () => ((await entryOf(service, callId))?.state === 'waiting' ? true : undefined));
  await Promise.all(center.agents.map((agent) => setAvailable(service, center.workspaceId, agent)));
  // Nobody answers: after maxWaitSecs the caller overflows.
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  await endedCall(service, callId);
  // One offer (maxWaitSecs ends it before its 15 s), to one agent; the overflow is no missed offer.
  const offers = await service.pool.query<{ device_id: string; state: string }>(
    'SELECT device_id, state FROM offers WHERE call_id = $1',
    [callId],
  );
  t.is(offers.rows.length, 1);
  t.is(offers.rows[0]?.state, 'withdrawn');
  const timelines = await Promise.all(center.agents.map((agent) => agentTimeline(service, agent)));
  const offered = center.agents.findIndex((agent) => agent.deviceId === offers.rows[0]?.device_id);
  t.deepEqual(timelines[offered], [
    `offline>available:member:${center.agents[offered]?.memberId}`,
    'available>offered:system',
    'offered>available:system',
  ]);
  t.deepEqual(timelines[1 - offered], [`offline>available:member:${center.agents[1 - offered]?.memberId}`]);
  t.is((await entryOf(service, callId))?.state, 'overflowed');
  t.deepEqual(await callTimeline(service, callId), [
    'call.started',
    'call.answered',
    'queue.entered:waiting',
    'call.ringing',
    'queue.left:overflowed',
    'call.ended',
  ]);
  const missed = await service.pool.query<{ missed_offers: number }>(
    'SELECT max(missed_offers) AS missed_offers FROM agent_states WHERE member_id = ANY ($1::uuid[])',
    [center.agents.map((agent) => agent.memberId)],
  );
  t.is(missed.rows[0]?.missed_offers, 0);
});
