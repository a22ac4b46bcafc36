/**
 * The queue-agents bench's arithmetic (bench/queue-agents.ts), kept apart from the processes it drives so that it
 * can be tested on its own (test/bench/queue-figures.test.ts): the agents' phones' message traces read back, each
 * offer paired with the moment its agent became free, the calls per agent and how evenly they were spread, and the
 * agents found on two calls at once.
 */

/** A message an agent's phone (sipp, `-trace_msg`) received or sent, stamped with its wall clock. */
export interface PhoneMessage {
  /** ms since the epoch (µs precision). */
  at: number;
  /** The SIP username the engine rang (the INVITE's Request-URI user); the same for the BYE of that dialog. */
  user: string;
  callId: string;
  /** An INVITE received (an offer reaching the phone), or a BYE sent (the agent hung up). */
  kind: 'invite' | 'bye';
}

const entry =
  /^-+ (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\n\w+ message (received|sent)[^\n]*\n\s*([A-Z]+) (\S+) [^]*?^Call-ID: *(\S+)/gm;

/**
 * The INVITEs a phone received and the BYEs it sent, from its message trace, oldest first. sipp stamps each
 * message with the local wall clock ("----- 2026-11-24 15:44:10.707399", then "UDP message received [511] bytes :"
 * or "UDP message sent (312 bytes):" and the message). Retransmissions are left out (the first of each is kept);
 * responses and other requests too.
 */
export function phoneMessages(trace: string): PhoneMessage[] {
  const messages: PhoneMessage[] = [];
  const users = new Map<string, string>();
  const seen = new Set<string>();
  for (const match of trace.matchAll(entry)) {
    const [, year, month, day, hours, minutes, seconds, micros, direction, method, uri, callId] = match;
    if (callId === undefined || uri === undefined) continue;
    const kind =
      direction === 'received' && method === 'INVITE'
        ? 'invite'
        : direction === 'sent' && method === 'BYE'
          ? 'bye'
          : undefined;
    if (kind === undefined || seen.has(`${kind} ${callId}`)) continue;
    seen.add(`${kind} ${callId}`);
    const at =
      new Date(
        Number(year),
        Number(month) - 1,
        Number(day),
        Number(hours),
        Number(minutes),
        Number(seconds),
      ).getTime() +
      Number(micros) / 1000;
    if (kind === 'invite') users.set(callId, /^sip:([^@]+)@/.exec(uri)?.[1] ?? '');
    const user = users.get(callId);
    if (user === undefined) continue;
    messages.push({ at, user, callId, kind });
  }
  return messages.sort((a, b) => a.at - b.at);
}

/** One `agent.state_changed` of an agent: the state it went to, from which, when (ms since the epoch). */
export interface AgentChange {
  agent: string;
  state: string;
  previous: string | null;
  at: number;
}

/** An offer that reached an agent's phone: the INVITE's arrival, and when its caller entered the queue. */
export interface ArrivedOffer {
  agent: string;
  at: number;
  enqueuedAt: number;
}

export type FreedBy = 'sign_in' | 'after_call' | 'after_missed';

export interface OfferTiming {
  agent: string;
  freedBy: FreedBy;
  /** From the agent's `available` to the INVITE at the phone. */
  fromAvailableMs: number;
  /** From the agent's `available` to its `offered` (distribution decided), when there is one between. */
  toOfferedMs: number | undefined;
  /** From the agent's phone sending the BYE of its previous call to this INVITE (`after_call` only). */
  fromByeMs: number | undefined;
  /** Offers decided for other agents between this agent becoming free and its own offer (distribution's queue). */
  othersOfferedFirst: number;
}

export interface OfferTimings {
  timings: OfferTiming[];
  /** Offers whose caller entered the queue after the agent was free: the wait was the caller's, not ours. */
  callerLater: number;
  /** Offers with no `available` of their agent before them. */
  unmatched: number;
}

/**
 * Each offer with the moment its agent became free: the agent's last change to `available` before the INVITE
 * arrived (from `offline` or `away`: a sign-in; from `on_call` or `wrap_up`: the end of a call or of its wrap-up;
 * from `offered`: an offer missed), the `offered` between the two, the BYE the agent's phone sent last before, and
 * how many offers to other agents were decided between the agent becoming free and its own.
 * Only offers whose caller was already waiting when the agent became free are timed.
 */
export function offerTimings(
  offers: readonly ArrivedOffer[],
  changes: readonly AgentChange[],
  byes: readonly PhoneMessage[],
): OfferTimings {
  const byAgent = <T extends { at: number }>(rows: readonly T[], agentOf: (row: T) => string) => {
    const grouped = new Map<string, T[]>();
    for (const row of rows) grouped.set(agentOf(row), [...(grouped.get(agentOf(row)) ?? []), row]);
    for (const list of grouped.values()) list.sort((a, b) => a.at - b.at);
    return grouped;
  };
  const changesOf = byAgent(changes, (change) => change.agent);
  const byesOf = byAgent(byes, (bye) => bye.user);
  const lastBefore = <T extends { at: number }>(
    rows: readonly T[] | undefined,
    at: number,
    keep: (row: T) => boolean,
  ) => rows?.filter((row) => row.at <= at && keep(row)).at(-1);
  const result: OfferTimings = { timings: [], callerLater: 0, unmatched: 0 };
  for (const offer of offers) {
    const agentChanges = changesOf.get(offer.agent);
    const freed = lastBefore(agentChanges, offer.at, (change) => change.state === 'available');
    if (freed === undefined) {
      result.unmatched += 1;
      continue;
    }
    if (offer.enqueuedAt > freed.at) {
      result.callerLater += 1;
      continue;
    }
    const freedBy: FreedBy =
      freed.previous === 'on_call' || freed.previous === 'wrap_up'
        ? 'after_call'
        : freed.previous === 'offered'
          ? 'after_missed'
          : 'sign_in';
    const offered = lastBefore(agentChanges, offer.at, (change) => change.state === 'offered' && change.at >= freed.at);
    const bye = freedBy === 'after_call' ? lastBefore(byesOf.get(offer.agent), offer.at, () => true) : undefined;
    const decidedAt = offered?.at ?? offer.at;
    const othersOfferedFirst = changes.filter(
      (change) =>
        change.agent !== offer.agent && change.state === 'offered' && change.at > freed.at && change.at < decidedAt,
    ).length;
    result.timings.push({
      agent: offer.agent,
      freedBy,
      fromAvailableMs: offer.at - freed.at,
      toOfferedMs: offered === undefined ? undefined : offered.at - freed.at,
      fromByeMs: bye === undefined ? undefined : offer.at - bye.at,
      othersOfferedFirst,
    });
  }
  return result;
}

export interface Fairness {
  agents: number;
  min: number;
  max: number;
  mean: number;
  /** Population standard deviation of the calls per agent. */
  stddev: number;
  /** max - min. */
  spread: number;
}

/** How evenly calls were spread over agents: `counts` has one number per agent (0 for one that had none). */
export function fairness(counts: readonly number[]): Fairness {
  if (counts.length === 0) return { agents: 0, min: 0, max: 0, mean: 0, stddev: 0, spread: 0 };
  const mean = counts.reduce((sum, count) => sum + count, 0) / counts.length;
  const variance = counts.reduce((sum, count) => sum + (count - mean) ** 2, 0) / counts.length;
  const min = Math.min(...counts);
  const max = Math.max(...counts);
  return { agents: counts.length, min, max, mean, stddev: Math.sqrt(variance), spread: max - min };
}

/**
 * Agents whose phone got an INVITE while it was still on an earlier call (a call whose BYE it had not sent yet),
 * with how many times: each phone answers every INVITE, so a second offer during a call would be a second call.
 */
export function doubleBooked(messages: readonly PhoneMessage[]): Map<string, number> {
  const open = new Map<string, Set<string>>();
  const found = new Map<string, number>();
  for (const message of [...messages].sort((a, b) => a.at - b.at)) {
    const calls = open.get(message.user) ?? new Set<string>();
    open.set(message.user, calls);
    if (message.kind === 'bye') {
      calls.delete(message.callId);
      continue;
    }
    if (calls.size > 0) found.set(message.user, (found.get(message.user) ?? 0) + 1);
    calls.add(message.callId);
  }
  return found;
}
