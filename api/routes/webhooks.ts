/**
 * Operations 73-79: webhook endpoints (create, list, get with delivery state, update, delete), replay and secret
 * rotation (spec section 4, docs/events.md). An endpoint belongs to the application of the key; another
 * application's endpoint is 404. Signing secrets are shown once (create, rotate) and stored sealed.
 *
 * Longer than 400 lines because it holds seven operations of one resource, schemas and handlers only (the SQL is in
 * core/webhooks/endpoints.ts and deliveries.ts); the replay's scope rules read best beside its schema.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Queryable } from '../../core/database.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { eventsByIds } from '../../core/events/log.ts';
import type { WebhookEndpointSpec } from '../../core/resources/kinds.ts';
import { WebhookDescription, WebhookEventTypes, WebhookUrl } from '../../core/resources/kinds.ts';
import { sealSecret } from '../../core/sealing.ts';
import { newSigningSecret } from '../../core/webhooks/secrets.ts';
import { checkWebhookUrl } from '../../core/webhooks/url.ts';
import { queueReplay, type ReplaySelection, resumeParkedLanes } from '../../core/webhooks/deliveries.ts';
import {
  createEndpoint,
  deleteEndpoint,
  type DetailRow,
  endpointDetail,
  type EndpointRow,
  listEndpoints,
  lockOwnEndpoint,
  maxEndpointsPerApplication,
  roomForEndpoint,
  rotateSecret,
  updateEndpoint,
} from '../../core/webhooks/endpoints.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { apiResources } from '../resources.ts';
import { defineOperation, type HandlerContext, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

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
  const row = await lockOwnEndpoint(db, id, applicationId);
  if (row === undefined) throw endpointNotFound();
  return row;
}

type ReplayScope = 'parked' | 'range' | 'events';
const fieldsOfScope: Record<ReplayScope, readonly string[]> = {
  parked: [],
  range: ['since', 'until'],
  events: ['eventIds'],
};

/**
 * Writes the endpoint's `WebhookEndpoint` custom resource (docs/kubernetes.md) beside its record (api/resources.ts):
 * the spec as the API holds it, without `secretRef` (the API keeps its secrets sealed in PostgreSQL).
 */
async function writeResource(context: HandlerContext, applicationId: string, row: EndpointRow) {
  const spec: WebhookEndpointSpec = {
    id: row.id,
    applicationId,
    url: row.url,
    enabled: row.enabled,
    ...(row.event_types === null ? {} : { eventTypes: row.event_types as WebhookEndpointSpec['eventTypes'] }),
    ...(row.description === null ? {} : { description: row.description }),
  };
  await apiResources(context).apply('WebhookEndpoint', row.id, spec, { applicationId });
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
    handler: async (context) => {
      const { db, body, principal } = context;
      const applicationId = principal.applicationId as string;
      const url = checkedUrl(services, body.url);
      if ((await roomForEndpoint(db, applicationId)) !== 'room') {
        throw new ApiError(
          'limit_exceeded',
          `an application has at most ${maxEndpointsPerApplication} webhook endpoints; delete one first`,
        );
      }
      const signingSecret = newSigningSecret();
      const row = await createEndpoint(db, applicationId, {
        url,
        eventTypes: body.eventTypes ?? null,
        enabled: body.enabled ?? true,
        description: body.description ?? null,
        secret: sealSecret(services.keys.webhookSecrets, signingSecret),
      });
      await writeResource(context, applicationId, row);
      return { status: 201, body: { endpoint: endpointJson(row), signingSecret } };
    },
  });

  defineOperation(app, services, 'listWebhooks', {
    schemas: { querystring: ListQuery, response: { 200: pageOf(WebhookEndpoint) } },
    handler: async ({ db, query, principal }) => {
      const page = await listPage<EndpointRow>({
        key: services.keys.cursors,
        list: 'webhooks',
        owner: principal.applicationId as string,
        query,
        read: (window) => listEndpoints(db, principal.applicationId as string, window),
      });
      return { status: 200, body: { data: page.rows.map(endpointJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getWebhook', {
    schemas: { params: IdParams, response: { 200: WebhookEndpointDetail } },
    handler: async ({ db, params, principal }) => {
      const row = await endpointDetail(db, principal.applicationId as string, params.id);
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
    handler: async (context) => {
      const { db, body, params, principal } = context;
      const url = body.url === undefined ? null : checkedUrl(services, body.url);
      // Absent fields keep their value; eventTypes and description may be set to null.
      const row = await updateEndpoint(db, principal.applicationId as string, params.id, {
        url,
        enabled: body.enabled ?? null,
        ...('eventTypes' in body ? { eventTypes: body.eventTypes ?? null } : {}),
        ...('description' in body ? { description: body.description ?? null } : {}),
      });
      if (row === undefined) throw endpointNotFound();
      await writeResource(context, principal.applicationId as string, row);
      return { status: 200, body: endpointJson(row) };
    },
  });

  defineOperation(app, services, 'deleteWebhook', {
    // No fields: the body may be left out or be `{}`.
    schemas: { params: IdParams, body: NoFields, response: { 200: WebhookEndpoint } },
    handler: async (context) => {
      const { db, params, principal } = context;
      // Its queued deliveries and lanes go with it (ON DELETE CASCADE).
      const row = await deleteEndpoint(db, principal.applicationId as string, params.id);
      if (row === undefined) throw endpointNotFound();
      await apiResources(context).delete('WebhookEndpoint', row.id);
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
      const endpoint = await ownEndpoint(db, params.id, applicationId);
      const streamKey: string | null = body.streamKey ?? null;

      if (scope === 'parked') {
        const row = await resumeParkedLanes(db, endpoint.id, streamKey);
        return { status: 200, body: { queued: Number(row.queued), lanes: Number(row.lanes) } };
      }

      let selection: ReplaySelection;
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
        selection = { since, until, streamKey, eventTypes: endpoint.event_types };
      } else {
        if (body.eventIds === undefined) throw new ApiError('invalid_request', 'scope "events" needs body.eventIds');
        const ids = body.eventIds;
        const found = await eventsByIds(db, applicationId, ids);
        const byId = new Map(found.map((row) => [row.id, row]));
        const unknown = ids.filter((id) => !byId.has(id.toLowerCase()));
        if (unknown.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events this application does not have: ${unknown.join(', ')}`,
          );
        }
        const types = endpoint.event_types;
        const untaken = found.filter((row) => types !== null && !types.includes(row.type));
        if (untaken.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events of types this endpoint does not take: ${untaken.map((row) => `${row.id} (${row.type})`).join(', ')}`,
          );
        }
        const outside = streamKey === null ? [] : found.filter((row) => row.stream_key !== streamKey);
        if (outside.length > 0) {
          throw new ApiError(
            'invalid_request',
            `body.eventIds has events outside stream ${streamKey}: ${outside.map((row) => row.id).join(', ')}`,
          );
        }
        selection = { eventIds: ids };
      }

      // Each event keeps its stream and sequence: the lane delivers its lowest sequence first.
      const row = await queueReplay(db, endpoint.id, applicationId, selection);
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
      const row = await rotateSecret(
        db,
        principal.applicationId as string,
        params.id,
        overlap,
        sealSecret(services.keys.webhookSecrets, signingSecret),
      );
      if (row === undefined) throw endpointNotFound();
      return {
        status: 200,
        body: { signingSecret, previousSecretExpiresAt: row.previous_secret_expires_at?.toISOString() ?? null },
      };
    },
  });
}
