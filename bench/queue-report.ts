/**
 * What the queue-agents bench (bench/queue-agents.ts) reads back once its calls ended, and prints: each round's
 * offers (the INVITEs the phones received, matched to queue entries by Call-ID, timed from their agent becoming
 * free), the calls per agent, the checks that no entry was offered twice and no agent had two calls at once, and the
 * engine's CPU per waiting caller.
 */
import type pg from 'pg';
import { percent, percentile } from './engine-process.ts';
import type { QueueCenter } from './queue-agents-setup.ts';
import {
  type AgentChange,
  type ArrivedOffer,
  doubleBooked,
  type Fairness,
  fairness,
  type FreedBy,
  type OfferTimings,
  offerTimings,
  type PhoneMessage,
} from './queue-figures.ts';
import type { SippStats } from './sipp-runs.ts';

/** CPU shares of one core over a window. */
export interface CpuShares {
  engine: number;
  phones: number;
  callers: number;
  host: number;
}

export interface Round extends OfferTimings {
  name: string;
  /** INVITEs the phones received in the round, and those with no device leg (not answered, or not recorded). */
  invites: number;
  withoutLeg: number;
  fairness: Fairness;
  /** CPU while the round's callers all waited (the full round only). */
  waiting: CpuShares | undefined;
  /** The engine's CPU share from the sign-in to the last call's end. */
  busyShare: number;
  stats: SippStats;
}

/** The round's offers (INVITEs between `since` and `until`), timed. */
export async function readRound(
  pool: pg.Pool,
  input: {
    name: string;
    center: QueueCenter;
    messages: readonly PhoneMessage[];
    since: Date;
    until: Date;
    waiting: CpuShares | undefined;
    busyShare: number;
    stats: SippStats;
  },
): Promise<Round> {
  const { center } = input;
  const legs = await pool.query<{ sip_call_id: string; enqueued_at: Date }>(
    `SELECT l.sip_call_id, e.enqueued_at FROM call_legs l JOIN queue_entries e ON e.call_id = l.call_id
      WHERE e.queue_id = $1 AND l.role = 'device' AND e.enqueued_at BETWEEN $2 AND $3`,
    [center.queueId, input.since, input.until],
  );
  const enqueued = new Map(legs.rows.map((row) => [row.sip_call_id, row.enqueued_at.getTime()]));
  const inRound = (message: PhoneMessage) => message.at >= input.since.getTime() && message.at <= input.until.getTime();
  const invites = input.messages.filter((message) => message.kind === 'invite' && inRound(message));
  const offers: ArrivedOffer[] = [];
  for (const invite of invites) {
    const enqueuedAt = enqueued.get(invite.callId);
    if (enqueuedAt !== undefined) offers.push({ agent: invite.user, at: invite.at, enqueuedAt });
  }
  const timings = offerTimings(
    offers,
    await agentChanges(pool, center),
    input.messages.filter((message) => message.kind === 'bye'),
  );
  const perAgent = new Map<string, number>();
  for (const offer of offers) perAgent.set(offer.agent, (perAgent.get(offer.agent) ?? 0) + 1);
  const rungAgents = center.agents.filter((agent) => perAgent.has(agent.username) || input.name === 'full');
  return {
    ...timings,
    name: input.name,
    invites: invites.length,
    withoutLeg: invites.length - offers.length,
    fairness: fairness(rungAgents.map((agent) => perAgent.get(agent.username) ?? 0)),
    waiting: input.waiting,
    busyShare: input.busyShare,
    stats: input.stats,
  };
}

/** Every `agent.state_changed` of the workspace, by the agent's SIP username. */
async function agentChanges(pool: pg.Pool, center: QueueCenter): Promise<AgentChange[]> {
  const usernames = new Map(center.agents.map((agent) => [agent.memberId, agent.username]));
  const events = await pool.query<{ payload: string }>(
    "SELECT payload FROM events WHERE workspace_id = $1 AND type = 'agent.state_changed'",
    [center.workspaceId],
  );
  return events.rows.map((row) => {
    const { agent } = JSON.parse(row.payload) as {
      agent: { memberId: string; state: string; previousState: string | null; changedAt: string };
    };
    return {
      agent: usernames.get(agent.memberId) ?? agent.memberId,
      state: agent.state,
      previous: agent.previousState,
      at: Date.parse(agent.changedAt),
    };
  });
}

export interface Checks {
  ok: boolean;
}

const ms = (value: number | undefined) => (value === undefined || Number.isNaN(value) ? '-' : value.toFixed(0));

interface Latency {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

function latency(values: readonly number[]): Latency {
  return {
    n: values.length,
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: values.length === 0 ? Number.NaN : Math.max(...values),
  };
}

const line = (label: string, figures: Latency) =>
  `  ${label.padEnd(44)} n ${String(figures.n).padStart(4)}  p50 ${ms(figures.p50).padStart(5)} ms  p99 ` +
  `${ms(figures.p99).padStart(5)} ms  max ${ms(figures.max).padStart(5)} ms\n`;

/** The latencies of a round's offers, by how the agent became free. */
function latencies(round: Round, freedBy: FreedBy) {
  const timings = round.timings.filter((timing) => timing.freedBy === freedBy);
  const defined = (values: (number | undefined)[]) => values.filter((value): value is number => value !== undefined);
  return {
    fromAvailable: latency(timings.map((timing) => timing.fromAvailableMs)),
    toOffered: latency(defined(timings.map((timing) => timing.toOfferedMs))),
    offeredToInvite: latency(
      defined(
        timings.map((timing) =>
          timing.toOfferedMs === undefined ? undefined : timing.fromAvailableMs - timing.toOfferedMs,
        ),
      ),
    ),
    fromBye: latency(defined(timings.map((timing) => timing.fromByeMs))),
    byeToAvailable: latency(
      defined(
        timings.map((timing) =>
          timing.fromByeMs === undefined ? undefined : timing.fromByeMs - timing.fromAvailableMs,
        ),
      ),
    ),
  };
}

/** The checks on the database and the phones' traces, and the figures, printed; `ok` unless a check failed. */
export async function printReport(
  pool: pg.Pool,
  input: {
    center: QueueCenter;
    messages: readonly PhoneMessage[];
    rounds: readonly Round[];
    idle: CpuShares;
    callers: number;
    targetMs: number;
    /** The largest max - min of calls per agent that is fair (none: not judged). */
    fairnessBound: number | undefined;
  },
): Promise<Checks> {
  const { center } = input;
  const out = (text: string) => process.stdout.write(text);
  const byState = await pool.query<{ state: string; count: string }>(
    'SELECT state, count(*) FROM queue_entries WHERE queue_id = $1 GROUP BY 1 ORDER BY 1',
    [center.queueId],
  );
  const count = async (sql: string, values: unknown[]) =>
    Number((await pool.query<{ count: string }>(sql, values)).rows[0]?.count ?? 0);
  const rungTwice = await count(
    `SELECT count(*) FROM (SELECT stream_key FROM events WHERE workspace_id = $1 AND type = 'call.ringing'
       GROUP BY stream_key HAVING count(*) > 1) AS twice`,
    [center.workspaceId],
  );
  const twoLegs = await count(
    `SELECT count(*) FROM (SELECT l.call_id FROM call_legs l JOIN queue_entries e ON e.call_id = l.call_id
       WHERE e.queue_id = $1 AND l.role = 'device' GROUP BY l.call_id HAVING count(*) > 1) AS two`,
    [center.queueId],
  );
  const overlapping = await count(
    `SELECT count(*) FROM call_legs a JOIN call_legs b
         ON a.remote = b.remote AND a.id < b.id AND a.answered_at < coalesce(b.ended_at, 'infinity')
        AND b.answered_at < coalesce(a.ended_at, 'infinity')
       JOIN queue_entries e ON e.call_id = a.call_id
      WHERE e.queue_id = $1 AND a.role = 'device' AND b.role = 'device'`,
    [center.queueId],
  );
  const connected = Number(byState.rows.find((row) => row.state === 'connected')?.count ?? 0);
  const entries = byState.rows.reduce((sum, row) => sum + Number(row.count), 0);
  const invites = input.messages.filter((message) => message.kind === 'invite').length;
  const booked = [...doubleBooked(input.messages).values()].reduce((sum, value) => sum + value, 0);
  const withoutLeg = input.rounds.reduce((sum, round) => sum + round.withoutLeg, 0);
  const ok =
    rungTwice === 0 &&
    twoLegs === 0 &&
    overlapping === 0 &&
    booked === 0 &&
    connected === entries &&
    invites === connected;

  out('\nchecks (both rounds):\n');
  out(`  entries by state: ${byState.rows.map((row) => `${row.state} ${row.count}`).join(', ')}\n`);
  out(`  INVITEs at the phones ${invites} (without a device leg ${withoutLeg}); entries connected ${connected}\n`);
  out(`  calls rung more than once ${rungTwice}; calls with two device legs ${twoLegs}\n`);
  out(`  INVITEs to a phone still on a call ${booked}; overlapping device legs of one device ${overlapping}\n`);
  out(`  ${ok ? 'every entry offered once and connected once, no agent on two calls: OK' : 'FAILED'}\n`);

  const full = input.rounds.find((round) => round.name === 'full');
  const light = input.rounds.find((round) => round.name === 'light');
  out('\nengine CPU (share of one core):\n');
  out(`  idle, phones registered, nobody calling: ${percent(input.idle.engine)}\n`);
  if (full?.waiting !== undefined) {
    const extra = full.waiting.engine - input.idle.engine;
    out(
      `  ${input.callers} callers waiting (hold music), no agent signed in: ${percent(full.waiting.engine)} ` +
        `(${(full.waiting.engine / Math.max(input.idle.engine, 0.001)).toFixed(1)}x idle)\n` +
        `  per waiting caller: ${((extra / input.callers) * 100).toFixed(3)}% of a core ` +
        `(${((extra / input.callers) * 1000).toFixed(2)} ms of CPU a second)\n` +
        `  same window: phones ${percent(full.waiting.phones)}, callers' sipp ${percent(full.waiting.callers)}, ` +
        `host ${percent(full.waiting.host)} of all cores\n`,
    );
  }
  for (const round of input.rounds) {
    out(`  ${round.name} round, from the sign-in to the last call's end: ${percent(round.busyShare)}\n`);
  }

  out("\noffer latency: agent free -> INVITE at the agent's phone\n");
  for (const round of input.rounds) {
    out(
      `${round.name} round: ${round.invites} INVITEs, ${round.timings.length} timed (${round.callerLater} whose ` +
        `caller came after the agent was free, ${round.unmatched} unmatched)\n`,
    );
    for (const freedBy of ['after_call', 'sign_in', 'after_missed'] as const) {
      const figures = latencies(round, freedBy);
      if (figures.fromAvailable.n === 0) continue;
      out(line(`${freedBy}: available -> INVITE`, figures.fromAvailable));
      out(line(`${freedBy}:   available -> offered (distribution)`, figures.toOffered));
      out(line(`${freedBy}:   offered -> INVITE (ring round)`, figures.offeredToInvite));
      if (freedBy === 'after_call') {
        out(line("after_call: agent's BYE -> next INVITE", figures.fromBye));
        out(line("after_call:   agent's BYE -> available (freed)", figures.byeToAvailable));
      }
    }
    const slow = round.timings.filter(
      (timing) => timing.freedBy === 'after_call' && timing.fromAvailableMs >= input.targetMs,
    );
    if (slow.length > 0) {
      const queued = percentile(
        slow.map((timing) => timing.othersOfferedFirst),
        50,
      );
      out(
        `  after_call offers of ${input.targetMs} ms or more: ${slow.length}; offers decided for other agents ` +
          `between their agent becoming free and their own: median ${queued}\n`,
      );
    }
    const signIns = round.timings.filter((timing) => timing.freedBy === 'sign_in' && timing.toOfferedMs !== undefined);
    if (signIns.length > 1) {
      const decided = signIns.map((timing) => timing.toOfferedMs as number);
      const each = (Math.max(...decided) - Math.min(...decided)) / (signIns.length - 1);
      out(`  the sign-in's ${signIns.length} offers were decided one after another, ${each.toFixed(1)} ms apart\n`);
    }
  }
  if (full !== undefined && light !== undefined) {
    out('\nfull round against the light round (same run):\n');
    for (const freedBy of ['after_call', 'sign_in'] as const) {
      const heavy = latencies(full, freedBy).fromAvailable;
      const base = latencies(light, freedBy).fromAvailable;
      out(`  ${freedBy}: p50 ${(heavy.p50 / base.p50).toFixed(1)}x, p99 ${(heavy.p99 / base.p99).toFixed(1)}x\n`);
    }
  }
  if (full !== undefined) {
    const { fairness: fair } = full;
    out(
      `\ncalls per agent (full round, ${fair.agents} agents): min ${fair.min}, max ${fair.max}, mean ` +
        `${fair.mean.toFixed(1)}, stddev ${fair.stddev.toFixed(2)}, max - min ${fair.spread}` +
        (input.fairnessBound === undefined
          ? ' (talk times vary: not judged)\n'
          : ` (bound ${input.fairnessBound}: ${fair.spread <= input.fairnessBound ? 'MET' : 'NOT MET'})\n`),
    );
    const afterCall = latencies(full, 'after_call');
    const p99 = afterCall.fromAvailable.p99;
    out(
      `target: after-call offer latency p99 < ${input.targetMs} ms with ${input.callers} callers: ` +
        `${ms(p99)} ms ${p99 < input.targetMs ? 'MET' : 'NOT MET'}\n`,
    );
    // The same, timed from the agent hanging up (the engine hearing the BYE and freeing the agent included).
    const fromBye = afterCall.fromBye.p99;
    out(
      `  counted from the agent's BYE: ${ms(fromBye)} ms ${fromBye < input.targetMs ? 'within' : 'over'} ` +
        `${input.targetMs} ms\n`,
    );
  }
  return { ok };
}
