/**
 * Hold (operation 54, docs/contact-center.md "Call control"): a caller's bridge that can be held. Every place that
 * bridges a caller to their party (a browser or SIP device in ringing.ts and ring-sip.ts, a cell, forward or
 * callback in dial-out.ts, and so a queue's agent) bridges through `bridgeCaller`, which registers the bridge under
 * the caller's media; the call's `hold` command (engine/calls/commands.ts, through `Call.hold`) reaches it there.
 *
 * Held, the bridge is stopped both ways: the caller hears the hold music (engine/media/hold-music.ts, as in a
 * queue), the party hears silence (nothing is sent to them). Resumed, the music stops and the two are bridged
 * again. Holding a held call, or resuming one not held, changes nothing. No re-INVITE is sent to SIP parties.
 */
import { type BridgeEndpoint, bridge } from '../media/bridge.ts';
import { holdMusicLoop } from '../media/hold-music.ts';
import type { MediaEndpoint } from '../media/rtp.ts';

type Caller = BridgeEndpoint & Pick<MediaEndpoint, 'play'>;

/** The bridges now up, by the caller's media (one at a time per caller): each one's hold (`on`) or resume. */
const bridges = new WeakMap<object, (on: boolean) => void>();

/** Bridges `caller` and `party` as `bridge` does, holdable by `holdCaller`; the returned function ends it. */
export function bridgeCaller(caller: Caller, party: BridgeEndpoint): () => void {
  let unbridge: (() => void) | undefined = bridge(caller, party);
  let music: AbortController | undefined;
  let ended = false;
  const hold = (on: boolean) => {
    if (ended || on === (music !== undefined)) return;
    if (on) {
      unbridge?.();
      unbridge = undefined;
      music = new AbortController();
      playLooped(caller, holdMusicLoop(), music.signal);
    } else {
      music?.abort();
      music = undefined;
      unbridge = bridge(caller, party);
    }
  };
  bridges.set(caller, hold);
  return () => {
    if (ended) return;
    ended = true;
    unbridge?.();
    music?.abort();
    if (bridges.get(caller) === hold) bridges.delete(caller);
  };
}

/** Plays `pcm` to `media` again and again until `signal` aborts (or another `play` takes the media over). */
export function playLooped(media: Pick<MediaEndpoint, 'play'>, pcm: Int16Array, signal: AbortSignal): void {
  void (async () => {
    while (!signal.aborted && (await media.play(pcm, signal)) === 'done');
  })().catch(() => {});
}

/** Holds (`on`) or resumes the bridge of `caller`; false when the caller is not bridged now. */
export function holdCaller(caller: object, on: boolean): boolean {
  const hold = bridges.get(caller);
  if (hold === undefined) return false;
  hold(on);
  return true;
}
