/** Operations 15-16: the workspace's members (the service's own users, created by `switchboard members create`). */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { notFound } from '../../core/errors.ts';
import { listMembers, memberById, type MemberRow, memberJson } from '../../core/identity/members.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

export const Member = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  email: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  scopes: Type.Array(Type.String(), { description: 'The most a member token of this member can carry' }),
  createdAt: DateTime,
});

export function memberRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'listMembers', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(Member) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<MemberRow & { cursor_ts: string }>({
        key: services.keys.cursors,
        list: 'members',
        owner: workspace.id,
        query: context.query,
        read: (window) => listMembers(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(memberJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getMember', {
    schemas: { params: IdParams, response: { 200: Member } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await memberById(context.db, workspace.id, context.params.id);
      if (row === undefined) throw notFound('member');
      return { status: 200, body: memberJson(row) };
    },
  });
}
