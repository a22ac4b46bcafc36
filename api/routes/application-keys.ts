/** Operations 3-5: application keys, rotated with overlap (the new key works before the old one is revoked). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { announce, credentialChannel } from '../../core/change-notices.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { issueKey, type KeyRow, keyJson, keyScopes, listKeys, revokeKey } from '../../core/identity/applications.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, type Services } from '../route.ts';
import { grantableScopes, requireHeldScopes } from '../scope-grants.ts';
import { ApplicationKey, IdParams, IssuedKey, ScopeList } from '../schemas.ts';

const maxOverlapDays = 30;

export function applicationKeyRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createApplicationKey', {
    optionalBody: true,
    schemas: {
      body: Type.Object(
        { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), scopes: Type.Optional(ScopeList) },
        { additionalProperties: false },
      ),
      response: { 201: IssuedKey },
    },
    handler: async ({ db, body, principal }) => {
      const scopes = grantableScopes(body.scopes, principal.scopes);
      const issued = await issueKey(db, { applicationId: principal.applicationId as string, name: body.name, scopes });
      return { status: 201, body: { key: keyJson(issued.row), apiKey: issued.secret } };
    },
  });

  defineOperation(app, services, 'listApplicationKeys', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(ApplicationKey) }) } },
    handler: async ({ db, query, principal }) => {
      const page = await listPage<KeyRow & { cursor_ts: string }>({
        key: services.keys.cursors,
        list: 'application-keys',
        owner: principal.applicationId as string,
        query,
        read: (window) => listKeys(db, principal.applicationId as string, window),
      });
      return { status: 200, body: { data: page.rows.map(keyJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'revokeApplicationKey', {
    optionalBody: true,
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          revokeAt: Type.Optional(
            Type.String({
              format: 'date-time',
              description: `When the key stops working (default now; at most ${maxOverlapDays} days ahead)`,
            }),
          ),
        },
        { additionalProperties: false },
      ),
      response: { 200: ApplicationKey },
    },
    handler: async ({ db, body, params, principal, afterCommit }) => {
      const at = body.revokeAt === undefined ? new Date() : new Date(body.revokeAt);
      if (at.getTime() > Date.now() + maxOverlapDays * 86_400_000) {
        throw new ApiError('invalid_request', `body.revokeAt must be within ${maxOverlapDays} days`);
      }
      // A key's scopes never change, so the check and the update need no lock between them.
      const scopes = await keyScopes(db, principal.applicationId as string, params.id);
      if (scopes === undefined) throw notFound('key');
      // Revoking takes a key's power away from whoever uses it: only a credential holding all of it may do that.
      requireHeldScopes(scopes, principal.scopes, 'revoking this key');
      const row = await revokeKey(db, principal.applicationId as string, params.id, at);
      // Every process drops the key from its cache when this commits: this one before it answers, the others on
      // the change notice PostgreSQL delivers at commit.
      await announce(db, credentialChannel, row.id);
      afterCommit(() => services.keyRevoked?.(row.id));
      return { status: 200, body: keyJson(row) };
    },
  });
}
