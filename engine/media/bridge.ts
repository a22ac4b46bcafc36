/**
 * Bridging two legs: each leg's decoded audio is sent on the other (re-encoded in that leg's codec, so a PCMU leg
 * and a PCMA leg can talk) and each leg's DTMF is sent on the other as RFC 4733 events (or in-band tones when that
 * leg's remote has no telephone-event). Frames are relayed as they arrive, without buffering. The returned function
 * stops the relay (calling it again is fine); closing either endpoint also ends its side.
 */
import type { MediaEndpoint } from './rtp.ts';

export function bridge(a: MediaEndpoint, b: MediaEndpoint): () => void {
  if (a === b) throw new Error('cannot bridge a media endpoint with itself');
  const relayDtmf = (to: MediaEndpoint) => (digit: string) => {
    // Queued on the far leg; a leg that closes meanwhile just drops it.
    to.sendDtmf(digit).catch(() => {});
  };
  const stops = [
    a.onAudio((frame) => b.send(frame)),
    b.onAudio((frame) => a.send(frame)),
    a.onDtmf(relayDtmf(b)),
    b.onDtmf(relayDtmf(a)),
  ];
  return () => {
    for (const stop of stops.splice(0)) stop();
  };
}
