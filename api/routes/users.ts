/** Operations 11-14: application users, known by the application's own id (`externalUserId`). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError, notFound } from '../../core/errors.ts';
import { e164Pattern } from '../../core/ids.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

export const User = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  externalUserId: Type.String(),
  displayName: Type.String(),
  cell: Type.Union([Type.String(), Type.Null()], { description: 'E.164 cell number' }),
  createdAt: DateTime,
  removedAt: Type.Union([DateTime, Type.Null()]),
});

interface UserRow {
  id: string;
  workspace_id: string;
  external_user_id: string;
  display_name: string;
  cell: string | null;
  created_at: Date;
  removed_at: Date | null;
  cursor_ts: string;
}

const columns =
  'id, workspace_id, external_user_id, display_name, cell, created_at, removed_at, created_at::text AS cursor_ts';

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
      const result = await db.query<UserRow>(
        `INSERT INTO app_users (workspace_id, external_user_id, display_name, cell) VALUES ($1, $2, $3, $4)
         ON CONFLICT (workspace_id, external_user_id) WHERE removed_at IS NULL DO NOTHING RETURNING ${columns}`,
        [workspace.id, body.externalUserId, body.displayName, body.cell ?? null],
      );
      const row = result.rows[0];
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
        db: context.db,
        key: services.keys.cursors,
        list: 'users',
        owner: workspace.id,
        select: `SELECT ${columns} FROM app_users`,
        where: 'workspace_id = $1 AND removed_at IS NULL',
        params: [workspace.id],
        query: context.query,
      });
      return { status: 200, body: { data: page.rows.map(userJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getUser', {
    schemas: { params: IdParams, response: { 200: User } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const result = await context.db.query<UserRow>(
        `SELECT ${columns} FROM app_users WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL`,
        [context.params.id, workspace.id],
      );
      const row = result.rows[0];
      if (row === undefined) throw notFound('user');
      return { status: 200, body: userJson(row) };
    },
  });

  defineOperation(app, services, 'deleteUser', {
    // No fields: the body may be left out or be `{}`, and an unknown field is refused like everywhere else.
    schemas: { params: IdParams, body: Type.Object({}, { additionalProperties: false }), response: { 200: User } },
    optionalBody: true,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      // No new tokens from now on (minting checks the user); tokens already issued live to their expiry.
      const result = await context.db.query<UserRow>(
        `UPDATE app_users SET removed_at = clock_timestamp()
          WHERE id = $1 AND workspace_id = $2 AND removed_at IS NULL RETURNING ${columns}`,
        [context.params.id, workspace.id],
      );
      const row = result.rows[0];
      if (row === undefined) throw notFound('user');
      return { status: 200, body: userJson(row) };
    },
  });
}
