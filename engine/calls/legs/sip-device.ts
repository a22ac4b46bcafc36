/**
 * A SIP device's leg: a registered desk phone that answered a `ring` step's INVITE (engine/calls/steps/ring/desk-phones.ts). It is
 * a dialled SIP dialog like a forward's (legs/sip-dialog.ts: the far end's BYE heard through `onHangup`, our BYE on
 * `bye`), with the device it belongs to, and the flow its requests are pinned to (the binding's source, where its
 * REGISTER came from) released once the dialog's last transaction can no longer need it.
 */
import type { Session } from 'sip.js/lib/core/index.js';
import type { RtpEndpoint } from '../../media/rtp.ts';
import { SipDialogLeg } from './sip-dialog.ts';

/**
 * How long a flow stays pinned once its dialog or INVITE is done with: a CANCEL's or BYE's transaction lifetime
 * (64 × T1). Used for the leg here and for the INVITEs that did not win (steps/ring/desk-phones.ts).
 */
const flowLingerMs = 32_000;

/** Unpins a flow once `flowLingerMs` are over. */
export function unpinLater(unpin: () => void): void {
  setTimeout(unpin, flowLingerMs).unref();
}

export class SipDeviceLeg extends SipDialogLeg {
  constructor(
    id: string,
    session: Session,
    media: RtpEndpoint,
    /** The device (devices.id) that answered. */
    readonly deviceId: string,
    unpinFlow: () => void,
  ) {
    // The flow goes once a BYE's retransmissions are done.
    super(id, session, media, { release: () => unpinLater(unpinFlow) });
  }
}
