/**
 * One round of a `ring` step on a call (docs/phones.md, "The ring step"): the people's live devices are offered the
 * call, each with the SDP offer of its own WebRTC endpoint; `call.ringing` is written; the cells are dialled out
 * through the called number's carrier (`dialCell`); the caller hears ringback; the round waits for the first answer
 * (a device's accept, heard on `switchboard_offers` through the engine's one listener, or a cell's 200), the
 * caller's hangup or the round's timeout. Whatever ends it, the waiting offers of the round are withdrawn (they
 * expire at the end of their round), the cells still ringing are cancelled (CANCEL), and every endpoint but the
 * answering one is closed. Registered SIP devices are rung beside the offers by INVITE (desk-phones.ts): a phone's
 * 200 ends the wait too, and wins unless a browser's accept or a cell's 200 came first (the offers are withdrawn
 * before deciding; a phone that loses is hung up).
 *
 * The round returns who answered (`RoundWinner`), not yet connected: a browser whose answer completed its endpoint
 * and whose media is up (its leg recorded `browser`; one that does not connect is let go and the round is
 * unanswered), a desk phone's answered dialog, or a cell's answered carrier leg. Connecting it to the caller, or
 * letting it go, is winner.ts's.
 *
 * A queue's offer (`queued`, steps/queue/wait.ts) is such a round with two differences: the caller hears the
 * queue's audio instead of ringback, and the round also ends when its `stop` aborts or every offer was declined.
 * Its devices may come with the offer, read by the distribution that made it (targets.ts): then nothing is read
 * before the phones' INVITEs. The queue claims its entry for the winner before connecting it.
 */
import { addLeg, changeState, setLegState } from '../../../../core/calls/calls.ts';
import { type RingableDevices, setDeviceBusy, type DeviceRow } from '../../../../core/devices/devices.ts';
import { callOffers, makeOffers, type OfferRow, withdrawOffers } from '../../../../core/devices/offers.ts';
import type { RingTarget } from '../../../../core/routing/definition.ts';
import type { AsideRound, CallerMedia } from '../../connection.ts';
import type { CallerSide } from '../../connect-party.ts';
import { playLooped } from '../../../media/looped-audio.ts';
import { ringbackCadence } from '../../../media/ringback.ts';
import type { WebRtcMedia } from '../../../media/webrtc-endpoint.ts';
import { hangUpDialled } from '../../dial-out.ts';
import { BrowserLeg } from '../../legs/browser.ts';
import type { SipDialogLeg } from '../../legs/sip-dialog.ts';
import type { RingingCall } from '../../control.ts';
import { abandonRinging, ringSipDevices, type SipAnswer } from './desk-phones.ts';
import { modeFor, ownersOf, roundTargets } from './targets.ts';
import type { CallServices } from '../../services.ts';

/** How long an answering device has to bring ICE and DTLS up once its answer is taken. */
const connectTimeoutMs = 10_000;

export interface RoundContext {
  /** The call that rings (its cells dialled and its offer notices heard through it). */
  call: RingingCall;
  /** The call's id, as the side a winner is connected to names it. */
  callId: string;
  ringSeq: number;
  /** The caller's media: hears ringback, then is bridged to the answering device. */
  caller: CallerMedia;
  /** Stops the round: the call is over (the caller hung up, a command, shutdown), or the round beside it is. */
  stop: AbortSignal;
  /** Set for a queue's offer (steps/queue/wait.ts): what differs from a `ring` step's round. */
  queued?: QueuedRound;
  /** Set for a round beside the call's own connection (a warm transfer's consultation, a supervisor's leg). */
  aside?: AsideRound;
}

/** A round that rings a queue entry's offered agents (steps/queue/wait.ts, docs/contact-center.md). */
export interface QueuedRound {
  /** What the caller hears while it rings, instead of ringback, until `signal` aborts. */
  waitAudio(signal: AbortSignal): void;
  /** Ends the wait as its timeout would: the entry stopped being offered, or the caller's wait is over. */
  stop: AbortSignal;
  /** The agents' devices as the distribution read them with its offer: the round reads none before its INVITEs. */
  ringable?: RingableDevices;
}

/**
 * Who answered a round, not yet connected to the caller (`connectWinner`, or `dropWinner` when not wanted): a
 * browser (its leg recorded, its media up), a desk phone (its dialog answered, not yet the call's leg) or a cell (its
 * dialled leg, answered).
 */
export type RoundWinner = (
  | { kind: 'browser'; leg: BrowserLeg; device: DeviceRow | undefined }
  | { kind: 'phone'; answer: SipAnswer }
  | { kind: 'cell'; leg: SipDialogLeg }
) & {
  /** What the winner is connected to: the round's caller side. */
  side: CallerSide;
};

/** What ended a round's wait: a device's accepted offer, an answered cell, or nothing (timeout, hangup, no one). */
type Answer = { offer: OfferRow } | { cell: SipDialogLeg } | undefined;

/** Runs one round and returns who answered, or undefined; see the file's comment. */
export async function ringRound(
  services: CallServices,
  round: RoundContext,
  targets: readonly RingTarget[],
  timeoutMs: number,
): Promise<RoundWinner | undefined> {
  const { pool, log } = services;
  const { people, cells, devices, sipTargets } = await roundTargets(services, round, targets);
  if ((devices.length === 0 && cells.length === 0 && sipTargets.length === 0) || round.stop.aborted) {
    return undefined;
  }
  const endpoints = new Map<string, WebRtcMedia>();
  const closeAll = (except?: string) => {
    for (const [deviceId, endpoint] of endpoints) if (deviceId !== except) endpoint.close();
  };
  const offered = await Promise.all(
    devices.map(async (device) => {
      const endpoint = services.webrtcMedia({
        iceServers: services.iceServers ?? [],
        onError: (error) => log.warn({ err: error }, 'WebRTC endpoint error'),
      });
      endpoints.set(device.id, endpoint);
      try {
        return { deviceId: device.id, sdpOffer: await endpoint.createOffer(), mode: modeFor(device, people) };
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
  const stopListening = round.call.onOfferChange(() => wake());
  // Cancels the cells still ringing once the round is decided (or the call ends).
  const stopCells = new AbortController();
  const onStopCells = () => stopCells.abort();
  round.stop.addEventListener('abort', onStopCells, { once: true });
  // Each cell's dial-out, settled once it is answered and handed over, or given up.
  const dialling: Promise<void>[] = [];
  try {
    const expiresAt = new Date(Date.now() + timeoutMs);
    const toOffer = offered.filter((offer) => offer !== undefined);
    const made =
      toOffer.length === 0
        ? { offers: [], notOffered: [] }
        : await makeOffers(pool, {
            callId: round.callId,
            workspaceId: round.call.workspaceId,
            ringSeq: round.ringSeq,
            devices: toOffer,
            expiresAt,
          });
    for (const deviceId of made.notOffered) {
      endpoints.get(deviceId)?.close();
      endpoints.delete(deviceId);
    }
    if (made.offers.length === 0 && cells.length === 0 && sipTargets.length === 0) return undefined;
    const owners = new Map(devices.map((device) => [device.id, device]));
    // The phones' INVITEs go out while `call.ringing` is written (a transaction of several statements): an answer is
    // acted on only once the round waits below, after the write, so `call.connected` still follows `call.ringing`.
    const sip = await ringSipDevices(services, {
      callId: round.callId,
      from: round.call.fromNumber,
      targets: sipTargets,
    });
    const ringing = await changeState(pool, round.callId, round.aside === undefined ? 'offering' : 'connected', {
      ringing: {
        ringSeq: round.ringSeq,
        ...ownersOf([
          ...made.offers.map((offer) => owners.get(offer.device_id)),
          ...sipTargets.map((target) => target.device),
        ]),
        offerId: made.offers[0]?.id ?? null,
        expiresAt,
      },
    }).catch((error: unknown) => {
      abandonRinging(sip);
      throw error;
    });
    if (ringing === undefined) {
      abandonRinging(sip);
      return undefined;
    }

    const ringback = new AbortController(); // the caller's ringback (or queue audio) until the round is decided
    if (round.queued === undefined) playLooped(round.caller, ringbackCadence(), ringback.signal);
    else round.queued.waitAudio(ringback.signal);
    const answer = await new Promise<Answer>((resolve) => {
      let settled = false;
      const settle = (found: Answer) => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        round.stop.removeEventListener('abort', onStop);
        resolve(found);
        return true;
      };
      const onStop = () => settle(undefined);
      const timer = setTimeout(() => settle(undefined), Math.max(0, expiresAt.getTime() - Date.now()));
      round.stop.addEventListener('abort', onStop, { once: true });
      // A queue's offer also ends when its entry stops being offered (signals abort once; no removal needed).
      if (round.queued?.stop.aborted === true) settle(undefined);
      else round.queued?.stop.addEventListener('abort', onStop, { once: true });
      // The cells and SIP devices ring with the offers; with no offer made, the round ends once every cell and every
      // SIP device gave up. A SIP device's 200 ends the wait: who wins is decided below, once the offers are withdrawn.
      let cellsRinging = cells.length;
      let sipRinging = sipTargets.length > 0;
      const nothingRings = () => cellsRinging === 0 && !sipRinging && made.offers.length === 0;
      void sip.answered.then((found) => {
        sipRinging = false;
        if (found !== undefined || nothingRings()) settle(undefined);
      });
      for (const cell of cells) {
        dialling.push(
          round.call
            .dialCell(cell, Math.max(0, expiresAt.getTime() - Date.now()), stopCells.signal)
            .catch((error: unknown) => {
              log.warn({ err: error, callId: round.callId }, 'a cell could not be dialled');
              return undefined;
            })
            .then(async (dialled) => {
              if (dialled !== undefined) {
                // A cell answering after another target won is hung up at once.
                if (!settle({ cell: dialled })) await hangUpDialled(services, dialled);
                return;
              }
              cellsRinging -= 1;
              if (nothingRings()) settle(undefined);
            }),
        );
      }
      let reading = false;
      let again = false;
      wake = () => {
        if (reading) {
          again = true;
          return;
        }
        reading = true;
        void decidedOffers(pool, round)
          .then(({ offer, noneWaiting }) => {
            if (offer !== undefined) settle({ offer });
            // A queue's offer that every device declined (or lost) is over; a ring step's round rings to its end.
            else if (noneWaiting && round.queued !== undefined && !sipRinging && cellsRinging === 0) settle(undefined);
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
      if (made.offers.length > 0) wake();
    });
    ringback.abort();
    wake = () => {};
    // The round is over: the cells still ringing are cancelled, its waiting offers go. An accept that won just
    // before the withdrawal still counts, unless a cell answered first.
    stopCells.abort();
    sip.stop();
    const sipAnswer = await sip.answered;
    await Promise.all(dialling);
    await withdrawOffers(pool, round.callId, round.ringSeq);
    const accepted =
      answer !== undefined && 'offer' in answer
        ? answer.offer
        : made.offers.length > 0
          ? await acceptedOffer(pool, round)
          : undefined;
    if (answer !== undefined && 'cell' in answer) {
      closeAll();
      sipAnswer?.hangup();
      // A device that accepted as the cell answered lost: it is free again.
      if (accepted !== undefined) await setDeviceBusy(pool, accepted.device_id, null);
      if (round.stop.aborted) {
        await hangUpDialled(services, answer.cell);
        return undefined;
      }
      return { kind: 'cell', leg: answer.cell, side: round };
    }
    if (accepted === undefined) {
      // No browser accepted: a phone that answered has the call.
      if (sipAnswer === undefined) return undefined;
      closeAll();
      if (round.stop.aborted) {
        sipAnswer.hangup();
        return undefined;
      }
      return { kind: 'phone', answer: sipAnswer, side: round };
    }
    sipAnswer?.hangup();
    // The accepted device's endpoint is the winner's from here: the round closes every other.
    const endpoint = endpoints.get(accepted.device_id);
    endpoints.delete(accepted.device_id);
    closeAll();
    if (round.stop.aborted) {
      endpoint?.close();
      await setDeviceBusy(pool, accepted.device_id, null);
      return undefined;
    }
    return await answeredBrowser(services, round, accepted, endpoint, owners.get(accepted.device_id));
  } finally {
    stopListening();
    wake = () => {};
    stopCells.abort();
    round.stop.removeEventListener('abort', onStopCells);
    closeAll();
  }
}

/** The round's accepted offer, if any. */
async function acceptedOffer(pool: CallServices['pool'], round: RoundContext): Promise<OfferRow | undefined> {
  return (await decidedOffers(pool, round)).offer;
}

/** The round's accepted offer, if any, and whether none of its offers waits any more (declined, withdrawn, expired). */
async function decidedOffers(
  pool: CallServices['pool'],
  round: RoundContext,
): Promise<{ offer: OfferRow | undefined; noneWaiting: boolean }> {
  const offers = (await callOffers(pool, round.callId)).filter((offer) => offer.ring_seq === round.ringSeq);
  return {
    offer: offers.find((offer) => offer.state === 'accepted'),
    noneWaiting: offers.length > 0 && offers.every((offer) => offer.state !== 'offered'),
  };
}

/**
 * The accepted device's leg: recorded (`browser`), its answer taken and its media up (ICE and DTLS), or undefined
 * when its answer or connection failed (the leg ended, the device free again).
 */
async function answeredBrowser(
  services: CallServices,
  round: RoundContext,
  offer: OfferRow,
  endpoint: WebRtcMedia | undefined,
  device: DeviceRow | undefined,
): Promise<RoundWinner | undefined> {
  const { pool, log } = services;
  let leg: BrowserLeg | undefined;
  try {
    if (endpoint === undefined || offer.sdp_answer === null) {
      endpoint?.close();
      await setDeviceBusy(pool, offer.device_id, null);
      return undefined;
    }
    const legId = await addLeg(pool, round.callId, {
      role: 'browser',
      remote: `device ${offer.device_id}`,
      sipCallId: null,
    });
    leg = new BrowserLeg(legId, endpoint, offer.device_id);
    await endpoint.acceptAnswer(offer.sdp_answer);
    await endpoint.connected(connectTimeoutMs);
    return { kind: 'browser', leg, device, side: round };
  } catch (error) {
    log.warn({ err: error, callId: round.callId, deviceId: offer.device_id }, 'the answering device did not connect');
    endpoint?.close();
    await Promise.all([
      leg === undefined ? undefined : setLegState(pool, leg.id, 'ended'),
      setDeviceBusy(pool, offer.device_id, null),
    ]);
    return undefined;
  }
}
