/**
 * Operations 44-48: AI agents, the voice bots an `ai_answer` step hands callers to. The provider's API key is
 * write-only: stored encrypted (AES-256-GCM, core/sealing.ts) and shown only as `hasApiKey`. Deleting an
 * agent that a routing plan uses is refused (409 `in_use`).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';

import {
  aiAgentById,
  type AgentRow,
  createAiAgent,
  deleteAiAgent,
  listAiAgents,
  updateAiAgent,
} from '../../core/routing/ai-agents.ts';
import { aiProviders } from '../../core/routing/definition.ts';
import { refuseWhenUsed } from '../../core/routing/usage.ts';
import { sealSecret } from '../../core/sealing.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

const Provider = Type.Enum([...aiProviders]);
const Name = Type.String({ minLength: 1, maxLength: 200 });

const Connection = Type.Object(
  {
    url: Type.String({
      format: 'uri',
      pattern: '^(https|wss)://',
      maxLength: 2000,
      description: "The provider's realtime endpoint (https or wss)",
    }),
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    voice: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    instructions: Type.Optional(Type.String({ minLength: 1, maxLength: 20000, description: 'The system prompt' })),
  },
  { additionalProperties: false },
);
const ApiKey = Type.String({ minLength: 1, maxLength: 4000, description: "The provider's API key; never shown again" });
const MinuteCap = Type.Union([Type.Integer({ minimum: 1, maximum: 10_000_000 }), Type.Null()], {
  description: 'AI minutes a month before `ai_answer` takes its `onCap` edge; null: no cap',
});

export const AiAgent = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  name: Type.String(),
  provider: Provider,
  connection: Connection,
  hasApiKey: Type.Boolean(),
  minuteCap: Type.Union([Type.Integer(), Type.Null()]),
  minutesUsed: Type.Number({ description: 'AI minutes used so far' }),
  createdAt: DateTime,
  updatedAt: DateTime,
});

function agentJson(row: AgentRow) {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    provider: row.provider,
    connection: row.connection,
    hasApiKey: row.api_key !== null,
    minuteCap: row.minute_cap,
    minutesUsed: Math.round((Number(row.seconds_used) / 60) * 100) / 100,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export function aiAgentRoutes(app: FastifyInstance, services: Services) {
  const seal = (apiKey: string | null | undefined) =>
    apiKey === undefined || apiKey === null ? apiKey : sealSecret(services.keys.providerSecrets, apiKey);

  defineOperation(app, services, 'createAiAgent', {
    schemas: {
      body: Type.Object(
        {
          name: Name,
          provider: Provider,
          connection: Connection,
          apiKey: Type.Optional(ApiKey),
          minuteCap: Type.Optional(MinuteCap),
        },
        { additionalProperties: false },
      ),
      response: { 201: AiAgent },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body } = context;
      const row = await createAiAgent(context.db, workspace.id, {
        name: body.name,
        provider: body.provider,
        connection: body.connection,
        apiKey: seal(body.apiKey) ?? null,
        minuteCap: body.minuteCap ?? null,
      });
      return { status: 201, body: agentJson(row) };
    },
  });

  defineOperation(app, services, 'listAiAgents', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(AiAgent) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<AgentRow>({
        key: services.keys.cursors,
        list: 'ai-agents',
        owner: workspace.id,
        query: context.query,
        read: (window) => listAiAgents(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(agentJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getAiAgent', {
    schemas: { params: IdParams, response: { 200: AiAgent } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await aiAgentById(context.db, workspace.id, context.params.id);
      return { status: 200, body: agentJson(row) };
    },
  });

  defineOperation(app, services, 'updateAiAgent', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Name),
          provider: Type.Optional(Provider),
          connection: Type.Optional(Connection),
          apiKey: Type.Optional(Type.Union([ApiKey, Type.Null()])),
          minuteCap: Type.Optional(MinuteCap),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: AiAgent },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body, db } = context;
      const current = await aiAgentById(db, workspace.id, context.params.id, true);
      // A plan's ai_answer step names the provider too: changing it under a plan that uses the agent would break it.
      if (body.provider !== undefined && body.provider !== current.provider) {
        await refuseWhenUsed(db, 'AI agent', current.id);
      }
      const row = await updateAiAgent(db, current.id, {
        name: body.name ?? current.name,
        provider: body.provider ?? current.provider,
        connection: body.connection ?? current.connection,
        apiKey: body.apiKey === undefined ? current.api_key : (seal(body.apiKey) as string | null),
        minuteCap: body.minuteCap === undefined ? current.minute_cap : body.minuteCap,
      });
      return { status: 200, body: agentJson(row) };
    },
  });

  defineOperation(app, services, 'deleteAiAgent', {
    schemas: { params: IdParams, body: NoFields, response: { 200: AiAgent } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db } = context;
      const row = await aiAgentById(db, workspace.id, context.params.id, true);
      await refuseWhenUsed(db, 'AI agent', row.id);
      await deleteAiAgent(db, row.id);
      return { status: 200, body: agentJson(row) };
    },
  });
}
