/**
 * Operations 73-79: webhook endpoints (create, list, get with delivery state, update, delete), replay and secret
 * rotation (spec section 4, docs/events.md). An endpoint belongs to the application of the key; another
 * application's endpoint is 404. Signing secrets are shown once (create, rotate) and stored sealed.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Queryable } from '../../core/database.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import type { WebhookEndpointSpec } from '../../core/resources/kinds.ts';
import { WebhookDescription, WebhookEventTypes, WebhookUrl } from '../../core/resources/kinds.ts';
import { sealSecret } from '../../core/sealing.ts';
import { newSigningSecret } from '../../core/webhooks/secrets.ts';
import { checkWebhookUrl } from '../../core/webhooks/url.ts';
import { maxEndpointsPerApplication, roomForEndpoint } from '../../core/webhooks/limits.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { apiResources } from '../resources.ts';
import { defineOperation, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

const defaultOverlapSeconds = 86_400;
const maxOverlapSeconds = 604_800;
const maxReplayRangeMs = 7 * 86_400_000;
const maxReplayEventIds = 100;

// The fields an endpoint takes are the WebhookEndpoint custom resource's (core/resources/kinds.ts).
const EventTypes = WebhookEventTypes;
const Url = WebhookUrl;
const Description = WebhookDescription;
const StreamKey = Type.String({
  pattern: '^(call|number|agent):[^\\s]{1,200}$',
  description: 'One stream, such as call:<callId>, number:<numberId> or agent:<memberId>',
});

const EndpointFields = {
  id: Uuid,
  url: Type.String(),
  description: Description,
  eventTypes: Type.Union([Type.Array(Type.String()), Type.Null()], { description: 'null: every event type' }),
  enabled: Type.Boolean(),
  createdAt: DateTime,
  updatedAt: DateTime,
};

export const WebhookEndpoint = Type.Object(EndpointFields);

export const WebhookEndpointDetail = Type.Object({
  ...EndpointFields,
  pendingCount: Type.Integer({ description: 'Events waiting to be delivered to this endpoint' }),
  parkedCount: Type.Integer({ description: 'Streams parked after 24 hours of failures; resume them by replay' }),
  lastError: Type.Union(
    [
      Type.Object({ message: Type.String(), at: Type.Union([DateTime, Type.Null()]), streamKey: Type.String() }),
      Type.Null(),
    ],
    { description: 'The most recent failed delivery attempt of any stream' },
  ),
  secretRotation: Type.Union([Type.Object({ previousExpiresAt: DateTime }), Type.Null()], {
    description: 'Set while the previous secret still signs deliveries (rotation overlap)',
  }),
});

const SecretAnswer = Type.Object({
  signingSecret: Type.String({ description: 'The signing secret, shown this once' }),
});

interface EndpointRow {
  id: string;
  url: string;
  description: string | null;
  event_types: string[] | null;
  enabled: boolean;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

interface DetailRow extends EndpointRow {
  pending_count: string;
  parked_count: string;
  last_error: string | null;
  last_error_at: Date | null;
  last_error_stream: string | null;
  previous_expires_at: Date | null;
}

const columns = 'id, url, description, event_types, enabled, created_at, updated_at, created_at::text AS cursor_ts';

function endpointJson(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    eventTypes: row.event_types,
    enabled: row.enabled,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function detailJson(row: DetailRow) {
  return {
    ...endpointJson(row),
    pendingCount: Number(row.pending_count),
    parkedCount: Number(row.parked_count),
    lastError:
      row.last_error === null
        ? null
        : {
            message: row.last_error,
            at: row.last_error_at?.toISOString() ?? null,
            streamKey: row.last_error_stream as string,
          },
    secretRotation:
      row.previous_expires_at === null ? null : { previousExpiresAt: row.previous_expires_at.toISOString() },
  };
}

const endpointNotFound = () => notFound('webhook endpoint');

function checkedUrl(services: Services, url: string): string {
  const check = checkWebhookUrl(url, { allowPrivateNetworks: services.config.webhookAllowPrivateNetworks });
  if (!check.ok) throw new ApiError('invalid_request', `body.url ${check.problem}`);
  return check.url;
}

/** The endpoint's id and types when it belongs to the application, row-locked against a concurrent change. */
async function ownEndpoint(db: Queryable, id: string, applicationId: string) {
  const result = await db.query<{ id: string; event_types: string[] | null }>(
    'SELECT id, event_types FROM webhook_endpoints WHERE id = $1 AND application_id = $2 FOR NO KEY UPDATE',
    [id, applicationId],
  );
  const row = result.rows[0];
  if (row === undefined) throw endpointNotFound();
  return row;
}

/**
 * Lane upsert of a replay: the lane of each stream becomes due. A lane waiting out a backoff keeps its time; a
 * parked lane is un-parked, due now, with its failure count and parking clock reset.
 */
const laneUpsert = `
  INSERT INTO webhook_lanes (endpoint_id, stream_key, next_attempt_at)
  SELECT DISTINCT $1::uuid, stream_key, now() FROM selected
  ON CONFLICT (endpoint_id, stream_key) DO UPDATE SET
    next_attempt_at = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN now()
                           ELSE coalesce(webhook_lanes.next_attempt_at, now()) END,
    attempts = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN 0 ELSE webhook_lanes.attempts END,
    head_first_attempt_at = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN NULL
                                 ELSE webhook_lanes.head_first_attempt_at END,
    parked_at = NULL
  RETURNING 1`;

type ReplayScope = 'parked' | 'range' | 'events';
const fieldsOfScope: Record<ReplayScope, readonly string[]> = {
  parked: [],
  range: ['since', 'until'],
  events: ['eventIds'],
};

/**
 * Writes the endpoint's `WebhookEndpoint` custom resource (docs/kubernetes.md) beside its record, in the request's
 * transaction: the spec as the API holds it, without `secretRef` (the API keeps its secrets sealed in PostgreSQL).
 */
async function writeResource(services: Services, db: Queryable, applicationId: string, row: EndpointRow) {
  const spec: WebhookEndpointSpec = {
    id: row.id,
    applicationId,
    url: row.url,
    enabled: row.enabled,
    ...(row.event_types === null ? {} : { eventTypes: row.event_types as WebhookEndpointSpec['eventTypes'] }),
    ...(row.description === null ? {} : { description: row.description }),
  };
  await apiResources(services, db).apply('WebhookEndpoint', row.id, spec, { applicationId });
}

export function webhookRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createWebhook', {
    schemas: {
      body: Type.Object(
        {
          url: Url,
          eventTypes: Type.Optional(EventTypes),
          description: Type.Optional(Description),
          enabled: Type.Optional(Type.Boolean({ default: true })),
        },
        { additionalProperties: false },
      ),
      response: {
        201: Type.Object({
          endpoint: WebhookEndpoint,
          signingSecret: Type.String({ description: 'The signing secret, shown this once' }),
        }),
      },
    },
    handler: async ({ db, body, principal }) => {
      const applicationId = principal.applicationId as string;
      const url = checkedUrl(services, body.url);
      if ((await roomForEndpoint(db, applicationId)) !== 'room') {
        throw new ApiError(
          'limit_exceeded',
          `an application has at most ${maxEndpointsPerApplication} webhook endpoints; delete one first`,
        );
      }
      const signingSecret = newSigningSecret();
      const result = await db.query<EndpointRow>(
        `INSERT INTO webhook_endpoints (application_id, url, event_types, enabled, description, secret)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${columns}`,
        [
          applicationId,
          url,
          body.eventTypes ?? null,
          body.enabled ?? true,
          body.description ?? null,
          sealSecret(services.keys.webhookSecrets, signingSecret),
        ],
      );
      const row = result.rows[0] as EndpointRow;
      await writeResource(services, db, applicationId, row);
      return { status: 201, body: { endpoint: endpointJson(row), signingSecret } };
    },
  });

  defineOperation(app, services, 'listWebhooks', {
    schemas: { querystring: ListQuery, response: { 200: pageOf(WebhookEndpoint) } },
    handler: async ({ db, query, principal }) => {
      const page = await listPage<EndpointRow>({
        db,
        key: services.keys.cursors,
        list: 'webhooks',
        owner: principal.applicationId as string,
        select: `SELECT ${columns} FROM webhook_endpoints`,
        where: 'application_id = $1',
        params: [principal.applicationId],
        query,
      });
      return { status: 200, body: { data: page.rows.map(endpointJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getWebhook', {
    schemas: { params: IdParams, response: { 200: WebhookEndpointDetail } },
    handler: async ({ db, params, principal }) => {
      const result = await db.query<DetailRow>({
        name: 'switchboard-get-webhook',
        text: `SELECT e.id, e.url, e.description, e.event_types, e.enabled, e.created_at, e.updated_at,
                      e.created_at::text AS cursor_ts,
                      (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = e.id) AS pending_count,
                      (SELECT count(*) FROM webhook_lanes l
                        WHERE l.endpoint_id = e.id AND l.parked_at IS NOT NULL) AS parked_count,
                      failed.last_error, failed.last_attempt_at AS last_error_at,
                      failed.stream_key AS last_error_stream,
                      CASE WHEN e.previous_secret IS NOT NULL AND e.previous_secret_expires_at > now()
                           THEN e.previous_secret_expires_at END AS previous_expires_at
                 FROM webhook_endpoints e
                 LEFT JOIN LATERAL (
                   SELECT l.last_error, l.last_attempt_at, l.stream_key FROM webhook_lanes l
                    WHERE l.endpoint_id = e.id AND l.last_error IS NOT NULL
                    ORDER BY l.last_attempt_at DESC NULLS LAST LIMIT 1) failed ON true
                WHERE e.id = $1 AND e.application_id = $2`,
        values: [params.id, principal.applicationId],
      });
      const row = result.rows[0];
      if (row === undefined) throw endpointNotFound();
      return { status: 200, body: detailJson(row) };
    },
  });

  defineOperation(app, services, 'updateWebhook', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          url: Type.Optional(Url),
          eventTypes: Type.Optional(EventTypes),
          enabled: Type.Optional(Type.Boolean()),
          description: Type.Optional(Description),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: WebhookEndpoint },
    },
    handler: async ({ db, body, params, principal }) => {
      const url = body.url === undefined ? null : checkedUrl(services, body.url);
      // Absent fields keep their value; eventTypes and description may be set to null.
      const result = await db.query<EndpointRow>(
        `UPDATE webhook_endpoints SET
           url = coalesce($3, url),
           event_types = CASE WHEN $4 THEN $5::text[] ELSE event_types END,
           enabled = coalesce($6, enabled),
           description = CASE WHEN $7 THEN $8 ELSE description END,
           updated_at = clock_timestamp()
         WHERE id = $1 AND application_id = $2 RETURNING ${columns}`,
        [
          params.id,
          principal.applicationId,
          url,
          'eventTypes' in body,
          body.eventTypes ?? null,
          body.enabled ?? null,
          'description' in body,
          body.description ?? null,
        ],
      );
      const row = result.rows[0];
      if (row === undefined) throw endpointNotFound();
      await writeResource(services, db, principal.applicationId as string, row);
      return { status: 200, body: endpointJson(row) };
    },
  });

  defineOperation(app, services, 'deleteWebhook', {
    // No fields: the body may be left out or be `{}`.
    schemas: {
      params: IdParams,
      body: Type.Object({}, { additionalProperties: false }),
      response: { 200: WebhookEndpoint },
    },
    optionalBody: true,
    handler: async ({ db, params, principal }) => {
      // Its queued deliveries and lanes go with it (ON DELETE CASCADE).
      const result = await db.query<EndpointRow>(
        `DELETE FROM webhook_endpoints WHERE id = $1 AND application_id = $2 RETURNING ${columns}`,
        [params.id, principal.applicationId],
      );
      const row = result.rows[0];
      if (row === undefined) throw endpointNotFound();
      await apiResources(services, db).delete('WebhookEndpoint', row.id);
      return { status: 200, body: endpointJson(row) };
    },
  });

  defineOperation(app, services, 'replayWebhook', {
    optionalBody: true,
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          scope: Type.Optional(
            Type.Enum(['parked', 'range', 'events'], {
              description:
                'parked: resume parked streams; range: redeliver events that occurred in [since, until); events: ' +
                'redeliver the events of eventIds. Default: events when eventIds is given, range when since or ' +
                'until is, else parked',
            }),
          ),
          since: Type.Optional(Type.String({ format: 'date-time', description: 'range: first instant (included)' })),
          until: Type.Optional(
            Type.String({ format: 'date-time', description: 'range: end (excluded), at most 7 days after since' }),
          ),
          eventIds: Type.Optional(
            Type.Array(Uuid, { minItems: 1, maxItems: maxReplayEventIds, uniqueItems: true, description: 'events' }),
          ),
          streamKey: Type.Optional(StreamKey),
        },
        { additionalProperties: false },
      ),
      response: {
        200: Type.Object({
          queued: Type.Integer({ description: 'Events now waiting for delivery (parked: in the resumed streams)' }),
          lanes: Type.Integer({ description: 'Streams made due' }),
        }),
      },
    },
    handler: async ({ db, body, params, principal }) => {
      const applicationId = principal.applicationId as string;
      const scope: ReplayScope =
        body.scope ??
        (body.eventIds !== undefined
          ? 'events'
          : body.since !== undefined || body.until !== undefined
            ? 'range'
            : 'parked');
      const foreign = (['since', 'until', 'eventIds'] as const).find(
        (field) => body[field] !== undefined && !fieldsOfScope[scope].includes(field),
      );
      if (foreign !== undefined) {
        throw new ApiError('invalid_request', `body.${foreign} does not go with scope "${scope}"`);
      }
      const endpoint = await ownEndpoint(db, params.id as string, applicationId);
      const streamKey: string | null = body.streamKey ?? null;

      if (scope === 'parked') {
        const result = await db.query<{ queued: string; lanes: string }>(
          `WITH resumed AS (
             UPDATE webhook_lanes SET parked_at = NULL, attempts = 0, head_first_attempt_at = NULL,
                                      next_attempt_at = now()
              WHERE endpoint_id = $1 AND parked_at IS NOT NULL AND ($2::text IS NULL OR stream_key = $2)
             RETURNING stream_key)
           SELECT (SELECT count(*) FROM resumed) AS lanes,
                  (SELECT count(*) FROM webhook_deliveries
                    WHERE endpoint_id = $1 AND stream_key IN (SELECT stream_key FROM resumed)) AS queued`,
          [endpoint.id, streamKey],
        );
        const row = result.rows[0] as { queued: string; lanes: string };
        return { status: 200, body: { queued: Number(row.queued), lanes: Number(row.lanes) } };
      }

      let selection: string;
      let values: unknown[];
      if (scope === 'range') {
        if (body.since === undefined || body.until === undefined) {
          throw new ApiError('invalid_request', 'scope "range" needs body.since and body.until');
        }
        const since = new Date(body.since);
        const until = new Date(body.until);
        if (since.getTime() >= until.getTime()) {
          throw new ApiError('invalid_request', 'body.since must be before body.until');
        }
        if (until.getTime() - since.getTime() > maxReplayRangeMs) {
          throw new ApiError('invalid_request', 'body.since to body.until must span at most 7 days');
        }
        selection = `SELECT id, stream_key, sequence FROM events
                      WHERE application_id = $2 AND occurred_at >= $3::timestamptz AND occurred_at < $4::timestamptz
                        AND ($5::text IS NULL OR stream_key = $5)
                        AND ($6::text[] IS NULL OR type = ANY ($6))`;
        values = [
          endpoint.id,
          applicationId,
          since.toISOString(),
          until.toISOString(),
          streamKey,
          endpoint.event_types,
        ];
      } else {
        if (body.eventIds === undefined) throw new ApiError('invalid_request', 'scope "events" needs body.eventIds');
        const ids = body.eventIds as string[];
        const found = await db.query<{ id: string; type: string; stream_key: string }>(
          'SELECT id, type, stream_key FROM events WHERE application_id = $1 AND id = ANY ($2::uuid[])',
          [applicationId, ids],
        );
        const byId = new Map(found.rows.map((row) => [row.id, row]));
        const unknown = ids.filter((id) => !byId.has(id.toLowerCase()));
        if (unknown.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events this application does not have: ${unknown.join(', ')}`,
          );
        }
        const types = endpoint.event_types;
        const untaken = found.rows.filter((row) => types !== null && !types.includes(row.type));
        if (untaken.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events of types this endpoint does not take: ${untaken.map((row) => `${row.id} (${row.type})`).join(', ')}`,
          );
        }
        const outside = streamKey === null ? [] : found.rows.filter((row) => row.stream_key !== streamKey);
        if (outside.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events outside stream ${streamKey}: ${outside.map((row) => row.id).join(', ')}`,
          );
        }
        selection = 'SELECT id, stream_key, sequence FROM events WHERE application_id = $2 AND id = ANY ($3::uuid[])';
        values = [endpoint.id, applicationId, ids];
      }

      // Each event keeps its stream and sequence: the lane delivers its lowest sequence first.
      const result = await db.query<{ queued: string; lanes: string }>(
        `WITH selected AS (${selection}),
         queued AS (
           INSERT INTO webhook_deliveries (endpoint_id, event_id, stream_key, sequence)
           SELECT $1, id, stream_key, sequence FROM selected
           ON CONFLICT (endpoint_id, stream_key, sequence) DO NOTHING),
         lanes AS (${laneUpsert})
         SELECT (SELECT count(*) FROM selected) AS queued, (SELECT count(*) FROM lanes) AS lanes`,
        values,
      );
      const row = result.rows[0] as { queued: string; lanes: string };
      return { status: 200, body: { queued: Number(row.queued), lanes: Number(row.lanes) } };
    },
  });

  defineOperation(app, services, 'rotateWebhookSecret', {
    optionalBody: true,
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          overlapSeconds: Type.Optional(
            Type.Integer({
              minimum: 0,
              maximum: maxOverlapSeconds,
              default: defaultOverlapSeconds,
              description: 'How long the outgoing secret keeps signing deliveries; 0 ends it at once',
            }),
          ),
        },
        { additionalProperties: false },
      ),
      response: {
        200: Type.Object({
          ...SecretAnswer.properties,
          previousSecretExpiresAt: Type.Union([DateTime, Type.Null()], {
            description: 'When the outgoing secret stops signing; null when it stopped at once',
          }),
        }),
      },
    },
    handler: async ({ db, body, params, principal }) => {
      const overlap: number = body.overlapSeconds ?? defaultOverlapSeconds;
      const signingSecret = newSigningSecret();
      // The current secret becomes the previous one (an older previous secret, still in its overlap, ends now).
      const result = await db.query<{ previous_secret_expires_at: Date | null }>(
        `UPDATE webhook_endpoints SET
           previous_secret = CASE WHEN $3::integer = 0 THEN NULL ELSE secret END,
           previous_secret_expires_at = CASE WHEN $3::integer = 0 THEN NULL
                                             ELSE clock_timestamp() + make_interval(secs => $3::integer) END,
           secret = $4,
           updated_at = clock_timestamp()
         WHERE id = $1 AND application_id = $2 RETURNING previous_secret_expires_at`,
        [params.id, principal.applicationId, overlap, sealSecret(services.keys.webhookSecrets, signingSecret)],
      );
      const row = result.rows[0];
      if (row === undefined) throw endpointNotFound();
      return {
        status: 200,
        body: { signingSecret, previousSecretExpiresAt: row.previous_secret_expires_at?.toISOString() ?? null },
      };
    },
  });
}
