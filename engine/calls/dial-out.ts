/**
 * Dialling out (a `forward` step): an INVITE through a carrier, with its digest account when it has one, ringing up
 * to a timeout (then CANCEL), answered or not (docs/calls.md, The runner). An answer that comes after we gave up is
 * hung up at once. Answered, the far end is a carrier leg the call bridges to its caller.
 */
import { Grammar, type OutgoingInviteRequest, type Session } from 'sip.js/lib/core/index.js';
import { addLeg, changeState, setLegState } from '../../core/calls/calls.ts';
import { openSecret } from '../../core/sealing.ts';
import { MediaEndpoint as Media } from '../media/rtp.ts';
import { offer as offerSdp, parseSdp, remoteFromAnswer } from '../media/sdp.ts';
import { engineUser } from '../sip/user-agent.ts';
import { CarrierLeg } from './legs/carrier.ts';
import type { CallServices } from './services.ts';

export interface DialOut {
  /** The call dialling out (its record). */
  callId: string;
  /** Who the far end sees calling: the number the caller dialed. */
  from: string;
  /** The carrier to leave through: the called number's. */
  carrierName: string;
  to: string;
  timeoutMs: number;
  /** Aborts when the call ends: ringing stops (CANCEL). */
  signal: AbortSignal;
  /** Why the dial-out could not even start (counted and logged by the call). */
  unavailable(detail: string): void;
}

/** An answered dial-out. `release` forgets the carrier's account once the leg's requests can no longer be challenged. */
export interface Dialled {
  leg: CarrierLeg;
  release(): void;
}

/**
 * Dials `to` through the carrier and resolves once answered (the leg recorded `answered`). Not answered within
 * `timeoutMs`, refused, the call gone meanwhile, or impossible (no carrier, a carrier named only by a CIDR range):
 * undefined.
 */
export async function dialOut(services: CallServices, request: DialOut): Promise<Dialled | undefined> {
  const { to, signal } = request;
  const carrier = await services.carriers.byName(request.carrierName);
  if (carrier === undefined || carrier.address.includes('/')) {
    request.unavailable(`forward to ${to}: carrier "${request.carrierName}" has no address to dial out to`);
    return undefined;
  }
  const core = services.sip.core(carrier.transport);
  const host = services.sip.host;
  const target = Grammar.URIParse(`sip:${to}@${carrier.address}:${carrier.port};transport=${carrier.transport}`);
  const from = Grammar.URIParse(`sip:${request.from}@${host}:${services.sip.port}`);
  if (target === undefined || from === undefined) {
    request.unavailable(`forward to ${to}: cannot make a SIP URI`);
    return undefined;
  }
  const media = await Media.open(services.ports, services.rtpHost).catch(() => undefined);
  if (media === undefined) {
    request.unavailable(`forward to ${to}: no media port free`);
    return undefined;
  }
  await changeState(services.pool, request.callId, 'offering');
  const message = core.makeOutgoingRequestMessage(
    'INVITE',
    target,
    from,
    target,
    {},
    [`Contact: <sip:${engineUser}@${host}:${services.sip.port};transport=${carrier.transport}>`],
    {
      contentDisposition: 'session',
      contentType: 'application/sdp',
      content: offerSdp({ address: services.rtpAdvertisedHost, port: media.localPort }),
    },
  );
  // A carrier with an account challenges our INVITE (401 or 407); sip.js answers once with the account.
  let stopSigning = () => {};
  if (carrier.username !== null && carrier.password !== null) {
    let password: string;
    try {
      password = openSecret(services.carrierSecrets, carrier.password);
    } catch {
      media.close();
      request.unavailable(`forward to ${to}: carrier "${carrier.name}"'s password cannot be opened`);
      await changeState(services.pool, request.callId, 'routing');
      return undefined;
    }
    stopSigning = services.sip.signRequests(message.callId, { username: carrier.username, password });
  }
  // The account stays with the answered leg (its BYE may be challenged too) until the call releases it.
  let handedOver = false;
  try {
    const legId = await addLeg(services.pool, request.callId, {
      role: 'forward',
      remote: `${to} via ${carrier.name}`,
      sipCallId: message.callId,
    });
    const answered = await new Promise<Session | undefined>((resolve) => {
      let settled = false;
      const settle = (session: Session | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onGone);
        resolve(session);
      };
      // Set once the INVITE is handed to the core; giving up before that has nothing to cancel.
      const pending: { invite?: OutgoingInviteRequest } = {};
      const giveUp = () => {
        try {
          pending.invite?.cancel();
        } catch {
          // Already final.
        }
        settle(undefined);
      };
      const timer = setTimeout(giveUp, request.timeoutMs);
      const onGone = () => giveUp();
      signal.addEventListener('abort', onGone, { once: true });
      pending.invite = core.invite(message, {
        onAccept: (response) => {
          response.ack();
          if (settled) {
            // Answered after we gave up: hang that leg up at once.
            response.session.bye();
            return;
          }
          try {
            media.setRemote(remoteFromAnswer(parseSdp(response.message.body)));
          } catch {
            response.session.bye();
            settle(undefined);
            return;
          }
          settle(response.session);
        },
        onReject: () => settle(undefined),
      });
    });
    if (answered === undefined || signal.aborted) {
      media.close();
      await setLegState(services.pool, legId, 'ended');
      if (answered !== undefined) answered.bye();
      return undefined;
    }
    await setLegState(services.pool, legId, 'answered');
    handedOver = true;
    return { leg: new CarrierLeg(legId, answered, media), release: stopSigning };
  } finally {
    if (!handedOver) stopSigning();
  }
}
