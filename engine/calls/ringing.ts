/**
 * One round of a `ring` step on a call (docs/phones.md, "The ring step"): the people's live devices are offered the
 * call, each with the SDP offer of its own WebRTC endpoint; `call.ringing` is written; the cells are dialled out
 * through the called number's carrier (`dialCell`); the caller hears ringback; the round waits for the first answer
 * (a device's accept, heard on `switchboard_offers` through the engine's one listener, call-engine.ts, or a cell's
 * 200), the caller's hangup or the round's timeout. Whatever ends it, the waiting offers of the round are withdrawn
 * (they expire at the end of their round), the cells still ringing are cancelled (CANCEL), and every endpoint but
 * the answering one is closed. Registered SIP devices are rung beside the offers by INVITE (ring-sip.ts): a phone's
 * 200 ends the wait too, and wins unless a browser's accept or a cell's 200 came first (the offers are withdrawn
 * before deciding; a phone that loses is hung up); the phone is then bridged by `connectSipDevice`.
 *
 * A device accepted: its answer completes its endpoint, the leg is recorded (`browser`), the call is `connected`
 * with that leg (`call.connected`), and the caller and the device are bridged until either hangs up; then the leg
 * ends and the device is free again (`setDeviceBusy` null). A cell answered: its carrier leg (`cell`, no memberId or
 * externalUserId) is bridged to the caller in the same way (`bridgeDialled`).
 *
 * A queue's offer (`queued`, queueing.ts) is such a round with three differences: the caller hears the queue's
 * audio instead of ringback, the round also ends when its `stop` aborts or every offer was declined, and an answering
 * device must `claim` the entry before the call is connected to it. Its devices may come with the offer, read by the
 * distribution that made it (ring-targets.ts): then nothing is read before the phones' INVITEs.
 */
import { addLeg, changeState, setLegState } from '../../core/calls/calls.ts';
import { type RingableDevices, setDeviceBusy, type DeviceRow } from '../../core/devices/devices.ts';
import { callOffers, makeOffers, type OfferRow, withdrawOffers } from '../../core/devices/offers.ts';
import type { RingTarget } from '../../core/routing/definition.ts';
import { type AsideRound, bridgeCaller, type CallerMedia, reportConnected } from './connection.ts';
import { playLooped } from '../media/looped-audio.ts';
import { ringbackCadence } from '../media/ringback.ts';
import type { WebRtcMedia } from '../media/webrtc-endpoint.ts';
import type { RingOutcome } from './control.ts';
import { bridgeDialled, type Dialled, hangUpDialled } from './dial-out.ts';
import { farEndHungUp } from './leg.ts';
import { BrowserLeg } from './legs/browser.ts';
import { abandonRinging, connectSipDevice, ringSipDevices } from './ring-sip.ts';
import { modeFor, ownersOf, roundTargets } from './ring-targets.ts';
import type { CallServices } from './services.ts';

/** How long an answering device has to bring ICE and DTLS up once its answer is taken. */
const connectTimeoutMs = 10_000;

export interface RoundContext {
  callId: string;
  workspaceId: string;
  ringSeq: number;
  /** The caller's media: hears ringback, then is bridged to the answering device. */
  caller: CallerMedia;
  /** Aborts when the call ends (the caller hung up, a command, shutdown). */
  gone: AbortSignal;
  /**
   * Dials a cell out through the called number's carrier, ringing up to `timeoutMs` and cancelled when `signal`
   * aborts; resolves once answered, or undefined (not answered, refused, impossible).
   */
  dialCell(to: string, timeoutMs: number, signal: AbortSignal): Promise<Dialled | undefined>;
  /** Called with every offer notice of the call while the round waits; returns the unsubscribe. */
  onOfferChange(listener: () => void): () => void;
  /** The caller's number, shown to SIP devices (the INVITE's From). */
  callerNumber?: string;
  /** Set for a queue's offer (queueing.ts): what differs from a `ring` step's round. */
  queued?: QueuedRound;
  /** Set for a round beside the call's own connection (a warm transfer's consultation, a supervisor's leg). */
  aside?: AsideRound;
}

/** A round that rings a queue entry's offered agents (queueing.ts, docs/contact-center.md). */
export interface QueuedRound {
  /** What the caller hears while it rings, instead of ringback, until `signal` aborts. */
  waitAudio(signal: AbortSignal): void;
  /** Ends the wait as its timeout would: the entry stopped being offered, or the caller's wait is over. */
  stop: AbortSignal;
  /**
   * Asked once a device answered and its media is up, before the call is connected to it, with the device's member:
   * false (the entry is no longer theirs) hangs the device up and the round is unanswered.
   */
  claim(memberId: string | null): Promise<boolean>;
  /**
   * The claimed device's connection is over: frees the device together with its agent (the queue's wrap-up), in
   * place of freeing the device alone.
   */
  ended(deviceId: string): Promise<void>;
  /** The agents' devices as the distribution read them with its offer: the round reads none before its INVITEs. */
  ringable?: RingableDevices;
}

/** What ended a round's wait: a device's accepted offer, an answered cell, or nothing (timeout, hangup, no one). */
type Answer = { offer: OfferRow } | { cell: Dialled } | undefined;

/** Runs one round; see the file's comment. */
export async function ringRound(
  services: CallServices,
  round: RoundContext,
  targets: readonly RingTarget[],
  timeoutMs: number,
): Promise<RingOutcome> {
  const { pool, log } = services;
  const { people, cells, devices, sipTargets } = await roundTargets(services, round, targets);
  if ((devices.length === 0 && cells.length === 0 && sipTargets.length === 0) || round.gone.aborted) {
    return 'unanswered';
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
  const stopListening = round.onOfferChange(() => wake());
  // Cancels the cells still ringing once the round is decided (or the call ends).
  const stopCells = new AbortController();
  const onGoneCells = () => stopCells.abort();
  round.gone.addEventListener('abort', onGoneCells, { once: true });
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
            workspaceId: round.workspaceId,
            ringSeq: round.ringSeq,
            devices: toOffer,
            expiresAt,
          });
    for (const deviceId of made.notOffered) {
      endpoints.get(deviceId)?.close();
      endpoints.delete(deviceId);
    }
    if (made.offers.length === 0 && cells.length === 0 && sipTargets.length === 0) return 'unanswered';
    const owners = new Map(devices.map((device) => [device.id, device]));
    // The phones' INVITEs go out while `call.ringing` is written (a transaction of several statements): an answer is
    // acted on only once the round waits below, after the write, so `call.connected` still follows `call.ringing`.
    const sip = await ringSipDevices(services, { callId: round.callId, from: round.callerNumber, targets: sipTargets });
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
      return 'unanswered';
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
        round.gone.removeEventListener('abort', onGone);
        resolve(found);
        return true;
      };
      const onGone = () => settle(undefined);
      const timer = setTimeout(() => settle(undefined), Math.max(0, expiresAt.getTime() - Date.now()));
      round.gone.addEventListener('abort', onGone, { once: true });
      // A queue's offer also ends when its entry stops being offered (signals abort once; no removal needed).
      if (round.queued?.stop.aborted === true) settle(undefined);
      else round.queued?.stop.addEventListener('abort', onGone, { once: true });
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
          round
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
      if (round.gone.aborted) {
        await hangUpDialled(services, answer.cell);
        return 'unanswered';
      }
      await bridgeDialled(
        services,
        { callId: round.callId, caller: round.caller, gone: round.gone, aside: round.aside },
        answer.cell,
        { role: 'cell', memberId: null, externalUserId: null },
      );
      return 'answered';
    }
    if (accepted === undefined) {
      // No browser accepted: a phone that answered has the call.
      if (sipAnswer === undefined) return 'unanswered';
      closeAll();
      if (round.gone.aborted) {
        sipAnswer.hangup();
        return 'unanswered';
      }
      return await connectSipDevice(services, round, sipAnswer);
    }
    sipAnswer?.hangup();
    closeAll(accepted.device_id);
    if (round.gone.aborted) {
      endpoints.get(accepted.device_id)?.close();
      await setDeviceBusy(pool, accepted.device_id, null);
      return 'unanswered';
    }
    return await connect(services, round, accepted, endpoints.get(accepted.device_id), owners.get(accepted.device_id));
  } finally {
    stopListening();
    wake = () => {};
    stopCells.abort();
    round.gone.removeEventListener('abort', onGoneCells);
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
 * The accepted device's leg: its answer taken, connected, bridged to the caller until either side hangs up. The
 * device is freed whatever happens. `answered` once bridged; `unanswered` when its answer or connection failed.
 */
async function connect(
  services: CallServices,
  round: RoundContext,
  offer: OfferRow,
  endpoint: WebRtcMedia | undefined,
  device: DeviceRow | undefined,
): Promise<RingOutcome> {
  const { pool, log } = services;
  // The leg's end is written while the device is freed: a queue's agent is free again one write sooner.
  let legEnded: Promise<void> | undefined;
  // A queue's device that claimed the entry is freed with its agent.
  let claimed = false;
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
    claimed = round.queued !== undefined && (await round.queued.claim(device?.member_id ?? null));
    if (round.queued !== undefined && !claimed) {
      endpoint.close();
      await setLegState(pool, legId, 'ended');
      return 'unanswered';
    }
    await setLegState(pool, legId, 'answered');
    const connection = bridgeCaller(round.caller, endpoint);
    await reportConnected(
      services.pool,
      round,
      {
        id: legId,
        role: 'browser',
        memberId: device?.member_id ?? null,
        externalUserId: device?.external_user_id ?? null,
      },
      connection,
    );
    // A browser that went away while connecting has ended already: its hangup was heard before anyone listened.
    if (!leg.ended) await farEndHungUp(leg, connection.until(round.gone));
    connection.end();
    await leg.bye();
    const stats = endpoint.stats;
    legEnded = setLegState(pool, legId, 'ended', { in: stats.framesIn, out: stats.framesOut });
    return 'answered';
  } finally {
    endpoint?.close();
    const free = claimed ? round.queued?.ended(offer.device_id) : setDeviceBusy(pool, offer.device_id, null);
    await Promise.all([free, legEnded]);
  }
}
