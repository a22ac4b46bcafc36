/**
 * The mixer of a supervision (engine/media/mixer.ts) on its own 20 ms ticker: frames summed with clipping, each
 * input's jitter buffer (no audio until 40 ms are in, at most 120 ms kept, the oldest dropped), outputs hearing only
 * their inputs and sent nothing when none of them had audio. Each frame is a constant value, so the frames an output
 * got tell which inputs were mixed at each tick.
 */
import test from 'ava';
import { Mixer, mix } from '../../../engine/media/mixer.ts';

const frame = (value: number) => new Int16Array(160).fill(value);

test('mix sums frames and clips to 16 bits', (t) => {
  t.deepEqual([...mix([frame(100), frame(-30)])].slice(0, 2), [70, 70]);
  t.is(mix([frame(30000), frame(10000)])[0], 32767);
  t.is(mix([frame(-30000), frame(-10000)])[159], -32768);
});

test('jitter buffers: prefill, the oldest dropped past 120 ms, outputs mixing only what had audio', (t) => {
  const mixer = new Mixer<'a' | 'c'>(['a', 'c']);
  const heard = { a: [] as number[], c: [] as number[], both: [] as number[] };
  const record = (into: number[]) => (mixed: Int16Array) => {
    t.is(mixed.length, 160);
    t.true(
      mixed.every((sample) => sample === mixed[0]),
      'a whole frame of one value',
    );
    into.push(mixed[0]!);
  };
  // The test is the clock: each tick is one 20 ms step of the mixer's pacer.
  const ticks = (count: number) => {
    for (let tick = 0; tick < count; tick += 1) mixer.tick();
  };
  mixer.route([
    { from: ['a'], to: record(heard.a) },
    { from: ['c'], to: record(heard.c) },
    { from: ['a', 'c'], to: record(heard.both) },
  ]);
  // Ten frames of `c` (200 ms) before the start: the six newest are kept.
  for (let value = 1; value <= 10; value += 1) mixer.input('c', frame(value));
  // One frame of `a` is under the 40 ms prefill: it waits.
  mixer.input('a', frame(1000));
  ticks(3);
  t.deepEqual(heard.c, [5, 6, 7]);
  t.deepEqual(heard.a, [], 'a single frame is not played before the prefill');
  // A second frame completes the prefill: from the next tick on, `a` plays and mixes with `c`.
  mixer.input('a', frame(2000));
  ticks(3);
  t.deepEqual(heard.c, [5, 6, 7, 8, 9, 10]);
  t.deepEqual(heard.a, [1000, 2000]);
  t.deepEqual(heard.both, [5, 6, 7, 1008, 2009, 10]);
  // Nothing more comes in: nothing more goes out, and an input dry since fills again before it plays.
  ticks(2);
  t.is(heard.c.length, 6, 'nothing is sent while no input has audio');
  mixer.input('a', frame(3000));
  mixer.input('c', frame(20));
  mixer.input('c', frame(30));
  ticks(2);
  t.deepEqual(heard.c, [5, 6, 7, 8, 9, 10, 20, 30]);
  t.deepEqual(heard.a, [1000, 2000], 'the refilling input waits for its prefill again');
  t.deepEqual(heard.both.slice(6), [20, 30]);
  mixer.stop();
  mixer.input('c', frame(40));
  mixer.input('c', frame(50));
  ticks(2);
  t.is(heard.c.length, 8, 'a stopped mixer takes no input');
});

test('the pacer ticks on its own once started, until its signal aborts', async (t) => {
  const mixer = new Mixer<'a'>(['a']);
  const heard: number[] = [];
  let wake = () => {};
  mixer.route([{ from: ['a'], to: (mixed) => (heard.push(mixed[0]!), wake()) }]);
  for (let value = 1; value <= 3; value += 1) mixer.input('a', frame(value));
  const stopped = new AbortController();
  t.teardown(() => stopped.abort());
  mixer.start(stopped.signal);
  while (heard.length < 3) await new Promise<void>((resolve) => (wake = resolve));
  t.deepEqual(heard, [1, 2, 3]);
});
