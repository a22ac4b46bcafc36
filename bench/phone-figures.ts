/**
 * The phones bench's figures (bench/phones.ts): per-call engine CPU and RSS of the browser calls as ratios to the
 * carrier-only calls, audio both ways in 20 ms frames, offer and withdrawal latencies, and the targets.
 */
import os from 'node:os';
import type { HeldCalls } from './held-calls.ts';
import { percent, percentile, reasons } from './engine-process.ts';
import type { CallRecord, FromBrowsers } from './phone-browsers.ts';
import { failedOf, type UacRun } from './sipp-runs.ts';

export interface LegRow {
  call_id: string;
  role: string;
  packets_in: number;
  packets_out: number;
  answered_at: Date | null;
  ended_at: Date | null;
}

type BrowserReport = Extract<FromBrowsers, { type: 'report' }>;
interface EngineLog {
  lines: number;
  last: string[];
}
export interface CallTimes {
  id: string;
  sip_call_id: string;
  started_at: Date;
  connected_at: Date | null;
}

export interface Phases {
  concurrent: number;
  holdSeconds: number;
  rampRate: number;
  media: { loops: number; pcap: { packets: number; ms: number } };
  carrier: { held: HeldCalls; legs: LegRow[]; log: EngineLog };
  browser: { held: HeldCalls; legs: LegRow[]; calls: CallTimes[]; records: BrowserReport };
  offers: {
    rate: number;
    seconds: number;
    run: UacRun;
    reasons: Record<string, number>;
    calls: CallTimes[];
    inviteSent: Map<string, number>;
    /** When each offer row was written (clock_timestamp() in its transaction), by offer id. */
    offerCreated: Map<string, number>;
    records: BrowserReport;
  };
  withdrawals: {
    rate: number;
    seconds: number;
    run: UacRun;
    reasons: Record<string, number>;
    calls: CallTimes[];
    records: BrowserReport;
    /** The devices that accept (the others only long-poll). */
    first: ReadonlySet<string>;
  };
  engineLog: EngineLog;
  /** Lines said as they are (the devices' state between runs). */
  notes: string[];
}

const targets = { concurrent: 100, offerP99Ms: 200, offerRate: 20, withdrawalMs: 1000 };
const framesPerSecond = 50;
/** Frames a browser may receive fewer than the engine sent without a loss: the packet still being filled. */
const framing = 2;
/**
 * Shares below which audio counts as lost before the wire: the caller's packets the engine counted, of what sipp
 * played (an estimate from the pcap's rate); and each call's frames received by its browser, of 50/s over the time
 * its leg was bridged (a healthy run is at 100% and above: the jitter buffer's start).
 */
const minimumShare = { caller: 0.99, bridged: 0.98 };

const sum = (values: readonly number[]) => values.reduce((total, value) => total + value, 0);
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '-');
const ratio = (value: number, of: number) => (of > 0 ? `${((value / of) * 100).toFixed(1)}%` : '-');
const seconds = (leg: LegRow) =>
  leg.answered_at !== null && leg.ended_at !== null ? (leg.ended_at.getTime() - leg.answered_at.getTime()) / 1000 : 0;

/** Audio of the browser calls, in 20 ms frames. */
function audio(phases: Phases) {
  const { legs, records } = phases.browser;
  const browserLegs = legs.filter((leg) => leg.role === 'browser');
  const callerLegs = legs.filter((leg) => leg.role === 'caller' && browserLegs.some((b) => b.call_id === leg.call_id));
  const byCall = new Map<string, CallRecord>(records.calls.map((record) => [record.callId, record]));
  const calls = browserLegs.map((leg) => {
    const rtp = byCall.get(leg.call_id)?.rtp ?? null;
    const engineSent = leg.packets_out;
    return { leg, rtp, engineSent, bridged: seconds(leg), skipped: byCall.get(leg.call_id)?.chunksSkipped ?? 0 };
  });
  const measured = calls.filter((call) => call.rtp !== null);
  const received = sum(measured.map((call) => call.rtp?.packetsReceived ?? 0));
  const bridged = sum(calls.map((call) => call.bridged));
  const lowestShare = Math.min(
    ...measured.map((call) => (call.rtp?.packetsReceived ?? 0) / Math.max(1, call.bridged * framesPerSecond)),
  );
  const reported = measured.filter((call) => call.rtp?.remotePacketsLost !== null);
  return {
    calls: calls.length,
    measured: measured.length,
    // The pcap plays back to back until the BYE: its packets over the hold time.
    sippSent: Math.round(
      (callerLegs.length * phases.media.pcap.packets * phases.holdSeconds * 1000) / phases.media.pcap.ms,
    ),
    callerIn: sum(callerLegs.map((leg) => leg.packets_in)),
    callerOut: sum(callerLegs.map((leg) => leg.packets_out)),
    engineSent: sum(measured.map((call) => call.engineSent)),
    received,
    lost: sum(measured.map((call) => call.rtp?.packetsLost ?? 0)),
    short: measured.filter((call) => (call.rtp?.packetsReceived ?? 0) < call.engineSent - framing).length,
    concealed: sum(measured.map((call) => call.rtp?.concealedSamples ?? 0)),
    samples: sum(measured.map((call) => call.rtp?.totalSamplesReceived ?? 0)),
    meanPower: sum(measured.map((call) => call.rtp?.meanPower ?? 0)) / Math.max(1, measured.length),
    bridged,
    lowestShare: measured.length > 0 ? lowestShare : 0,
    sent: sum(measured.map((call) => call.rtp?.packetsSent ?? 0)),
    remoteLost: sum(reported.map((call) => call.rtp?.remotePacketsLost ?? 0)),
    unreported: measured.length - reported.length,
    engineIn: sum(browserLegs.map((leg) => leg.packets_in)),
    skipped: sum(calls.map((call) => call.skipped)),
  };
}

/** How far the browser calls got: offered, accepted, connected, bridged; and how long connecting took. */
function callPath(phases: Phases) {
  const { calls, legs, records } = phases.browser;
  const ids = new Set(calls.map((call) => call.id));
  const offered = new Set(records.offers.filter((offer) => ids.has(offer.callId)).map((offer) => offer.callId));
  const mine = records.calls.filter((record) => ids.has(record.callId));
  const errors = mine.filter((record) => record.error !== null).map((record) => record.error);
  const connected = calls.filter((call) => call.connected_at !== null);
  return {
    calls: calls.length,
    offered: offered.size,
    accepted: mine.filter((record) => record.acceptStatus === 200).length,
    errors,
    peerConnected: mine.filter((record) => record.connectedAt !== null).length,
    bridged: legs.filter((leg) => leg.role === 'browser' && leg.answered_at !== null).length,
    connected: connected.length,
    toConnect: connected.map((call) => (call.connected_at?.getTime() ?? 0) - call.started_at.getTime()),
  };
}

/**
 * Offer latency: from sipp's INVITE to the device reading the call's first offer, and its parts: the INVITE to the
 * call row (sipp to the engine's admission), the call row to the offer row (the engine answers, runs the plan, makes
 * the WebRTC offer), the offer row to the device (the commit and its notice, the API's waiter, the HTTP answer).
 */
function offerLatency(phases: Phases) {
  const { calls, inviteSent, offerCreated, records } = phases.offers;
  const firstSeen = new Map<string, { seenAt: number; offerId: string }>();
  for (const offer of records.offers) {
    const seen = firstSeen.get(offer.callId);
    if (seen === undefined || offer.seenAt < seen.seenAt) firstSeen.set(offer.callId, offer);
  }
  const parts = { total: [] as number[], admission: [] as number[], engine: [] as number[], api: [] as number[] };
  for (const call of calls) {
    const seen = firstSeen.get(call.id);
    const sent = inviteSent.get(call.sip_call_id);
    const created = seen === undefined ? undefined : offerCreated.get(seen.offerId);
    const started = call.started_at.getTime();
    if (seen === undefined || sent === undefined || created === undefined) continue;
    parts.total.push(seen.seenAt - sent);
    parts.admission.push(started - sent);
    parts.engine.push(created - started);
    parts.api.push(seen.seenAt - created);
  }
  return { ...parts, offered: [...firstSeen.keys()].filter((id) => calls.some((call) => call.id === id)).length };
}

/** Withdrawal: from the first device's accept to the second device's long-poll answering without the offer. */
function withdrawal(phases: Phases) {
  const { calls, records, first } = phases.withdrawals;
  const ids = new Set(calls.map((call) => call.id));
  const accepts = new Map(
    records.calls
      .filter((record) => ids.has(record.callId) && first.has(record.deviceId) && record.acceptStatus === 200)
      .map((record) => [record.callId, record]),
  );
  const fromSent: number[] = [];
  const fromAnswered: number[] = [];
  let unheard = 0;
  for (const offer of records.offers) {
    const accepted = accepts.get(offer.callId);
    if (first.has(offer.deviceId) || accepted === undefined) continue;
    if (offer.goneAt === null) {
      unheard += 1;
      continue;
    }
    if (accepted.acceptSentAt !== null) fromSent.push(offer.goneAt - accepted.acceptSentAt);
    if (accepted.acceptDoneAt !== null) fromAnswered.push(offer.goneAt - accepted.acceptDoneAt);
  }
  const failed = records.calls.filter((record) => ids.has(record.callId) && record.acceptStatus !== 200);
  return { fromSent, fromAnswered, accepted: accepts.size, unheard, failed };
}

const latencyRow = (name: string, values: number[]) =>
  `| ${name} | ${values.length} | ${ms(percentile(values, 50))} | ${ms(percentile(values, 99))} | ${ms(Math.max(...values))} |`;

export function report(phases: Phases): string {
  const { carrier, browser } = phases;
  const [c, b] = [carrier.held, browser.held];
  const a = audio(phases);
  const path = callPath(phases);
  const offers = offerLatency(phases);
  const withdrawn = withdrawal(phases);
  const times = (value: number, of: number) => (of > 0 ? `${(value / of).toFixed(1)}x` : '-');
  const per = (mb: number) => `${mb.toFixed(2)} MB`;
  const cpu = (share: number) => `${(share * 100).toFixed(2)}%`;
  const noLoss =
    phases.concurrent >= targets.concurrent &&
    b.lowest >= targets.concurrent &&
    failedOf(b.media) === 0 &&
    a.measured === a.calls &&
    path.bridged === path.calls &&
    a.callerIn >= minimumShare.caller * a.sippSent &&
    a.lowestShare >= minimumShare.bridged &&
    a.lost === 0 &&
    a.short === 0 &&
    a.remoteLost === 0;
  const offerP99 = percentile(offers.total, 99);
  const withdrawalP99 = percentile(withdrawn.fromSent, 99);
  const hold = `${phases.holdSeconds} s`;
  const lines = [
    '',
    `| ${phases.concurrent} concurrent calls with media, held ${hold} | carrier-only: forward to sipp (two G.711 legs) | browser: ring step, WebRTC leg (WEBRTC_MEDIA=${process.env.WEBRTC_MEDIA ?? 'g711'}) | browser / carrier-only |`,
    '|---|---|---|---|',
    `| calls connected during the plateau (lowest / peak) | ${c.lowest} / ${c.peak} | ${b.lowest} / ${b.peak} | |`,
    `| sipp: completed / failed | ${c.media.successful} / ${failedOf(c.media)} | ${b.media.successful} / ${failedOf(b.media)} | |`,
    `| engine CPU, idle -> plateau (${c.plateauSeconds.toFixed(0)} s / ${b.plateauSeconds.toFixed(0)} s), of one core | ${percent(c.idleShare)} -> ${percent(c.engineShare)} | ${percent(b.idleShare)} -> ${percent(b.engineShare)} | ${times(b.engineShare, c.engineShare)} |`,
    `| engine CPU per call, of one core | ${cpu(c.perCallCpu)} | ${cpu(b.perCallCpu)} | ${times(b.perCallCpu, c.perCallCpu)} |`,
    `| engine RSS, before -> plateau peak | ${c.rssBefore.toFixed(0)} -> ${c.rssPeak.toFixed(0)} MB | ${b.rssBefore.toFixed(0)} -> ${b.rssPeak.toFixed(0)} MB | |`,
    `| engine RSS per call | ${per(c.perCallMb)} | ${per(b.perCallMb)} | ${times(b.perCallMb, c.perCallMb)} |`,
    `| other processes' CPU during the plateau, of one core | sipp UAC ${percent(c.sippShare)}, far sipp UAS ${percent(c.watched.far ?? 0)} | sipp UAC ${percent(b.sippShare)}, stand-in browsers ${percent(b.watched.browsers ?? 0)} | |`,
    `| host CPU busy during the plateau, of ${os.cpus().length} cores | ${percent(c.hostShare)} | ${percent(b.hostShare)} | |`,
    `| UDP datagrams dropped for a full receive buffer: RTP / SIP | ${c.dropped.rtp} / ${c.dropped.sip} | ${b.dropped.rtp} / ${b.dropped.sip} | |`,
    `| calls by end reason | ${reasons(c.reasons)} | ${reasons(b.reasons)} | |`,
    `| engine log lines (warn and above) | ${carrier.log.lines} | ${phases.engineLog.lines} (with the offer and withdrawal runs) | |`,
    '',
    `browser calls: ${path.calls} made; ${path.offered} offered to (and read by) their device; ${path.accepted} ` +
      `accepts answered 200; ${path.peerConnected} peer connections connected at the browsers; ${path.bridged} browser ` +
      `legs bridged; ${path.connected} calls connected, p50 ${ms(percentile(path.toConnect, 50))} ms / p99 ` +
      `${ms(percentile(path.toConnect, 99))} ms / max ${ms(Math.max(...path.toConnect))} ms after the engine admitted ` +
      `the INVITE; ${path.errors.length} browser errors${path.errors.length > 0 ? ` (${path.errors.slice(0, 2).join('; ')})` : ''}`,
    '',
    `| audio of the ${a.calls} browser calls (${a.measured} with statistics) | frames | per call | ratio |`,
    '|---|---|---|---|',
    `| caller -> engine: sipp played (g711a.pcap, ${phases.media.pcap.packets} packets of 30 ms in ${(phases.media.pcap.ms / 1000).toFixed(2)} s, back to back) / the caller legs' packets_in | about ${a.sippSent} / ${a.callerIn} packets | | ${ratio(a.callerIn, a.sippSent)} |`,
    `| engine -> browsers: the browser legs' packets_out (20 ms) | ${a.engineSent.toFixed(0)} | ${(a.engineSent / Math.max(1, a.measured)).toFixed(0)} | |`,
    `| browsers received (inbound-rtp packetsReceived) | ${a.received} | ${(a.received / Math.max(1, a.measured)).toFixed(0)} | ${ratio(a.received, a.engineSent)} of the engine's; ${a.short} calls short by more than ${framing} |`,
    `| 50/s over the time the legs were bridged (mean ${(a.bridged / Math.max(1, a.calls)).toFixed(1)} s) | ${(a.bridged * framesPerSecond).toFixed(0)} | | received ${ratio(a.received, a.bridged * framesPerSecond)} (lowest call ${(a.lowestShare * 100).toFixed(1)}%) |`,
    `| 50/s over the hold time (${hold}) | ${a.calls * phases.holdSeconds * framesPerSecond} | ${phases.holdSeconds * framesPerSecond} | received ${ratio(a.received, a.calls * phases.holdSeconds * framesPerSecond)} (the rest: ringing and connecting) |`,
    `| lost on the way to the browsers (inbound-rtp packetsLost) | ${a.lost} | | |`,
    `| played concealed by the browsers' jitter buffers (share of samples) | | | ${ratio(a.concealed, a.samples)} |`,
    `| mean power of what the browsers heard (0 is silence) | | ${a.meanPower.toFixed(4)} | |`,
    `| browsers -> engine: browsers sent (outbound-rtp packetsSent) | ${a.sent} | ${(a.sent / Math.max(1, a.measured)).toFixed(0)} | |`,
    `| lost, per the engine's RTCP receiver reports (remote-inbound-rtp packetsLost; ${a.unreported} calls without one) | ${a.remoteLost} | | ${ratio(a.remoteLost, a.sent)} |`,
    `| the browser legs' packets_in (20 ms frames: G.711, packets received; libwebrtc, its playout clock, received or concealed) | ${a.engineIn} | ${(a.engineIn / Math.max(1, a.calls)).toFixed(0)} | ${ratio(a.engineIn, a.bridged * framesPerSecond)} of 50/s bridged |`,
    `| engine -> caller: the caller legs' packets_out (20 ms) | ${a.callerOut} | ${(a.callerOut / Math.max(1, a.calls)).toFixed(0)} | |`,
    `| 10 ms chunks the browsers skipped (their timer over 0.5 s late) | ${a.skipped} | | |`,
    '',
    `| latency | samples | p50 ms | p99 ms | max ms |`,
    '|---|---|---|---|---|',
    latencyRow(
      `offer: sipp sent the INVITE -> the device read the offer (${phases.offers.calls.length} calls at ${phases.offers.rate}/s)`,
      offers.total,
    ),
    latencyRow(`- of which: the INVITE -> the call row (started_at, as the engine admits it)`, offers.admission),
    latencyRow(
      `- of which: the call row -> the offer row (created_at: answered, plan run, WebRTC offer)`,
      offers.engine,
    ),
    latencyRow(`- of which: the offer row -> the device read it (commit, notice, long-poll answer)`, offers.api),
    latencyRow(
      `withdrawal: the first device sent its accept -> the second device's long-poll answered without the offer (${phases.withdrawals.calls.length} calls at ${phases.withdrawals.rate}/s)`,
      withdrawn.fromSent,
    ),
    latencyRow(`withdrawal: the accept's 200 arrived -> the same`, withdrawn.fromAnswered),
    '',
    `offers: ${offers.offered} of ${phases.offers.calls.length} calls read by their device; sipp completed ${phases.offers.run.successful}, failed ${failedOf(phases.offers.run)}; calls by end reason: ${reasons(phases.offers.reasons)}`,
    `withdrawals: ${withdrawn.accepted} accepts answered 200, ${withdrawn.failed.length} not (${withdrawn.failed
      .slice(0, 3)
      .map((record) => record.error ?? record.acceptStatus)
      .join(
        '; ',
      )}); ${withdrawn.unheard} second devices never heard theirs go; sipp completed ${phases.withdrawals.run.successful}, failed ${failedOf(phases.withdrawals.run)}; calls by end reason: ${reasons(phases.withdrawals.reasons)}`,
    `stand-in browsers: long-poll errors ${phases.withdrawals.records.pollErrors}${phases.withdrawals.records.lastPollError === null ? '' : ` (last: ${phases.withdrawals.records.lastPollError})`}, presence renewals refused or failed ${phases.withdrawals.records.presenceErrors}`,
    ...phases.notes,
    '',
    `target: ${targets.concurrent} concurrent bridged browser calls with no audio loss: ${b.lowest} connected at the ` +
      `plateau's lowest, ${path.bridged} of ${path.calls} bridged, ${failedOf(b.media)} failed; frames lost on the ` +
      `wire ${a.lost} to the browsers (${a.short} calls short of the engine's) and ${a.remoteLost} to the engine; ` +
      `the caller's packets at the engine ${ratio(a.callerIn, a.sippSent)} of sipp's, the lowest call's frames at ` +
      `its browser ${(a.lowestShare * 100).toFixed(1)}% of 50/s bridged: ${noLoss ? 'MET' : 'NOT MET'}`,
    `target: offer p99 under ${targets.offerP99Ms} ms at ${targets.offerRate}/s: p99 ${ms(offerP99)} ms at ` +
      `${phases.offers.rate}/s: ${offerP99 < targets.offerP99Ms && phases.offers.rate >= targets.offerRate && offers.offered === phases.offers.calls.length ? 'MET' : 'NOT MET'}`,
    `target: losing devices stop ringing within ${targets.withdrawalMs / 1000} s of the winner's accept: p99 ` +
      `${ms(withdrawalP99)} ms: ${withdrawalP99 < targets.withdrawalMs && withdrawn.unheard === 0 ? 'MET' : 'NOT MET'}`,
  ];
  if (phases.engineLog.lines > 0) lines.push('', 'last engine log lines:', ...phases.engineLog.last);
  if (carrier.log.lines > 0) lines.push('', 'last engine log lines (carrier-only run):', ...carrier.log.last);
  return lines.join('\n');
}
