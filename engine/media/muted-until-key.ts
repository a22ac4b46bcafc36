/**
 * A leg that starts muted until its person presses a key: the ring step's `muted` mode for a SIP desk phone
 * (docs/phones.md, "Ring modes"). SIP has no way to tell a phone to answer with its microphone off, so the engine
 * holds the phone's audio back instead: the caller hears nothing from the phone until its first DTMF digit (RFC 4733
 * or in-band), which unmutes it and is not passed on. The phone hears the caller from the start.
 *
 * The result has the shape `bridge` takes (bridge.ts): give it to `bridge` in place of the endpoint.
 */
import type { BridgeEndpoint } from './bridge.ts';
import type { RtpEndpoint } from './rtp.ts';

export interface MutedUntilKey extends BridgeEndpoint {
  /** True until the first digit. */
  readonly muted: boolean;
  /** Stops listening to the endpoint (the bridge's own listeners go with the bridge). */
  close(): void;
}

export function mutedUntilKey(endpoint: RtpEndpoint): MutedUntilKey {
  let muted = true;
  const stopWatching = endpoint.onDtmf(() => {
    muted = false;
  });
  return {
    get muted() {
      return muted;
    },
    onAudio: (listener) =>
      endpoint.onAudio((frame) => {
        if (!muted) listener(frame);
      }),
    // The digit that unmutes is the phone's own; the ones after it are the person's and cross as usual. The
    // watcher above was registered first, so it has unmuted by the time this listener hears the digit.
    onDtmf: (listener) => {
      let first = muted;
      return endpoint.onDtmf((digit) => {
        if (first) {
          first = false;
          return;
        }
        listener(digit);
      });
    },
    send: (frame) => endpoint.send(frame),
    sendDtmf: (digit, durationMs) => endpoint.sendDtmf(digit, durationMs),
    close: stopWatching,
  };
}
