/** Operations 11-14: application users, known by the application's own id (`externalUserId`). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError, notFound } from '../../core/errors.ts';
import { createUser, listUsers, removeUser, userById, type UserRow } from '../../core/identity/users.ts';
import { e164Pattern } from '../../core/ids.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

export const User = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  externalUserId: Type.String(),
  displayName: Type.String(),
  cell: Type.Union([Type.String(), Type.Null()], { description: 'E.164 cell number' }),
  createdAt: DateTime,
  removedAt: Type.Union([DateTime, Type.Null()]),
});

function userJson(row: UserRow) {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    externalUserId: row.external_user_id,
    displayName: row.display_name,
    cell: row.cell,
    createdAt: row.created_at.toISOString(),
    removedAt: row.removed_at?.toISOString() ?? null,
  };
}

export function userRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createUser', {
    schemas: {
      body: Type.Object(
        {
          externalUserId: Type.String({ minLength: 1, maxLength: 200 }),
          displayName: Type.String({ minLength: 1, maxLength: 200 }),
          cell: Type.Optional(Type.Union([Type.String({ pattern: e164Pattern }), Type.Null()])),
        },
        { additionalProperties: false },
      ),
      response: { 201: User },
    },
    handler: async (context) => {
      const { db, body } = context;
      const workspace = requireWorkspace(context);
      const row = await createUser(db, workspace.id, {
        externalUserId: body.externalUserId,
        displayName: body.displayName,
        cell: body.cell ?? null,
      });
      if (row === undefined) {
        throw new ApiError('already_exists', `a user with externalUserId "${body.externalUserId}" exists`);
      }
      return { status: 201, body: userJson(row) };
    },
  });

  defineOperation(app, services, 'listUsers', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(User) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<UserRow>({
        key: services.keys.cursors,
        list: 'users',
        owner: workspace.id,
        query: context.query,
        read: (window) => listUsers(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(userJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getUser', {
    schemas: { params: IdParams, response: { 200: User } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await userById(context.db, workspace.id, context.params.id);
      if (row === undefined) throw notFound('user');
      return { status: 200, body: userJson(row) };
    },
  });

  defineOperation(app, services, 'deleteUser', {
    // No fields: the body may be left out or be `{}`, and an unknown field is refused like everywhere else.
    schemas: { params: IdParams, body: NoFields, response: { 200: User } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      // No new tokens from now on (minting checks the user); tokens already issued live to their expiry. Their
      // devices and SIP credentials go in the same transaction (docs/phones.md).
      const row = await removeUser(context.db, workspace.id, context.params.id);
      if (row === undefined) throw notFound('user');
      return { status: 200, body: userJson(row) };
    },
  });
}
