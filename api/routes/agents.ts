/**
 * Operations 57-58: agents (docs/contact-center.md, "Agents"). Agents are the workspace's members with their state
 * (core/agents/agent-states.ts). A person sets `available`, `away` or `offline` (core/queues/entries.ts,
 * `changeStateByPerson`) in the request's idempotent transaction, with its `agent.state_changed` event.
 *
 * Who may set whose state: an application key sets any agent's (the application's own supervisor screens and
 * wallboards act through its backend); a member token sets its own member's only (403 `forbidden` for another's),
 * since `calls:*` is every agent's scope and would otherwise let any agent sign their colleagues out.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { Type } from 'typebox';
import { agentOf, agentStates, listAgents, type AgentRow, personStates } from '../../core/agents/agent-states.ts';
import { ApiError, notFound } from '../../core/errors.ts';
import { changeStateByPerson } from '../../core/queues/entries.ts';
import { actorOf } from '../auth.ts';
import { ListQuery, listPage, pageOf } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, Uuid } from '../schemas.ts';

/** The agent as the API shows it (operations 57, 58). */
export function agentJson(row: AgentRow) {
  return {
    memberId: row.member_id,
    email: row.email,
    name: row.name,
    state: row.state,
    reason: row.reason,
    actor: row.actor,
    changedAt: row.changed_at?.toISOString() ?? null,
    reachable: row.reachable,
    missedOffers: row.missed_offers,
    callsAnswered: Number(row.calls_answered),
    wrapUpUntil: row.wrap_up_until?.toISOString() ?? null,
  };
}

export const Agent = Type.Object({
  memberId: Uuid,
  email: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  state: Type.Enum([...agentStates], { description: 'A member with no state recorded is `offline`' }),
  reason: Type.Union([Type.String(), Type.Null()], {
    description: 'Why, as given with the state (or `missed_offers`)',
  }),
  actor: Type.Union([Type.String(), Type.Null()], {
    description: 'Who set the state: `member:<id>`, `application` or `system`; null before any change',
  }),
  changedAt: Type.Union([DateTime, Type.Null()]),
  reachable: Type.Boolean({ description: 'Has a live device (a presence lease, or a SIP registration)' }),
  missedOffers: Type.Integer({ description: 'Offers missed in a row; the third sends the agent `away`' }),
  callsAnswered: Type.Integer({ description: 'Queue calls answered' }),
  wrapUpUntil: Type.Union([DateTime, Type.Null()], { description: 'While `wrap_up`: when it ends' }),
});

const StateParams = Type.Object({ memberId: Uuid }, { additionalProperties: false });

const StateBody = Type.Object(
  {
    state: Type.Enum([...personStates], { description: '`available` needs a live device (409 `agent_unreachable`)' }),
    reason: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()])),
  },
  { additionalProperties: false },
);

export function agentRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'listAgents', {
    schemas: { querystring: ListQuery, response: { 200: pageOf(Agent) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<AgentRow & { id: string }>({
        key: services.keys.cursors,
        list: 'agents',
        owner: workspace.id,
        query: context.query,
        read: (window) => listAgents(context.db, workspace.id, window),
      });
      return { status: 200, body: { data: page.rows.map(agentJson), nextCursor: page.nextCursor } };
    },
  });

  defineOperation(app, services, 'setAgentState', {
    schemas: { params: StateParams, body: StateBody, response: { 200: Agent } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const memberId = context.params.memberId.toLowerCase();
      const { principal } = context;
      if (principal.token?.kind === 'member' && principal.token.subjectId.toLowerCase() !== memberId) {
        throw new ApiError(
          'forbidden',
          "a member token sets its own agent state only; an application key sets any agent's",
        );
      }
      // A mutation's handler runs in its idempotent transaction: a client of the pool.
      const db = context.db as pg.PoolClient;
      const outcome = await changeStateByPerson(db, {
        workspaceId: workspace.id,
        memberId,
        state: context.body.state,
        reason: context.body.reason ?? null,
        actor: actorOf(principal),
      });
      if (outcome.outcome === 'not_found') throw notFound('member');
      if (outcome.outcome === 'unreachable') {
        throw new ApiError(
          'agent_unreachable',
          'the member has no live device (a browser or mobile device with a presence lease, or a registered desk phone)',
        );
      }
      const agent = (await agentOf(db, workspace.id, memberId)) as AgentRow;
      return { status: 200, body: agentJson(agent) };
    },
  });
}
