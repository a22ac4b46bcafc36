/**
 * Operations 25-33: routing plans. A plan is a `RoutingPlan` custom resource (ResourceStore, in the request's
 * transaction) plus its PostgreSQL records: the plan row and its immutable versions. One validator
 * (core/routing/validate.ts) serves validate, save and publish; a save or publish share-locks the queues, schedules
 * and AI agents it names (core/routing/facts.ts), so a concurrent delete of one of them is refused or makes the save
 * fail, never leaving a plan pointing at nothing. The plan row is locked for every change, so concurrent saves get
 * distinct version numbers. The limits (core/routing/limits.ts): a definition over its size is 413, a plan past its
 * versions or a workspace past its plans 409 `limit_exceeded`, counted under those locks.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { Queryable } from '../../core/database.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { assignNumber, lockWorkspaceNumber, numberUpdated } from '../../core/numbers/numbers.ts';
import type { ConditionInput } from '../../core/resources/conditions.ts';
import { RoutingPlanDefinition } from '../../core/routing/definition.ts';
import { workspaceFacts } from '../../core/routing/facts.ts';
import { definitionSizeProblem, plansLimitProblem, versionsLimitProblem } from '../../core/routing/limits.ts';
import {
  archivePlan,
  addVersion,
  createPlan,
  listPlans,
  listVersions,
  lockPlan,
  lockWorkspacePlans,
  planVersion,
  type PlanRow,
  publishVersion,
  readPlan,
  renamePlan,
} from '../../core/routing/plans.ts';
import { describeIssues, type PlanIssue, referencesOf, validateDefinition } from '../../core/routing/validate.ts';
import type { WorkspaceRef } from '../auth.ts';
import { apiResources } from '../resources.ts';
import { ListQuery, listPage, openCursor, sealCursor } from '../pagination.ts';
import { defineOperation, type HandlerContext, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

const Definition = Type.Unknown({
  description:
    'A routing plan definition: `{ entry, steps, recording? }` (docs/routing-plans.md). Problems are reported as `issues`, never as a 400.',
});
const Name = Type.String({ minLength: 1, maxLength: 200 });

const Issue = Type.Object({
  stepId: Type.Union([Type.String(), Type.Null()]),
  code: Type.String(),
  message: Type.String(),
  severity: Type.String({ description: '`error` makes the definition invalid; `warning` (an unreachable step) not' }),
});

const Assignment = Type.Object({
  routingPlanId: Uuid,
  phoneNumberId: Uuid,
  e164: Type.String(),
  assignedAt: DateTime,
});

export const RoutingPlan = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  name: Type.String(),
  state: Type.String({ description: '`published` once a version is published, else `draft`' }),
  newestVersion: Type.Integer(),
  publishedVersion: Type.Union([Type.Integer(), Type.Null()]),
  publishedAt: Type.Union([DateTime, Type.Null()]),
  definition: RoutingPlanDefinition,
  assignments: Type.Array(Type.Omit(Assignment, ['routingPlanId'])),
  createdAt: DateTime,
  updatedAt: DateTime,
});

const Version = Type.Object({
  version: Type.Integer(),
  state: Type.String({ description: '`published` for the version new calls run, else `draft`' }),
  definition: RoutingPlanDefinition,
  createdAt: DateTime,
});

function planJson(row: PlanRow) {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    state: row.published_version === null ? 'draft' : 'published',
    newestVersion: row.newest_version,
    publishedVersion: row.published_version,
    publishedAt: row.published_at?.toISOString() ?? null,
    definition: row.definition,
    assignments: row.assignments,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** 413 `payload_too_large` for a definition over the size a plan may store (core/routing/limits.ts). */
function checkSize(definition: unknown): void {
  const problem = definitionSizeProblem(definition);
  if (problem !== undefined) throw new ApiError('payload_too_large', problem);
}

/** 409 `limit_exceeded` for a limit on plans or versions (the limit's message). */
function checkLimit(problem: string | undefined): void {
  if (problem !== undefined) throw new ApiError('limit_exceeded', problem);
}

/** Validates against the workspace with the things it names share-locked; 422 `invalid_plan` when invalid. */
async function checkForSave(db: Queryable, workspaceId: string, definition: unknown) {
  const references = referencesOf(definition);
  const facts = await workspaceFacts(db, workspaceId, references, true);
  const result = validateDefinition(definition, facts);
  if (!result.valid) throw invalidPlan(result.issues);
  return references;
}

function invalidPlan(issues: PlanIssue[]): ApiError {
  return new ApiError('invalid_plan', describeIssues(issues), { extra: { issues } });
}

/** Writes the plan's custom resource (spec as the API holds it) and its status. */
async function writeResource(context: HandlerContext, workspace: WorkspaceRef, planId: string): Promise<PlanRow> {
  const plan = await readPlan(context.db, planId, workspace.id);
  const condition = (type: string, ok: boolean, reason: string, message: string): ConditionInput => ({
    type,
    status: ok ? 'True' : 'False',
    reason,
    message,
  });
  await apiResources(context).apply(
    'RoutingPlan',
    plan.id,
    {
      id: plan.id,
      applicationId: workspace.applicationId,
      workspaceId: workspace.id,
      name: plan.name,
      definition: plan.definition,
      publishedVersion: plan.published_version,
    },
    { applicationId: workspace.applicationId, workspaceId: workspace.id },
    {
      fields: { newestVersion: plan.newest_version, publishedVersion: plan.published_version, issues: [] },
      conditions: [
        condition('Valid', true, 'Validated', 'the newest definition is valid'),
        plan.published_version === null
          ? condition('Published', false, 'Draft', 'no version is published')
          : condition('Published', true, 'Published', `version ${plan.published_version} is published`),
        // As the operator says of the same records: the API saves only valid definitions, so they match the resource.
        condition('Ready', true, 'Reconciled', 'the records match the resource'),
      ],
    },
  );
  return plan;
}

export function routingPlanRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'validateRoutingPlan', {
    schemas: {
      body: Type.Object({ definition: Definition }, { additionalProperties: false, required: ['definition'] }),
      response: { 200: Type.Object({ valid: Type.Boolean(), issues: Type.Array(Issue) }) },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const definition: unknown = context.body.definition;
      const facts = await workspaceFacts(context.db, workspace.id, referencesOf(definition), false);
      return { status: 200, body: validateDefinition(definition, facts) };
    },
  });

  defineOperation(app, services, 'createRoutingPlan', {
    schemas: {
      body: Type.Object(
        {
          name: Name,
          definition: Definition,
          publish: Type.Optional(Type.Boolean({ description: 'true: the first version is the one new calls run' })),
        },
        { additionalProperties: false, required: ['name', 'definition'] },
      ),
      response: { 201: RoutingPlan },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db, body } = context;
      checkSize(body.definition);
      const references = await checkForSave(db, workspace.id, body.definition);
      checkLimit(plansLimitProblem(await lockWorkspacePlans(db, workspace.id)));
      const publish = body.publish === true;
      const planId = await createPlan(db, workspace.id, body.name, { publish });
      await addVersion(db, planId, body.definition, references);
      const plan = await writeResource(context, workspace, planId);
      return { status: 201, body: planJson(plan) };
    },
  });

  defineOperation(app, services, 'listRoutingPlans', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(RoutingPlan) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<PlanRow>({
        key: services.keys.cursors,
        list: 'routing-plans',
        owner: workspace.id,
        query: context.query,
        read: (window) => listPlans(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(planJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getRoutingPlan', {
    schemas: { params: IdParams, response: { 200: RoutingPlan } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      return { status: 200, body: planJson(await readPlan(context.db, context.params.id, workspace.id)) };
    },
  });

  defineOperation(app, services, 'updateRoutingPlan', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Name),
          definition: Type.Optional(Type.Unknown({ description: 'Saves a new immutable version' })),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: RoutingPlan },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db, body } = context;
      const planId = context.params.id;
      const { newestVersion } = await lockPlan(db, planId, workspace.id);
      if (body.definition !== undefined) {
        checkSize(body.definition);
        const references = await checkForSave(db, workspace.id, body.definition);
        checkLimit(versionsLimitProblem(newestVersion));
        await addVersion(db, planId, body.definition, references);
      }
      if (body.name !== undefined) await renamePlan(db, planId, body.name);
      const plan = await writeResource(context, workspace, planId);
      return { status: 200, body: planJson(plan) };
    },
  });

  defineOperation(app, services, 'publishRoutingPlan', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          // Versions are PostgreSQL integers: a larger number is no version rather than an error of the database.
          version: Type.Optional(
            Type.Integer({ minimum: 1, maximum: 2147483647, description: 'The version to publish; default newest' }),
          ),
        },
        { additionalProperties: false },
      ),
      response: { 200: RoutingPlan },
    },
    optionalBody: true,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db, body } = context;
      const planId = context.params.id;
      await lockPlan(db, planId, workspace.id);
      const version = await planVersion(db, planId, body.version ?? null);
      if (version === undefined) throw notFound(`version ${body.version} of this routing plan`);
      // Re-checked now: a queue, schedule, agent, member or policy it relies on may have changed since the save.
      await checkForSave(db, workspace.id, version.definition);
      await publishVersion(db, planId, version.version);
      const plan = await writeResource(context, workspace, planId);
      return { status: 200, body: planJson(plan) };
    },
  });

  defineOperation(app, services, 'assignRoutingPlan', {
    schemas: {
      params: IdParams,
      body: Type.Object({ phoneNumberId: Uuid }, { additionalProperties: false }),
      response: { 200: Assignment },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db, body } = context;
      const planId = context.params.id;
      await lockPlan(db, planId, workspace.id);
      const plan = await readPlan(db, planId, workspace.id);
      if (plan.published_version === null) {
        throw new ApiError('not_published', 'publish a version of this routing plan before assigning it');
      }
      const number = await lockWorkspaceNumber(db, workspace.id, body.phoneNumberId);
      if (number === undefined) throw notFound('number');
      if (number.voice_lane !== 'service') {
        throw new ApiError(
          'voice_lane_off',
          `${number.e164} is not on the service's voice lane (voiceLane is "${number.voice_lane}"); PATCH the number with voiceLane "service" first`,
        );
      }
      let row = number;
      if (number.routing_plan_id !== planId) {
        row = await assignNumber(db, number.id, planId);
        await numberUpdated(db, workspace, row, ['routingPlanId']);
      }
      return {
        status: 200,
        body: {
          routingPlanId: planId,
          phoneNumberId: row.id,
          e164: row.e164,
          assignedAt: (row.assigned_at as Date).toISOString(),
        },
      };
    },
  });

  defineOperation(app, services, 'listRoutingPlanVersions', {
    schemas: {
      params: IdParams,
      querystring: ListQuery,
      response: {
        200: Type.Object({ data: Type.Array(Version), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
      },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const planId = context.params.id;
      const plan = await readPlan(context.db, planId, workspace.id);
      let before = plan.newest_version + 1;
      if (context.query.cursor !== undefined) {
        const position = openCursor(services.keys.cursors, context.query.cursor, 3);
        if (position === undefined || position[0] !== 'plan-versions' || position[1] !== planId) {
          throw new ApiError('invalid_cursor', 'cursor is not one this list handed out');
        }
        before = Number(position[2]);
      }
      const fetched = await listVersions(context.db, planId, before, context.query.limit);
      const rows = fetched.slice(0, context.query.limit);
      const last = rows[rows.length - 1];
      return {
        status: 200,
        body: {
          data: rows.map((row) => ({
            version: row.version,
            state: row.version === plan.published_version ? 'published' : 'draft',
            definition: row.definition,
            createdAt: row.created_at.toISOString(),
          })),
          nextCursor:
            fetched.length > context.query.limit && last !== undefined
              ? sealCursor(services.keys.cursors, ['plan-versions', planId, String(last.version)])
              : null,
        },
      };
    },
  });

  defineOperation(app, services, 'archiveRoutingPlan', {
    schemas: { params: IdParams, body: NoFields, response: { 200: RoutingPlan } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db } = context;
      const planId = context.params.id;
      await lockPlan(db, planId, workspace.id);
      const plan = await readPlan(db, planId, workspace.id);
      if (plan.assignments.length > 0) {
        throw new ApiError(
          'in_use',
          `the routing plan runs the calls of ${plan.assignments.map((a) => a.e164).join(', ')}; assign those numbers another plan or unassign them first`,
          { extra: { phoneNumberIds: plan.assignments.map((a) => a.phoneNumberId) } },
        );
      }
      await archivePlan(db, planId);
      await apiResources(context).delete('RoutingPlan', planId);
      return { status: 200, body: planJson(plan) };
    },
  });
}
