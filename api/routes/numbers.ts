/**
 * Operations 19-24: the service's numbers. Search the inventory, claim one into the workspace, list, get, change
 * (name, voice lane, texting registration, emergency address, unassign), release back to the inventory. Every change
 * of a claimed number emits `number.updated` in the number's stream.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../../core/errors.ts';
import { EmergencyAddressSchema, emergencyAddressProblems } from '../../core/numbers/emergency-address.ts';
import {
  capabilities,
  claimNumber,
  listNumbers,
  numberById,
  numberJson,
  type NumberRow,
  type NumberSearch,
  numberUpdated,
  releaseNumber,
  searchInventory,
  type TextingRegistration,
  updateNumber,
} from '../../core/numbers/numbers.ts';
import { ListQuery, listPage, openCursor, sealCursor } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

const Capability = Type.Enum([...capabilities]);
const VoiceLane = Type.Enum(['service', 'off'], {
  description: "`service`: calls run through this service's routing plans; `off`: the number takes no calls",
});

export const PhoneNumber = Type.Object({
  id: Uuid,
  e164: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  status: Type.String({ description: '`active` (claimed by a workspace) or `available` (in the inventory)' }),
  region: Type.Union([Type.String(), Type.Null()], { description: 'ISO 3166-1 region of the number' }),
  capabilities: Type.Array(Capability),
  voiceLane: VoiceLane,
  textingRegistration: Type.Object({
    status: Type.String({
      description:
        '`unregistered` (no campaign), `pending` (a campaign named, waiting for review), `approved` (the number ' +
        'sends messages) or `rejected`',
    }),
    campaignId: Type.Union([Type.String(), Type.Null()]),
  }),
  emergencyAddress: Type.Union([EmergencyAddressSchema, Type.Null()]),
  routingPlanId: Type.Union([Uuid, Type.Null()]),
  assignedAt: Type.Union([DateTime, Type.Null()]),
  claimedAt: Type.Union([DateTime, Type.Null()]),
  updatedAt: DateTime,
});

const AvailableNumber = Type.Object({
  e164: Type.String(),
  region: Type.Union([Type.String(), Type.Null()]),
  capabilities: Type.Array(Capability),
});

const SearchQuery = Type.Object(
  {
    region: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 region, e.g. US' })),
    areaCode: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,6}$', description: 'Leading digits of the national number, e.g. 415' }),
    ),
    contains: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', description: 'Digits anywhere in the number' })),
    capabilities: Type.Optional(
      Type.String({
        pattern: '^(voice|sms|mms)(,(voice|sms|mms))*$',
        description: 'Comma list; every one must be supported',
      }),
    ),
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
    cursor: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

/**
 * The registration once the workspace names `campaignId` (docs/messaging.md, "Texting registration"): none is
 * `unregistered`; a new campaign, or one named again after a rejection or without one before, is `pending` (the
 * admin decides); the same campaign named again keeps its `pending` or `approved`.
 */
function registrationAfter(current: NumberRow, campaignId: string | null): TextingRegistration {
  if (campaignId === null) return 'unregistered';
  if (campaignId !== current.texting_campaign_id) return 'pending';
  return current.texting_registration === 'approved' ? 'approved' : 'pending';
}

export function numberRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'searchAvailableNumbers', {
    schemas: {
      querystring: SearchQuery,
      response: {
        200: Type.Object({ data: Type.Array(AvailableNumber), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
      },
    },
    handler: async ({ db, query }) => {
      const search: NumberSearch = { limit: query.limit };
      if (query.region !== undefined) search.region = query.region;
      if (query.areaCode !== undefined) search.areaCode = query.areaCode;
      if (query.contains !== undefined) search.contains = query.contains;
      if (query.capabilities !== undefined) search.capabilities = [...new Set(String(query.capabilities).split(','))];
      if (query.cursor !== undefined) {
        const after = openCursor(services.keys.cursors, query.cursor, 2);
        if (after === undefined || after[0] !== 'available-numbers') {
          throw new ApiError('invalid_cursor', 'cursor is not one this search handed out');
        }
        search.after = after[1];
      }
      const found = await searchInventory(db, search);
      const rows = found.slice(0, query.limit);
      const last = rows[rows.length - 1];
      return {
        status: 200,
        body: {
          data: rows.map((row) => ({ e164: row.e164, region: row.region, capabilities: row.capabilities })),
          nextCursor:
            found.length > query.limit && last !== undefined
              ? sealCursor(services.keys.cursors, ['available-numbers', last.e164])
              : null,
        },
      };
    },
  });

  defineOperation(app, services, 'claimNumber', {
    schemas: {
      body: Type.Object(
        {
          e164: Type.String({ pattern: '^\\+[1-9][0-9]{1,14}$', description: 'A number the search offered' }),
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
        },
        { additionalProperties: false },
      ),
      response: { 201: PhoneNumber },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await claimNumber(context.db, workspace.id, context.body.e164, context.body.name ?? null);
      if (row === undefined) {
        throw new ApiError('number_unavailable', `${context.body.e164} is not in the inventory or is already taken`);
      }
      await numberUpdated(context.db, workspace, row, ['claimed']);
      return { status: 201, body: numberJson(row) };
    },
  });

  defineOperation(app, services, 'listNumbers', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(PhoneNumber) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<NumberRow & { cursor_ts: string }>({
        key: services.keys.cursors,
        list: 'numbers',
        owner: workspace.id,
        query: context.query,
        read: (window) => listNumbers(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(numberJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getNumber', {
    schemas: { params: IdParams, response: { 200: PhoneNumber } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await numberById(context.db, workspace.id, context.params.id);
      return { status: 200, body: numberJson(row) };
    },
  });

  defineOperation(app, services, 'updateNumber', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()])),
          voiceLane: Type.Optional(VoiceLane),
          textingRegistration: Type.Optional(
            Type.Object(
              {
                campaignId: Type.Union([Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }), Type.Null()], {
                  description: 'The texting campaign the number is registered under; null unregisters it',
                }),
              },
              { additionalProperties: false },
            ),
          ),
          emergencyAddress: Type.Optional(Type.Union([EmergencyAddressSchema, Type.Null()])),
          routingPlanId: Type.Optional(Type.Null({ description: 'null unassigns the routing plan' })),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: PhoneNumber },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body } = context;
      const current = await numberById(context.db, workspace.id, context.params.id, true);
      if (body.emergencyAddress) {
        const problems = emergencyAddressProblems(body.emergencyAddress, current.region);
        if (problems.length > 0) {
          throw new ApiError('emergency_address_invalid', `emergencyAddress: ${problems.join('; ')}`, {
            extra: { problems },
          });
        }
      }
      const campaignId: string | null =
        body.textingRegistration === undefined ? current.texting_campaign_id : body.textingRegistration.campaignId;
      const next = {
        name: body.name === undefined ? current.name : body.name,
        voiceLane: body.voiceLane ?? current.voice_lane,
        campaignId,
        textingRegistration: registrationAfter(current, campaignId),
        emergencyAddress: body.emergencyAddress === undefined ? current.emergency_address : body.emergencyAddress,
        routingPlanId: body.routingPlanId === undefined ? current.routing_plan_id : null,
      };
      if (next.voiceLane === 'off' && next.routingPlanId !== null) {
        throw new ApiError(
          'in_use',
          `the number runs routing plan ${next.routingPlanId}; unassign it (routingPlanId: null) to turn voice off`,
        );
      }
      const changes: string[] = [];
      if (next.name !== current.name) changes.push('name');
      if (next.voiceLane !== current.voice_lane) changes.push('voiceLane');
      if (
        next.campaignId !== current.texting_campaign_id ||
        next.textingRegistration !== current.texting_registration
      ) {
        changes.push('textingRegistration');
      }
      if (JSON.stringify(next.emergencyAddress) !== JSON.stringify(current.emergency_address)) {
        changes.push('emergencyAddress');
      }
      if (next.routingPlanId !== current.routing_plan_id) changes.push('routingPlanId');
      if (changes.length === 0) return { status: 200, body: numberJson(current) };
      const row = await updateNumber(context.db, current.id, next);
      await numberUpdated(context.db, workspace, row, changes);
      return { status: 200, body: numberJson(row) };
    },
  });

  defineOperation(app, services, 'releaseNumber', {
    schemas: { params: IdParams, body: NoFields, response: { 200: PhoneNumber } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const current = await numberById(context.db, workspace.id, context.params.id, true);
      if (current.routing_plan_id !== null) {
        throw new ApiError(
          'in_use',
          `the number is assigned to routing plan ${current.routing_plan_id}; unassign it (PATCH routingPlanId: null) first`,
          { extra: { routingPlanIds: [current.routing_plan_id] } },
        );
      }
      // Back to the inventory as it came: nothing of this workspace stays on it.
      const row = await releaseNumber(context.db, current.id);
      await numberUpdated(context.db, workspace, row, ['released']);
      return { status: 200, body: numberJson(row) };
    },
  });
}
