/**
 * Ringing registered SIP devices in a `ring` round (docs/phones.md, "The ring step"): each targeted person's `sip`
 * device that is not on a call is rung at every live binding by an INVITE with the engine's RTP offer (G.711, as a
 * forward's dial-out; no digest: we call the phone). The INVITE goes to the binding's source (where its REGISTER
 * came from, on that transport), never to its Contact's host; the Request-URI is the binding's contact; its media
 * likewise goes to that source's address, whatever the answer's c= line names (engine/media/media-peer.ts), and an
 * answer whose address cannot be a phone's (multicast, link-local, unspecified) is hung up with a Reason header. A
 * binding past its expiry (on the engine's clock) is never rung.
 *
 * The first 200 wins among the bindings: the others are CANCELled, and an answer after the winner's (or after
 * `stop`) is acknowledged and hung up at once. Whether it wins against a browser's accept is the round's call
 * (round.ts), which connects the winner as the call's `device` leg (`connectWinner`).
 */
import { Grammar, type OutgoingInviteRequest, type Session } from 'sip.js/lib/core/index.js';
import type { DeviceRow } from '../../../../core/devices/devices.ts';
import type { SipBinding } from '../../../../core/devices/sip-bindings.ts';
import type { RingMode } from '../../../../core/routing/definition.ts';
import { RtpEndpoint as Media } from '../../../media/rtp.ts';
import { parseSdp, remoteFromAnswer } from '../../../media/sdp.ts';
import { engineUser } from '../../../sip/sip-endpoint.ts';
import { cancelInvite, makeInvite, reasonHeader, refusedMedia } from '../../invite.ts';
import { SipDeviceLeg, unpinLater } from '../../legs/sip-device.ts';
import type { CallServices } from '../../services.ts';

/** One binding of a device to ring. */
export interface SipRingTarget {
  device: DeviceRow;
  binding: SipBinding;
  /** The ring step's mode for the device's person (`ring` when not given). */
  mode?: RingMode;
}

/**
 * `silent`: the INVITE asks the phone to alert without a ringtone. SIP has no standard "silent" alert; RFC 7462's
 * low-priority URN is the standard value closest to it, and desk phones map Alert-Info values to their ring tones
 * (silent included) in their own settings.
 */
const silentAlert = 'Alert-Info: <urn:alert:priority:low>';

/** A device that answered: its dialog, media and flow, not yet a leg (round.ts records it or hangs it up). */
export interface SipAnswer {
  device: DeviceRow;
  binding: SipBinding;
  mode: RingMode;
  sipCallId: string;
  /** Makes the answer the call's leg, recorded as `legId`. */
  leg(legId: string): SipDeviceLeg;
  /** Hangs the answer up (it lost to another device): BYE, media closed. */
  hangup(): void;
}

export interface SipRinging {
  /** The first answer, or undefined once every INVITE was refused or failed, or `stop` came first. */
  answered: Promise<SipAnswer | undefined>;
  /** Stops ringing: what still rings is CANCELled, and an answer after this is hung up. */
  stop(): void;
}

/** A round over before it waited for an answer: what still rings is cancelled, a phone that answered hung up. */
export function abandonRinging(sip: SipRinging): void {
  sip.stop();
  void sip.answered.then((answer) => answer?.hangup());
}

/** The caller's number as a SIP user part (anything else is `anonymous`). */
function callerUser(from: string | undefined): string {
  return from !== undefined && /^\+?[\w.-]{1,64}$/.test(from) ? from : 'anonymous';
}

/** Rings every target at once; see the file's comment. */
export async function ringSipDevices(
  services: CallServices,
  request: { callId: string; from?: string; targets: readonly SipRingTarget[] },
): Promise<SipRinging> {
  const { log } = services;
  const host = services.sip.host;
  const fromUri = Grammar.URIParse(`sip:${callerUser(request.from)}@${host}:${services.sip.port}`);
  const ringing = new Set<OutgoingInviteRequest>();
  let decided = false;
  let resolveAnswer: (answer: SipAnswer | undefined) => void = () => {};
  const answered = new Promise<SipAnswer | undefined>((resolve) => (resolveAnswer = resolve));
  let pending = 0;
  const settle = (answer: SipAnswer | undefined) => {
    if (decided) return;
    decided = true;
    for (const invite of ringing) cancelInvite(invite);
    ringing.clear();
    resolveAnswer(answer);
  };
  const oneDone = () => {
    pending -= 1;
    if (pending === 0) settle(undefined);
  };

  for (const { device, binding, mode = 'ring' } of request.targets) {
    const ruri = Grammar.URIParse(binding.contactUri);
    const to = Grammar.URIParse(`sip:${device.sip_username ?? engineUser}@${host}`);
    if (ruri === undefined || to === undefined || fromUri === undefined) {
      log.warn({ callId: request.callId, deviceId: device.id }, 'a SIP binding cannot be rung: no usable URI');
      continue;
    }
    // The phone's media goes where its REGISTER came from, whatever its answer's c= says (media-peer.ts).
    const peer = { kind: 'phone', name: 'the desk phone', signalling: binding.source.address } as const;
    const media = await Media.open(services.ports, services.rtpHost, { peer }).catch(() => undefined);
    if (media === undefined) {
      log.warn({ callId: request.callId, deviceId: device.id }, 'a SIP device cannot be rung: no media port free');
      continue;
    }
    const { core, message } = makeInvite(
      services,
      binding.source.protocol,
      { target: ruri, from: fromUri, to },
      media,
      mode === 'silent' ? [silentAlert] : [],
    );
    const unpin = services.sip.pinFlow(message.callId, binding.source);
    const lingerThenUnpin = () => unpinLater(unpin);
    const lost = (session?: Session, reason?: string) => {
      try {
        session?.bye(undefined, reason === undefined ? undefined : { extraHeaders: [reasonHeader(reason)] });
      } catch {
        // The dialog is gone already.
      }
      media.close();
      lingerThenUnpin();
    };
    pending += 1;
    let finished = false;
    const finish = () => {
      if (finished) return false;
      finished = true;
      return true;
    };
    // Refused, redirected, timed out (sip.js's 408) or unreachable (its 503): this binding is done.
    const refused = () => {
      ringing.delete(invite);
      if (!finish()) return;
      media.close();
      lingerThenUnpin();
      oneDone();
    };
    const invite: OutgoingInviteRequest = core.invite(message, {
      onAccept: (response) => {
        response.ack();
        ringing.delete(invite);
        if (!finish() || decided) {
          // A second answer, or one after another device won or we stopped: hang that phone up at once.
          lost(response.session);
          return;
        }
        try {
          media.setRemote(remoteFromAnswer(parseSdp(response.message.body)));
        } catch (error) {
          const reason = refusedMedia(error);
          log.warn({ callId: request.callId, deviceId: device.id, reason }, "a SIP device's answer is refused");
          lost(response.session, reason);
          oneDone();
          return;
        }
        const session = response.session;
        settle({
          device,
          binding,
          mode,
          sipCallId: message.callId,
          leg: (legId) => new SipDeviceLeg(legId, session, media, device.id, unpin),
          hangup: () => lost(session),
        });
      },
      onRedirect: refused,
      onReject: refused,
    });
    if (decided) cancelInvite(invite);
    else ringing.add(invite);
  }
  if (pending === 0) settle(undefined);
  return { answered, stop: () => settle(undefined) };
}
