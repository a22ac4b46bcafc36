/**
 * Voice verifications (docs/messaging.md, "One-time codes"): the engine calls the recipient through the carrier of
 * the workspace's first voice number, speaks "Your code is 1, 2, 3, 4, 5, 6." twice with the engine's text-to-speech,
 * and hangs up. A verification waiting for its call is announced on `switchboard_verifications`; every engine wakes
 * on it (and polls, for a notice missed), and exactly one takes it: the take clears the sealed code from the row, so
 * only that engine, in memory, still has it. The speech is made of one prompt per digit, so no prompt cache (in
 * memory or on disk) ever holds the code.
 */
import { ChangeListener, verificationsChannel } from '../../core/change-notices.ts';
import type { Log } from '../../core/log.ts';
import { openSecret } from '../../core/sealing.ts';
import {
  callPlaced,
  dropExpiredCalls,
  sealedCodeData,
  type TakenCall,
  takeVerificationCall,
} from '../../core/verifications/verifications.ts';
import { dialThroughCarrier } from '../calls/dial-out.ts';
import { promptAudio } from '../calls/prompt-audio.ts';
import type { CallServices } from '../calls/services.ts';
import { sampleRate } from '../media/prompts.ts';

/** How often engines look for calls whose notice they missed, and drop codes that expired waiting. */
const pollMs = 2_000;
/** How long the recipient's phone rings before we give up. */
const ringMs = 45_000;
/** The silences: between the digits, and between the two times the code is said. */
const digitGapMs = 250;
const repeatGapMs = 1_000;

const silence = (ms: number) => new Int16Array((sampleRate * ms) / 1000);

function joined(pieces: readonly Int16Array[]): Int16Array {
  const all = new Int16Array(pieces.reduce((sum, piece) => sum + piece.length, 0));
  let at = 0;
  for (const piece of pieces) {
    all.set(piece, at);
    at += piece.length;
  }
  return all;
}

/** "Your code is" and each digit, a short silence after each: what is played (twice) to the recipient. */
export async function spokenCode(services: CallServices, id: string, code: string): Promise<Int16Array> {
  const say = (text: string) => promptAudio(services, `verification:${id}`, { tts: text });
  const pieces: Int16Array[] = [await say('Your code is'), silence(digitGapMs)];
  for (const digit of code) pieces.push(await say(digit), silence(digitGapMs));
  return joined(pieces);
}

export class VoiceVerifications {
  private readonly notices: ChangeListener;
  private poll: NodeJS.Timeout | undefined;
  private taking: Promise<void> | undefined;
  private again = false;
  private readonly closing = new AbortController();
  private readonly calls = new Set<Promise<void>>();

  constructor(
    private readonly options: {
      services: CallServices;
      databaseUrl: string;
      /** Opens the sealed codes (SigningKeys.verificationCodes). */
      codesKey: Uint8Array;
      log: Pick<Log, 'info' | 'warn'>;
    },
  ) {
    this.notices = new ChangeListener(
      options.databaseUrl,
      verificationsChannel,
      () => this.look(),
      () => this.look(),
      (message) => options.log.warn({}, message),
    );
  }

  async start(): Promise<void> {
    await this.notices.start();
    this.poll = setInterval(() => {
      this.look();
      dropExpiredCalls(this.options.services.pool).catch((error: unknown) =>
        this.options.log.warn({ err: error }, 'expired verification calls could not be dropped'),
      );
    }, pollMs);
    this.poll.unref();
    this.look();
  }

  /** Takes every waiting verification call, one statement each; a look asked for meanwhile runs after. */
  private look(): void {
    if (this.closing.signal.aborted) return;
    if (this.taking !== undefined) {
      this.again = true;
      return;
    }
    this.taking = (async () => {
      do {
        this.again = false;
        for (;;) {
          if (this.closing.signal.aborted) return;
          const taken = await takeVerificationCall(this.options.services.pool, this.options.services.owner);
          if (taken === undefined) break;
          const placing = this.place(taken).catch((error: unknown) =>
            this.options.log.warn({ err: error, verificationId: taken.id }, 'verification call failed'),
          );
          this.calls.add(placing);
          void placing.finally(() => this.calls.delete(placing));
        }
      } while (this.again);
    })()
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'verification calls could not be taken'))
      .finally(() => (this.taking = undefined));
  }

  private async place(taken: TakenCall): Promise<void> {
    const { services, log } = this.options;
    const { pool } = services;
    let code: string;
    try {
      code = openSecret(this.options.codesKey, taken.sealedCode, sealedCodeData(taken.id));
    } catch {
      log.warn({ verificationId: taken.id }, 'a verification code cannot be opened; no call');
      await callPlaced(pool, taken.id, 'failed');
      return;
    }
    if (taken.caller === undefined) {
      log.warn({ verificationId: taken.id }, 'the workspace has no voice number to call from; no call');
      await callPlaced(pool, taken.id, 'failed');
      return;
    }
    let unavailable = false;
    const leg = await dialThroughCarrier(
      services,
      {
        workspaceId: taken.workspaceId,
        kind: 'verification',
        from: taken.caller.e164,
        carrierName: taken.caller.carrier,
        to: taken.to,
        timeoutMs: ringMs,
        signal: this.closing.signal,
        unavailable: (detail) => {
          unavailable = true;
          log.warn({ verificationId: taken.id }, detail);
        },
      },
      // No call record: the verification is the record; the leg goes by the verification's id.
      {
        what: `verification call to ${taken.to}`,
        leg: async () => `verification:${taken.id}`,
        legState: async () => {},
      },
    );
    if (leg === undefined) {
      await callPlaced(pool, taken.id, unavailable ? 'failed' : 'unanswered');
      return;
    }
    const over = new AbortController();
    const stop = () => over.abort();
    leg.onHangup(stop);
    this.closing.signal.addEventListener('abort', stop, { once: true });
    try {
      const speech = await spokenCode(services, taken.id, code);
      if ((await leg.media.play(speech, over.signal)) === 'done') {
        if ((await leg.media.play(silence(repeatGapMs), over.signal)) === 'done') {
          await leg.media.play(speech, over.signal);
        }
      }
      // Hung up by us unless the recipient did first.
      if (!over.signal.aborted) await leg.bye();
    } finally {
      this.closing.signal.removeEventListener('abort', stop);
      const counts = leg.close();
      if (counts.rtp !== undefined) services.metrics.countRtp(counts.rtp);
    }
    await callPlaced(pool, taken.id, 'answered');
  }

  async close(): Promise<void> {
    clearInterval(this.poll);
    this.closing.abort();
    await this.notices.close();
    await this.taking;
    await Promise.allSettled([...this.calls]);
  }
}
