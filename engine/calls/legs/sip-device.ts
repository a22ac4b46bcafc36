/**
 * A SIP device's leg: a registered desk phone that answered a `ring` step's INVITE (engine/calls/ring-sip.ts). It is
 * a dialled SIP dialog like a forward's (legs/carrier.ts: the far end's BYE heard through `onHangup`, our BYE on
 * `bye`), with the device it belongs to, and the flow its requests are pinned to (the binding's source, where its
 * REGISTER came from) released once the dialog's last transaction can no longer need it.
 */
import type { Session } from 'sip.js/lib/core/index.js';
import type { MediaEndpoint } from '../../media/rtp.ts';
import { CarrierLeg } from './carrier.ts';

/** How long the flow stays pinned after the leg ends: a non-INVITE transaction's lifetime (64 × T1). */
const flowLingerMs = 32_000;

export class SipDeviceLeg extends CarrierLeg {
  private released = false;

  constructor(
    id: string,
    session: Session,
    media: MediaEndpoint,
    /** The device (devices.id) that answered. */
    readonly deviceId: string,
    private readonly unpinFlow: () => void,
  ) {
    super(id, session, media);
  }

  /** The leg is over: the media closes, and the flow goes once a BYE's retransmissions are done. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.media.close();
    setTimeout(this.unpinFlow, flowLingerMs).unref();
  }
}
