/**
 * Paced sending: `count` steps, step `index` due at `start + index × stepMs`, each due time computed from the start
 * (never by adding up timer delays, which drift late by a little at each step). A step that comes late is sent at
 * once, so the schedule catches up; after a stall of more than `maxLateSteps` steps (a blocked event loop) the
 * schedule is re-anchored on now rather than bursting every missed frame into the network.
 *
 * `pace` resolves 'done' one step after the last send (when the last frame has played out at the far end) or
 * 'aborted' as soon as `signal` aborts, sending nothing more.
 */
import { setTimeout as sleep } from 'node:timers/promises';

export const frameMs = 20;
export const frameSamples = 160;
const maxLateSteps = 3;

/** Waits `ms`; false when `signal` aborted first. */
export async function wait(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return false;
  if (ms <= 0) return true;
  try {
    await sleep(ms, undefined, signal === undefined ? {} : { signal });
    return true;
  } catch {
    return false;
  }
}

/** What `pace` goes by: a monotonic clock in ms and a wait on it (the real ones; tests give their own). */
export interface PaceTimer {
  now(): number;
  wait(ms: number, signal: AbortSignal | undefined): Promise<boolean>;
}

const realTimer: PaceTimer = { now: () => performance.now(), wait };

export async function pace(
  count: number,
  send: (index: number) => void,
  signal?: AbortSignal,
  stepMs = frameMs,
  timer: PaceTimer = realTimer,
): Promise<'done' | 'aborted'> {
  let start = timer.now();
  for (let index = 0; index < count; index += 1) {
    const late = timer.now() - (start + index * stepMs);
    if (late > maxLateSteps * stepMs) start = timer.now() - index * stepMs;
    if (!(await timer.wait(start + index * stepMs - timer.now(), signal))) return 'aborted';
    if (signal?.aborted) return 'aborted';
    send(index);
  }
  if (!(await timer.wait(start + count * stepMs - timer.now(), signal))) return 'aborted';
  return 'done';
}

/** Splits `pcm` into frames of `frameSamples`, the last one padded with silence. */
export function frameAt(pcm: Int16Array, index: number, samples = frameSamples): Int16Array {
  const begin = index * samples;
  const frame = pcm.subarray(begin, begin + samples);
  if (frame.length === samples) return frame;
  const padded = new Int16Array(samples);
  padded.set(frame);
  return padded;
}

export function frameCount(pcm: Int16Array, samples = frameSamples): number {
  return Math.ceil(pcm.length / samples);
}
