/**
 * The phones bench (part of `npm run bench`; alone: `node --import=tsx bench/phones.ts` once `npm run build` made
 * dist/, which the engine runs): issue 14's "Measured", with sipp as the carrier on loopback and stand-in browsers
 * (bench/phone-browsers.ts: plain `@roamhq/wrtc` peer connections that register, long-poll, answer and accept as
 * client/phone.ts does) in a process of their own. The API role runs in this process, the engine role in a process
 * of its own (`switchboard engine`), so the engine's CPU (/proc/<pid>/stat) and RSS are the engine's alone.
 *
 * One user per call: USERS users (BENCH_PHONES_CONCURRENT, or five times the larger call rate if more), each with
 * one browser device and a number whose plan rings that user alone (`ring`, simultaneous, 30 s, then `hangup`); sipp
 * dials the numbers in turn (`-inf`). A ring step offers a call to every live device of its person that is not on a
 * call, so with one user holding many devices every call would be offered to every free device (one WebRTC
 * endpoint each) and the first to accept would win; a person also has at most 50 devices.
 *
 * 1. Concurrent browser calls, beside carrier-only calls in the same run, each on a freshly started engine (5 calls
 *    of its kind to warm it up; the engine's RSS then starts from the same place): BENCH_PHONES_CONCURRENT calls
 *    started at BENCH_PHONES_RAMP_RATE/s, held BENCH_PHONES_HOLD_SECONDS from the engine's 200 while sipp plays
 *    g711a.pcap back to back (as bench/calls.ts does). Carrier-only: a `forward` to a second sipp (`-sn uas
 *    -rtp_echo`) through a carrier of its own, a bridged call of two G.711 legs with media both ways. Browser: the
 *    ring plan; each device accepts and speaks (a 400 Hz tone) while receiving. The plateau (bench/held-calls.ts)
 *    runs from when every call is connected to 1 s before the first hangs up. Audio both ways, in 20 ms frames (an
 *    RTP packet of G.711, the browsers' as the carrier's): frames the browsers received (inbound-rtp `packetsReceived`,
 *    read when the call ended) beside the frames the engine sent (the browser leg's `packets_out`, 20 ms frames),
 *    50/s of the time the leg was bridged, and 50/s of the hold time;
 *    frames the browsers sent (outbound-rtp `packetsSent`) beside what the engine's RTCP receiver reports say it
 *    lost (remote-inbound-rtp `packetsLost`) and the browser leg's `packets_in` (20 ms frames the leg's media gave the
 *    bridge: with the G.711 stack, the packets received; with libwebrtc, its playout's, one per 20 ms whether a
 *    packet came or was concealed, so time rather than packets). The engine's browser legs use the stack
 *    WEBRTC_MEDIA names (`g711` unless set; the engine processes inherit this process's environment).
 * 2. Offer latency: BENCH_PHONES_OFFER_RATE calls/s for BENCH_PHONES_OFFER_SECONDS, each to a user whose device
 *    long-polls and does not accept; sipp hangs up 1 s after the engine's 200. The start is when sipp sent the
 *    INVITE (its message trace stamps each message with the wall clock as it sends it, µs), the end when the device's
 *    process had read the long-poll answer carrying the offer (its wall clock, `performance.timeOrigin +
 *    performance.now()`); one machine, one clock. Also shown from the call row's `started_at` (clock_timestamp() as
 *    the engine admits the INVITE).
 * 3. Withdrawal: each user gets a second device; BENCH_PHONES_WITHDRAW_RATE calls/s for BENCH_PHONES_WITHDRAW_SECONDS,
 *    the first device accepts (a real answer, then 2 s of call), the second only long-polls with `known`: the time
 *    from the first device sending its accept to the second's long-poll answering without the offer.
 *
 * Targets: 100 concurrent bridged browser calls on 2 cores with no audio loss; offer p99 under 200 ms at 20/s; the
 * losing devices hear the withdrawal within a second of the accept. A missed target prints NOT MET; the exit code
 * is non-zero only when the run itself broke (setup failed, a process died, no call completed).
 *
 * Shorter or other runs: BENCH_PHONES_CONCURRENT (100), BENCH_PHONES_HOLD_SECONDS (20), BENCH_PHONES_RAMP_RATE (20),
 * BENCH_PHONES_OFFER_RATE (20), BENCH_PHONES_OFFER_SECONDS (15), BENCH_PHONES_WITHDRAW_RATE (10),
 * BENCH_PHONES_WITHDRAW_SECONDS (the offer seconds), BENCH_PHONES_ENGINE_NODE_ARGS (e.g. --cpu-prof).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { runCli } from '../test/helpers/cli.ts';
import { freePort } from '../test/helpers/free-port.ts';
import { writeScenario } from '../test/helpers/sipp.ts';
import { scratchDatabase } from './database.ts';
import { databaseNow, drained, type EngineProcess, sleep, startApi, startEngine } from './engine-process.ts';
import { holdCalls } from './held-calls.ts';
import type { FromBrowsers, PhoneSpec, ToBrowsers } from './phone-browsers.ts';
import { type CallTimes, type LegRow, report, type Phases } from './phone-figures.ts';
import { addSecondDevices, setUpPeople } from './phone-setup.ts';
import { inviteSendTimes, mediaFor, runUac, startSipp } from './sipp-runs.ts';

const concurrent = Number(process.env.BENCH_PHONES_CONCURRENT ?? 100);
const holdSeconds = Number(process.env.BENCH_PHONES_HOLD_SECONDS ?? 20);
const rampRate = Number(process.env.BENCH_PHONES_RAMP_RATE ?? 20);
const offerRate = Number(process.env.BENCH_PHONES_OFFER_RATE ?? 20);
const offerSeconds = Number(process.env.BENCH_PHONES_OFFER_SECONDS ?? 15);
const withdrawRate = Number(process.env.BENCH_PHONES_WITHDRAW_RATE ?? 10);
const withdrawSeconds = Number(process.env.BENCH_PHONES_WITHDRAW_SECONDS ?? offerSeconds);
const users = Math.max(concurrent, 5 * offerRate, 5 * withdrawRate);
const warmupCalls = 5;
// BENCH_PHONES_ENGINE_NODE_ARGS: extra node options for the engine processes (e.g. --cpu-prof --cpu-prof-dir=/tmp/x).
const nodeArgs = (process.env.BENCH_PHONES_ENGINE_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-phones-'));
const work = await mkdtemp(path.join(os.tmpdir(), 'sipp-bench-phones-'));
const pool = new pg.Pool({ connectionString: database.url, max: 4 });
pool.on('error', () => {});
const children: ChildProcess[] = [];
let api: Awaited<ReturnType<typeof startApi>> | undefined;
let engine: EngineProcess | undefined;
let browsers: ChildProcess | undefined;
let watching = true;
let watcher: Promise<void> | undefined;

/** The next message of `type` from the browsers' process (or its exit, an error). */
function fromBrowsers<T extends FromBrowsers['type']>(type: T): Promise<Extract<FromBrowsers, { type: T }>> {
  return new Promise((resolve, reject) => {
    const child = browsers as ChildProcess;
    const onMessage = (message: FromBrowsers) => {
      if (message.type !== type) return;
      child.off('message', onMessage).off('exit', onExit);
      resolve(message as Extract<FromBrowsers, { type: T }>);
    };
    const onExit = (code: number | null) => reject(new Error(`the browsers' process exited (${code})`));
    child.on('message', onMessage).once('exit', onExit);
  });
}
const tell = (message: ToBrowsers) => {
  if (browsers?.connected) browsers.send(message);
};

/** test/sipp/<name>.xml filled, dialling each call the next number of the injection file instead of `-s`. */
async function toEachNumber(name: string, replacements: Record<string, string>): Promise<string> {
  const file = await writeScenario(name, work, replacements);
  await writeFile(file, (await readFile(file, 'utf8')).replaceAll('[service]', '[field0]'));
  return file;
}

try {
  process.stdout.write(
    `phones bench: Node ${process.version}, ${os.cpus().length} CPUs, ${database.where}; sipp on loopback as the ` +
      `carrier; stand-in browsers (@roamhq/wrtc) in a process of their own\n` +
      `${concurrent} calls held ${holdSeconds} s (started at ${rampRate}/s); offers at ${offerRate}/s for ` +
      `${offerSeconds} s; withdrawals at ${withdrawRate}/s for ${withdrawSeconds} s; ${users} users, one per call; ` +
      `load average at the start ${os.loadavg()[0]?.toFixed(1)}\n\n`,
  );
  // sipp sends from 127.0.0.1; the far end of the carrier-only calls is a carrier of its own (its port).
  const farPort = await freePort();
  for (const args of [
    ['carriers', 'add', 'sipp', '--address', '127.0.0.1'],
    ['carriers', 'add', 'far', '--address', '127.0.0.1', '--port', String(farPort)],
  ]) {
    const added = await runCli(database.url, args);
    if (added.code !== 0) throw new Error(`carriers add: ${added.stderr}`);
  }
  api = await startApi(database.url, dataDir);
  const apiUrl = api.url;

  process.stdout.write(`setting up ${users} users, devices and numbers ...\n`);
  const { people, ringNumbers, forwardNumber } = await setUpPeople(pool, apiUrl, users, 'far');
  const numbersFile = path.join(work, 'numbers.csv');
  await writeFile(numbersFile, `SEQUENTIAL\n${ringNumbers.map((number) => `${number.slice(1)};`).join('\n')}\n`);
  const media = await mediaFor(holdSeconds * 1000, { throughout: true });
  const short = (holdMs: number) => toEachNumber('caller-hangs-up', { HOLD_MS: String(holdMs) });
  const uac = (args: string[], calls: number, rate: number) =>
    runUac({
      work,
      args,
      target: `127.0.0.1:${engine?.sipPort}`,
      calls,
      rate,
      limit: 10_000,
      started: (sipp) => children.push(sipp.child),
    });

  browsers = fork(fileURLToPath(new URL('./phone-browsers.ts', import.meta.url)), [], {
    execArgv: ['--import=tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await fromBrowsers('ready');
  const browsersPid = browsers.pid as number;
  const phones = (accepting: boolean, second: boolean): PhoneSpec[] =>
    people.flatMap((person) => [
      { deviceId: person.first, token: person.token, accept: accepting },
      ...(second && person.second !== undefined
        ? [{ deviceId: person.second, token: person.token, accept: false }]
        : []),
    ]);
  tell({ type: 'phones', apiUrl, phones: phones(true, false) });
  // The browsers hear which calls ended (as a browser hears its call end): they stop speaking and read their stats.
  const told = new Set<string>();
  watcher = (async () => {
    while (watching) {
      const ended = await pool
        .query<{ id: string }>("SELECT id FROM calls WHERE ended_at > clock_timestamp() - interval '30 seconds'")
        .catch(() => ({ rows: [] }));
      const fresh = ended.rows.map((row) => row.id).filter((id) => !told.has(id));
      for (const id of fresh) told.add(id);
      if (fresh.length > 0) tell({ type: 'ended', callIds: fresh });
      await sleep(200);
    }
  })();
  /** The browsers' records once every answered call of `callIds` has its statistics (at most 15 s). */
  const settled = async (callIds: ReadonlySet<string>) => {
    for (const deadline = Date.now() + 15_000; ;) {
      tell({ type: 'report' });
      const answer = await fromBrowsers('report');
      const open = answer.calls.filter(
        (record) => callIds.has(record.callId) && record.acceptStatus === 200 && record.error === null && !record.rtp,
      );
      if (open.length === 0 || Date.now() > deadline) return answer;
      await sleep(250);
    }
  };
  const legsOf = async (since: Date, numbers: readonly string[]) =>
    (
      await pool.query<LegRow>(
        `SELECT l.call_id, l.role, l.packets_in::int AS packets_in, l.packets_out::int AS packets_out,
                l.answered_at, l.ended_at
           FROM call_legs l JOIN calls c ON c.id = l.call_id
          WHERE c.started_at >= $1 AND c.to_number = ANY($2)`,
        [since, numbers],
      )
    ).rows;
  const callsOf = async (since: Date, numbers: readonly string[]) =>
    (
      await pool.query<CallTimes>(
        `SELECT id, sip_call_id, started_at, connected_at FROM calls
          WHERE started_at >= $1 AND to_number = ANY($2)`,
        [since, numbers],
      )
    ).rows;

  /** Devices that cannot be rung now: on a call, or without a live presence lease. */
  const unringable = async (when: string) => {
    const { rows } = await pool.query<{ busy: string; lapsed: string }>(
      `SELECT count(*) FILTER (WHERE busy_call_id IS NOT NULL) AS busy,
              count(*) FILTER (WHERE presence_expires_at <= clock_timestamp()) AS lapsed FROM devices`,
    );
    notes.push(`${when}: ${rows[0]?.busy} devices on a call, ${rows[0]?.lapsed} without a live presence lease`);
  };
  const notes: string[] = [];

  // 1a. Carrier-only: a forward to sipp's UAS, on a fresh engine.
  engine = await startEngine({ databaseUrl: database.url, dataDir, nodeArgs });
  const mediaPort = await freePort();
  const far = startSipp(
    ['-sn', 'uas', '-rtp_echo', '-i', '127.0.0.1', '-p', String(farPort), '-mi', '127.0.0.1', '-mp', String(mediaPort)],
    work,
  );
  children.push(far.child);
  process.stdout.write(`measuring ${concurrent} concurrent carrier-only calls (forward to sipp) ...\n`);
  let since = await databaseNow(pool);
  const heldForward = await writeScenario('caller-hangs-up', work, { MEDIA: media.MEDIA, HOLD_MS: media.HOLD_MS });
  const shortForward = await writeScenario('caller-hangs-up', work, { HOLD_MS: '2000' });
  await uac(['-sf', shortForward, '-s', forwardNumber.slice(1)], warmupCalls, warmupCalls);
  await drained(pool, [forwardNumber], since);
  const carrier = await holdCalls({
    pool,
    engine,
    work,
    children,
    scenarioArgs: ['-sf', heldForward, '-s', forwardNumber.slice(1)],
    numbers: [forwardNumber],
    count: concurrent,
    rampRate,
    holdSeconds,
    up: 'connected_at',
    watch: { far: far.child.pid as number },
  });
  const carrierLegs = await legsOf(carrier.since, [forwardNumber]);
  far.child.kill('SIGTERM');
  await far.done;
  const carrierLog = { lines: engine.lines(), last: [...engine.log] };
  await engine.stop();

  // 1b. Browser calls on a fresh engine.
  engine = await startEngine({ databaseUrl: database.url, dataDir, nodeArgs });
  process.stdout.write(`measuring ${concurrent} concurrent browser calls ...\n`);
  since = await databaseNow(pool);
  await uac(['-sf', await short(2000), '-inf', numbersFile], warmupCalls, warmupCalls);
  await drained(pool, ringNumbers, since);
  const heldRing = await toEachNumber('caller-hangs-up', { MEDIA: media.MEDIA, HOLD_MS: media.HOLD_MS });
  const browser = await holdCalls({
    pool,
    engine,
    work,
    children,
    scenarioArgs: ['-sf', heldRing, '-inf', numbersFile],
    numbers: ringNumbers,
    count: concurrent,
    rampRate,
    holdSeconds,
    up: 'connected_at',
    watch: { browsers: browsersPid },
  });
  const browserLegs = await legsOf(browser.since, ringNumbers);
  const browserCalls = await callsOf(browser.since, ringNumbers);
  const browserRecords = await settled(new Set(browserCalls.map((row) => row.id)));

  await unringable('after the concurrent browser calls ended');
  // 2. Offer latency: the devices only long-poll; sipp hangs up 1 s after the 200.
  tell({ type: 'phones', apiUrl, phones: phones(false, false) });
  process.stdout.write(`measuring offers at ${offerRate}/s for ${offerSeconds} s ...\n`);
  since = await databaseNow(pool);
  const messages = path.join(work, 'offers-messages.log');
  const offerRun = await uac(
    ['-sf', await short(1000), '-inf', numbersFile, '-trace_msg', '-message_file', messages],
    offerRate * offerSeconds,
    offerRate,
  );
  const offerReasons = await drained(pool, ringNumbers, since);
  const offerCalls = await callsOf(since, ringNumbers);
  const offerRows = (
    await pool.query<{ id: string; created_at: Date }>(
      `SELECT o.id, o.created_at FROM offers o JOIN calls c ON c.id = o.call_id
        WHERE c.started_at >= $1 AND c.to_number = ANY($2)`,
      [since, ringNumbers],
    )
  ).rows;
  const inviteSent = await inviteSendTimes(messages);
  tell({ type: 'report' });
  const offerRecords = await fromBrowsers('report');

  await unringable('after the offer run');
  // 3. Withdrawal: a second device per user that only long-polls; the first accepts.
  await addSecondDevices(apiUrl, people);
  tell({ type: 'phones', apiUrl, phones: phones(true, true) });
  process.stdout.write(`measuring withdrawals at ${withdrawRate}/s for ${withdrawSeconds} s ...\n`);
  since = await databaseNow(pool);
  const withdrawRun = await uac(
    ['-sf', await short(2000), '-inf', numbersFile],
    withdrawRate * withdrawSeconds,
    withdrawRate,
  );
  const withdrawReasons = await drained(pool, ringNumbers, since);
  const withdrawCalls = await callsOf(since, ringNumbers);
  const withdrawRecords = await settled(new Set(withdrawCalls.map((row) => row.id)));
  await unringable('after the withdrawal run');
  engine.alive();

  const phases: Phases = {
    concurrent,
    holdSeconds,
    rampRate,
    media,
    carrier: { held: carrier, legs: carrierLegs, log: carrierLog },
    browser: { held: browser, legs: browserLegs, calls: browserCalls, records: browserRecords },
    offers: {
      rate: offerRate,
      seconds: offerSeconds,
      run: offerRun,
      reasons: offerReasons,
      calls: offerCalls,
      inviteSent,
      offerCreated: new Map(offerRows.map((row) => [row.id, row.created_at.getTime()])),
      records: offerRecords,
    },
    withdrawals: {
      rate: withdrawRate,
      seconds: withdrawSeconds,
      run: withdrawRun,
      reasons: withdrawReasons,
      calls: withdrawCalls,
      records: withdrawRecords,
      first: new Set(people.map((person) => person.first)),
    },
    engineLog: { lines: engine.lines(), last: [...engine.log] },
    notes,
  };
  process.stdout.write(`${report(phases)}\n`);
  if (browser.media.successful === 0) throw new Error(`no browser call completed: ${browser.output}`);
  if (offerCalls.length === 0) throw new Error(`no call was offered: ${offerRun.output}`);
} catch (error) {
  process.stdout.write(`phones bench failed: ${error instanceof Error ? error.message : String(error)}\n`);
  if ((engine?.log.length ?? 0) > 0) process.stdout.write(`last engine log lines:\n${engine?.log.join('\n')}\n`);
  process.exitCode = 1;
} finally {
  watching = false;
  await watcher;
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  if (browsers !== undefined && browsers.exitCode === null && browsers.signalCode === null) {
    const stopped = fromBrowsers('stopped').catch(() => undefined);
    tell({ type: 'stop' });
    await Promise.race([stopped, sleep(10_000)]);
    browsers.kill('SIGKILL');
  }
  await engine?.stop();
  await api?.close();
  await pool.end();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
  await rm(work, { recursive: true, force: true });
}
