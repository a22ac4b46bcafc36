/**
 * Warm transfers' other ends (docs/contact-center.md "Transfer") on the real engine, as test/engine/calls/transfer.test.ts
 * sets them up (test/helpers/transfer-calls.ts): a warm transfer to a number (the called number's carrier is a second
 * sipp echoing the audio: agent 0 hears their own 700 Hz through it while the caller holds; completed, the caller
 * hears their own 1 kHz), and agent 0 hanging up while consulting, which completes the transfer.
 */
import { farEndCarrier } from '../../helpers/phone-lines.ts';
import test from 'ava';
import { type Agent, agentState } from '../../helpers/queue-lines.ts';
import type { TestService } from '../../helpers/service.ts';
import { exitPastWrtc, musicShare, startEngineService } from '../../helpers/engine-service.ts';
import { until } from '../../helpers/until.ts';
import { answerAs, connectedToAgent, hangUp, lastConnected, transferred } from '../../helpers/transfer-calls.ts';
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

test('warm to a number: agent 0 talks to the far end while the caller holds, then complete bridges the caller', async (t) => {
  const { carrier } = await farEndCarrier(t, service, 30_000);
  const call = await connectedToAgent({ service, sipPort }, t, { carrier });
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { e164: '+15550009999' },
    warm: true,
  });
  t.is(asked.status, 200, asked.text);
  // The far end echoes agent 0's 700 Hz back to agent 0; the caller holds.
  await until('agent 0 echoed through the far end', () =>
    share(call.first.heard, 700, call.first.rate, 4800) > 0.5 ? true : undefined,
  );
  await until('hold music at the caller', () =>
    musicShare(call.phone.heard) > 0.2 && share(call.phone.heard, 700, 8000, 4000) < 0.05 ? true : undefined,
  );
  t.deepEqual(await transferred(service, call.callId), []);

  const completed = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, { action: 'complete' });
  t.is(completed.status, 200, completed.text);
  await until('the caller echoed through the far end', () =>
    share(call.phone.heard, 1000, 8000, 1600) > 0.5 && musicShare(call.phone.heard.slice(-1600)) < 0.1
      ? true
      : undefined,
  );
  t.deepEqual(await transferred(service, call.callId), [
    { target: { e164: '+15550009999' }, warm: true, actor: 'application' },
  ]);
  t.like(await lastConnected(service, call.callId), { role: 'transfer', memberId: null });
  await until('agent 0 let go', async () =>
    (await agentState(service, call.center.workspaceId, call.center.agents[0]!)) === 'available' ? true : undefined,
  );
  await hangUp(t, call);
});

test('agent 0 hangs up while consulting: the transfer completes, the caller talks with agent 1', async (t) => {
  const call = await connectedToAgent({ service, sipPort }, t);
  const [first, second] = call.center.agents as [Agent, Agent];
  const asked = await call.center.line.api('POST', `/calls/${call.callId}/transfer`, {
    target: { memberId: second.memberId },
    warm: true,
  });
  t.is(asked.status, 200, asked.text);
  const target = await answerAs(service, t, second, 500);
  await until('agent 0 at agent 1', () => (share(target.heard, 700, target.rate, 4800) > 0.5 ? true : undefined));
  // Agent 0's browser goes away: the engine hears its DTLS close at once.
  call.first.close();
  await until('agent 1 at the caller', () => (share(call.phone.heard, 500, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at agent 1', () => (share(target.heard, 1000, target.rate, 4800) > 0.5 ? true : undefined));
  t.deepEqual(await transferred(service, call.callId), [
    { target: { memberId: second.memberId }, warm: true, actor: 'application' },
  ]);
  t.like(await lastConnected(service, call.callId), { role: 'browser', memberId: second.memberId });
  t.is(await agentState(service, call.center.workspaceId, first), 'available');
  await hangUp(t, call);
});
