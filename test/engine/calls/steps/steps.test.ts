/**
 * The routing steps (engine/calls/steps/) and the plan runner against a `CallControl` double: no SIP, no RTP, no
 * timers, so each runs in milliseconds. What crosses the wire (prompts heard, keys sent, BYE, bridging) is tested with
 * sipp in test/engine/calls/calls.test.ts and test/engine/calls/call-plans.test.ts.
 */
import test from 'ava';
import type { RoutingPlanDefinition, Step } from '../../../../core/routing/definition.ts';
import type { ScheduleHours } from '../../../../core/routing/opening-hours.ts';
import type { StepContext } from '../../../../engine/calls/control.ts';
import { runPlan, splitBranch } from '../../../../engine/calls/runner.ts';
import { runStep, steps } from '../../../../engine/calls/steps/index.ts';
import { defaultGreeting, voicemailMaxMs } from '../../../../engine/calls/steps/voicemail.ts';
import { type CallScript, ScriptedCall } from '../../../helpers/call-control.ts';

const scheduleId = '7d1c7c52-4a43-4d0f-9a51-6a1f2b3c4d5e';

/** Weekdays 09:00-17:00 in Paris; closed all day on 2026-12-25. */
const officeHours: ScheduleHours = {
  timezone: 'Europe/Paris',
  weeklyHours: (['monday', 'tuesday', 'wednesday', 'thursday', 'friday'] as const).map((day) => ({
    day,
    open: '09:00',
    close: '17:00',
  })),
  exceptions: [{ date: '2026-12-25', hours: [] }],
};

function context(options: { callId?: string; now?: string; schedules?: Record<string, ScheduleHours> } = {}) {
  const schedules = options.schedules ?? { [scheduleId]: officeHours };
  const context: StepContext = {
    callId: options.callId ?? '0b5d8a3e-1f2c-4d5e-8f90-a1b2c3d4e5f6',
    stepId: 'step',
    definition: { entry: 'step', steps: {} } as unknown as RoutingPlanDefinition,
    schedule: (id) => Promise.resolve(schedules[id]),
    now: () => new Date(options.now ?? '2026-03-09T10:00:00Z'),
  };
  return context;
}

async function run(step: Step, script: CallScript = {}, at: Parameters<typeof context>[0] = {}) {
  const call = new ScriptedCall(script);
  const next = await runStep(step, call, context(at));
  return { next, call };
}

const menuStep = {
  type: 'menu',
  prompt: { tts: 'Press 1 for sales, 2 for support.' },
  options: { '1': 'sales', '2': 'support' },
  noInput: 'operator',
  timeoutSecs: 4,
  maxRetries: 2,
} satisfies Step;

test('every step type has its handler in the table', (t) => {
  t.deepEqual(Object.keys(steps).sort(), [
    'ai_answer',
    'forward',
    'hangup',
    'hours',
    'menu',
    'queue',
    'ring',
    'split',
    'voicemail',
  ]);
});

// menu

test('menu: a listed key after the prompt goes to its step', async (t) => {
  const { next, call } = await run(menuStep, { keys: ['2'] });
  t.is(next, 'support');
  t.deepEqual(call.actions, [{ play: menuStep.prompt, stopOnKey: true }, { keyWaitMs: 4000 }]);
});

test('menu: a key pressed during the prompt answers it without a wait', async (t) => {
  const { next, call } = await run(menuStep, { keys: [{ duringPrompt: '1' }] });
  t.is(next, 'sales');
  t.deepEqual(call.actions, [{ play: menuStep.prompt, stopOnKey: true }]);
});

test('menu: no key plays the prompt again, and after maxRetries retries noInput follows', async (t) => {
  const { next, call } = await run(menuStep);
  t.is(next, 'operator');
  t.is(call.played.length, 3, 'the first prompt and two retries');
  t.deepEqual(
    call.actions.filter((action) => 'keyWaitMs' in action),
    [{ keyWaitMs: 4000 }, { keyWaitMs: 4000 }, { keyWaitMs: 4000 }],
  );
  t.deepEqual(call.hungUp, []);
});

test('menu: an unlisted key counts as a retry', async (t) => {
  const retried = await run(menuStep, { keys: ['9', '1'] });
  t.is(retried.next, 'sales');
  t.is(retried.call.played.length, 2);
  const exhausted = await run(menuStep, { keys: ['9', '#', { duringPrompt: '7' }, '1'] });
  t.is(exhausted.next, 'operator', 'three unlisted keys use up the prompt and its two retries');
  t.is(exhausted.call.played.length, 3);
});

test('menu: with maxRetries 0 the prompt plays once', async (t) => {
  const { next, call } = await run({ ...menuStep, maxRetries: 0 });
  t.is(next, 'operator');
  t.is(call.played.length, 1);
});

test('menu: a caller who hangs up during the prompt ends the step', async (t) => {
  const { next, call } = await run(menuStep, { hangsUpDuringPrompt: 0 });
  t.is(next, undefined);
  t.is(call.played.length, 1);
});

// hours

const hoursStep = { type: 'hours', scheduleId, open: 'desk', closed: 'after_hours' } satisfies Step;

test('hours: open on a weekday in office hours (in the schedule time zone)', async (t) => {
  // Monday 9 March 2026, 10:00 UTC is 11:00 in Paris (CET, +01:00).
  t.is((await run(hoursStep, {}, { now: '2026-03-09T10:00:00Z' })).next, 'desk');
  // 08:00 UTC is 09:00 in Paris: the range opens (inclusive).
  t.is((await run(hoursStep, {}, { now: '2026-03-09T08:00:00Z' })).next, 'desk');
});

test('hours: closed before opening, at closing, at the weekend and on an exception date', async (t) => {
  t.is((await run(hoursStep, {}, { now: '2026-03-09T07:59:59Z' })).next, 'after_hours', '08:59:59 in Paris');
  t.is((await run(hoursStep, {}, { now: '2026-03-09T16:00:00Z' })).next, 'after_hours', '17:00 in Paris');
  t.is((await run(hoursStep, {}, { now: '2026-03-08T10:00:00Z' })).next, 'after_hours', 'a Sunday');
  t.is((await run(hoursStep, {}, { now: '2026-12-25T10:00:00Z' })).next, 'after_hours', 'Christmas, a Friday');
});

test('hours: a schedule that is not there counts as closed', async (t) => {
  const { next, call } = await run(hoursStep, {}, { schedules: {} });
  t.is(next, 'after_hours');
  t.deepEqual(call.actions, []);
});

// split

test('split: the branch follows the call id, the same every time', async (t) => {
  const step = { type: 'split', percentToA: 50, a: 'left', b: 'right' } satisfies Step;
  const callIds = Array.from({ length: 40 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
  const branches = new Set<string | undefined>();
  for (const callId of callIds) {
    const expected = splitBranch(callId, 50) === 'a' ? 'left' : 'right';
    const first = await run(step, {}, { callId });
    const again = await run(step, {}, { callId });
    t.is(first.next, expected);
    t.is(again.next, expected);
    branches.add(first.next);
  }
  t.deepEqual([...branches].sort(), ['left', 'right'], 'forty calls at 50 % take both branches');
});

test('split: 0 % always takes b, 100 % always a', async (t) => {
  for (const callId of ['a1b2c3d4-0000-4000-8000-000000000001', 'a1b2c3d4-0000-4000-8000-000000000002']) {
    t.is((await run({ type: 'split', percentToA: 0, a: 'x', b: 'y' }, {}, { callId })).next, 'y');
    t.is((await run({ type: 'split', percentToA: 100, a: 'x', b: 'y' }, {}, { callId })).next, 'x');
  }
});

// forward

const forwardStep = { type: 'forward', to: '+33612345678', timeoutSecs: 20, next: 'voicemail' } satisfies Step;

test('forward: answered, the call is bridged and then hung up as completed', async (t) => {
  const { next, call } = await run(forwardStep, { forwardsAnswered: [true] });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ forward: '+33612345678', timeoutMs: 20_000 }, { hangup: 'completed' }]);
});

test('forward: not answered, the call goes back to routing and takes next', async (t) => {
  const { next, call } = await run(forwardStep, { forwardsAnswered: [false] });
  t.is(next, 'voicemail');
  t.deepEqual(call.actions, [{ forward: '+33612345678', timeoutMs: 20_000 }, { enter: 'routing' }]);
});

// voicemail

test('voicemail: the default greeting, the recording, then voicemail_complete', async (t) => {
  const { next, call } = await run({ type: 'voicemail', greeting: null });
  t.is(next, undefined);
  t.deepEqual(call.actions, [
    { enter: 'voicemail' },
    { play: defaultGreeting, stopOnKey: false },
    { voicemailMaxMs },
    { hangup: 'voicemail_complete' },
  ]);
  t.is(voicemailMaxMs, 5 * 60_000);
});

test("voicemail: the step's greeting; a caller who hangs up while recorded is not hung up on", async (t) => {
  const greeting = { audioUrl: 'https://example.com/greeting.wav' };
  const { next, call } = await run({ type: 'voicemail', greeting }, { hangsUpDuringRecording: true });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ enter: 'voicemail' }, { play: greeting, stopOnKey: false }, { voicemailMaxMs }]);
});

test('voicemail: a caller who hangs up during the greeting is not recorded', async (t) => {
  const { call } = await run({ type: 'voicemail', greeting: null }, { hangsUpDuringPrompt: 0 });
  t.deepEqual(call.actions, [{ enter: 'voicemail' }, { play: defaultGreeting, stopOnKey: false }]);
});

// hangup

test('hangup: the message, then the hangup', async (t) => {
  const { next, call } = await run({ type: 'hangup', message: 'Goodbye.' });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ play: { tts: 'Goodbye.' }, stopOnKey: false }, { hangup: 'plan_hangup' }]);
});

test('hangup: without a message, at once', async (t) => {
  const { next, call } = await run({ type: 'hangup', message: null });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ hangup: 'plan_hangup' }]);
});

// ring

const alice = { memberId: '1a2b3c4d-0000-4000-8000-00000000000a' };
const bob = { userId: '1a2b3c4d-0000-4000-8000-00000000000b' };
const ringStep = (strategy: 'simultaneous' | 'sequential') =>
  ({
    type: 'ring',
    targets: [alice, bob],
    strategy,
    timeoutSecs: 15,
    next: 'after_ring',
  }) satisfies Step;

test('ring: nobody answers (or nobody is live) takes next after one round of simultaneous ringing', async (t) => {
  const { next, call } = await run(ringStep('simultaneous'));
  t.is(next, 'after_ring');
  t.deepEqual(call.actions, [{ ring: [alice.memberId, bob.userId], timeoutMs: 15_000 }, { enter: 'routing' }]);
});

test('ring: simultaneous, answered: the call is over once the bridge ends (completed)', async (t) => {
  const { next, call } = await run(ringStep('simultaneous'), { rings: ['answered'] });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ ring: [alice.memberId, bob.userId], timeoutMs: 15_000 }, { hangup: 'completed' }]);
});

test('ring: sequential rings one target per round, each for timeoutSecs, and the second answers', async (t) => {
  const { next, call } = await run(ringStep('sequential'), { rings: ['unanswered', 'answered'] });
  t.is(next, undefined);
  t.deepEqual(call.rounds, [[alice.memberId], [bob.userId]]);
  t.deepEqual(call.hungUp, ['completed']);
  const nobody = await run(ringStep('sequential'));
  t.is(nobody.next, 'after_ring');
  t.deepEqual(nobody.call.actions, [
    { ring: [alice.memberId], timeoutMs: 15_000 },
    { ring: [bob.userId], timeoutMs: 15_000 },
    { enter: 'routing' },
  ]);
});

test('ring: the caller hanging up while it rings ends the step; no further round', async (t) => {
  const { next, call } = await run(ringStep('sequential'), { rings: ['caller_hangup'] });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ ring: [alice.memberId], timeoutMs: 15_000 }]);
});

test('ring: a cell rings in the same round as the people (simultaneous); answered: completed', async (t) => {
  const step = {
    type: 'ring',
    targets: [{ cell: '+33612345678' }, bob],
    strategy: 'simultaneous',
    timeoutSecs: 20,
    next: 'after_ring',
  } satisfies Step;
  const { next, call } = await run(step, { rings: ['answered'] });
  t.is(next, undefined);
  t.deepEqual(call.actions, [{ ring: ['+33612345678', bob.userId], timeoutMs: 20_000 }, { hangup: 'completed' }]);
  t.deepEqual(call.notes, []);
  const nobody = await run(step);
  t.is(nobody.next, 'after_ring');
  t.deepEqual(nobody.call.actions, [{ ring: ['+33612345678', bob.userId], timeoutMs: 20_000 }, { enter: 'routing' }]);
});

test('ring: sequential, a cell is its own round; not answered takes next, answered completes', async (t) => {
  const step = {
    type: 'ring',
    targets: [alice, { cell: '+33612345678' }],
    strategy: 'sequential',
    timeoutSecs: 20,
    next: 'after_ring',
  } satisfies Step;
  const nobody = await run(step);
  t.is(nobody.next, 'after_ring');
  t.deepEqual(nobody.call.actions, [
    { ring: [alice.memberId], timeoutMs: 20_000 },
    { ring: ['+33612345678'], timeoutMs: 20_000 },
    { enter: 'routing' },
  ]);
  const answered = await run(step, { rings: ['unanswered', 'answered'] });
  t.is(answered.next, undefined);
  t.deepEqual(answered.call.rounds, [[alice.memberId], ['+33612345678']]);
  t.deepEqual(answered.call.hungUp, ['completed']);
  const cellOnly = await run({ ...step, targets: [{ cell: '+33612345678' }] }, { rings: ['answered'] });
  t.is(cellOnly.next, undefined);
  t.deepEqual(cellOnly.call.rounds, [['+33612345678']]);
});

// queue, ai_answer

const queueStep = {
  type: 'queue',
  queueId: '6a0e9b2c-3d4f-4a5b-8c6d-7e8f9a0b1c2d',
  maxWaitSecs: 60,
  offerCallback: true,
  overflow: 'overflowed',
} satisfies Step;

test("queue: the call waits with the step's settings (priority 0 unless given); answered it is over, overflowed it takes overflow", async (t) => {
  const answered = await run(queueStep, { queues: ['answered'] });
  t.is(answered.next, undefined);
  t.deepEqual(answered.call.actions, [
    { queue: { queueId: queueStep.queueId, maxWaitMs: 60_000, offerCallback: true, priority: 0 } },
    { hangup: 'completed' },
  ]);
  const urgent = await run({ ...queueStep, priority: -7 }, { queues: ['answered'] });
  t.like(urgent.call.actions[0], { queue: { priority: -7 } }, "the step's priority");
  const overflowed = await run(queueStep, { queues: ['overflowed'] });
  t.is(overflowed.next, 'overflowed');
  t.deepEqual(overflowed.call.actions.slice(1), [{ enter: 'routing' }]);
  const ended = await run(queueStep, { queues: ['ended'] });
  t.is(ended.next, undefined);
  t.deepEqual(ended.call.actions.slice(1), [], 'the caller left: nothing more');
  t.deepEqual([...answered.call.notes, ...overflowed.call.notes, ...ended.call.notes], []);
});

test('ai_answer takes its no-answer edge and notes it', async (t) => {
  const ai = await run({
    type: 'ai_answer',
    provider: 'provider_a',
    agentId: '5f9d8a1b-2c3e-4d5f-9a6b-7c8d9e0f1a2b',
    onCap: 'capped',
    next: 'after_ai',
  });
  t.is(ai.next, 'after_ai');
  t.deepEqual(ai.call.notes, ['step: ai_answer is not built yet; taking next']);
  t.deepEqual(ai.call.hungUp, []);
});

// the runner

function plan(entry: string, planSteps: Record<string, unknown>): RoutingPlanDefinition {
  return { entry, steps: planSteps } as unknown as RoutingPlanDefinition;
}

test('runPlan walks the plan from its entry and records the steps taken', async (t) => {
  const call = new ScriptedCall({ keys: ['1'], forwardsAnswered: [false] });
  const definition = plan('main', {
    main: menuStep,
    sales: { type: 'ring', targets: [{ cell: '+33612345678' }], strategy: 'sequential', timeoutSecs: 20, next: 'fw' },
    fw: { ...forwardStep, next: 'bye' },
    bye: { type: 'hangup', message: null },
  });
  const taken = await runPlan({ ...context(), definition }, call);
  t.deepEqual(taken, ['main', 'sales', 'fw', 'bye']);
  // The cell was rung (its own round) and not answered: the plan went on to `fw`.
  t.deepEqual(call.rounds, [['+33612345678']]);
  t.deepEqual(call.notes, []);
  t.deepEqual(call.hungUp, ['plan_hangup']);
});

test('runPlan hangs up with plan_error on a step that is not in the plan', async (t) => {
  const call = new ScriptedCall();
  const taken = await runPlan(
    { ...context(), definition: plan('main', { main: { ...forwardStep, next: 'missing' } }) },
    call,
  );
  t.deepEqual(taken, ['main']);
  t.deepEqual(call.hungUp, ['plan_error']);
});

test('runPlan stops at the next step once the caller hung up', async (t) => {
  const call = new ScriptedCall({ hangsUpDuringPrompt: 0 });
  const taken = await runPlan({ ...context(), definition: plan('main', { main: menuStep }) }, call);
  t.deepEqual(taken, ['main']);
  t.deepEqual(call.hungUp, []);
});
