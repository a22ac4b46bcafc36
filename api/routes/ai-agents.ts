/**
 * Operations 44-48: AI agents, the voice bots an `ai_answer` step hands callers to. The provider's API key is
 * write-only: stored encrypted (AES-256-GCM, core/sealing.ts) and shown only as `hasApiKey`. Deleting an
 * agent that a routing plan uses is refused (409 `in_use`).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';

import { aiProviders } from '../../core/routing/definition.ts';
import { refuseWhenUsed } from '../../core/routing/usage.ts';
import { sealSecret } from '../../core/sealing.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { workspaceRow } from '../workspace-rows.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, Uuid } from '../schemas.ts';

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

interface AgentRow {
  id: string;
  workspace_id: string;
  name: string;
  provider: string;
  connection: Record<string, unknown>;
  api_key: string | null;
  minute_cap: number | null;
  seconds_used: string;
  created_at: Date;
  updated_at: Date;
  cursor_ts: string;
}

const columns = `id, workspace_id, name, provider, connection, api_key, minute_cap, seconds_used, created_at, updated_at,
  created_at::text AS cursor_ts`;

const agentTable = { table: 'ai_agents', columns, name: 'AI agent' };

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
      const result = await context.db.query<AgentRow>(
        `INSERT INTO ai_agents (workspace_id, name, provider, connection, api_key, minute_cap)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${columns}`,
        [
          workspace.id,
          body.name,
          body.provider,
          JSON.stringify(body.connection),
          seal(body.apiKey) ?? null,
          body.minuteCap ?? null,
        ],
      );
      return { status: 201, body: agentJson(result.rows[0] as AgentRow) };
    },
  });

  defineOperation(app, services, 'listAiAgents', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(AiAgent) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<AgentRow>({
        db: context.db,
        key: services.keys.cursors,
        list: 'ai-agents',
        owner: workspace.id,
        select: `SELECT ${columns} FROM ai_agents`,
        where: 'workspace_id = $1',
        params: [workspace.id],
        query: context.query,
      });
      return { status: 200, body: { data: page.rows.map(agentJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'getAiAgent', {
    schemas: { params: IdParams, response: { 200: AiAgent } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await workspaceRow<AgentRow>(context.db, agentTable, context.params.id as string, workspace.id);
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
      const current = await workspaceRow<AgentRow>(db, agentTable, context.params.id as string, workspace.id, true);
      // A plan's ai_answer step names the provider too: changing it under a plan that uses the agent would break it.
      if (body.provider !== undefined && body.provider !== current.provider) {
        await refuseWhenUsed(db, 'AI agent', current.id);
      }
      const result = await db.query<AgentRow>(
        `UPDATE ai_agents SET name = $2, provider = $3, connection = $4, api_key = $5, minute_cap = $6,
                updated_at = clock_timestamp()
          WHERE id = $1 RETURNING ${columns}`,
        [
          current.id,
          body.name ?? current.name,
          body.provider ?? current.provider,
          JSON.stringify(body.connection ?? current.connection),
          body.apiKey === undefined ? current.api_key : seal(body.apiKey),
          body.minuteCap === undefined ? current.minute_cap : body.minuteCap,
        ],
      );
      return { status: 200, body: agentJson(result.rows[0] as AgentRow) };
    },
  });

  defineOperation(app, services, 'deleteAiAgent', {
    schemas: { params: IdParams, body: Type.Object({}, { additionalProperties: false }), response: { 200: AiAgent } },
    optionalBody: true,
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db } = context;
      const row = await workspaceRow<AgentRow>(db, agentTable, context.params.id as string, workspace.id, true);
      await refuseWhenUsed(db, 'AI agent', row.id);
      await db.query('DELETE FROM ai_agents WHERE id = $1', [row.id]);
      return { status: 200, body: agentJson(row) };
    },
  });
}
