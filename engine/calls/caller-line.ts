/**
 * The caller's line on a call: the leg that is the caller's now (the first one; none while a queue's callback waits;
 * the dialled one once the caller is called back), the keys its far end presses, and prompts played to it.
 *
 * - Keys are heard from the first packet on: a caller may press one right after the ACK. A key nobody waits for is
 *   kept (typed ahead) for the next prompt or key wait; a key wait takes the first kept key, or waits for one.
 * - A prompt asked to stop on a key stops at the first key (a kept one answers it at once, before it plays); that
 *   key is the answer, not a second press.
 * - Only the caller's leg of the moment counts: a key or a hangup of a leg the line let go changes nothing.
 */
import type { Leg } from './leg.ts';

export class CallerLine {
  private leg: Leg | undefined;
  private readonly keys: string[] = [];
  private keyWaiter: ((key: string | undefined) => void) | undefined;

  /** `ended` aborts when the call ends: a wait for a key, or a prompt, stops then. */
  constructor(private readonly ended: AbortSignal) {}

  /** The caller's leg now, if one is on the line. */
  get current(): Leg | undefined {
    return this.leg;
  }

  /** `leg` is the caller's from now: its keys are the line's, and `onHangup` hears its hangup while it is. */
  attach(leg: Leg, onHangup: () => void): void {
    this.leg = leg;
    leg.onDtmf((digit) => {
      if (this.leg !== leg) return;
      const waiter = this.keyWaiter;
      if (waiter !== undefined) {
        this.keyWaiter = undefined;
        waiter(digit);
      } else this.keys.push(digit);
    });
    leg.onHangup(() => {
      if (this.leg === leg) onHangup();
    });
  }

  /** No caller on the line from now (their BYE, or ours, no longer ends the call); returns the leg that was. */
  detach(): Leg | undefined {
    const leg = this.leg;
    this.leg = undefined;
    return leg;
  }

  /** Hears the keys of the caller's leg now; returns the unsubscribe. */
  onKeys(listener: (digit: string) => void): () => void {
    return this.leg === undefined ? () => {} : this.leg.onDtmf(listener);
  }

  /** Keys pressed so far are forgotten (they were a queue's, not typed ahead for the next step). */
  forgetKeys(): void {
    this.keys.length = 0;
  }

  /** Plays `pcm` to the caller; with `stopOnKey`, the key that stopped it (or a kept one, at once). */
  async play(pcm: Int16Array, stopOnKey: boolean): Promise<string | undefined> {
    const leg = this.leg;
    if (leg === undefined) return undefined;
    const stop = new AbortController();
    const onEnded = () => stop.abort();
    let pressed: string | undefined;
    let unsubscribe: (() => void) | undefined;
    if (stopOnKey) {
      // A key pressed before the prompt (typed ahead) answers it at once.
      const early = this.keys.shift();
      if (early !== undefined) return early;
      unsubscribe = leg.onDtmf((digit) => {
        pressed ??= digit;
        stop.abort();
      });
    }
    this.ended.addEventListener('abort', onEnded, { once: true });
    try {
      await leg.media.play(pcm, stop.signal);
    } finally {
      unsubscribe?.();
      this.ended.removeEventListener('abort', onEnded);
    }
    if (pressed !== undefined) {
      // The key that cut the prompt is the answer; the kept copy is not a second press.
      const index = this.keys.indexOf(pressed);
      if (index !== -1) this.keys.splice(index, 1);
    }
    return pressed;
  }

  /** Waits up to `timeoutMs` for one key (a kept key at once); undefined when none came or the call ended. */
  key(timeoutMs: number): Promise<string | undefined> {
    const kept = this.keys.shift();
    if (kept !== undefined) return Promise.resolve(kept);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const onEnded = () => finish(undefined);
      const finish = (key: string | undefined) => {
        clearTimeout(timer);
        this.ended.removeEventListener('abort', onEnded);
        if (this.keyWaiter === finish) this.keyWaiter = undefined;
        resolve(key);
      };
      this.ended.addEventListener('abort', onEnded, { once: true });
      this.keyWaiter = finish;
    });
  }
}
