/**
 * The carrier HTTP interface's inbound side (docs/messaging.md, "MMS"): not an operation of /api/v1 but what a
 * carrier (or its adapter) calls. `POST /carriers/{name}/mms` with `{ from, to, text, media: [{ url, contentType }] }`
 * is an inbound MMS to one of the carrier's claimed numbers: a message `received` with `message.received`.
 * `POST /carriers/{name}/mms/status` with `{ id, status: "delivered" | "failed", error? }` is a status callback for
 * an MMS the carrier took (`id` as it answered): recorded as a delivery receipt is. Both are authenticated with HTTP
 * Basic, the carrier's SMPP system id and password (compared in constant time; a carrier without an MMS URL, or none
 * by that name, is 401 alike, so the answer tells nothing of which carriers exist). Answers in the error envelope:
 * 401 for credentials, 400 for a body that is not the interface's, 404 for a number that is not the carrier's.
 *
 * Against password guessing (an SMPP password is at most 8 characters), wrong credentials are counted per source
 * address and per carrier name as the SIP registrar counts them (core/failure-limiter.ts): at 10 in a fixed minute,
 * every request of that address, or to that carrier, is 429 `rate_limited` with Retry-After until the minute ends,
 * before any database work and whatever the password; a success clears both counts.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter } from 'prom-client';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { mmsAccount } from '../../core/carriers/messaging.ts';
import { ApiError } from '../../core/errors.ts';
import { FailureLimiter } from '../../core/failure-limiter.ts';
import { e164Pattern } from '../../core/ids.ts';
import { mediaTypes } from '../../core/messages/media.ts';
import { receiveMms, recordMmsStatus } from '../../core/messages/mms.ts';
import type { Services } from '../route.ts';

const Params = Type.Object({ name: Type.String({ minLength: 1, maxLength: 63 }) });

const InboundMms = Type.Object({
  // The sender: a number, a short code or an alphanumeric sender id.
  from: Type.String({ pattern: '^\\+?[0-9A-Za-z]{1,20}$' }),
  to: Type.String({ pattern: e164Pattern }),
  text: Type.Optional(Type.String({ maxLength: 1600 })),
  media: Type.Array(
    Type.Object({
      url: Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://' }),
      contentType: Type.Enum([...mediaTypes]),
    }),
    { maxItems: 10 },
  ),
});

const MmsStatus = Type.Object({
  id: Type.String({ pattern: '^[\\x20-\\x7e]{1,64}$' }),
  status: Type.Enum(['delivered', 'failed']),
  error: Type.Optional(
    Type.Object({ code: Type.String({ minLength: 1, maxLength: 100 }), message: Type.String({ maxLength: 1000 }) }),
  ),
});

const digest = (value: string) => createHash('sha256').update(value).digest();

function refused(): ApiError {
  return new ApiError('unauthorized', "HTTP Basic with the carrier's SMPP system id and password is required", {
    headers: { 'www-authenticate': 'Basic realm="switchboard carrier", charset="UTF-8"' },
  });
}

/** Wrong credentials per source address and per carrier in a window before 429, as the registrar's REGISTERs. */
const failureLimit = 10;
const failureWindowMs = 60_000;

type Outcome = 'accepted' | 'failed' | 'limited';

function limited(retryAfter: number): ApiError {
  return new ApiError('rate_limited', `too many failed logins; try again in ${retryAfter} s`, {
    headers: { 'retry-after': String(retryAfter) },
  });
}

/**
 * The carrier named in the path when the request carries its credentials; 401 otherwise, 429 while its address or
 * that carrier has too many failures in the window.
 */
async function authenticate(
  services: Services,
  limiter: FailureLimiter,
  count: (outcome: Outcome) => void,
  request: FastifyRequest,
): Promise<void> {
  const addressKey = `address:${request.ip}`;
  const byAddress = limiter.blocked(addressKey, Date.now());
  if (byAddress !== undefined) {
    count('limited');
    throw limited(byAddress);
  }
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? /^Basic ([A-Za-z0-9+/=]{1,400})$/i.exec(header.trim()) : null;
  if (match === null) throw refused();
  const name = (request.params as { name?: string }).name ?? '';
  const carrierKey = `carrier:${name.slice(0, 63)}`;
  const byCarrier = limiter.blocked(carrierKey, Date.now());
  if (byCarrier !== undefined) {
    count('limited');
    throw limited(byCarrier);
  }
  const account = name.length > 63 ? undefined : await mmsAccount(services.pool, services.keys.carrierSecrets, name);
  const given = digest(Buffer.from(match[1] as string, 'base64').toString('utf8'));
  // Compared even when there is no account, so an unknown carrier costs the same as a wrong password.
  const expected = digest(account === undefined ? '\u0000' : `${account.systemId}:${account.password}`);
  if (!timingSafeEqual(given, expected) || account === undefined) {
    const now = Date.now();
    limiter.fail(addressKey, now);
    limiter.fail(carrierKey, now);
    count('failed');
    throw refused();
  }
  limiter.reset(addressKey);
  limiter.reset(carrierKey);
  count('accepted');
}

export function carrierMmsRoutes(app: FastifyInstance, services: Services) {
  // One count per API process: a guesser spread over pods gets each pod's allowance.
  const limiter = new FailureLimiter(failureLimit, failureWindowMs);
  const logins = new Counter({
    name: 'switchboard_carrier_http_logins_total',
    help: "Requests to the carriers' HTTP interface by how their credentials fared (limited: refused for too many failures)",
    labelNames: ['outcome'],
    registers: services.registry === undefined ? [] : [services.registry],
  });
  const count = (outcome: Outcome) => logins.inc({ outcome });
  const options = {
    bodyLimit: 64 * 1024,
    onRequest: (request: FastifyRequest) => authenticate(services, limiter, count, request),
  };

  // Typed from the schemas (fastify checks the params and body against them before the handler runs).
  const routes = app.withTypeProvider<TypeBoxTypeProvider>();
  routes.post('/carriers/:name/mms', { ...options, schema: { params: Params, body: InboundMms } }, async (request) => {
    const { name } = request.params;
    const { body } = request;
    const text = body.text ?? '';
    if (text === '' && body.media.length === 0) {
      throw new ApiError('invalid_request', 'body.text or body.media is required: an MMS carries something');
    }
    const received = await receiveMms(services.pool, name, { from: body.from, to: body.to, text, media: body.media });
    if (received.outcome === 'unknown_number') {
      throw new ApiError('not_found', `${body.to} is not a claimed number of carrier ${name}`);
    }
    return { id: received.messageId };
  });

  routes.post(
    '/carriers/:name/mms/status',
    { ...options, schema: { params: Params, body: MmsStatus } },
    async (request, reply) => {
      const { name } = request.params;
      const { body } = request;
      const delivered = body.status === 'delivered';
      await recordMmsStatus(services.pool, name, {
        carrierMessageId: body.id,
        delivered,
        state: delivered ? 'DELIVRD' : 'UNDELIV',
        error: delivered ? null : (body.error ?? null),
      });
      return reply.code(204).send();
    },
  );
}
