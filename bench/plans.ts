/**
 * The routing plan validation bench (part of `npm run bench`; alone: `node --import=tsx bench/plans.ts`): a valid
 * plan of 1,000 steps (100 blocks of hours, menu, ring, queue, AI answer, forward, split, voicemails and a hangup,
 * each block's menu leading to the next block) validated with workspace facts, beside a baseline measured in the
 * same run on the same plan: a JSON round trip (`JSON.parse(JSON.stringify(plan))`).
 *
 * Target: a 1,000-step plan validates in under 50 ms (at the 99th percentile).
 */
import os from 'node:os';
import { validateDefinition, type WorkspaceFacts } from '../core/routing/validate.ts';

const blocks = 100;
const warmup = Number(process.env.BENCH_PLAN_WARMUP ?? 50);
const iterations = Number(process.env.BENCH_PLAN_ITERATIONS ?? 200);
const targetMs = 50;

function buildPlan() {
  const steps: Record<string, object> = {};
  for (let block = 0; block < blocks; block += 1) {
    const name = (step: string) => `b${block}-${step}`;
    const onward = block === blocks - 1 ? name('hangup') : `b${block + 1}-hours`;
    steps[name('hours')] = {
      type: 'hours',
      scheduleId: `schedule-${block % 10}`,
      open: name('menu'),
      closed: name('closed'),
    };
    steps[name('menu')] = {
      type: 'menu',
      prompt: { tts: `Block ${block}: press 1 for sales, 2 for support, 3 for the assistant, 0 to go on.` },
      options: {
        '0': onward,
        '1': name('ring'),
        '2': name('queue'),
        '3': name('ai'),
        '4': name('forward'),
        '5': name('split'),
      },
      noInput: name('hangup'),
      timeoutSecs: 5,
      maxRetries: 2,
    };
    steps[name('ring')] = {
      type: 'ring',
      targets: [
        { memberId: `member-${block % 20}` },
        { userId: `user-${block % 20}`, mode: 'silent' },
        { cell: '+15550100000' },
      ],
      strategy: 'sequential',
      timeoutSecs: 20,
      next: name('voicemail'),
    };
    steps[name('queue')] = {
      type: 'queue',
      queueId: `queue-${block % 5}`,
      maxWaitSecs: 600,
      overflow: name('voicemail'),
      offerCallback: true,
    };
    steps[name('ai')] = {
      type: 'ai_answer',
      provider: 'provider_a',
      agentId: 'agent-1',
      onCap: name('ring'),
      next: name('hangup'),
    };
    steps[name('forward')] = {
      type: 'forward',
      to: `+1555010${String(block).padStart(4, '0')}`,
      timeoutSecs: 30,
      next: name('voicemail'),
    };
    steps[name('split')] = { type: 'split', percentToA: 30, a: name('ring'), b: name('queue') };
    steps[name('voicemail')] = { type: 'voicemail', greeting: { audioUrl: 'https://example.com/greeting.mp3' } };
    steps[name('closed')] = { type: 'voicemail', greeting: null };
    steps[name('hangup')] = { type: 'hangup', message: 'Goodbye' };
  }
  return { entry: 'b0-hours', recording: { enabled: true, disclosure: true }, steps };
}

const range = (prefix: string, count: number) =>
  new Set(Array.from({ length: count }, (_, index) => `${prefix}-${index}`));
const facts: WorkspaceFacts = {
  schedules: range('schedule', 10),
  queues: range('queue', 5),
  aiAgents: new Map([['agent-1', 'provider_a']]),
  members: range('member', 20),
  users: range('user', 20),
  destinationPolicy: { allowedPrefixes: ['+1'], blockedPrefixes: ['+1900'] },
};

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** Milliseconds per call of `work`, sorted, after `warmup` unmeasured calls. */
function measure(work: () => unknown): number[] {
  for (let index = 0; index < warmup; index += 1) work();
  const times: number[] = [];
  for (let index = 0; index < iterations; index += 1) {
    const began = performance.now();
    work();
    times.push(performance.now() - began);
  }
  return times.sort((a, b) => a - b);
}

const plan = buildPlan();
const stepCount = Object.keys(plan.steps).length;
const result = validateDefinition(plan, facts);
if (!result.valid || result.issues.length > 0) {
  process.stdout.write(`the bench plan is not valid: ${JSON.stringify(result.issues.slice(0, 5))}\n`);
  process.exit(1);
}

const baseline = measure(() => JSON.parse(JSON.stringify(plan)));
const validation = measure(() => validateDefinition(plan, facts));
const [baseMedian, baseP99] = [percentile(baseline, 50), percentile(baseline, 99)];
const [median, p99] = [percentile(validation, 50), percentile(validation, 99)];
const ms = (value: number) => value.toFixed(2);

process.stdout.write(
  [
    `routing plan bench: Node ${process.version}, ${os.cpus().length} CPUs; a plan of ${stepCount} steps ` +
      `(${JSON.stringify(plan).length} bytes of JSON), ${warmup} warm-up + ${iterations} measured runs each`,
    '',
    '| measure | median ms | p99 ms | median vs baseline |',
    '|---|---|---|---|',
    `| JSON.parse(JSON.stringify(plan)) (baseline) | ${ms(baseMedian)} | ${ms(baseP99)} | 1.0x |`,
    `| validateDefinition(plan, facts) | ${ms(median)} | ${ms(p99)} | ${(median / baseMedian).toFixed(1)}x |`,
    '',
    `target: a ${stepCount}-step plan validates in under ${targetMs} ms: p99 ${ms(p99)} ms ${p99 < targetMs ? 'MET' : 'NOT MET'}`,
    '',
  ].join('\n'),
);
