/**
 * Dialling out (a `forward` step, or a `ring` step's `{cell}` target): an INVITE through a carrier, with its digest
 * account when it has one, ringing up to a timeout (then CANCEL), answered or not (docs/calls.md, The runner). An
 * answer that comes after we gave up is hung up at once. Answered, the far end is a carrier leg the call bridges to
 * its caller (`bridgeDialled`).
 */
import { Grammar, type OutgoingInviteRequest, type Session } from 'sip.js/lib/core/index.js';
import { addLeg, changeState, type ConnectedLeg, setLegState } from '../../core/calls/calls.ts';
import { openSecret } from '../../core/sealing.ts';
import { bridgeCaller } from './hold.ts';
import { MediaEndpoint as Media, type MediaEndpoint } from '../media/rtp.ts';
import { parseSdp, remoteFromAnswer } from '../media/sdp.ts';
import { cancelInvite, makeInvite } from './invite.ts';
import { farEndHungUp } from './leg.ts';
import { CarrierLeg } from './legs/carrier.ts';
import type { CallServices } from './services.ts';

/** What a dialled leg is to its call (its `call_legs.role`). */
export type DialRole = 'forward' | 'cell' | 'callback';

export interface DialOut {
  /** The call dialling out (its record). */
  callId: string;
  /** Who the far end sees calling: the number the caller dialed. */
  from: string;
  /** The carrier to leave through: the called number's. */
  carrierName: string;
  to: string;
  /**
   * The leg's role: `forward` (the call goes to `offering` as it dials, back to `routing` if it cannot), `cell` (a
   * ring round's target: the round owns the call's state) or `callback` (a queue calls its caller back,
   * queueing.ts: likewise).
   */
  role: DialRole;
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
  const { signal, role, to } = request;
  const what = `${role} to ${to}`;
  const carrier = await services.carriers.byName(request.carrierName);
  if (carrier === undefined || carrier.address.includes('/')) {
    request.unavailable(`${what}: carrier "${request.carrierName}" has no address to dial out to`);
    return undefined;
  }
  const host = services.sip.host;
  const target = Grammar.URIParse(`sip:${to}@${carrier.address}:${carrier.port};transport=${carrier.transport}`);
  const from = Grammar.URIParse(`sip:${request.from}@${host}:${services.sip.port}`);
  if (target === undefined || from === undefined) {
    request.unavailable(`${what}: cannot make a SIP URI`);
    return undefined;
  }
  const media = await Media.open(services.ports, services.rtpHost).catch(() => undefined);
  if (media === undefined) {
    request.unavailable(`${what}: no media port free`);
    return undefined;
  }
  if (role === 'forward') await changeState(services.pool, request.callId, 'offering');
  const { core, message } = makeInvite(services, carrier.transport, { target, from, to: target }, media);
  // A carrier with an account challenges our INVITE (401 or 407); sip.js answers once with the account.
  let stopSigning = () => {};
  if (carrier.username !== null && carrier.password !== null) {
    let password: string;
    try {
      password = openSecret(services.carrierSecrets, carrier.password);
    } catch {
      media.close();
      request.unavailable(`${what}: carrier "${carrier.name}"'s password cannot be opened`);
      if (role === 'forward') await changeState(services.pool, request.callId, 'routing');
      return undefined;
    }
    stopSigning = services.sip.signRequests(message.callId, { username: carrier.username, password });
  }
  // The account stays with the answered leg (its BYE may be challenged too) until the call releases it.
  let handedOver = false;
  try {
    const legId = await addLeg(services.pool, request.callId, {
      role,
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
        cancelInvite(pending.invite);
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

/**
 * An answered dial-out bridged to the caller: the call is `connected` with the leg (`call.connected`), and the two
 * are bridged until one side hangs up: the far end's BYE, or the call's end (`gone`: the caller's BYE, a command),
 * on which our BYE goes to the far end. Then the leg is `ended` with its packet counts, and its account released.
 */
export async function bridgeDialled(
  services: CallServices,
  call: { callId: string; caller: MediaEndpoint; gone: AbortSignal },
  dialled: Dialled,
  connectedLeg: Omit<ConnectedLeg, 'id'>,
): Promise<void> {
  const { pool, metrics } = services;
  const { leg } = dialled;
  try {
    await changeState(pool, call.callId, 'connected', { connectedLeg: { id: leg.id, ...connectedLeg } });
    const unbridge = bridgeCaller(call.caller, leg.media);
    // Bridged until one side hangs up: the far end's BYE, or the caller's (which ends the call). Our BYE goes at
    // once (the far end has acknowledged its answer); a far end that hung up at the same time is no error.
    if (!(await farEndHungUp(leg, call.gone))) void leg.bye();
    unbridge();
    const stats = leg.media.stats;
    metrics.countRtp(stats);
    leg.media.close();
    await setLegState(pool, leg.id, 'ended', { in: stats.packetsIn, out: stats.packetsOut });
  } finally {
    dialled.release();
  }
}

/** An answered dial-out nobody wants any more (another target answered first, or the call ended): BYE, ended. */
export async function hangUpDialled(services: CallServices, dialled: Dialled): Promise<void> {
  try {
    void dialled.leg.bye();
    dialled.leg.media.close();
    await setLegState(services.pool, dialled.leg.id, 'ended');
  } finally {
    dialled.release();
  }
}
