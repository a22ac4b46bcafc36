/**
 * Dialling out (a `forward` step, or a `ring` step's `{cell}` target): an INVITE through a carrier, with its digest
 * account when it has one, ringing up to a timeout (then CANCEL), answered or not (docs/calls.md, The runner). An
 * answer that comes after we gave up is hung up at once. Answered, the far end is a SIP dialog leg that the call
 * connects to its caller (connect-party.ts); the carrier's account goes with the leg until it closes.
 */
import { Grammar, type OutgoingInviteRequest, type Session } from 'sip.js/lib/core/index.js';
import { addLeg, changeState, setLegState } from '../../core/calls/calls.ts';
import { type DialKind, dialOutRefusal } from '../../core/calls/dial-policy.ts';
import { openSecret } from '../../core/sealing.ts';
import { RtpEndpoint as Media } from '../media/rtp.ts';
import { parseSdp, remoteFromAnswer } from '../media/sdp.ts';
import { cancelInvite, makeInvite, reasonHeader, refusedMedia } from './invite.ts';
import { SipDialogLeg } from './legs/sip-dialog.ts';
import type { CallServices } from './services.ts';

/** What a dialled leg is to its call (its `call_legs.role`). */
export type DialRole = 'forward' | 'cell' | 'callback' | 'transfer';

export interface DialOut {
  /** The call dialling out (its record). */
  callId: string;
  /** Its workspace, whose destination policy the number must pass (core/calls/dial-policy.ts). */
  workspaceId: string;
  /** Who the far end sees calling: the number the caller dialed. */
  from: string;
  /** The carrier to leave through: the called number's. */
  carrierName: string;
  to: string;
  /**
   * The leg's role: `forward` (the call goes to `offering` as it dials, back to `routing` if it cannot), `cell` (a
   * ring round's target: the round owns the call's state) or `callback` (a queue calls its caller back,
   * steps/queue/wait.ts: likewise).
   */
  role: DialRole;
  timeoutMs: number;
  /** Aborts when the call ends: ringing stops (CANCEL). */
  signal: AbortSignal;
  /** Why the dial-out could not even start (counted and logged by the call). */
  unavailable(detail: string): void;
}

/**
 * Dials `to` through the carrier for a call's leg and resolves once answered (the leg recorded `answered`). Not
 * answered within `timeoutMs`, refused, the call gone meanwhile, or impossible (no carrier, a carrier named only by a
 * CIDR range): undefined.
 */
export function dialOut(services: CallServices, request: DialOut): Promise<SipDialogLeg | undefined> {
  const { pool } = services;
  const forward = request.role === 'forward';
  return dialThroughCarrier(
    services,
    { ...request, kind: request.role },
    {
      what: `${request.role} to ${request.to}`,
      dialling: forward ? () => changeState(pool, request.callId, 'offering') : undefined,
      notDialled: forward ? () => changeState(pool, request.callId, 'routing') : undefined,
      leg: (sipCallId, remote) => addLeg(pool, request.callId, { role: request.role, remote, sipCallId }),
      legState: (legId, state) => setLegState(pool, legId, state),
    },
  );
}

/** A dial-out as its owner records it: a call's leg (`dialOut`), or a verification's call (engine/verifications/). */
export interface DialRecord {
  /** What is dialled, for the reasons given to `unavailable`. */
  what: string;
  /** Once a media port is open, before the INVITE is made. */
  dialling?: (() => Promise<unknown>) | undefined;
  /** The INVITE could not be made after `dialling` (the carrier's password cannot be opened). */
  notDialled?: (() => Promise<unknown>) | undefined;
  /** Records the leg before the INVITE goes; its id is the leg's. */
  leg(sipCallId: string, remote: string): Promise<string>;
  legState(legId: string, state: 'answered' | 'ended'): Promise<unknown>;
}

/**
 * Dials `to` through the carrier, with its digest account when it has one (let go of when the leg closes), and
 * resolves once answered, the leg recorded as `record` records it. Not answered within `timeoutMs`, refused (by the far end, or by the workspace's
 * destination policy before anything is sent), `signal` aborted meanwhile, or impossible (no carrier, a carrier
 * named only by a CIDR range): undefined, the reason given to `unavailable` unless the far end refused.
 */
export async function dialThroughCarrier(
  services: CallServices,
  request: Pick<DialOut, 'from' | 'carrierName' | 'to' | 'timeoutMs' | 'signal' | 'unavailable'> & {
    /** The workspace whose destination policy decides (core/calls/dial-policy.ts), and what kind of call this is. */
    workspaceId: string;
    kind: DialKind;
  },
  record: DialRecord,
): Promise<SipDialogLeg | undefined> {
  const { signal, to } = request;
  const { what } = record;
  // Nothing is dialled past the workspace's policy, whatever asked for it (a caller's From, an older plan).
  const refusal = await dialOutRefusal(services.pool, { workspaceId: request.workspaceId, kind: request.kind, to });
  if (refusal !== undefined) {
    request.unavailable(`${what}: refused (${refusal.code}): ${refusal.message}`);
    return undefined;
  }
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
  const signalling = services.carriers.signallingAddress(carrier);
  if (signalling === undefined) {
    request.unavailable(`${what}: carrier "${carrier.name}"'s host ${carrier.address} has no address`);
    return undefined;
  }
  const peer = services.carriers.mediaPeer(carrier, signalling);
  const media = await Media.open(services.ports, services.rtpHost, { peer }).catch(() => undefined);
  if (media === undefined) {
    request.unavailable(`${what}: no media port free`);
    return undefined;
  }
  await record.dialling?.();
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
      await record.notDialled?.();
      return undefined;
    }
    stopSigning = services.sip.signRequests(message.callId, { username: carrier.username, password });
  }
  // The account stays with the answered leg (its BYE may be challenged too) until the call releases it.
  let handedOver = false;
  try {
    const legId = await record.leg(message.callId, `${to} via ${carrier.name}`);
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
          } catch (error) {
            // An answer without usable media, or media aimed where the carrier could not receive: hung up.
            const reason = refusedMedia(error);
            request.unavailable(`${what}: the answer is refused: ${reason}`);
            response.session.bye(undefined, { extraHeaders: [reasonHeader(reason)] });
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
      await record.legState(legId, 'ended');
      if (answered !== undefined) answered.bye();
      return undefined;
    }
    await record.legState(legId, 'answered');
    handedOver = true;
    return new SipDialogLeg(legId, answered, media, { release: stopSigning });
  } finally {
    if (!handedOver) stopSigning();
  }
}

/** An answered dial-out nobody wants any more (another target answered first, or the call ended): BYE, ended. */
export async function hangUpDialled(services: CallServices, leg: SipDialogLeg): Promise<void> {
  try {
    void leg.bye();
  } finally {
    leg.close();
  }
  await setLegState(services.pool, leg.id, 'ended');
}
