/**
 * The messages bench (part of `npm run bench`; alone, after `npm run build`: `node --import=tsx bench/messages.ts`,
 * with DATABASE_URL for a scratch database on that server, else an embedded PostgreSQL), against a test SMSC (the
 * tests' one, test/helpers/smsc.ts, in a process of its own: bench/smsc-process.ts):
 *
 * 1. Baseline: the SMSC fed directly by the `smpp` package's client with our link's window (10 unanswered):
 *    BENCH_MESSAGES messages, messages/s and the submit-to-answer time (bench/messages-smsc.ts).
 * 2. End to end, as fast as messages are accepted (after BENCH_MESSAGES_WARMUP, 1,000, sent the same way and
 *    reported apart: the processes' first seconds compile code and prepare statements): the engine role in a process
 *    of its own (`switchboard engine`, the build) with a carrier whose messaging settings point at another SMSC of the same kind (throughput 10,000
 *    parts/s); BENCH_MESSAGES one-part texts accepted by BENCH_MESSAGES_WRITERS writers at once, until every one is
 *    answered by the SMSC and `sent` in the database. Accepted means POST /api/v1/messages answered 202 when
 *    operation 67 is built (the API role runs in this process); while it answers 501 the bench writes each message
 *    as operation 67 will (core/messages/messages.ts `createOutboundMessage`, one transaction each), and says so.
 * 3. End to end at the target's pace: 500 messages/s offered for BENCH_MESSAGES_PACED_SECONDS (10).
 *
 * Each message goes to a destination of its own, so the SMSC tells a loss or a duplicate. Figures: messages/s (the
 * end-to-end ones also as a share of the baseline), p50/p99 from the request (or the write) to the SMSC's answer and to `sent` in the
 * database, the engine's CPU seconds per 1,000 messages, and the host's load average. Target on 2 cores: 500
 * messages/s end to end with none lost. A missed target prints NOT MET; the exit code is non-zero only when the run
 * broke (a process died, setup failed, messages not acknowledged in time).
 */
import { randomInt, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inTransaction } from '../core/database.ts';
import { createApplication } from '../core/identity/applications.ts';
import { createOutboundMessage } from '../core/messages/messages.ts';
import { decideTextingRegistration, importNumbers } from '../core/numbers/numbers.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { runCli } from '../test/helpers/cli.ts';
import { scratchDatabase } from './database.ts';
import {
  apiCaller,
  cpuSeconds,
  type EngineProcess,
  percentile,
  sleep,
  startApi,
  startEngine,
} from './engine-process.ts';
import { type BaselineFigures, destination, feedDirectly, type SmscProcess, startSmsc } from './messages-smsc.ts';

const total = Number(process.env.BENCH_MESSAGES ?? 5000);
const writers = Number(process.env.BENCH_MESSAGES_WRITERS ?? 16);
const warmupCount = Number(process.env.BENCH_MESSAGES_WARMUP ?? 1000);
const numberCount = Number(process.env.BENCH_MESSAGES_NUMBERS ?? 10);
const pacedSeconds = Number(process.env.BENCH_MESSAGES_PACED_SECONDS ?? 10);
const targetRate = 500;
/** Our link's window (engine/messaging/link.ts): the baseline keeps as many unanswered. */
const window = 10;
const throughput = 10_000;

const loadAverage = () =>
  os
    .loadavg()
    .map((value) => value.toFixed(2))
    .join(' ');
const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : '-');

process.stdout.write(
  `messages bench: Node ${process.version}, ${os.cpus().length} CPUs, load average ${loadAverage()}\n`,
);

// 1. The baseline, on an SMSC of its own.
let baseline: BaselineFigures;
{
  const smsc = await startSmsc();
  try {
    // A short warm-up (JIT, the socket), then the measured run.
    await feedDirectly(smsc.port, Math.min(500, total), window, 900_000);
    baseline = await feedDirectly(smsc.port, total, window);
    const report = await smsc.report();
    if (report.distinct !== total + Math.min(500, total)) throw new Error('the baseline SMSC missed submits');
  } finally {
    await smsc.stop();
  }
}
process.stdout.write(
  `baseline (smpp client -> SMSC, window ${window}): ${baseline.messages} messages in ${baseline.seconds.toFixed(2)} s, ` +
    `${baseline.perSecond.toFixed(0)}/s, submit->answer p50 ${ms(baseline.p50)} ms p99 ${ms(baseline.p99)} ms\n`,
);

const database = await scratchDatabase();
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-messages-'));
const pool = new pg.Pool({ connectionString: database.url, max: writers + 2 });
pool.on('error', () => {});
let smsc: SmscProcess | undefined;
let api: Awaited<ReturnType<typeof startApi>> | undefined;
const agent = new http.Agent({ keepAlive: true, maxSockets: writers * 2 });
let engine: EngineProcess | undefined;
let broken = false;

interface Phase {
  name: string;
  messages: number;
  seconds: number;
  perSecond: number;
  acceptedPerSecond: number;
  toAnswer: number[];
  toSent: number[];
  duplicates: number;
  lost: number;
  notSent: number;
  resubmitted: number;
  engineCpuPer1000: number;
}

try {
  smsc = await startSmsc();
  const cli = async (args: string[]) => {
    const result = await runCli(database.url, args);
    if (result.code !== 0) throw new Error(`switchboard ${args.slice(0, 2).join(' ')}: ${result.stderr}`);
  };
  // The carrier and its SMPP account, set the way an admin does, before the engine reads them.
  await cli(['carriers', 'add', 'smsc', '--address', '127.0.0.1']);
  await cli(
    ['carriers', 'messaging', 'smsc', '--smpp-host', '127.0.0.1', '--smpp-port', String(smsc.port)].concat([
      '--system-id',
      'switchboard',
      '--password',
      'secret',
      '--system-type',
      'sb',
      '--throughput',
      String(throughput),
    ]),
  );
  api = await startApi(database.url, dataDir);
  const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
  const call = apiCaller(api.url, apiKey);
  const workspace = await call('POST', '/workspaces', { externalWorkspaceId: 'bench', name: 'Bench', timezone: 'UTC' });
  const firstNumber = randomInt(1_000_000, 9_000_000);
  const senders = Array.from({ length: numberCount }, (_, i) => ({ e164: `+3390${firstNumber + i}`, id: '' }));
  await importNumbers(
    pool,
    'smsc',
    senders.map(({ e164 }) => e164),
    ['voice', 'sms'],
  );
  for (const sender of senders) sender.id = (await call('POST', '/numbers', { e164: sender.e164 }, workspace.id)).id;
  // Texting registration: only approved numbers send through operation 67 (a campaign named, then decided).
  for (const sender of senders) {
    await call('PATCH', `/numbers/${sender.id}`, { textingRegistration: { campaignId: 'CBENCH1' } }, workspace.id);
    await decideTextingRegistration(pool, sender.e164, 'approved');
  }
  /** Message `index` goes from the bench's numbers in turn. */
  const senderOf = (index: number) => senders[index % senders.length] as { e164: string; id: string };

  // BENCH_MESSAGES_ENGINE_NODE_ARGS: extra node options for the engine process (e.g. --cpu-prof --cpu-prof-dir=/tmp/x).
  const nodeArgs = (process.env.BENCH_MESSAGES_ENGINE_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  engine = await startEngine({ databaseUrl: database.url, dataDir, nodeArgs });
  const enginePort = engine.httpPort;
  for (let tries = 0; ; tries += 1) {
    const metrics = await fetch(`http://127.0.0.1:${enginePort}/metrics`).then((response) => response.text());
    if (/^switchboard_smpp_sessions\{carrier="smsc"\} 1$/m.test(metrics)) break;
    if (tries > 300) throw new Error('the engine did not bind to the SMSC in 30 s');
    await sleep(100);
  }

  // Which path accepts: operation 67 when it is built, else the records' own write (the same transaction's work).
  // The writers' client: node:http over kept-alive connections (fetch costs this process, which is also the API,
  // about twice the CPU per request, which the service's figures would carry).
  const apiUrl = new URL(`${api?.url}/api/v1/messages`);
  const apiSend = (index: number): Promise<number> =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify({
        from: senderOf(index).e164,
        to: `+${destination(index)}`,
        text: `Bench message ${index}`,
      });
      const request = http.request(
        apiUrl,
        {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${apiKey}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
            'idempotency-key': randomUUID(),
            'x-service-workspace-id': workspace.id,
          },
        },
        (response) => {
          response.resume();
          response.on('end', () => resolve(response.statusCode ?? 0));
          response.on('error', reject);
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  const owner = { id: workspace.id, applicationId: 'bench', externalWorkspaceId: 'bench' };
  const insertSend = (index: number) =>
    inTransaction(pool, (db) =>
      createOutboundMessage(db, {
        workspace: owner,
        number: { ...senderOf(index), carrier: 'smsc' },
        to: `+${destination(index)}`,
        text: `Bench message ${index}`,
        actor: null,
      }),
    );
  const probe = await apiSend(0);
  if (probe !== 202 && probe !== 501) throw new Error(`POST /api/v1/messages answered ${probe}`);
  const throughApi = probe === 202;
  const accepted = new Map<string, number>([[destination(0), Date.now()]]);
  // From the request's start: the API answers once the carrier answered (or after 2 s), so its answer comes last.
  const send = async (index: number) => {
    const asked = Date.now();
    if (throughApi) {
      const status = await apiSend(index);
      if (status !== 202) throw new Error(`POST /api/v1/messages answered ${status}`);
    } else {
      await insertSend(index);
    }
    accepted.set(destination(index), asked);
  };
  process.stdout.write(
    throughApi
      ? 'accepted through POST /api/v1/messages (operation 67, the API role in this process)\n'
      : 'POST /api/v1/messages answers 501 in this tree: messages accepted by writing them as operation 67 will ' +
          '(createOutboundMessage, one transaction each, from this process)\n',
  );
  if (!throughApi) await send(0);
  let sentSoFar = 1;

  /** Waits until the SMSC answered and the database holds `sent` every message up to `until` (exclusive). */
  const settled = async (until: number, deadlineMs: number) => {
    const deadline = Date.now() + deadlineMs;
    for (;;) {
      const result = await pool.query<{ sent: number }>(
        `SELECT count(*)::int AS sent FROM messages WHERE direction = 'outbound' AND status = 'sent'`,
      );
      if ((result.rows[0]?.sent ?? 0) >= until) return true;
      if (Date.now() > deadline) return false;
      engine?.alive();
      await sleep(50);
    }
  };
  if (!(await settled(sentSoFar, 10_000))) throw new Error('the first message was not sent in 10 s');

  /** Runs `send` over the destinations [first, first + count) as `offer` says, then measures the phase. */
  const phase = async (name: string, count: number, offer: (first: number) => Promise<void>): Promise<Phase> => {
    const first = sentSoFar;
    const cpuBefore = await cpuSeconds(engine?.pid as number);
    const started = Date.now();
    await offer(first);
    const acceptedSeconds = (Date.now() - started) / 1000;
    sentSoFar += count;
    const done = await settled(sentSoFar, Math.max(60_000, count * 20));
    const cpu = (await cpuSeconds(engine?.pid as number)) - cpuBefore;
    const report = await (smsc as SmscProcess).report();
    const destinations = Array.from({ length: count }, (_, i) => destination(first + i));
    const sentAt = await pool.query<{ to: string; at: Date }>(
      `SELECT m.to_number AS to, e.at FROM message_events e JOIN messages m ON m.id = e.message_id
        WHERE e.status = 'sent' AND m.to_number = ANY ($1)`,
      [destinations.map((digits) => `+${digits}`)],
    );
    const sentTimes = new Map(sentAt.rows.map((row) => [row.to.slice(1), row.at.getTime()]));
    const resubmitted = await pool.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM message_parts WHERE direction = 'outbound' AND attempts > 1`,
    );
    const toAnswer: number[] = [];
    const toSent: number[] = [];
    let lost = 0;
    let last = started;
    for (const digits of destinations) {
      const at = accepted.get(digits) ?? started;
      const answered = report.answeredAt[digits];
      const sent = sentTimes.get(digits);
      if (answered === undefined) lost += 1;
      else toAnswer.push(answered - at);
      if (sent !== undefined) toSent.push(sent - at);
      last = Math.max(last, answered ?? last, sent ?? last);
    }
    if (!done) broken = true;
    const seconds = (last - started) / 1000;
    return {
      name,
      messages: count,
      seconds,
      perSecond: seconds > 0 ? count / seconds : 0,
      acceptedPerSecond: count / acceptedSeconds,
      toAnswer,
      toSent,
      // Every submit beyond the first of its destination, over the whole run so far.
      duplicates: report.submits - report.distinct,
      lost,
      notSent: count - toSent.length,
      resubmitted: resubmitted.rows[0]?.count ?? 0,
      engineCpuPer1000: (cpu / count) * 1000,
    };
  };

  const asFastAsAccepted = (name: string, count: number) =>
    phase(name, count, async (first) => {
      let next = first;
      const writer = async () => {
        while (next < first + count) await send(next++);
      };
      await Promise.all(Array.from({ length: writers }, writer));
    });
  // The processes' first seconds compile code and prepare statements: the same load first, measured apart.
  const warmup =
    warmupCount > 0
      ? await asFastAsAccepted(`${warmupCount} to warm up (${writers} writers; not the target's)`, warmupCount)
      : undefined;
  const burst = await asFastAsAccepted(`${total} as fast as accepted (${writers} writers)`, total);
  const pacedCount = targetRate * pacedSeconds;
  const paced = await phase(`${pacedCount} offered at ${targetRate}/s`, pacedCount, async (first) => {
    const start = performance.now();
    const sends: Promise<void>[] = [];
    for (let i = 0; i < pacedCount; i += 1) {
      const due = start + (i * 1000) / targetRate - performance.now();
      if (due > 1) await sleep(due);
      sends.push(send(first + i));
    }
    await Promise.all(sends);
  });

  process.stdout.write('\n');
  for (const figures of [...(warmup === undefined ? [] : [warmup]), burst, paced]) {
    process.stdout.write(
      `end to end, ${figures.name}: ${figures.perSecond.toFixed(0)} messages/s ` +
        `(${((figures.perSecond / baseline.perSecond) * 100).toFixed(1)}% of the baseline), ` +
        `accepted at ${figures.acceptedPerSecond.toFixed(0)}/s; request->SMSC answer p50 ${ms(percentile(figures.toAnswer, 50))} ms ` +
        `p99 ${ms(percentile(figures.toAnswer, 99))} ms, request->sent p50 ${ms(percentile(figures.toSent, 50))} ms ` +
        `p99 ${ms(percentile(figures.toSent, 99))} ms; lost ${figures.lost}, not sent ${figures.notSent}, ` +
        `duplicates ${figures.duplicates}, parts submitted again ${figures.resubmitted}; ` +
        `engine CPU ${figures.engineCpuPer1000.toFixed(2)} s per 1,000\n`,
    );
  }
  if ((engine?.lines() ?? 0) > 0) {
    process.stdout.write(
      `the engine logged ${engine?.lines()} lines (warn and above), the last:\n${engine?.log.join('\n')}\n`,
    );
  }
  const noLoss = [...(warmup === undefined ? [] : [warmup]), burst, paced].every(
    (figures) => figures.lost === 0 && figures.notSent === 0,
  );
  const keptPace = paced.perSecond >= targetRate * 0.98;
  process.stdout.write(
    `target: ${targetRate} messages/s end to end with no loss: ${burst.perSecond.toFixed(0)}/s as fast as accepted, ` +
      `${paced.perSecond.toFixed(0)}/s of ${targetRate}/s offered, ` +
      `${noLoss ? 'none lost' : 'some lost'}: ${burst.perSecond >= targetRate && keptPace && noLoss ? 'MET' : 'NOT MET'}` +
      ` (${throughApi ? 'through the API' : 'accepted by the records, not the API'}); load average ${loadAverage()}\n`,
  );
} catch (error) {
  broken = true;
  process.stdout.write(`messages bench broke: ${error instanceof Error ? error.stack : String(error)}\n`);
  if (engine !== undefined) process.stdout.write(`engine log:\n${engine.log.join('\n')}\n`);
} finally {
  agent.destroy();
  await engine?.stop();
  await api?.close();
  await smsc?.stop();
  await pool.end();
  await database.close();
  await rm(dataDir, { recursive: true, force: true });
}
process.exit(broken ? 1 : 0);
