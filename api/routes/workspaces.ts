/** Operations 6-10: workspaces (one business the application serves) and workspace keys. */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError, notFound } from '../../core/errors.ts';
import { issueKey, keyJson } from '../../core/identity/applications.ts';
import {
  createWorkspace,
  listWorkspaces,
  updateWorkspace,
  workspaceRecord,
  type WorkspaceRow,
} from '../../core/identity/workspaces.ts';
import { defaultHelpReply, helpTextProblem } from '../../core/messages/keywords.ts';
import { workspaceKeyScopes } from '../../core/scopes.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { requireHeldScopes } from '../scope-grants.ts';
import { DateTime, IdParams, IssuedKey, Uuid } from '../schemas.ts';

const Prefix = Type.String({ pattern: '^\\+[0-9]{1,15}$', description: 'An E.164 prefix such as +1 or +4420' });

const DestinationPolicy = Type.Object(
  {
    allowedPrefixes: Type.Array(Prefix, {
      maxItems: 200,
      description: 'Destinations calls may reach; empty means every destination',
    }),
    blockedPrefixes: Type.Array(Prefix, { maxItems: 200, description: 'Refused even when allowed' }),
  },
  { additionalProperties: false, description: 'Where forwards and outbound calls may go; emergency numbers never' },
);

const Limits = Type.Object(
  {
    concurrentCalls: Type.Integer({ minimum: 1, maximum: 100000 }),
    devicesPerUser: Type.Integer({ minimum: 1, maximum: 50 }),
  },
  { additionalProperties: false },
);

const HelpText = Type.String({
  minLength: 1,
  maxLength: 160,
  description: 'What an inbound HELP is answered with: one SMS (160 GSM characters, or 70 when it needs UCS-2)',
});

/** Texting settings (docs/messaging.md, "Receiving"); a null helpText goes back to the default text. */
const TextingSettings = Type.Object(
  { helpText: Type.Optional(Type.Union([HelpText, Type.Null()])) },
  { additionalProperties: false },
);

const defaultPolicy = { allowedPrefixes: [], blockedPrefixes: [] };
const defaultLimits = { concurrentCalls: 50, devicesPerUser: 5 };

export const Workspace = Type.Object({
  id: Uuid,
  externalWorkspaceId: Type.String(),
  name: Type.String(),
  timezone: Type.String({ description: 'IANA time zone' }),
  destinationPolicy: DestinationPolicy,
  limits: Limits,
  texting: Type.Object({ helpText: Type.String({ description: 'The help text in effect (the default unless set)' }) }),
  createdAt: DateTime,
  updatedAt: DateTime,
});

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Timezone = Type.String({ minLength: 1, maxLength: 100, description: 'IANA time zone, e.g. Europe/Paris' });

function workspaceJson(row: WorkspaceRow) {
  return {
    id: row.id,
    externalWorkspaceId: row.external_workspace_id,
    name: row.name,
    timezone: row.timezone,
    destinationPolicy: row.destination_policy,
    limits: row.limits,
    texting: { helpText: row.texting.helpText ?? defaultHelpReply },
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The texting settings given, checked (a help text must fit one SMS part), or a 400 naming the field. */
function checkedTexting(texting: { helpText?: string | null } | undefined): { helpText?: string | null } {
  if (texting === undefined) return {};
  const helpText = texting.helpText;
  if (typeof helpText === 'string') {
    const problem = helpTextProblem(helpText);
    if (problem !== undefined) throw new ApiError('invalid_request', `body.texting.helpText ${problem}`);
  }
  return helpText === undefined ? {} : { helpText };
}

/** The canonical IANA name of a time zone, or a 400 naming the field. */
export function canonicalTimezone(field: string, value: string): string {
  let canonical: string | undefined;
  try {
    canonical = new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
  } catch {
    canonical = undefined;
  }
  // Newer runtimes also take UTC offsets such as +01:00, which are not IANA names.
  if (canonical === undefined || /^[+-]/.test(canonical)) {
    throw new ApiError('invalid_request', `${field} must be an IANA time zone such as Europe/Paris, got "${value}"`);
  }
  return canonical;
}

export function workspaceRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createWorkspace', {
    schemas: {
      body: Type.Object(
        {
          externalWorkspaceId: Type.String({ minLength: 1, maxLength: 200 }),
          name: Name,
          timezone: Timezone,
          destinationPolicy: Type.Optional(DestinationPolicy),
          limits: Type.Optional(Limits),
          texting: Type.Optional(TextingSettings),
        },
        { additionalProperties: false },
      ),
      response: { 201: Workspace },
    },
    handler: async ({ db, body, principal }) => {
      const timezone = canonicalTimezone('body.timezone', body.timezone);
      const texting = checkedTexting(body.texting);
      const row = await createWorkspace(db, principal.applicationId as string, {
        externalWorkspaceId: body.externalWorkspaceId,
        name: body.name,
        timezone,
        destinationPolicy: body.destinationPolicy ?? defaultPolicy,
        limits: body.limits ?? defaultLimits,
        texting,
      });
      if (row === undefined) {
        throw new ApiError(
          'already_exists',
          `a workspace with externalWorkspaceId "${body.externalWorkspaceId}" exists`,
        );
      }
      return { status: 201, body: workspaceJson(row) };
    },
  });

  defineOperation(app, services, 'listWorkspaces', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(Workspace) }) } },
    handler: async ({ db, query, principal }) => {
      const page = await listPage<WorkspaceRow>({
        key: services.keys.cursors,
        list: 'workspaces',
        owner: principal.applicationId as string,
        query,
        read: (window) => listWorkspaces(db, principal.applicationId as string, window),
      });
      return { status: 200, body: { data: page.rows.map(workspaceJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getWorkspace', {
    schemas: { params: IdParams, response: { 200: Workspace } },
    handler: async ({ db, workspace }) => {
      const row = await workspaceRecord(db, workspace?.id);
      if (row === undefined) throw notFound('workspace');
      return { status: 200, body: workspaceJson(row) };
    },
  });

  defineOperation(app, services, 'updateWorkspace', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Name),
          timezone: Type.Optional(Timezone),
          destinationPolicy: Type.Optional(Type.Partial(DestinationPolicy)),
          limits: Type.Optional(Type.Partial(Limits)),
          texting: Type.Optional(TextingSettings),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: Workspace },
    },
    handler: async ({ db, body, workspace }) => {
      const timezone = body.timezone === undefined ? null : canonicalTimezone('body.timezone', body.timezone);
      const texting = checkedTexting(body.texting);
      const row = await updateWorkspace(db, workspace?.id, {
        name: body.name ?? null,
        timezone,
        destinationPolicy: body.destinationPolicy ?? {},
        limits: body.limits ?? {},
        texting,
      });
      if (row === undefined) throw notFound('workspace');
      return { status: 200, body: workspaceJson(row) };
    },
  });

  defineOperation(app, services, 'createWorkspaceKey', {
    optionalBody: true,
    schemas: {
      params: IdParams,
      body: Type.Object({ name: Type.Optional(Name) }, { additionalProperties: false }),
      response: { 201: IssuedKey },
    },
    handler: async (context) => {
      const { db, body, principal } = context;
      const ref = requireWorkspace(context);
      requireHeldScopes(workspaceKeyScopes, principal.scopes, 'issuing a workspace key');
      const issued = await issueKey(db, {
        applicationId: ref.applicationId,
        workspaceId: ref.id,
        name: body.name,
        scopes: workspaceKeyScopes,
      });
      return { status: 201, body: { key: keyJson(issued.row), apiKey: issued.secret } };
    },
  });
}
