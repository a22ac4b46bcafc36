/**
 * Operation 81: the live figures of the credential's workspace (docs/contact-center.md, "Live figures"), for
 * wallboards that ask every few seconds. Three statements, each on indexes of live rows only: the queues with their
 * agents by state (core/agents/agent-states.ts) beside the calls not ended by state (core/calls/calls.ts), then those
 * queues' entries, still in them or gone in the last interval (core/queues/figures.ts).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type AgentState, agentCountsByQueue, agentStates } from '../../core/agents/agent-states.ts';
import { liveCallCounts, liveCallStates } from '../../core/calls/calls.ts';
import { entryFigures } from '../../core/queues/figures.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, Uuid } from '../schemas.ts';

/** The interval `answered` and `abandoned` count over: the last 15 minutes. */
export const intervalSecs = 900;
/** The service level's threshold: answered within 20 seconds of entering the queue. */
export const serviceLevelSecs = 20;

const count = (description: string) => Type.Integer({ minimum: 0, description });

const QueueFigures = Type.Object({
  queueId: Uuid,
  name: Type.String(),
  waiting: count('Entries still in the queue: waiting in line, being offered to an agent, or kept as a callback'),
  longestWaitSecs: count('Seconds since the oldest of them entered (0 when none)'),
  agents: Type.Object(
    Object.fromEntries(agentStates.map((state) => [state, count(`Members of the queue who are ${state}`)])),
    { description: 'The queue members by agent state (a member with no state recorded is offline)' },
  ),
  answered: count('Entries connected to an agent in the last intervalSecs'),
  abandoned: count('Entries whose caller hung up in the last intervalSecs'),
  serviceLevel: Type.Union([Type.Number({ minimum: 0, maximum: 1 }), Type.Null()], {
    description:
      'Of the entries answered or abandoned in the last intervalSecs, the share answered within serviceLevelSecs ' +
      'of entering; null when none were',
  }),
});

const RealtimeFigures = Type.Object({
  at: DateTime,
  intervalSecs: Type.Integer({ description: 'The interval of answered, abandoned and serviceLevel: 900 s' }),
  serviceLevelSecs: Type.Integer({ description: 'The service level threshold: 20 s' }),
  queues: Type.Array(QueueFigures, { description: "The workspace's queues, by name" }),
  calls: Type.Object(
    Object.fromEntries(liveCallStates.map((state) => [state, count(`Calls of the workspace now ${state}`)])),
    { additionalProperties: Type.Integer({ minimum: 0 }), description: 'Calls not ended, by state' },
  ),
});

type AgentCounts = Record<AgentState, number>;

export function realtimeRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'getRealtimeMetrics', {
    schemas: { response: { 200: RealtimeFigures } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const at = new Date();
      const [agentRows, callRows] = await Promise.all([
        agentCountsByQueue(context.db, { workspaceId: workspace.id }),
        liveCallCounts(context.db, workspace.id),
      ]);
      const queues = new Map<string, { name: string; agents: AgentCounts }>();
      for (const row of agentRows) {
        let queue = queues.get(row.queue_id);
        if (queue === undefined) {
          const agents = Object.fromEntries(agentStates.map((state) => [state, 0])) as AgentCounts;
          queue = { name: row.name, agents };
          queues.set(row.queue_id, queue);
        }
        if (row.state !== null) queue.agents[row.state] += row.agents;
      }
      const entries = new Map(
        (await entryFigures(context.db, [...queues.keys()], intervalSecs, serviceLevelSecs)).map((row) => [
          row.queue_id,
          row,
        ]),
      );
      const calls: Record<string, number> = Object.fromEntries(liveCallStates.map((state) => [state, 0]));
      for (const row of callRows) calls[row.state] = row.calls;
      return {
        status: 200,
        body: {
          at: at.toISOString(),
          intervalSecs,
          serviceLevelSecs,
          queues: [...queues].map(([queueId, queue]) => {
            const figures = entries.get(queueId);
            const answered = figures?.answered ?? 0;
            const abandoned = figures?.abandoned ?? 0;
            return {
              queueId,
              name: queue.name,
              waiting: figures?.waiting ?? 0,
              longestWaitSecs: figures?.longest_wait_secs ?? 0,
              agents: queue.agents,
              answered,
              abandoned,
              serviceLevel:
                answered + abandoned === 0 ? null : (figures?.answered_in_time ?? 0) / (answered + abandoned),
            };
          }),
          calls,
        },
      };
    },
  });
}
