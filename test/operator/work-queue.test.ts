/**
 * The operator's work queue (operator/work-queue.ts): one run per key at a time, a key added during its run runs
 * once more after it, repeated adds before a run collapse into one, and failures come back with doubling backoff.
 */
import test from 'ava';
import { WorkQueue } from '../../operator/work-queue.ts';

function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

test('a key never runs twice at once; added during its run, it runs once more after', async (t) => {
  const runs: string[] = [];
  let running = 0;
  let most = 0;
  const first = gate();
  const queue = new WorkQueue(
    async (key) => {
      running += 1;
      most = Math.max(most, running);
      runs.push(key);
      if (runs.length === 1) await first.opened;
      running -= 1;
    },
    { concurrency: 4 },
  );
  queue.add('a');
  await new Promise((resolve) => setImmediate(resolve));
  queue.add('a');
  queue.add('a');
  queue.add('a');
  t.deepEqual(runs, ['a'], 'still running its first time');
  first.open();
  await queue.settled();
  t.deepEqual(runs, ['a', 'a'], 'three adds during the run: one more run');
  t.is(most, 1);
});

test('adds before a worker takes the key collapse into one run', async (t) => {
  const runs: string[] = [];
  const held = gate();
  const queue = new WorkQueue(
    async (key) => {
      runs.push(key);
      if (key === 'first') await held.opened;
    },
    { concurrency: 1 },
  );
  queue.add('first');
  for (const key of ['a', 'b', 'a', 'c', 'b', 'a']) queue.add(key);
  t.is(queue.depth, 3, 'a, b and c wait once each');
  held.open();
  await queue.settled();
  t.deepEqual(runs, ['first', 'a', 'b', 'c']);
});

test('a failing key comes back with doubling backoff until it succeeds; depth counts waiting keys', async (t) => {
  const times: number[] = [];
  const depths: number[] = [];
  const done = gate();
  const queue = new WorkQueue(
    async () => {
      times.push(performance.now());
      if (times.length < 4) throw new Error('not yet');
      done.open();
    },
    { concurrency: 1, baseDelayMs: 20, onDepth: (depth) => depths.push(depth) },
  );
  // The queue's timers do not keep a process alive (the operator's do not hold shutdown); this test's wait does.
  const alive = setInterval(() => {}, 1_000);
  queue.add('flaky');
  await done.opened;
  clearInterval(alive);
  const gaps = times.slice(1).map((time, index) => time - (times[index] as number));
  // 20, 40, 80 ms (timers may fire late, never early).
  t.true(gaps[0] !== undefined && gaps[0] >= 19, `${gaps}`);
  t.true(gaps[1] !== undefined && gaps[1] >= 39, `${gaps}`);
  t.true(gaps[2] !== undefined && gaps[2] >= 79, `${gaps}`);
  t.true(depths.includes(1), 'a key backing off is counted');
  await queue.close();
  t.is(queue.depth, 0);
});

test('a delayed add is overtaken by an immediate one, and close drops what waits', async (t) => {
  const runs: string[] = [];
  const queue = new WorkQueue(
    async (key) => {
      runs.push(key);
    },
    { concurrency: 1 },
  );
  queue.add('later', 60_000);
  t.is(queue.depth, 1);
  queue.add('later');
  await queue.settled();
  t.deepEqual(runs, ['later']);
  queue.add('never', 60_000);
  await queue.close();
  queue.add('after-close');
  await queue.settled();
  t.deepEqual(runs, ['later']);
});
