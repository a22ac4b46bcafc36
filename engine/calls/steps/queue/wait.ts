/**
 * A caller waiting in a queue (the `queue` step; docs/contact-center.md, "Queue entries and distribution"). The call
 * goes `queued` and its entry is made (`enterQueue`, held by this engine, with the step's priority); the caller hears
 * the queue's hold prompt looped, or the default hold music (media/hold-music.ts) until the prompt is ready or when
 * it cannot be made, until one of:
 *
 * - an agent answers: distribution (any engine's, distributor.ts) offers the entry to an agent, this engine hears it
 *   (the distributor's watch) and rings the agent's devices as a `ring` round does (steps/ring/round.ts, targets
 *   `[{ memberId }]`) for `queueOfferMs`, the caller still hearing hold music. The first device to answer claims the
 *   entry (`answerEntry`: connected, the agent `on_call`) and is connected to the caller; when the connection ends
 *   the agent goes to wrap-up (the queue's `wrapUpSecs`), their device freed in the same write (the distributor's
 *   `callEnded`). Not answered in time, or declined by every device: `releaseEntry` (a missed offer), the entry is
 *   back in its place and the caller keeps waiting. An offer whose entry stops being offered (the agent went away)
 *   stops ringing at once.
 * - `maxWaitMs` passes: the entry leaves `overflowed` and the plan takes `overflow`.
 * - the call ends (the caller hangs up, a command, shutdown): the entry leaves `abandoned` before the call's end is
 *   recorded (`queue.left` comes before `call.ended`).
 * - `offerCallback`: the caller may ask to be called back and hang up, keeping their place (callback.ts).
 *
 * A queue with `announce_position` or `announce_expected_wait`: `firstAnnouncementMs` after entering, then every
 * `announce_interval_secs`, the caller hears their position and/or expected wait (announcements.ts), spoken as the
 * callback offer is: between offers, never into one ringing, the hold audio stopped meanwhile and started again after.
 */
import { agentsOffered, missedOffersLimit } from '../../../../core/agents/agent-states.ts';
import { changeState } from '../../../../core/calls/calls.ts';
import type { RingableDevices } from '../../../../core/devices/devices.ts';
import {
  answerEntry,
  entryById,
  type EntryRow,
  enterQueue,
  leaveQueue,
  releaseEntry,
  requestCallback,
} from '../../../../core/queues/entries.ts';
import { entryPlace } from '../../../../core/queues/figures.ts';
import { queueById, type QueueRow } from '../../../../core/queues/queues.ts';
import { holdMusicLoop } from '../../../media/hold-music.ts';
import type { QueueCall, QueueOutcome, QueueStepRequest as QueueRequest, RingOutcome } from '../../control.ts';
import { playLooped } from '../../../media/looped-audio.ts';
import { connectWinner, dropWinner, winnerMember } from '../ring/winner.ts';
import { announcementText, firstAnnouncementMs } from './announcements.ts';
import {
  callbackAllowed,
  callbackAttempts,
  callbackGoodbye,
  callbackKey,
  callbackPrompt,
  callbackPromptMs,
  callbackRingMs,
} from './callback.ts';
import type { CallServices, EntryOffer } from '../../services.ts';

/** How long a queue's offer rings the agent's devices before it counts as missed. */
export const queueOfferMs = 15_000;

/** Runs the wait; see the file's comment. */
export async function waitInQueue(services: CallServices, call: QueueCall, step: QueueRequest): Promise<QueueOutcome> {
  const queue = await queueById(services.pool, call.workspaceId, step.queueId).catch(() => undefined);
  // A queue is not deleted while a published plan names it; should it be gone, the caller overflows.
  if (queue === undefined) return 'overflowed';
  if ((await changeState(services.pool, call.callId, 'queued')) === undefined) return 'ended';
  const entry = await enterQueue(services.pool, {
    callId: call.callId,
    queueId: queue.id,
    engineOwner: services.owner,
    priority: step.priority,
  });
  if (entry === undefined) return 'ended';
  return new QueueWait(services, call, step, queue, entry).run();
}

type Event = 'over' | 'deadline' | 'changed' | 'key' | 'prompt' | 'place';
const priority: readonly Event[] = ['over', 'deadline', 'changed', 'key', 'prompt', 'place'];

class QueueWait {
  private readonly pending = new Set<Event>();
  private wake = () => {};
  /** While an offer rings: checks that the entry is still in it. */
  private offerCheck: (() => void) | undefined;
  /** While an offer rings: stops it when the caller's time is up. */
  private offerDeadline: (() => void) | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  private hold: AbortController | undefined;
  /** What the caller hears while waiting: the queue's hold prompt once it is made, the default music until then. */
  private holdAudio = holdMusicLoop();
  private callback = false;
  private keyDeferred = false;
  private failedCallbacks = 0;
  /** Set when the offer's claim dialled the caller back and got no answer. */
  private dialFailed = false;
  private answeredBy: string | undefined;
  /** Whether the agent who answered was sent to wrap-up. */
  private wrappedUp = false;
  /** An offer this engine's distribution just made, handed over by the watch (nothing read since). */
  private offered: EntryOffer | undefined;
  /** When the last offer rung was made (its `offered_at`): an offer is rung once. */
  private rungAt: number | undefined;

  constructor(
    private readonly services: CallServices,
    private readonly call: QueueCall,
    private readonly step: QueueRequest,
    private readonly queue: QueueRow,
    private readonly entry: EntryRow,
  ) {}

  private add(event: Event): void {
    this.pending.add(event);
    this.wake();
  }

  private next(): Promise<Event> {
    return new Promise((resolve) => {
      const take = () => {
        const event = priority.find((candidate) => this.pending.has(candidate));
        if (event === undefined) return false;
        this.pending.delete(event);
        this.wake = () => {};
        resolve(event);
        return true;
      };
      if (!take()) this.wake = () => void take();
    });
  }

  async run(): Promise<QueueOutcome> {
    const { pool } = this.services;
    const { call, entry } = this;
    // Whatever ends the call: the entry leaves `abandoned` (nothing if it left), an agent on it goes to wrap-up.
    call.beforeEnd(async () => {
      await leaveQueue(pool, entry.id, 'abandoned', missedOffersLimit);
      await this.wrapUp();
    });
    const onOver = () => this.add('over');
    call.over.addEventListener('abort', onOver, { once: true });
    const unwatch = this.services.queues.watch(entry.id, entry.queue_id, (offered) => {
      // Only the latest word counts: a notice after a handed-over offer (it may withdraw it) means reading again.
      this.offered = offered;
      if (this.offerCheck !== undefined) this.offerCheck();
      else this.add('changed');
    });
    // A callback needs a number the dial-out policy passes: the SIP From is outside input (withheld, an emergency
    // number, a blocked prefix).
    const offerCallback = this.step.offerCallback && (await callbackAllowed(this.services, call, call.fromNumber));
    const stopKeys = call.onCallerKeys((digit) => {
      if (digit === callbackKey && offerCallback && !this.callback) this.add('key');
    });
    this.timers.push(
      setTimeout(() => {
        this.add('deadline');
        this.offerDeadline?.();
      }, this.step.maxWaitMs),
    );
    if (offerCallback) {
      // Made ahead (TTS takes a moment the first time), so that they play on time.
      for (const tts of [callbackPrompt, callbackGoodbye]) void this.services.prompts.pcm({ tts }).catch(() => {});
      this.timers.push(setInterval(() => this.add('prompt'), callbackPromptMs));
    }
    if (this.queue.announce_position || this.queue.announce_expected_wait) {
      const every = this.queue.announce_interval_secs * 1000;
      this.timers.push(
        setTimeout(() => {
          this.add('place');
          this.timers.push(setInterval(() => this.add('place'), every));
        }, firstAnnouncementMs),
      );
    }
    this.loadHoldPrompt();
    this.startHold();
    // Distribution may have offered the entry before the watch was set.
    this.add('changed');
    try {
      for (;;) {
        const event = await this.next();
        if (event === 'over' || call.over.aborted) return 'ended';
        if (event === 'deadline') {
          await leaveQueue(pool, entry.id, this.callback ? 'abandoned' : 'overflowed', missedOffersLimit);
          if (!this.callback) return 'overflowed';
          await call.hangup('callback_expired');
          return 'ended';
        }
        if (event === 'prompt' && !this.callback) await this.announce();
        if (event === 'place' && !this.callback) await this.announcePlace();
        if (event === 'key') await this.takeCallback();
        if (event === 'changed') {
          const outcome = await this.changed();
          if (outcome !== undefined) return outcome;
        }
      }
    } finally {
      call.over.removeEventListener('abort', onOver);
      unwatch();
      stopKeys();
      for (const timer of this.timers) clearTimeout(timer);
      this.stopHold();
    }
  }

  private startHold(): void {
    const media = this.call.callerMedia();
    if (this.hold !== undefined || this.callback || this.call.over.aborted || media === undefined) return;
    const stop = new AbortController();
    this.hold = stop;
    playLooped(media, this.holdAudio, stop.signal);
  }

  /** The queue's hold prompt, made (TTS) or fetched while the default music plays, then played instead of it. */
  private loadHoldPrompt(): void {
    if (this.queue.hold_prompt === null) return;
    this.services.prompts.pcm(this.queue.hold_prompt).then(
      (pcm) => {
        if (pcm.length === 0) return;
        this.holdAudio = pcm;
        if (this.hold === undefined) return;
        this.stopHold();
        this.startHold();
      },
      // The default music plays on.
      (error: unknown) =>
        this.services.log.warn(
          { queueId: this.queue.id, error: error instanceof Error ? error.message : String(error) },
          "the queue's hold prompt could not be made: the default hold music plays",
        ),
    );
  }

  private stopHold(): void {
    this.hold?.abort();
    this.hold = undefined;
  }

  private async announce(): Promise<void> {
    this.stopHold();
    await this.call.say(callbackPrompt);
    this.startHold();
  }

  /** The caller's position and/or expected wait, while the entry waits in line (not while it is offered). */
  private async announcePlace(): Promise<void> {
    const place = await entryPlace(this.services.pool, this.entry.id).catch(() => undefined);
    if (place?.state !== 'waiting') return;
    const text = announcementText(this.queue, place.position, place.answered_recently);
    if (text === undefined) return;
    this.stopHold();
    await this.call.say(text);
    this.startHold();
  }

  /** The caller pressed the callback key: the entry keeps its place as `callback`, the caller is let go. */
  private async takeCallback(): Promise<void> {
    if (!(await requestCallback(this.services.pool, this.entry.id, this.call.fromNumber))) {
      // Offered right now: asked again once that offer is over, if it was not answered.
      this.keyDeferred = true;
      return;
    }
    this.callback = true;
    this.stopHold();
    await this.call.releaseCaller(callbackGoodbye);
  }

  /** The entry may have changed: an offer to ring, or it left. */
  private async changed(): Promise<QueueOutcome | undefined> {
    const offered = this.offered;
    this.offered = undefined;
    // An offer is rung once, however it is heard of (handed over, or read after a notice).
    if (offered !== undefined && offered.offeredAt.getTime() !== this.rungAt) {
      return this.offer(offered.offeredAt, [...offered.memberIds], offered.ringable);
    }
    const now = await entryById(this.services.pool, this.entry.id);
    // Left without this wait's doing (not by an answer here: that returned already): the plan goes on.
    if (now === undefined || now.left_at !== null) return 'overflowed';
    if (now.state !== 'offered' || now.offered_at === null || now.offered_at.getTime() === this.rungAt)
      return undefined;
    const members = await agentsOffered(this.services.pool, now.id);
    if (members.length === 0) return undefined;
    return this.offer(now.offered_at, members);
  }

  /** Rings the offered agents; see the file's comment. */
  private async offer(
    offeredAt: Date,
    members: string[],
    ringable?: RingableDevices,
  ): Promise<QueueOutcome | undefined> {
    const { pool } = this.services;
    this.rungAt = offeredAt.getTime();
    // The policy may have changed since the caller asked: a refused callback leaves, never dialled, before any ring.
    const callback = this.callback ? (await entryById(pool, this.entry.id))?.callback_number : undefined;
    if (callback != null && !(await callbackAllowed(this.services, this.call, callback))) {
      await leaveQueue(pool, this.entry.id, 'callback_refused', missedOffersLimit);
      await this.call.hangup('callback_refused');
      return 'ended';
    }
    const stop = new AbortController();
    let why: 'changed' | 'deadline' | undefined;
    const stopFor = (reason: 'changed' | 'deadline') => {
      why ??= reason;
      stop.abort();
    };
    this.offerCheck = () => {
      void entryById(pool, this.entry.id)
        .then((now) => {
          if (now?.state !== 'offered' || now.offered_at?.getTime() !== offeredAt.getTime()) stopFor('changed');
        })
        .catch(() => {});
    };
    this.offerDeadline = () => {
      if (!this.callback) stopFor('deadline');
    };
    if (this.pending.has('deadline')) this.offerDeadline();
    this.dialFailed = false;
    let outcome: RingOutcome;
    try {
      outcome = await this.ringOffer(members, stop.signal, ringable);
    } finally {
      this.offerCheck = undefined;
      this.offerDeadline = undefined;
    }
    // Answered: the agent went to wrap-up with their device when the connection ended.
    if (outcome === 'answered') return 'answered';
    if (this.call.over.aborted) return 'ended';
    if (why === 'deadline') {
      await leaveQueue(pool, this.entry.id, 'overflowed', missedOffersLimit);
      return 'overflowed';
    }
    // The agent did not answer (or declined): a missed offer. A callback the caller did not answer is no agent's.
    if (why === undefined) {
      await releaseEntry(pool, this.entry.id, !this.dialFailed, missedOffersLimit, offeredAt);
    }
    if (this.dialFailed && ++this.failedCallbacks >= callbackAttempts) {
      await leaveQueue(pool, this.entry.id, 'abandoned', missedOffersLimit);
      await this.call.hangup('callback_unanswered');
      return 'ended';
    }
    await changeState(pool, this.call.callId, 'queued');
    this.startHold();
    if (this.keyDeferred) {
      this.keyDeferred = false;
      this.add('key');
    }
    // Whatever happened meanwhile (the entry offered again) is read again.
    this.add('changed');
    return undefined;
  }

  /**
   * The offered agents' devices rung once (steps/ring/round.ts); the first to answer claims the entry and is
   * connected to the caller until either side hangs up (`answered`), then wraps up; a failed claim hangs it up.
   */
  private async ringOffer(members: string[], stop: AbortSignal, ringable?: RingableDevices): Promise<RingOutcome> {
    const targets = members.map((memberId) => ({ memberId }));
    const waitAudio = (signal: AbortSignal) => signal.addEventListener('abort', () => this.stopHold(), { once: true });
    const winner = await this.call.ringOffer(targets, queueOfferMs, { waitAudio, stop, ...(ringable && { ringable }) });
    if (winner === undefined) return 'unanswered';
    const claimed = await this.claim(winnerMember(winner)).catch(async (error: unknown) => {
      await dropWinner(this.services, winner);
      throw error;
    });
    if (!claimed) {
      await dropWinner(this.services, winner);
      return 'unanswered';
    }
    await connectWinner(this.services, winner, (deviceId) => this.wrapUp(deviceId));
    return 'answered';
  }

  /** A device of `memberId` answered: a callback dials the caller first; then the entry is theirs, or not. */
  private async claim(memberId: string | null): Promise<boolean> {
    if (memberId === null) return false;
    if (this.callback) {
      const number = (await entryById(this.services.pool, this.entry.id))?.callback_number ?? this.call.fromNumber;
      if (!(await this.call.dialBack(number, callbackRingMs))) {
        this.dialFailed = true;
        return false;
      }
    }
    const mine = await answerEntry(this.services.pool, this.entry.id, memberId);
    if (mine) this.answeredBy = memberId;
    else if (this.callback) await this.call.dropCaller();
    return mine;
  }

  /**
   * The agent who answered goes to wrap-up, with the device the call was on freed in the same write (once the
   * connection is over). Written once; asked again without a device (the call ending), nothing more is written. Should
   * the device's end come second, the agent's change is written again and changes nothing.
   */
  private async wrapUp(deviceId?: string): Promise<void> {
    if (this.answeredBy === undefined || (this.wrappedUp && deviceId === undefined)) return;
    this.wrappedUp = true;
    await this.services.queues.callEnded({
      workspaceId: this.entry.workspace_id,
      memberId: this.answeredBy,
      entryId: this.entry.id,
      wrapUpSecs: this.queue.wrap_up_secs,
      ...(deviceId === undefined ? {} : { deviceId }),
    });
  }
}
