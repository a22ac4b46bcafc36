/**
 * Bridging two legs: each leg's decoded audio is sent on the other (re-encoded in that leg's codec, so a PCMU leg
 * and a PCMA leg can talk) and each leg's DTMF is sent on the other as RFC 4733 events (or in-band tones when that
 * leg's remote has no telephone-event). Frames are relayed as they arrive, without buffering. The returned function
 * stops the relay (calling it again is fine); closing either endpoint also ends its side.
 *
 * A leg is anything with the audio shape of `RtpEndpoint` (8 kHz frames in and out): an RTP endpoint, or a WebRTC
 * endpoint (webrtc.ts), which carries no DTMF, so digits cross only between legs that both have them.
 */
import type { RtpEndpoint } from './rtp.ts';

export type BridgeEndpoint = Pick<RtpEndpoint, 'onAudio' | 'send'> & Partial<Pick<RtpEndpoint, 'onDtmf' | 'sendDtmf'>>;

export function bridge(a: BridgeEndpoint, b: BridgeEndpoint): () => void {
  if (a === b) throw new Error('cannot bridge a media endpoint with itself');
  const relayDtmf = (from: BridgeEndpoint, to: BridgeEndpoint) => {
    if (from.onDtmf === undefined || to.sendDtmf === undefined) return () => {};
    const sendDtmf = to.sendDtmf.bind(to);
    // Queued on the far leg; a leg that closes meanwhile just drops it.
    return from.onDtmf((digit) => void sendDtmf(digit).catch(() => {}));
  };
  const stops = [
    a.onAudio((frame) => b.send(frame)),
    b.onAudio((frame) => a.send(frame)),
    relayDtmf(a, b),
    relayDtmf(b, a),
  ];
  return () => {
    for (const stop of stops.splice(0)) stop();
  };
}
