/**
 * Telling the SIP parties of a connection of its hold (operation 54, docs/contact-center.md "Hold"): the connection
 * (connection.ts) calls a `HoldSignal` when the application holds or resumes it, and the signal asks the leg for its
 * re-INVITE (`Leg.hold`, legs/sip-dialog.ts): the caller's leg `sendonly` (it hears our hold music), a party's leg
 * `inactive` (it is sent nothing while held), `sendrecv` on resume. A leg without signalling of its own (a browser)
 * has no signal. Every re-INVITE sent is counted by its result (`switchboard_sip_hold_reinvites_total`); one the far
 * end did not take is also logged, and the hold applies to the media all the same: the call goes on.
 */
import type { BridgeEndpoint } from '../media/bridge.ts';
import { HoldFailure, type Leg } from './leg.ts';
import type { CallServices } from './services.ts';

/** Told `true` when the connection is held, `false` when it is resumed. */
export type HoldSignal = (on: boolean) => void;

/** The signal of `leg` (held as `held`), or undefined for a leg that has no re-INVITE to send (or no leg). */
export function holdSignal(
  services: Pick<CallServices, 'metrics' | 'log'>,
  callId: string,
  leg: Pick<Leg<BridgeEndpoint>, 'id' | 'hold'> | undefined,
  held: 'sendonly' | 'inactive',
): HoldSignal | undefined {
  if (leg?.hold === undefined) return undefined;
  const { metrics, log } = services;
  return (on) => {
    void leg.hold?.(on ? held : 'sendrecv').then(
      (sent) => {
        if (sent) metrics.holdReinvites.inc({ result: 'answered' });
      },
      (error: unknown) => {
        const result = error instanceof HoldFailure ? error.result : 'unsent';
        metrics.holdReinvites.inc({ result });
        log.warn(
          { callId, legId: leg.id, result, detail: (error as Error).message },
          `the ${on ? 'hold' : 'resume'} re-INVITE failed; the media is ${on ? 'held' : 'resumed'} all the same`,
        );
      },
    );
  };
}
