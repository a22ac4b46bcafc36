/**
 * Transfers (operation 53, docs/contact-center.md "Transfer") on the real engine: sipp calls a number whose plan
 * queues the caller for agent 0; the caller's audio is a socket of the test's (test/helpers/rtp-phone.ts) speaking
 * 1 kHz; each agent's device is a stand-in browser (a plain `@roamhq/wrtc` peer connection) with a tone of its own
 * (agent 0: 700 Hz, agent 1: 500 Hz). Blind to a member: agent 0 is let go and goes to wrap-up, agent 1's device
 * rings and, answered, talks with the caller; warm: the caller hears hold music while the agents talk, then
 * `complete` joins caller and agent 1 (or `cancel` brings the caller back to agent 0); blind to a number: the
 * called number's carrier (a second sipp echoing the audio) is dialled and bridged.
 */
import { farEndCarrier } from '../../helpers/phone-lines.ts';
import test from 'ava';
import { createMember } from '../../../core/identity/members.ts';
import { createQueue } from '../../../core/queues/queues.ts';
import { type Agent, agentState, callRow, callTimeline, setAvailable } from '../../helpers/queue-lines.ts';
import type { TestService } from '../../helpers/service.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import { until } from '../../helpers/until.ts';
import {
  answerAs,
  connectedToAgent,
  hangUp,
  lastConnected,
  timelineAfterTransfer,
  transferred,
} from '../../helpers/transfer-calls.ts';
import { share } from '../../helpers/webrtc-browser.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

test('blind to a member: agent 0 is let go (wrap-up), agent 1 rings and talks with the caller', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const [, second] = call.center.agents as [Agent, Agent];
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: second.memberId },
  });
  t.is(asked.status, 200, asked.text);
  await until('agent 0 let go', async () =>
    (await agentState(service, call.center.workspaceId, call.center.agents[0]!)) === 'available' ? true : undefined,
  );
  const target = await answerAs(service, t, second, 500);
  await until('agent 1 at the caller', () => (share(call.phone.heard, 500, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at agent 1', () => (share(target.heard, 1000, target.rate, 4800) > 0.5 ? true : undefined));
  t.true(share(call.phone.heard, 700, 8000, 1600) < 0.05, 'agent 0 is not heard any more');
  t.deepEqual(await transferred(service, call.callId), [
    { target: { memberId: second.memberId }, warm: false, actor: 'application' },
  ]);
  t.like(await lastConnected(service, call.callId), { role: 'browser', memberId: second.memberId });
  const timeline = await timelineAfterTransfer(service, call.callId);
  t.deepEqual(timeline, ['call.transferred', 'call.ringing', 'call.connected'], timeline.join(', '));
  await hangUp(t, call);
});

test('warm to a member: the caller holds while the agents talk, then complete joins the caller and agent 1', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const [first, second] = call.center.agents as [Agent, Agent];
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: second.memberId },
    warm: true,
  });
  t.is(asked.status, 200, asked.text);
  await until('hold music at the caller', () =>
    musicShare(call.phone.heard) > 0.2 && share(call.phone.heard, 700, 8000, 4000) < 0.05 ? true : undefined,
  );
  const target = await answerAs(service, t, second, 500);
  // The agents talk; the caller still holds.
  await until('agent 1 at agent 0', () =>
    share(call.first.heard, 500, call.first.rate, 4800) > 0.5 ? true : undefined,
  );
  await until('agent 0 at agent 1', () => (share(target.heard, 700, target.rate, 4800) > 0.5 ? true : undefined));
  t.true(share(call.phone.heard, 500, 8000, 4000) < 0.05, 'the caller does not hear the consultation');
  t.deepEqual(await transferred(service, call.callId), [], 'a warm transfer is written at completion');
  const second409 = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { e164: '+15550009999' },
  });
  t.is(second409.status, 409, second409.text);

  const completed = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, { action: 'complete' });
  t.is(completed.status, 200, completed.text);
  await until('agent 1 at the caller', () => (share(call.phone.heard, 500, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at agent 1', () => (share(target.heard, 1000, target.rate, 4800) > 0.5 ? true : undefined));
  await until('agent 0 let go', async () =>
    (await agentState(service, call.center.workspaceId, first)) === 'available' ? true : undefined,
  );
  t.deepEqual(await transferred(service, call.callId), [
    { target: { memberId: second.memberId }, warm: true, actor: 'application' },
  ]);
  t.like(await lastConnected(service, call.callId), { role: 'browser', memberId: second.memberId });
  await hangUp(t, call);
});

test('warm to a member, cancelled: agent 1 is let go and the caller is back with agent 0', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const [, second] = call.center.agents as [Agent, Agent];
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: second.memberId },
    warm: true,
  });
  t.is(asked.status, 200, asked.text);
  const target = await answerAs(service, t, second, 500);
  await until('agent 0 at agent 1', () => (share(target.heard, 700, target.rate, 4800) > 0.5 ? true : undefined));
  const cancelled = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, { action: 'cancel' });
  t.is(cancelled.status, 200, cancelled.text);
  await until('agent 0 at the caller again', () =>
    share(call.phone.heard, 700, 8000, 1600) > 0.5 && musicShare(call.phone.heard.slice(-1600)) < 0.1
      ? true
      : undefined,
  );
  await until('the caller at agent 0 again', () =>
    share(call.first.heard, 1000, call.first.rate, 4800) > 0.5 ? true : undefined,
  );
  await until('agent 1 let go', async () => {
    const legs = await service.pool.query<{ state: string }>(
      `SELECT state FROM call_legs WHERE call_id = $1 AND role = 'browser' ORDER BY started_at`,
      [call.callId],
    );
    return legs.rows.length === 2 && legs.rows[1]?.state === 'ended' && legs.rows[0]?.state === 'answered'
      ? true
      : undefined;
  });
  t.deepEqual(await transferred(service, call.callId), [], 'nothing was transferred');
  const late = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, { action: 'complete' });
  t.is(late.status, 409, late.text);
  await hangUp(t, call);
});

test('blind to a number: dialled through the called number carrier and bridged to the caller', async (t) => {
  const { carrier } = await farEndCarrier(t, service, 30_000);
  const call = await connectedToAgent({ service, sipPort }, t, { carrier });
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { e164: '+15550009999' },
  });
  t.is(asked.status, 200, asked.text);
  // The far end echoes the caller's own 1 kHz; agent 0 is gone.
  await until('the far end bridged', async () => {
    const leg = await lastConnected(service, call.callId);
    return leg?.role === 'transfer' ? true : undefined;
  });
  await until('the caller echoed through the far end', () =>
    share(call.phone.heard, 1000, 8000, 1600) > 0.5 && share(call.phone.heard, 700, 8000, 1600) < 0.05
      ? true
      : undefined,
  );
  t.deepEqual(await transferred(service, call.callId), [
    { target: { e164: '+15550009999' }, warm: false, actor: 'application' },
  ]);
  await hangUp(t, call);
});

test('blind to a queue: the caller waits there and its agent takes the call', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const [, second] = call.center.agents as [Agent, Agent];
  const other = await createQueue(service.pool, call.center.workspaceId, {
    name: 'Billing',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [second.memberId],
  });
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { queueId: other.id },
  });
  t.is(asked.status, 200, asked.text);
  await until('waiting in the other queue', async () =>
    (await callTimeline(service, call.callId)).filter((type) => type === 'queue.entered:waiting').length === 2
      ? true
      : undefined,
  );
  await setAvailable(service, call.center.workspaceId, second);
  const target = await answerAs(service, t, second, 500);
  await until('agent 1 at the caller', () => (share(call.phone.heard, 500, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at agent 1', () => (share(target.heard, 1000, target.rate, 4800) > 0.5 ? true : undefined));
  const timeline = await timelineAfterTransfer(service, call.callId);
  t.deepEqual(
    timeline,
    ['call.transferred', 'queue.entered:waiting', 'call.ringing', 'queue.left:connected', 'call.connected'],
    timeline.join(', '),
  );
  await hangUp(t, call);
});

test('blind to a member nobody can reach: the caller hears an apology and the call ends transfer_failed', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const absent = await createMember(service.pool, {
    workspaceId: call.center.workspaceId,
    email: `absent-${Date.now()}@example.com`,
    scopes: ['calls:*'],
  });
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: absent.id },
  });
  t.is(asked.status, 200, asked.text);
  call.phone.quiet();
  const run = await call.sipp;
  t.is(run.code, 0, sippFailed(run));
  const row = await until('the end', async () => {
    const found = await callRow(service, call.callId);
    return found?.ended_at === null ? undefined : found;
  });
  t.is(row?.end_reason, 'transfer_failed');
});
