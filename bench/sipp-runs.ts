/**
 * What the call benches (bench/calls.ts, bench/phones.ts) share to drive sipp as the carrier: sipp runs started and
 * awaited, the UAC arguments every run takes, sipp's statistics file read back, the length of the pcap it plays, and
 * the INVITE send times of its message trace.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { freePort } from '../test/helpers/free-port.ts';

/** The audio sipp plays to the engine (Debian's sip-tester: G.711 A-law). */
export const audioPcap = '/usr/share/sip-tester/g711a.pcap';

/** A classic pcap file's RTP packets: how many, and the time from the first to the last, in ms. */
export async function pcapLength(file: string): Promise<{ packets: number; ms: number }> {
  const data = await readFile(file);
  const little = data.readUInt32LE(0) === 0xa1b2c3d4;
  const u32 = (offset: number) => (little ? data.readUInt32LE(offset) : data.readUInt32BE(offset));
  let packets = 0;
  let first = 0;
  let last = 0;
  for (let offset = 24; offset + 16 <= data.length; offset += 16 + u32(offset + 8)) {
    const at = u32(offset) * 1000 + u32(offset + 4) / 1000;
    if (packets === 0) first = at;
    last = at;
    packets += 1;
  }
  return { packets, ms: Math.round(last - first) };
}

/**
 * The MEDIA placeholder of a scenario that plays `pcap` for about `holdMs` (back to back: each play is followed by a
 * pause of its length), and the HOLD_MS that fills the rest; `loops` is how many times it plays. With `throughout`,
 * it plays until the hangup (the last play is cut short by the BYE) and HOLD_MS is 0.
 */
export async function mediaFor(holdMs: number, options: { pcap?: string; throughout?: boolean } = {}) {
  const pcap = options.pcap ?? audioPcap;
  const length = await pcapLength(pcap);
  const play = (pauseMs: number) =>
    `<nop><action><exec play_pcap_audio="${pcap}"/></action></nop><pause milliseconds="${pauseMs}"/>`;
  if (options.throughout) {
    const loops = Math.max(1, Math.ceil(holdMs / length.ms));
    const MEDIA = play(length.ms).repeat(loops - 1) + play(holdMs - (loops - 1) * length.ms);
    return { MEDIA, HOLD_MS: '0', loops, pcap: length };
  }
  const loops = Math.max(1, Math.floor(holdMs / length.ms));
  return {
    MEDIA: play(length.ms).repeat(loops),
    HOLD_MS: String(Math.max(0, holdMs - loops * length.ms)),
    loops,
    pcap: length,
  };
}

export interface SippStats {
  created: number;
  successful: number;
  failed: number;
  retransmissions: number;
  /** The mean time from the INVITE to its 200 (sipp's rtd), in ms. */
  responseMs: number;
  seconds: number;
  callsPerSecond: number;
}

/** The last line of a sipp statistics file (-trace_stat -stf): cumulative counts over the run's wall time. */
export async function sippStats(file: string): Promise<SippStats> {
  const lines = (await readFile(file, 'utf8')).split('\n').filter((line) => line.trim() !== '');
  const names = (lines[0] ?? '').split(';');
  const values = (lines.at(-1) ?? '').split(';');
  const field = (name: string) => values[names.indexOf(name)] ?? '';
  // Times are "date<TAB>time<TAB>epoch seconds".
  const epoch = (name: string) => Number(field(name).split('\t').at(-1));
  const seconds = epoch('CurrentTime') - epoch('StartTime');
  const successful = Number(field('SuccessfulCall(C)'));
  // Durations are "hh:mm:ss:microseconds".
  const [hours, minutes, secs, micros] = field('ResponseTime1(C)').split(':').map(Number);
  const responseMs = ((hours ?? 0) * 3600 + (minutes ?? 0) * 60 + (secs ?? 0)) * 1000 + (micros ?? 0) / 1000;
  return {
    created: Number(field('TotalCallCreated')),
    successful,
    failed: Number(field('FailedCall(C)')),
    retransmissions: Number(field('Retransmissions(C)')),
    responseMs,
    seconds,
    callsPerSecond: seconds > 0 ? successful / seconds : 0,
  };
}

/** Calls that failed, or were created and never completed. */
export function failedOf(run: SippStats): number {
  return run.failed + Math.max(0, run.created - run.successful - run.failed);
}

export interface Sipp {
  child: ChildProcess;
  done: Promise<{ code: number | null; output: string }>;
}

/** Starts sipp with `args` in `dir`; `done` resolves at its exit with the tail of what it printed. */
export function startSipp(args: string[], dir: string): Sipp {
  const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const done = new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
  return { child, done };
}

/** The UAC arguments shared by every run: this side's addresses, the load, the statistics file. */
export async function uacArgs(options: {
  calls: number;
  rate: number;
  limit: number;
  statsFile: string;
  seconds: number;
}): Promise<string[]> {
  return [
    '-i',
    '127.0.0.1',
    '-p',
    String(await freePort()),
    '-mi',
    '127.0.0.1',
    '-mp',
    String(await freePort()),
    '-m',
    String(options.calls),
    '-r',
    String(options.rate),
    '-l',
    String(options.limit),
    '-timeout',
    `${options.seconds}s`,
    '-trace_stat',
    '-stf',
    options.statsFile,
    '-fd',
    '1',
    '-nostdin',
  ];
}

export interface UacRun extends SippStats {
  code: number | null;
  output: string;
}

/**
 * One sipp UAC run in `work` to `target` (host:port): `calls` calls at `rate` calls/s, at most `limit` at once, with
 * the scenario (and anything else) of `args`; resolves with its statistics once it exited. `started` hears the
 * process (to watch or stop it).
 */
export async function runUac(options: {
  work: string;
  args: string[];
  target: string;
  calls: number;
  rate: number;
  limit: number;
  started?: (sipp: Sipp) => void;
}): Promise<UacRun> {
  const statsFile = path.join(options.work, `stats-${randomUUID()}.csv`);
  const seconds = Math.ceil(options.calls / options.rate) + 60;
  const sipp = startSipp(
    [
      ...options.args,
      ...(await uacArgs({ calls: options.calls, rate: options.rate, limit: options.limit, statsFile, seconds })),
      options.target,
    ],
    options.work,
  );
  options.started?.(sipp);
  const result = await sipp.done;
  const stats = await sippStats(statsFile).catch(() => undefined);
  if (stats === undefined) throw new Error(`sipp wrote no statistics (exit ${result.code}): ${result.output}`);
  return { ...stats, code: result.code, output: result.output };
}

/**
 * When sipp first sent each call's INVITE, by Call-ID, in ms since the epoch (µs precision), from its message trace
 * (`-trace_msg -message_file <file>`). sipp stamps each message with the local wall clock as it sends it:
 * "----- 2026-11-24 15:44:10.707399" then "UDP message sent (511 bytes):" and the message. Retransmissions are left
 * out (the first send is kept).
 */
export async function inviteSendTimes(file: string): Promise<Map<string, number>> {
  const text = await readFile(file, 'utf8');
  const sent = new Map<string, number>();
  const entry =
    /^-+ (\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6})\n\w+ message sent[^\n]*\n\s*INVITE [^]*?^Call-ID: *(\S+)/gm;
  for (const match of text.matchAll(entry)) {
    const [, year, month, day, hours, minutes, seconds, micros, callId] = match;
    if (callId === undefined || sent.has(callId)) continue;
    const at = new Date(Number(year), Number(month) - 1, Number(day), Number(hours), Number(minutes), Number(seconds));
    sent.set(callId, at.getTime() + Number(micros) / 1000);
  }
  return sent;
}
