/**
 * One dial-out policy for every call the engine places (core/calls/dial-policy.ts; docs/calls.md, Dialling out): a
 * `forward`, a `ring` step's cell and a queue's callback never dial a number the workspace's destination policy
 * blocks or an emergency number, whether the number came from a plan published before the policy changed or from a
 * caller's `From`. The far end is a socket that counts what reaches it: nothing ever does. (A transfer to a number and
 * a voice verification take their number through the API, which refuses it at once: test/api/call-transfer-api.test.ts
 * and test/api/verifications.test.ts.)
 */
import test, { type ExecutionContext } from 'ava';
import { exitPastWrtc, sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import { numberRunning, watchedFarEnd } from '../../helpers/phone-lines.ts';
import {
  agentTimeline,
  callTimeline,
  callTo,
  endedCall,
  entryOf,
  queueLine,
  setAvailable,
} from '../../helpers/queue-lines.ts';
import { startRtpPhone } from '../../helpers/rtp-phone.ts';
import type { TestService } from '../../helpers/service.ts';
import { runSipp } from '../../helpers/sipp.ts';
import { until } from '../../helpers/until.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

const blockedCell = '+19005550123';
const blockedForward = '+19005550124';

/** A number whose plan rings a cell, then forwards, then hangs up; its carrier the watched far end. */
async function dialingLine(t: ExecutionContext, cell: string, forward: string) {
  const far = await watchedFarEnd(t, service);
  const line = await numberRunning(t, service, {
    entry: 'r',
    steps: {
      r: { type: 'ring', targets: [{ cell }], strategy: 'simultaneous', timeoutSecs: 5, next: 'fwd' },
      fwd: { type: 'forward', to: forward, timeoutSecs: 5, next: 'bye' },
      bye: { type: 'hangup', message: null },
    },
  });
  await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [line.e164, far.carrier]);
  return { far, line };
}

/** A sipp caller of `e164` that waits for the engine's BYE; resolves with the ended call's row. */
async function callThrough(t: ExecutionContext, e164: string) {
  const run = await runSipp({ scenario: 'answered', sipPort, dialed: e164.slice(1), timeoutSeconds: 60 });
  t.is(run.code, 0, sippFailed(run));
  const callId = await callTo(service, e164);
  return { callId, ended: await endedCall(service, callId) };
}

const logged = (text: string) => service.logs.some((line) => line.includes(text));

test('a cell and a forward to a prefix blocked since the plan was published are never dialled', async (t) => {
  const { far, line } = await dialingLine(t, blockedCell, blockedForward);
  const blocked = await line.api('PATCH', `/workspaces/${line.workspaceId}`, {
    destinationPolicy: { blockedPrefixes: ['+1900'] },
  });
  t.is(blocked.status, 200, blocked.text);
  const { callId, ended } = await callThrough(t, line.e164);
  t.is(ended?.end_reason, 'plan_hangup');
  t.deepEqual(
    (await service.pool.query('SELECT steps_taken FROM calls WHERE id = $1', [callId])).rows[0]?.steps_taken,
    ['r', 'fwd', 'bye'],
  );
  t.is(far.datagrams, 0, 'nothing reached the carrier');
  t.true(logged(`a cell to ${blockedCell}: outside the workspace's destination policy`));
  t.true(logged(`a forward to ${blockedForward}: outside the workspace's destination policy`));
});

test('a cell and a forward to an emergency number are never dialled, even by a plan saved before the rule', async (t) => {
  const { far, line } = await dialingLine(t, '+15550104443', '+15550104444');
  // The plan as one saved before these numbers were known as emergency numbers would be (plan validation refuses
  // them now): the published version names 911 and 112.
  await service.pool.query(
    `UPDATE routing_plan_versions
        SET definition = replace(replace(definition::text, '+15550104443', '+1911'), '+15550104444', '+44112')::jsonb
      WHERE plan_id = $1`,
    [line.planId],
  );
  const { ended } = await callThrough(t, line.e164);
  t.is(ended?.end_reason, 'plan_hangup');
  t.is(far.datagrams, 0, 'nothing reached the carrier');
  t.true(logged('a cell to +1911: emergency numbers are not dialled'));
  t.true(logged('a forward to +44112: emergency numbers are not dialled'));
});

/**
 * A caller from `from` in a queue with callbacks presses 1, then hangs up after a while: resolves with the entry,
 * once the call ended. sipp fails should the engine hang up on it first (as it does after taking a callback).
 */
async function pressForCallback(t: ExecutionContext, e164: string, from: string, waitFor: string) {
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: 'caller-hangs-up',
    sipPort,
    dialed: e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), CALLER_ID: from, HOLD_MS: '8000' },
    timeoutSeconds: 60,
  });
  const callId = await callTo(service, e164);
  await until(`the refusal logged (${waitFor})`, () => (logged(waitFor) ? true : undefined));
  // Hold music reaches the caller's socket: its keys now reach the engine.
  await phone.firstPacket();
  await phone.press('1');
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  await endedCall(service, callId);
  return entryOf(service, callId);
}

test('a caller whose number the policy refuses is offered no callback: pressing 1 keeps them waiting', async (t) => {
  const far = await watchedFarEnd(t, service);
  for (const [from, refusal] of [
    ['+19005550199', "outside the workspace's destination policy"],
    ['+1911', 'emergency numbers are not dialled'],
  ] as const) {
    const center = await queueLine(t, service, { agents: 1, offerCallback: true, maxWaitSecs: 600 });
    await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [center.line.e164, far.carrier]);
    const blocked = await center.line.api('PATCH', `/workspaces/${center.workspaceId}`, {
      destinationPolicy: { blockedPrefixes: ['+1900'] },
    });
    t.is(blocked.status, 200, blocked.text);
    const entry = await pressForCallback(t, center.line.e164, from, `a callback to ${from}: ${refusal}`);
    t.like(entry, { state: 'abandoned', callback_number: null }, from);
  }
  t.is(far.datagrams, 0, 'nothing reached the carrier');
});

test('a callback the policy refuses by the time an agent is free leaves callback_refused, never dialled', async (t) => {
  const far = await watchedFarEnd(t, service);
  const center = await queueLine(t, service, { agents: 1, offerCallback: true, maxWaitSecs: 600 });
  await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [center.line.e164, far.carrier]);
  const agent = center.agents[0]!;
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  // The caller (+15550001111) presses 1: a goodbye, then the engine's BYE ends sipp's scenario.
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 60,
  });
  const callId = await callTo(service, center.line.e164);
  await phone.firstPacket();
  await phone.press('1');
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  await until('the callback entry', async () =>
    (await entryOf(service, callId))?.state === 'callback' ? true : undefined,
  );
  const blocked = await center.line.api('PATCH', `/workspaces/${center.workspaceId}`, {
    destinationPolicy: { blockedPrefixes: ['+1555'] },
  });
  t.is(blocked.status, 200, blocked.text);
  // The agent is free: the entry reaches them, and its callback is refused before their phone rings.
  await setAvailable(service, center.workspaceId, agent);
  const ended = await endedCall(service, callId);
  t.is(ended?.end_reason, 'callback_refused');
  t.like(await entryOf(service, callId), { state: 'callback_refused', callback_number: '+15550001111' });
  const timeline = await callTimeline(service, callId);
  t.true(timeline.includes('queue.left:callback_refused'), timeline.join(', '));
  t.false(timeline.includes('call.ringing'), 'no phone rang for it');
  await until('the agent available again', async () =>
    (await agentTimeline(service, agent)).at(-1) === 'offered>available:system' ? true : undefined,
  );
  t.is(far.datagrams, 0, 'nothing reached the carrier');
  t.true(logged("a callback to +15550001111: outside the workspace's destination policy"));
});
