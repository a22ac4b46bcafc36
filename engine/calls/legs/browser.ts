/**
 * A browser leg: a device that accepted a `ring` step's offer (docs/phones.md, "Legs"), reached over a WebRTC peer
 * connection of the engine (a `WebRtcMedia`, engine/media/webrtc-endpoint.ts, of the stack `WEBRTC_MEDIA` names). Its
 * media is the endpoint itself, with the carrier endpoint's audio shape, so the call bridges it to the caller's G.711
 * leg.
 *
 * - No DTMF comes from a browser: the endpoint carries none (`onDtmf` never calls its listener).
 * - The far end hangs up when its peer connection closes or fails (the browser closed it, went away, or ICE or DTLS
 *   gave up); `onHangup` hears that once. A browser that closes its peer connection is heard at once by the G.711
 *   stack (its DTLS close_notify) and about 15 s later by libwebrtc, when ICE consent lapses (both measured in
 *   test/engine/calls/legs/browser.test.ts).
 * - `bye` closes the peer connection (the browser sees it close); nothing waits.
 */
import type { WebRtcMedia, WebRtcState } from '../../media/webrtc-endpoint.ts';
import type { Leg, LegCounts } from '../leg.ts';

/** The connection states that end a browser leg. */
const endStates: ReadonlySet<WebRtcState> = new Set(['failed', 'closed']);

export class BrowserLeg implements Leg<WebRtcMedia> {
  private readonly hangupListeners: Array<() => void> = [];
  private over = false;
  private byUs = false;
  /** The browser ended it (not our `bye`). */
  private byThem = false;

  constructor(
    /** Its record (call_legs). */
    readonly id: string,
    readonly media: WebRtcMedia,
    /** The device that answered. */
    readonly deviceId: string,
  ) {
    media.onState((state) => {
      if (endStates.has(state)) this.end();
    });
    if (endStates.has(media.state)) queueMicrotask(() => this.end());
  }

  /** True once the leg ended, from either side. */
  get ended(): boolean {
    return this.over;
  }

  /** A browser sends no DTMF: the listener is never called. */
  onDtmf(_listener: (digit: string) => void): () => void {
    return () => {};
  }

  onHangup(listener: () => void): void {
    if (this.byThem) queueMicrotask(listener);
    else this.hangupListeners.push(listener);
  }

  bye(): Promise<void> {
    this.byUs = true;
    this.media.close();
    return Promise.resolve();
  }

  close(): LegCounts {
    this.media.close();
    const stats = this.media.stats;
    return { in: stats.framesIn, out: stats.framesOut };
  }

  private end(): void {
    if (this.over) return;
    this.over = true;
    if (this.byUs) return;
    this.byThem = true;
    for (const listener of this.hangupListeners.splice(0)) listener();
  }
}
