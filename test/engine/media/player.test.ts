/**
 * Paced sending (engine/media/player.ts `pace`) on a timer of the test's: each step is due at start + index × step,
 * never earlier; a late wake-up sends at once and the next steps keep their slots (no drift); a stall longer than
 * three steps moves the schedule on instead of sending every missed step at once. The frames on the wire are
 * test/engine/media/media.test.ts's.
 */
import test from 'ava';
import { pace, type PaceTimer } from '../../../engine/media/player.ts';

/** A timer whose waits end `lateBy(n)` ms after they were due, the nth wait counted from 0. */
function lateTimer(lateBy: (wait: number) => number): PaceTimer & { sent: number[] } {
  let now = 1000;
  let waits = 0;
  const sent: number[] = [];
  return {
    sent,
    now: () => now,
    wait: async (ms) => {
      now += Math.max(0, ms) + lateBy(waits);
      waits += 1;
      return true;
    },
  };
}

async function sendTimes(steps: number, lateBy: (wait: number) => number): Promise<number[]> {
  const timer = lateTimer(lateBy);
  const start = timer.now();
  const result = await pace(steps, () => timer.sent.push(timer.now() - start), undefined, 20, timer);
  if (result !== 'done') throw new Error(result);
  return timer.sent;
}

test('each step is sent in its slot: index × 20 ms after the start', async (t) => {
  t.deepEqual(await sendTimes(5, () => 0), [0, 20, 40, 60, 80]);
});

test('wake-ups 1 to 15 ms late: every step in its slot or just after it, never drifting behind', async (t) => {
  const lateness = [7, 15, 1, 12, 9, 3, 15, 15, 15, 2];
  const sent = await sendTimes(10, (wait) => lateness[wait] ?? 0);
  sent.forEach((at, index) => {
    t.true(at >= index * 20, `step ${index} at ${at} ms, not before its slot`);
    t.true(at - index * 20 <= 15, `step ${index} at ${at} ms, within a wake-up's lateness of its slot`);
  });
});

test('a late step is sent at once and the next keeps its own slot', async (t) => {
  // The third wait (before step 2) wakes 30 ms late: step 2 goes at 70, step 3 at once too (its slot, 60, is past),
  // step 4 at its slot.
  const sent = await sendTimes(5, (wait) => (wait === 2 ? 30 : 0));
  t.deepEqual(sent, [0, 20, 70, 70, 80]);
});

test('a stall of more than three steps moves the schedule on: no burst of the missed steps', async (t) => {
  // The second wait (before step 1) wakes 200 ms late, nine slots on: step 1 goes then, step 2 is due at once on the
  // moved schedule, and the rest follow 20 ms apart; the nine missed frames are not sent.
  t.deepEqual(await sendTimes(5, (wait) => (wait === 1 ? 200 : 0)), [0, 220, 220, 240, 260]);
});

test('an aborted signal stops the pacing before the next step', async (t) => {
  const controller = new AbortController();
  const timer: PaceTimer = {
    now: () => 0,
    wait: async (_ms, signal) => !(signal?.aborted ?? false),
  };
  let sent = 0;
  const result = await pace(
    10,
    () => {
      sent += 1;
      if (sent === 3) controller.abort();
    },
    controller.signal,
    20,
    timer,
  );
  t.is(result, 'aborted');
  t.is(sent, 3);
});
