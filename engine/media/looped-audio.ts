/**
 * Looped audio to a caller (the hold music of a held connection or a queue's wait, ringback): `playLooped`. Hold
 * itself (operation 54) is a state of the caller's connection (connection.ts).
 */
import type { RtpEndpoint } from './rtp.ts';

/** Plays `pcm` to `media` again and again until `signal` aborts (or another `play` takes the media over). */
export function playLooped(media: Pick<RtpEndpoint, 'play'>, pcm: Int16Array, signal: AbortSignal): void {
  void (async () => {
    while (!signal.aborted && (await media.play(pcm, signal)) === 'done');
  })().catch(() => {});
}
