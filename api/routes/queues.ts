/**
 * Operations 34-38: call queues. A queue is a custom resource (`Queue`, written through the ResourceStore in the
 * request's transaction) plus its PostgreSQL record. Deleting a queue that a routing plan uses is refused (409
 * `in_use`). A queue's hold prompt and announcements (docs/contact-center.md) are optional: left out on create they
 * take their defaults, and the resource holds only those that differ from them.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Queryable } from '../../core/database.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { unknownMembers } from '../../core/identity/members.ts';
import {
  createQueue,
  deleteQueue,
  listQueues,
  queueById,
  queueDefaults,
  type QueueRow,
  updateQueue,
} from '../../core/queues/queues.ts';
import { refuseWhenUsed } from '../../core/routing/usage.ts';
import {
  AnnounceExpectedWait,
  AnnounceIntervalSecs,
  AnnouncePosition,
  QueueHoldPrompt,
  QueueMembers,
  QueueName,
  type QueueSpec,
  QueueStrategy,
  WrapUpSecs,
} from '../../core/resources/kinds.ts';
import type { WorkspaceRef } from '../auth.ts';
import { apiResources } from '../resources.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, type HandlerContext, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

// The fields a queue takes are the Queue custom resource's (core/resources/kinds.ts).
const Strategy = QueueStrategy;
const Name = QueueName;
const Members = QueueMembers;
const HoldPrompt = Type.Union([...QueueHoldPrompt.anyOf, Type.Null()], {
  description: 'Played looped to waiting callers: text to speech or an audio file; null: the default hold music',
});
/** The optional settings, as create and update take them. */
const settingsFields = {
  holdPrompt: Type.Optional(HoldPrompt),
  announcePosition: Type.Optional(AnnouncePosition),
  announceExpectedWait: Type.Optional(AnnounceExpectedWait),
  announceIntervalSecs: Type.Optional(AnnounceIntervalSecs),
};

export const Queue = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  name: Type.String(),
  strategy: Strategy,
  wrapUpSecs: Type.Integer(),
  members: Type.Array(Uuid),
  holdPrompt: HoldPrompt,
  announcePosition: Type.Boolean(),
  announceExpectedWait: Type.Boolean(),
  announceIntervalSecs: Type.Integer(),
  createdAt: DateTime,
  updatedAt: DateTime,
});

function queueJson(row: QueueRow) {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    strategy: row.strategy,
    wrapUpSecs: row.wrap_up_secs,
    members: row.member_ids,
    holdPrompt: row.hold_prompt,
    announcePosition: row.announce_position,
    announceExpectedWait: row.announce_expected_wait,
    announceIntervalSecs: row.announce_interval_secs,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The member ids lowercased (UUIDs in any case, as PostgreSQL gives them back), once all are found. */
async function checkMembers(db: Queryable, workspaceId: string, members: string[]): Promise<string[]> {
  const ids = members.map((id) => id.toLowerCase());
  const repeated = ids.find((id, index) => ids.indexOf(id) !== index);
  if (repeated !== undefined) throw new ApiError('invalid_request', `members: ${repeated} is listed twice`);
  const unknown = await unknownMembers(db, workspaceId, ids);
  if (unknown.length > 0) {
    throw new ApiError('invalid_request', `members: not members of this workspace: ${unknown.join(', ')}`);
  }
  return ids;
}

async function writeResource(context: HandlerContext, workspace: WorkspaceRef, row: QueueRow): Promise<void> {
  const spec: QueueSpec = {
    id: row.id,
    applicationId: workspace.applicationId,
    workspaceId: workspace.id,
    name: row.name,
    strategy: row.strategy as QueueSpec['strategy'],
    wrapUpSecs: row.wrap_up_secs,
    members: row.member_ids,
    // Only the settings that differ from their defaults (a queue without any keeps the spec it always had).
    ...(row.hold_prompt === null ? {} : { holdPrompt: row.hold_prompt }),
    ...(row.announce_position === queueDefaults.announcePosition ? {} : { announcePosition: row.announce_position }),
    ...(row.announce_expected_wait === queueDefaults.announceExpectedWait
      ? {}
      : { announceExpectedWait: row.announce_expected_wait }),
    ...(row.announce_interval_secs === queueDefaults.announceIntervalSecs
      ? {}
      : { announceIntervalSecs: row.announce_interval_secs }),
  };
  await apiResources(context).apply('Queue', row.id, spec, {
    applicationId: workspace.applicationId,
    workspaceId: workspace.id,
  });
}

export function queueRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createQueue', {
    schemas: {
      body: Type.Object(
        {
          name: Name,
          strategy: Type.Optional(Strategy),
          wrapUpSecs: Type.Optional(WrapUpSecs),
          members: Type.Optional(Members),
          ...settingsFields,
        },
        { additionalProperties: false },
      ),
      response: { 201: Queue },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body, db } = context;
      const members = await checkMembers(db, workspace.id, body.members ?? []);
      const row = await createQueue(db, workspace.id, {
        name: body.name,
        strategy: body.strategy ?? 'longest_idle',
        wrapUpSecs: body.wrapUpSecs ?? 0,
        memberIds: members,
        holdPrompt: body.holdPrompt ?? null,
        announcePosition: body.announcePosition ?? queueDefaults.announcePosition,
        announceExpectedWait: body.announceExpectedWait ?? queueDefaults.announceExpectedWait,
        announceIntervalSecs: body.announceIntervalSecs ?? queueDefaults.announceIntervalSecs,
      });
      await writeResource(context, workspace, row);
      return { status: 201, body: queueJson(row) };
    },
  });

  defineOperation(app, services, 'listQueues', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(Queue) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<QueueRow>({
        key: services.keys.cursors,
        list: 'queues',
        owner: workspace.id,
        query: context.query,
        read: (window) => listQueues(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(queueJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getQueue', {
    schemas: { params: IdParams, response: { 200: Queue } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await queueById(context.db, workspace.id, context.params.id);
      return { status: 200, body: queueJson(row) };
    },
  });

  defineOperation(app, services, 'updateQueue', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Name),
          strategy: Type.Optional(Strategy),
          wrapUpSecs: Type.Optional(WrapUpSecs),
          members: Type.Optional(Members),
          ...settingsFields,
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: Queue },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body, db } = context;
      const members = body.members === undefined ? null : await checkMembers(db, workspace.id, body.members);
      const row = await updateQueue(db, workspace.id, context.params.id, {
        name: body.name ?? null,
        strategy: body.strategy ?? null,
        wrapUpSecs: body.wrapUpSecs ?? null,
        memberIds: members,
        holdPrompt: body.holdPrompt,
        announcePosition: body.announcePosition ?? null,
        announceExpectedWait: body.announceExpectedWait ?? null,
        announceIntervalSecs: body.announceIntervalSecs ?? null,
      });
      if (row === undefined) throw notFound('queue');
      await writeResource(context, workspace, row);
      return { status: 200, body: queueJson(row) };
    },
  });

  defineOperation(app, services, 'deleteQueue', {
    schemas: { params: IdParams, body: NoFields, response: { 200: Queue } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db } = context;
      // Lock first, then look for users: a save or publish holding it share-locked has committed by now.
      const row = await queueById(db, workspace.id, context.params.id, true);
      await refuseWhenUsed(db, 'queue', row.id);
      await deleteQueue(db, row.id);
      await apiResources(context).delete('Queue', row.id);
      return { status: 200, body: queueJson(row) };
    },
  });
}
