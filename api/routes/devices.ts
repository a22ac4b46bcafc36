/**
 * Operations 59-62 and 66: devices, their presence and their SIP credentials (docs/phones.md). A user or member
 * token registers its own person's phones and acts on those only (another person's device is 404); an application
 * key lists every device of the workspace and may unregister any. No event is written: section 6 lists none for
 * devices.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import {
  deviceJson,
  deviceKinds,
  type DeviceRow,
  listDevices,
  presenceLeaseSeconds,
  registerDevice,
  renewPresence,
  unregisterDevice,
} from '../../core/devices/devices.ts';
import { issueSipCredentials } from '../../core/devices/sip-credentials.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { lockMember } from '../../core/identity/members.ts';
import { lockLiveUser } from '../../core/identity/users.ts';
import { ownDevice, ownerOf, tokenOwner } from '../device-owners.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

const Kind = Type.Enum([...deviceKinds], { description: 'browser, mobile or sip' });
const Name = Type.String({ minLength: 1, maxLength: 100, description: 'What the person calls this phone' });
const ClientId = Type.String({
  pattern: '^[\\x21-\\x7E]{1,200}$',
  description:
    "The client's own stable id for this phone (1 to 200 visible ASCII characters): " +
    'registering again with it re-registers the same device',
});

export const Device = Type.Object({
  id: Uuid,
  kind: Kind,
  name: Type.Union([Type.String(), Type.Null()]),
  clientId: Type.Union([Type.String(), Type.Null()]),
  memberId: Type.Union([Uuid, Type.Null()], { description: "The member whose phone it is, or null (a user's)" }),
  externalUserId: Type.Union([Type.String(), Type.Null()], {
    description: "The application user whose phone it is, or null (a member's)",
  }),
  presence: Type.Object(
    {
      live: Type.Boolean({ description: 'Rung only while live' }),
      expiresAt: Type.Union([DateTime, Type.Null()]),
    },
    { description: `A lease of ${presenceLeaseSeconds} s, renewed by POST /devices/{id}/presence` },
  ),
  busy: Type.Boolean({ description: 'On a call' }),
  sipUsername: Type.Union([Type.String(), Type.Null()], { description: 'Once SIP credentials were issued' }),
  createdAt: DateTime,
});

const SipCredentials = Type.Object({
  deviceId: Uuid,
  username: Type.String(),
  password: Type.String({ description: 'Shown once; issuing again replaces it' }),
  issuedAt: DateTime,
});

export function deviceRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'registerDevice', {
    schemas: {
      body: Type.Object(
        {
          kind: Kind,
          name: Type.Optional(Type.Union([Name, Type.Null()])),
          clientId: Type.Optional(Type.Union([ClientId, Type.Null()])),
        },
        { additionalProperties: false },
      ),
      response: { 200: Device, 201: Device },
    },
    handler: async (context) => {
      const { db, body } = context;
      const workspace = requireWorkspace(context);
      const owner = tokenOwner(context.principal);
      const present =
        'userId' in owner
          ? await lockLiveUser(db, workspace.id, owner.userId)
          : await lockMember(db, workspace.id, owner.memberId);
      if (!present) throw new ApiError('forbidden', "this token's person is no longer in the workspace");
      const result = await registerDevice(db, workspace.id, owner, {
        kind: body.kind,
        name: body.name ?? null,
        clientId: body.clientId ?? null,
      });
      switch (result.outcome) {
        case 'limit':
          throw new ApiError(
            'limit_exceeded',
            `at most ${result.allowed} devices per person (the workspace's limits.devicesPerUser): unregister one before registering another`,
          );
        case 'busy':
          throw new ApiError(
            'device_busy',
            `device ${result.device.id} (clientId "${body.clientId}") is on a call: ` +
              'it can be registered again once the call ends',
          );
        case 'reregistered':
          return { status: 200, body: deviceJson(result.device) };
        case 'created':
          return { status: 201, body: deviceJson(result.device) };
      }
    },
  });

  defineOperation(app, services, 'listDevices', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(Device) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const owner = ownerOf(context.principal);
      const page = await listPage<DeviceRow>({
        key: services.keys.cursors,
        list: 'devices',
        // A token's pages are its own person's: a cursor of the workspace's list is not one of them, nor the reverse.
        owner:
          owner === undefined ? workspace.id : `${workspace.id}:${'userId' in owner ? owner.userId : owner.memberId}`,
        query: context.query,
        read: (window) => listDevices(context.db, workspace.id, owner, window),
      });
      return { status: 200, body: { data: page.rows.map(deviceJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'unregisterDevice', {
    schemas: { params: IdParams, body: NoFields, response: { 200: Device } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await unregisterDevice(context.db, workspace.id, ownerOf(context.principal), context.params.id);
      if (row === undefined) throw notFound('device');
      return { status: 200, body: deviceJson(row) };
    },
  });

  defineOperation(app, services, 'renewPresence', {
    schemas: { params: IdParams, body: NoFields, response: { 200: Device } },
    optionalBody: true,
    handler: async (context) => {
      const device = await ownDevice(context, true);
      if (device.kind === 'sip') {
        throw new ApiError(
          'invalid_request',
          "a sip device's presence is its REGISTER binding with the engine, not a lease renewed here",
        );
      }
      return { status: 200, body: deviceJson(await renewPresence(context.db, device.id)) };
    },
  });

  defineOperation(app, services, 'issueSipCredentials', {
    schemas: { params: IdParams, body: NoFields, response: { 201: SipCredentials } },
    optionalBody: true,
    handler: async (context) => {
      const device = await ownDevice(context, true);
      if (device.kind !== 'sip') {
        throw new ApiError(
          'invalid_request',
          `device ${device.id} is a ${device.kind} device: SIP credentials are issued to sip devices only`,
        );
      }
      const issued = await issueSipCredentials(context.db, services.keys.sipPasswords, device.id);
      return {
        status: 201,
        body: {
          deviceId: issued.deviceId,
          username: issued.username,
          password: issued.password,
          issuedAt: issued.issuedAt.toISOString(),
        },
      };
    },
  });
}
