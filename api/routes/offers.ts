/**
 * Operations 63-65: a device's offers (docs/phones.md, "Offers"). A user or member token long-polls its own device's
 * waiting offers (another person's device or offer is 404), accepts one with the device's SDP answer (the first
 * accept of a call wins) or declines it. Offers are made by the `ring` step (core/devices/offers.ts `makeOffers`).
 * The long-poll holds no database connection while it waits (api/offer-waiters.ts); at most 3 wait for one device
 * and 10 for one person in one API process (api/long-polls.ts), one more is 409 `limit_exceeded` with Retry-After.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter, Gauge } from 'prom-client';
import { Type } from 'typebox';
import {
  acceptOffer,
  declineOffer,
  type OfferDecision,
  offerJson,
  type OfferRow,
  offerStates,
  waitingOffers,
} from '../../core/devices/offers.ts';
import type { DeviceOwner } from '../../core/devices/devices.ts';
import { ringModes } from '../../core/routing/definition.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { ownDevice, tokenOwner } from '../device-owners.ts';
import { LongPollPlaces } from '../long-polls.ts';
import { OfferWaiters } from '../offer-waiters.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

/** What ended a long-poll's wait, if anything has: its answer's label in the metrics. */
function waitEnded(changed: boolean, leftMs: number, clientLeft: boolean, stopping: boolean) {
  if (changed) return 'change';
  if (leftMs <= 0) return 'wait';
  if (clientLeft) return 'client';
  return stopping ? 'shutdown' : undefined;
}

/** The longest a long-poll holds (the `wait` query's default and maximum). */
const longPollSeconds = 10;
/** Long-polls one device, and one person (a user or member, whatever token), may hold waiting in one API process. */
export const longPollsPerDevice = 3;
export const longPollsPerPerson = 10;
/** The longest SDP answer taken: a browser's is a few kilobytes. */
const maxSdpLength = 32_768;

const uuidPattern = '[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}';
/** At most this many ids in `known`. */
const maxKnown = 50;

const Offer = Type.Object({
  id: Uuid,
  callId: Uuid,
  deviceId: Uuid,
  ringSeq: Type.Integer({ minimum: 1, description: "The ring step's round (call.ringing's ring.ringSeq)" }),
  mode: Type.Enum([...ringModes], {
    description:
      "The ring step's mode for this device's person: ring (ring out loud), silent (show the call without a sound) " +
      'or muted (ring; answer with the microphone muted)',
  }),
  from: Type.String({ description: "The call's from" }),
  to: Type.String({ description: "The call's to" }),
  sdp: Type.String({ description: "The engine's WebRTC SDP offer for this device" }),
  state: Type.Enum([...offerStates], { description: 'offered, accepted, declined, withdrawn or expired' }),
  expiresAt: DateTime,
  createdAt: DateTime,
  decidedAt: Type.Union([DateTime, Type.Null()]),
});

const IceServer = Type.Object({
  urls: Type.Union([Type.String(), Type.Array(Type.String())], { description: 'stun:, stuns:, turn: or turns: URLs' }),
  username: Type.Optional(Type.String()),
  credential: Type.Optional(Type.String()),
});

/**
 * An offer as the long-poll serves it: with the STUN and TURN servers (ICE_SERVERS) the device's peer connection
 * uses. They are added here, never stored with the offer, and only here: the answers of accept and decline are kept
 * for replays, and a TURN credential has no place in them.
 */
const PolledOffer = Type.Object({
  ...Offer.properties,
  iceServers: Type.Array(IceServer, {
    description:
      'STUN and TURN servers for the peer connection (RTCConfiguration.iceServers); empty: host candidates only',
  }),
});

const OffersQuery = Type.Object(
  {
    ...ListQuery.properties,
    wait: Type.Integer({
      minimum: 0,
      maximum: longPollSeconds,
      default: longPollSeconds,
      description: `Seconds to hold the request while nothing changed (0 to ${longPollSeconds})`,
    }),
    known: Type.Optional(
      Type.String({
        pattern: `^${uuidPattern}(,${uuidPattern}){0,${maxKnown - 1}}$`,
        description:
          'Ids of the offers the device already shows, comma-separated (at most 50): the request holds while the ' +
          'waiting offers are exactly these, and answers once one is added or gone. Without it, it answers as ' +
          'soon as any offer waits',
      }),
    ),
  },
  { additionalProperties: false },
);

const SdpAnswer = Type.String({
  minLength: 1,
  maxLength: maxSdpLength,
  description: "The device's SDP answer (v=0, an audio m-line)",
});

/** What is wrong with an SDP answer, or undefined when it is plausible: `v=0` first, an audio m-line, an origin. */
function sdpProblem(sdp: string): string | undefined {
  const lines = sdp.split(/\r?\n/).filter((line) => line !== '');
  if (lines[0] !== 'v=0') return 'body.sdp must be an SDP answer starting with the line v=0';
  if (!lines.some((line) => /^o=\S+ \d+ \d+ IN IP[46] \S+$/.test(line))) {
    return 'body.sdp must have an origin line (o=<username> <session id> <version> IN IP4|IP6 <address>)';
  }
  if (!lines.some((line) => /^m=audio \d{1,5}(\/\d+)? [A-Za-z0-9/]+( \S+)+$/.test(line))) {
    return 'body.sdp must have an audio media line (m=audio <port> <protocol> <formats>)';
  }
  const bad = lines.find((line) => !/^[a-z]=/.test(line));
  if (bad !== undefined) return `body.sdp has a line that is not <type>=<value>: "${bad.slice(0, 40)}"`;
  return undefined;
}

/** Aborts when the client closes the request's connection before it is answered. */
function clientGone(request: FastifyRequest): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const socket = request.raw.socket;
  const onClose = () => controller.abort();
  if (socket.destroyed) controller.abort();
  else socket.once('close', onClose);
  return { signal: controller.signal, release: () => socket.off('close', onClose) };
}

function refuse(decision: Exclude<OfferDecision, { outcome: 'done' }>, offerId: string, doing: string): never {
  switch (decision.outcome) {
    case 'not_found':
      throw notFound('offer');
    case 'call_ended':
      throw new ApiError('call_ended', `call ${decision.offer.call_id} has ended: offer ${offerId} cannot be ${doing}`);
    case 'conflict': {
      const { state } = decision.offer;
      const why =
        state === 'offered'
          ? 'it expired'
          : state === 'withdrawn'
            ? 'it was withdrawn (another device answered the call, or its round ended)'
            : `it was ${state}`;
      throw new ApiError('call_conflict', `offer ${offerId} cannot be ${doing}: ${why}`);
    }
    case 'busy':
      throw new ApiError(
        'device_busy',
        `device ${decision.offer.device_id} is on another call (${decision.busyCallId}): it can answer once that call ends`,
      );
  }
}

/**
 * A place for a long-poll of the device by its person, or 409 `limit_exceeded` with Retry-After (the seconds until
 * the full key's first wait ends) when the device or the person holds as many as they may; its release.
 */
function takePlace(
  places: LongPollPlaces,
  refusals: Counter | undefined,
  deviceId: string,
  owner: DeviceOwner,
  until: number,
): () => void {
  const person = 'memberId' in owner ? `member:${owner.memberId}` : `user:${owner.userId}`;
  const taken = places.take(
    [
      { key: `device:${deviceId}`, limit: longPollsPerDevice },
      { key: person, limit: longPollsPerPerson },
    ],
    until,
    Date.now(),
  );
  if (taken.taken) return taken.release;
  refusals?.inc();
  const whose = taken.full.key === person ? 'of this person (all their devices)' : 'of this device';
  throw new ApiError(
    'limit_exceeded',
    `${taken.full.limit} long-polls ${whose} are waiting already, the most there may be; ` +
      `poll again once one has answered (Retry-After)`,
    { headers: { 'retry-after': String(taken.retryAfterSecs) } },
  );
}

export function offerRoutes(app: FastifyInstance, services: Services) {
  // Long-polls per device and per person waiting in this process.
  const places = new LongPollPlaces();
  // Waiting long-polls hear offers of their device through one listening connection for the process.
  const waiters = new OfferWaiters(services.databaseUrl, (message) => app.log.warn(message));
  app.addHook('onReady', () => waiters.start());
  // Before the server waits for requests in flight: the long-polls answer with what they have.
  app.addHook('preClose', async () => waiters.stopWaiting());
  app.addHook('onClose', () => waiters.close());
  let refusals: Counter | undefined;
  let answered: Counter<'by'> | undefined;
  if (services.registry !== undefined) {
    new Gauge({
      name: 'switchboard_offer_long_polls',
      help: 'Long-polls of offers (GET /devices/{id}/offers) waiting in this process',
      registers: [services.registry],
      collect() {
        this.set(waiters.size);
      },
    });
    refusals = new Counter({
      name: 'switchboard_offer_long_polls_refused_total',
      help: 'Long-polls of offers refused (409 limit_exceeded) because their device or person held the most waiting',
      registers: [services.registry],
    });
    answered = new Counter({
      name: 'switchboard_offer_long_polls_answered_total',
      help:
        'Long-polls of offers answered, by what ended their wait: change (the offers changed), wait (it ran out), ' +
        'client (the client left) or shutdown (the API process stops)',
      labelNames: ['by'],
      registers: [services.registry],
    });
  }

  defineOperation(app, services, 'pollOffers', {
    schemas: { params: IdParams, querystring: OffersQuery, response: { 200: pageOf(PolledOffer) } },
    handler: async (context) => {
      const device = await ownDevice(context);
      const { cursor, wait, known } = context.query;
      const shown = new Set(known?.toLowerCase().split(',') ?? []);
      const changed = (rows: OfferRow[]) => rows.length !== shown.size || rows.some((row) => !shown.has(row.id));
      const read = () =>
        listPage<OfferRow>({
          key: services.keys.cursors,
          list: 'offers',
          owner: device.id,
          query: context.query,
          read: (window) => waitingOffers(services.pool, device.id, window),
        });
      const answer = (page: Awaited<ReturnType<typeof read>>) => ({
        status: 200,
        body: {
          data: page.rows.map((row) => ({ ...offerJson(row), iceServers: services.config.iceServers })),
          nextCursor: page.nextCursor,
        },
      });
      // A next page, or no wait asked: what there is now. Otherwise what there is once it differs from what the
      // device shows (`known`, none by default), or after the wait.
      if (cursor !== undefined || wait === 0) return answer(await read());
      const until = Date.now() + wait * 1000;
      const release = takePlace(places, refusals, device.id, tokenOwner(context.principal), until);
      try {
        // Watching before the first read: an offer made between the read and the wait still wakes it.
        const watch = waiters.watch(device.id);
        const gone = clientGone(context.request);
        try {
          for (;;) {
            const page = await read();
            const by = waitEnded(changed(page.rows), until - Date.now(), gone.signal.aborted, watch.ended);
            if (by !== undefined) {
              answered?.inc({ by });
              return answer(page);
            }
            await watch.next(until - Date.now(), gone.signal);
          }
        } finally {
          gone.release();
          watch.stop();
        }
      } finally {
        release();
      }
    },
  });

  defineOperation(app, services, 'acceptOffer', {
    schemas: {
      params: IdParams,
      body: Type.Object({ sdp: SdpAnswer }, { additionalProperties: false }),
      response: { 200: Offer },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const owner = tokenOwner(context.principal);
      const sdp = context.body.sdp;
      const problem = sdpProblem(sdp);
      if (problem !== undefined) throw new ApiError('invalid_request', problem);
      const offerId = context.params.id;
      const decision = await acceptOffer(context.db, workspace.id, owner, offerId, sdp);
      if (decision.outcome !== 'done') refuse(decision, offerId, 'accepted');
      return { status: 200, body: offerJson(decision.offer) };
    },
  });

  defineOperation(app, services, 'declineOffer', {
    schemas: { params: IdParams, body: NoFields, response: { 200: Offer } },
    optionalBody: true,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const owner = tokenOwner(context.principal);
      const offerId = context.params.id;
      const decision = await declineOffer(context.db, workspace.id, owner, offerId);
      if (decision.outcome !== 'done') refuse(decision, offerId, 'declined');
      return { status: 200, body: offerJson(decision.offer) };
    },
  });
}
