/**
 * One round of a `ring` step on a call (docs/phones.md, "The ring step"): the people's live devices are offered the
 * call, each with the SDP offer of its own WebRTC endpoint; `call.ringing` is written; the caller hears ringback; the
 * round waits for an accept (heard on `switchboard_offers` through the engine's one listener, call-engine.ts), the
 * caller's hangup or the round's timeout. Whatever ends it, the waiting offers of the round are withdrawn (they
 * expire at the end of their round) and every endpoint but the answering one is closed. Registered SIP devices are
 * rung beside the offers by INVITE (ring-sip.ts): a phone's 200 ends the wait too, and wins unless a browser's accept
 * came first (the offers are withdrawn before deciding); the phone is then bridged by `connectSipDevice`.
 *
 * Accepted: the device's answer completes its endpoint, the leg is recorded (`browser`), the call is `connected`
 * with that leg (`call.connected`), and the caller and the device are bridged until either hangs up; then the leg
 * ends and the device is free again (`setDeviceBusy` null).
 */
import { addLeg, changeState, setLegState } from '../../core/calls/calls.ts';
import { ringableDevices, setDeviceBusy, type DeviceRow } from '../../core/devices/devices.ts';
import { callOffers, makeOffers, type OfferRow, withdrawOffers } from '../../core/devices/offers.ts';
import { bridge } from '../media/bridge.ts';
import { ringbackCadence } from '../media/ringback.ts';
import type { MediaEndpoint } from '../media/rtp.ts';
import { WebRtcEndpoint } from '../media/webrtc.ts';
import type { RingOutcome, RingPerson } from './control.ts';
import { BrowserLeg } from './legs/browser.ts';
import { connectSipDevice, ringSipDevices, sipRingTargets } from './ring-sip.ts';
import type { CallServices } from './services.ts';

/** How long an answering device has to bring ICE and DTLS up once its answer is taken. */
const connectTimeoutMs = 10_000;

export interface RoundContext {
  callId: string;
  workspaceId: string;
  ringSeq: number;
  /** The caller's media: hears ringback, then is bridged to the answering device. */
  caller: MediaEndpoint;
  /** Aborts when the call ends (the caller hung up, a command, shutdown). */
  gone: AbortSignal;
  /** Called with every offer notice of the call while the round waits; returns the unsubscribe. */
  onOfferChange(listener: () => void): () => void;
  /** The caller's number, shown to SIP devices (the INVITE's From). */
  callerNumber?: string;
}

/** Runs one round; see the file's comment. */
export async function ringRound(
  services: CallServices,
  round: RoundContext,
  people: readonly RingPerson[],
  timeoutMs: number,
): Promise<RingOutcome> {
  const { pool, log } = services;
  const ids = {
    memberIds: people.flatMap((person) => ('memberId' in person ? [person.memberId] : [])),
    userIds: people.flatMap((person) => ('userId' in person ? [person.userId] : [])),
  };
  const devices = await ringableDevices(pool, round.workspaceId, ids);
  // SIP devices are rung by INVITE at their live bindings (ring-sip.ts), beside the offers.
  const sipTargets = await sipRingTargets(services, round.workspaceId, ids);
  if ((devices.length === 0 && sipTargets.length === 0) || round.gone.aborted) return 'unanswered';
  const endpoints = new Map<string, WebRtcEndpoint>();
  const closeAll = (except?: string) => {
    for (const [deviceId, endpoint] of endpoints) if (deviceId !== except) endpoint.close();
  };
  const offered = await Promise.all(
    devices.map(async (device) => {
      const endpoint = new WebRtcEndpoint({ onError: (error) => log.warn({ err: error }, 'WebRTC endpoint error') });
      endpoints.set(device.id, endpoint);
      try {
        return { deviceId: device.id, sdpOffer: await endpoint.createOffer() };
      } catch (error) {
        log.warn({ err: error, callId: round.callId, deviceId: device.id }, 'no WebRTC offer for a device');
        endpoint.close();
        endpoints.delete(device.id);
        return undefined;
      }
    }),
  );
  // Listening before the offers exist: an accept may come as soon as they are announced.
  let wake = () => {};
  const stopListening = round.onOfferChange(() => wake());
  try {
    const expiresAt = new Date(Date.now() + timeoutMs);
    const made = await makeOffers(pool, {
      callId: round.callId,
      workspaceId: round.workspaceId,
      ringSeq: round.ringSeq,
      devices: offered.filter((offer) => offer !== undefined),
      expiresAt,
    });
    for (const deviceId of made.notOffered) {
      endpoints.get(deviceId)?.close();
      endpoints.delete(deviceId);
    }
    if (made.offers.length === 0 && sipTargets.length === 0) return 'unanswered';
    const owners = new Map(devices.map((device) => [device.id, device]));
    const ringing = await changeState(pool, round.callId, 'offering', {
      ringing: {
        ringSeq: round.ringSeq,
        ...ownersOf([
          ...made.offers.map((offer) => owners.get(offer.device_id)),
          ...sipTargets.map((target) => target.device),
        ]),
        offerId: made.offers[0]?.id ?? null,
        expiresAt,
      },
    });
    if (ringing === undefined) return 'unanswered';

    const ringback = new AbortController();
    void playRingback(round.caller, ringback.signal);
    const sip = await ringSipDevices(services, {
      callId: round.callId,
      from: round.callerNumber,
      targets: sipTargets,
    });
    const accepted = await new Promise<OfferRow | undefined>((resolve) => {
      let settled = false;
      const settle = (offer: OfferRow | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        round.gone.removeEventListener('abort', onGone);
        resolve(offer);
      };
      const onGone = () => settle(undefined);
      const timer = setTimeout(() => settle(undefined), Math.max(0, expiresAt.getTime() - Date.now()));
      round.gone.addEventListener('abort', onGone, { once: true });
      // A SIP device's 200 ends the wait (it wins below unless a browser accepted first); so does the last SIP
      // device refusing when no browser was offered.
      void sip.answered.then((answer) => {
        if (answer !== undefined || made.offers.length === 0) settle(undefined);
      });
      let reading = false;
      let again = false;
      wake = () => {
        if (reading) {
          again = true;
          return;
        }
        reading = true;
        void acceptedOffer(pool, round)
          .then((offer) => {
            if (offer !== undefined) settle(offer);
          })
          .catch((error: unknown) => log.warn({ err: error, callId: round.callId }, 'offers could not be read'))
          .finally(() => {
            reading = false;
            if (again && !settled) {
              again = false;
              wake();
            }
          });
      };
      // An accept announced before the listener was set, or while it was down.
      wake();
    });
    ringback.abort();
    wake = () => {};
    sip.stop();
    const sipAnswer = await sip.answered;
    // The round is over: its waiting offers go. An accept that won just before the withdrawal still counts (and
    // beats a SIP device's answer, hung up); after it, a SIP device's answer wins and later accepts are refused.
    await withdrawOffers(pool, round.callId, round.ringSeq);
    const winner = accepted ?? (await acceptedOffer(pool, round));
    if (winner !== undefined) sipAnswer?.hangup();
    else if (sipAnswer !== undefined) {
      closeAll(undefined);
      if (round.gone.aborted) {
        sipAnswer.hangup();
        return 'unanswered';
      }
      return await connectSipDevice(services, round, sipAnswer);
    }
    if (winner === undefined) return 'unanswered';
    closeAll(winner.device_id);
    if (round.gone.aborted) {
      endpoints.get(winner.device_id)?.close();
      await setDeviceBusy(pool, winner.device_id, null);
      return 'unanswered';
    }
    return await connect(services, round, winner, endpoints.get(winner.device_id), owners.get(winner.device_id));
  } finally {
    stopListening();
    wake = () => {};
    closeAll(undefined);
  }
}

/** The round's accepted offer, if any. */
async function acceptedOffer(pool: CallServices['pool'], round: RoundContext): Promise<OfferRow | undefined> {
  const offers = await callOffers(pool, round.callId);
  return offers.find((offer) => offer.ring_seq === round.ringSeq && offer.state === 'accepted');
}

function ownersOf(devices: readonly (DeviceRow | undefined)[]): { memberIds: string[]; externalUserIds: string[] } {
  const memberIds = new Set<string>();
  const externalUserIds = new Set<string>();
  for (const device of devices) {
    if (device?.member_id) memberIds.add(device.member_id);
    if (device?.external_user_id) externalUserIds.add(device.external_user_id);
  }
  return { memberIds: [...memberIds], externalUserIds: [...externalUserIds] };
}

/** Ringback to the caller, cadence after cadence, until `signal` aborts. */
async function playRingback(caller: MediaEndpoint, signal: AbortSignal): Promise<void> {
  const cadence = ringbackCadence();
  while (!signal.aborted && (await caller.play(cadence, signal)) === 'done');
}

/**
 * The accepted device's leg: its answer taken, connected, bridged to the caller until either side hangs up. The
 * device is freed whatever happens. `answered` once bridged; `unanswered` when its answer or connection failed.
 */
async function connect(
  services: CallServices,
  round: RoundContext,
  offer: OfferRow,
  endpoint: WebRtcEndpoint | undefined,
  device: DeviceRow | undefined,
): Promise<RingOutcome> {
  const { pool, log } = services;
  try {
    if (endpoint === undefined || offer.sdp_answer === null) return 'unanswered';
    const legId = await addLeg(pool, round.callId, {
      role: 'browser',
      remote: `device ${offer.device_id}`,
      sipCallId: null,
    });
    const leg = new BrowserLeg(legId, endpoint, offer.device_id);
    try {
      await endpoint.acceptAnswer(offer.sdp_answer);
      await endpoint.connected(connectTimeoutMs);
    } catch (error) {
      log.warn({ err: error, callId: round.callId, deviceId: offer.device_id }, 'the answering device did not connect');
      endpoint.close();
      await setLegState(pool, legId, 'ended');
      return 'unanswered';
    }
    await setLegState(pool, legId, 'answered');
    await changeState(pool, round.callId, 'connected', {
      connectedLeg: {
        id: legId,
        role: 'browser',
        memberId: device?.member_id ?? null,
        externalUserId: device?.external_user_id ?? null,
      },
    });
    const unbridge = bridge(round.caller, endpoint);
    await new Promise<void>((resolve) => {
      leg.onHangup(resolve);
      if (leg.ended) resolve();
      if (round.gone.aborted) resolve();
      round.gone.addEventListener('abort', () => resolve(), { once: true });
    });
    unbridge();
    await leg.bye();
    const stats = endpoint.stats;
    await setLegState(pool, legId, 'ended', { in: stats.framesIn, out: stats.framesOut });
    return 'answered';
  } finally {
    endpoint?.close();
    await setDeviceBusy(pool, offer.device_id, null);
  }
}
