/**
 * SIP fuzzing: at least 100,000 mutated and random datagrams (test/helpers/sip-fuzz.ts) thrown at the UDP and TCP
 * listeners of an engine running as its own process (`switchboard engine`), so that a crash is the process dying.
 * The engine must never crash nor log a warning or an error about what it was sent, its memory must stay flat, and a
 * normal call (sipp as the carrier) must still complete afterwards.
 *
 * The sender (127.0.0.3, an address nothing else here listens on) is a carrier, so INVITEs reach the number lookup
 * and the SDP handling; the number it dials most has a published plan that answers and hangs up. It behaves as a
 * peer would where that keeps the engine's state small (it acknowledges final answers to its INVITEs and answers
 * BYE), and after each batch it sends an OPTIONS and waits for the 200: UDP keeps order on loopback, so the engine
 * has read the batch by then, and a batch stays well inside a socket's receive buffer.
 *
 * Memory: the engine runs with `--expose-gc` and a collection on SIGUSR2 (a preloaded line, nothing of ours), so
 * the heap is read from /metrics after a full collection, without garbage. It is read after a warm-up over TCP (whose
 * transactions mostly end with their answer) and at the end, once the calls have ended and few transactions are left
 * (sip.js keeps a UDP transaction 32 s after its answer, RFC 3261 timers).
 *
 * Replay a failure with the seed it prints: SIP_FUZZ_SEED=<seed> (SIP_FUZZ_DATAGRAMS=<count> changes the count).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import test from 'ava';
import fc from 'fast-check';
import { runCli, switchboardArgs } from '../../helpers/cli.ts';
import { addSippCarrier, numberRunning } from '../../helpers/phone-lines.ts';
import { startService, type TestService } from '../../helpers/service.ts';
import { datagram, type FuzzTarget } from '../../helpers/sip-fuzz.ts';
import { runSipp } from '../../helpers/sipp.ts';

const seed = process.env.SIP_FUZZ_SEED === undefined ? randomInt(2 ** 31) : Number(process.env.SIP_FUZZ_SEED);
const total = Number(process.env.SIP_FUZZ_DATAGRAMS ?? 100_000);
/** Datagrams in a batch over UDP, between two fences. */
const batchSize = 100;
/**
 * Messages on one TCP connection. About one fuzzed message in five breaks the stream (no length to tell, longer
 * than any message), and the engine then cuts the connection: what follows on it would be lost.
 */
const tcpBatchSize = 5;
/** TCP connections at the same time. */
const tcpConnections = 4;
/** What a UDP batch may take of the engine's receive buffer (212,992 bytes by default), a kilobyte more per datagram. */
const batchBytes = 150_000;
const sender = '127.0.0.3';
/**
 * Heap growth (used heap and external memory, after full collections) that still counts as flat. Measured: the heap
 * settles about 6 MiB above the warm-up's measure (compiled code, pooled connections, the transactions in progress)
 * and then stays within 2 MiB over 300,000 datagrams; a leak of 250 bytes a datagram or more breaks this bound.
 */
const tolerance = 24 * 2 ** 20;
/**
 * Transactions the engine may still hold when the end is measured, a few kilobytes each: the fuzz keeps some hundreds
 * in progress (each lasts up to 32 s after its answer), and the end waits until they fall below this.
 */
const settledTransactions = 400;

const collectGarbage = "process.on('SIGUSR2',()=>{globalThis.gc();process.stderr.write('fuzz: collected\\n')})";

interface Engine {
  child: ChildProcess;
  url: string;
  sipPort: number;
  /** Log lines at warn level or above, by message, with one example each. */
  warnings: Map<string, { count: number; example: string }>;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** A full garbage collection in the engine. */
  collect(): Promise<void>;
}

/**
 * `switchboard engine` on the service's database, as its own process, from the sources (as every test runs it: a
 * build in dist/ may be older than the code under test).
 */
/** The master secret of the service and its engine. */
const secret = 'the fuzzed engine and its service share this secret';

async function startEngine(databaseUrl: string, dataDir: string): Promise<Engine> {
  const preload = `--import=data:text/javascript,${encodeURIComponent(collectGarbage)}`;
  const child = spawn(process.execPath, ['--expose-gc', preload, ...switchboardArgs, 'engine'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      SIP_PORT: '0',
      ENGINE_HTTP_PORT: '0',
      SWITCHBOARD_DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      // As production runs it (its absence is a warning at start): the service's own.
      SWITCHBOARD_SECRET: secret,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let collected = () => {};
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    if (chunk.includes('fuzz: collected\n')) collected();
    stderr = (stderr + chunk.replaceAll('fuzz: collected\n', '')).slice(-20_000);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const warnings = new Map<string, { count: number; example: string }>();
  let sipPort: number | undefined;
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const url = await new Promise<string>((resolve, reject) => {
    lines.on('line', (line) => {
      let entry: { level?: number; msg?: string; sip?: string; url?: string };
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if ((entry.level ?? 0) >= 40) {
        const seen = warnings.get(entry.msg ?? '') ?? { count: 0, example: line.slice(0, 2_000) };
        seen.count += 1;
        warnings.set(entry.msg ?? '', seen);
      }
      if (entry.msg === 'call engine listening') sipPort = Number(entry.sip?.split(':').at(-1));
      if (entry.msg === 'switchboard started' && entry.url !== undefined) resolve(entry.url);
    });
    exited.then((outcome) => reject(new Error(`the engine exited (${outcome.code}) before it started: ${stderr}`)));
  });
  if (sipPort === undefined) throw new Error('the engine did not say its SIP port');
  return {
    child,
    url,
    sipPort,
    warnings,
    stderr: () => stderr,
    exited,
    collect() {
      const done = new Promise<void>((resolve) => (collected = resolve));
      child.kill('SIGUSR2');
      return done;
    },
  };
}

/** Values of a metric in Prometheus text, summed over its label sets (those that contain `labels`). */
function metric(text: string, name: string, labels = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name} `) && !line.startsWith(`${name}{`)) continue;
    if (line.includes(labels)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/**
 * What a peer answers to the engine, where that ends the engine's state early: an ACK for a final response to an
 * INVITE, a 200 for a BYE. Nothing for anything else (or anything it cannot read).
 */
function reply(text: string, local: string, transport: 'UDP' | 'TCP'): string | undefined {
  const head = text.split('\r\n\r\n', 1)[0] as string;
  const header = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'im').exec(head)?.[1];
  const status = /^SIP\/2\.0 (\d{3}) /.exec(head);
  const cseq = /^(\d+)\s+(\w+)/.exec(header('CSeq') ?? '');
  const [via, from, to, callId] = [header('Via'), header('From'), header('To'), header('Call-ID')];
  if (cseq === null || via === undefined || from === undefined || to === undefined || callId === undefined) return;
  const end = ['Content-Length: 0', '', ''];
  if (status !== null && cseq[2] === 'INVITE' && Number(status[1]) >= 200) {
    // A 2xx is acknowledged in a transaction of its own, to its Contact; any other final answer in the INVITE's.
    const ok = (status[1] as string).startsWith('2');
    const contact = /<([^>]+)>/.exec(header('Contact') ?? '')?.[1];
    const target = ok ? (contact ?? 'sip:switchboard@127.0.0.1') : 'sip:switchboard@127.0.0.1';
    const ackVia = ok ? `SIP/2.0/${transport} ${local};branch=z9hG4bKack${randomInt(1e9)};rport` : via;
    const ack = [`ACK ${target} SIP/2.0`, `Via: ${ackVia}`, `From: ${from}`, `To: ${to}`, `Call-ID: ${callId}`];
    return [...ack, `CSeq: ${cseq[1]} ACK`, 'Max-Forwards: 70', ...end].join('\r\n');
  }
  if (status === null && head.startsWith('BYE ')) {
    const vias = head.split('\r\n').filter((line) => /^via\s*:/i.test(line));
    const ok = ['SIP/2.0 200 OK', ...vias, `From: ${from}`, `To: ${to}`, `Call-ID: ${callId}`];
    return [...ok, `CSeq: ${cseq[1]} BYE`, ...end].join('\r\n');
  }
  return undefined;
}

/** Calls `onMessage` with each SIP message of a TCP stream (headers, then Content-Length bytes). */
function readMessages(socket: net.Socket, onMessage: (message: string) => void): void {
  let text = '';
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    for (let end = text.indexOf('\r\n\r\n'); end !== -1; end = text.indexOf('\r\n\r\n')) {
      const length = Number(/^(?:content-length|l)\s*:\s*(\d+)/im.exec(text.slice(0, end))?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      onMessage(text.slice(0, end + 4 + length));
      text = text.slice(end + 4 + length);
    }
  });
}

let fences = 0;

/** An OPTIONS that only a live engine answers. */
function fenceRequest(sipPort: number, local: string, transport: 'UDP' | 'TCP'): { callId: string; text: string } {
  fences += 1;
  const callId = `fence-${fences}-${randomInt(1e9)}`;
  const text = [
    `OPTIONS sip:switchboard@127.0.0.1:${sipPort} SIP/2.0`,
    `Via: SIP/2.0/${transport} ${local};branch=z9hG4bKfence${callId};rport`,
    `From: <sip:fence@${sender}>;tag=fence`,
    `To: <sip:switchboard@127.0.0.1:${sipPort}>`,
    `Call-ID: ${callId}`,
    'CSeq: 1 OPTIONS',
    'Max-Forwards: 70',
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
  return { callId, text };
}

let service: TestService;
let engine: Engine;
let dataDir: string;

test.before(async () => {
  service = await startService({ SWITCHBOARD_SECRET: secret }, ['api']);
  dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-fuzz-'));
  engine = await startEngine(service.databaseUrl, dataDir);
});

test.after.always(async () => {
  if (engine !== undefined && engine.child.exitCode === null && engine.child.signalCode === null) {
    engine.child.kill('SIGTERM');
    await engine.exited;
  }
  await service?.close();
  if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
});

test('100,000 mutated and random datagrams over UDP and TCP: no crash, flat memory, and a call still completes', async (t) => {
  t.timeout(900_000);
  t.log(`seed ${seed} (replay: SIP_FUZZ_SEED=${seed})`);
  const { sipPort } = engine;
  // sipp (127.0.0.1) is the carrier of the final call; the fuzzing sender is one too.
  await addSippCarrier(service);
  const added = await runCli(service.databaseUrl, ['carriers', 'add', 'fuzz', '--address', sender]);
  t.is(added.code, 0, added.stderr);
  const line = await numberRunning(t, service, { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } });

  const died = engine.exited.then((outcome) => {
    throw new Error(`the engine died (${outcome.code ?? outcome.signal}): ${engine.stderr()}`);
  });
  died.catch(() => {});

  // The UDP sender, a socket for the RTP of answered calls, and a TCP listener for the connections the engine opens
  // (to the Contact of a call over TCP, for its BYE), which answers as the sender does.
  const udp = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => udp.bind(0, sender, resolve));
  const rtp = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => rtp.bind(0, sender, resolve));
  /** Messages of our own the engine takes too: fences, acknowledgements, answers to its BYEs. */
  let own = 0;
  const sink = net.createServer((socket) => {
    socket.on('error', () => {});
    const local = `${sender}:${socket.localPort}`;
    readMessages(socket, (message) => {
      const answer = reply(message, local, 'TCP');
      if (answer !== undefined && socket.writable) {
        socket.write(answer);
        own += 1;
      }
    });
  });
  await new Promise<void>((resolve) => sink.listen(0, sender, resolve));
  t.teardown(() => {
    udp.close();
    rtp.close();
    sink.close();
  });
  const udpLocal = `${sender}:${udp.address().port}`;
  const waiting = new Map<string, () => void>();
  let answers = 0;
  udp.on('message', (data) => {
    answers += 1;
    const text = data.toString('latin1');
    const callId = /^Call-ID:\s*(fence-\S+)/im.exec(text)?.[1];
    if (callId !== undefined && text.startsWith('SIP/2.0 200 ')) waiting.get(callId)?.();
    const answer = reply(text, udpLocal, 'UDP');
    if (answer !== undefined) {
      udp.send(answer, sipPort, '127.0.0.1');
      own += 1;
    }
  });
  const send = (data: Buffer | string) =>
    new Promise<void>((resolve) => udp.send(data, sipPort, '127.0.0.1', () => resolve()));

  /** Waits for the engine's 200 to an OPTIONS sent after a batch, retransmitted as SIP does (T1, 500 ms). */
  const udpFence = async () => {
    const fence = fenceRequest(sipPort, udpLocal, 'UDP');
    const answered = new Promise<void>((resolve) => waiting.set(fence.callId, resolve));
    const sendFence = () => {
      own += 1;
      return send(fence.text);
    };
    await sendFence();
    const resend = setInterval(() => void sendFence(), 500);
    try {
      await Promise.race([answered, died]);
    } finally {
      clearInterval(resend);
      waiting.delete(fence.callId);
    }
  };

  /**
   * A batch over UDP: the datagrams, and a fence each time they fill half the receive buffer. The fence after one half
   * is awaited only once the next half is sent, so that the engine reads one while the next is made.
   */
  let pendingFence: Promise<void> = Promise.resolve();
  const fenceAfter = async () => {
    await pendingFence;
    pendingFence = udpFence();
    pendingFence.catch(() => {});
  };
  const udpBatch = async (messages: Buffer[]): Promise<number> => {
    let bytes = 0;
    let sending: Promise<void>[] = [];
    for (const message of messages) {
      sending.push(send(message));
      bytes += message.length + 1_024;
      if (bytes > batchBytes / 2) {
        await Promise.all(sending);
        await fenceAfter();
        bytes = 0;
        sending = [];
      }
    }
    await Promise.all(sending);
    await fenceAfter();
    return messages.length;
  };

  /**
   * A batch over TCP, on a connection of its own: the messages (each in two writes, split anywhere), then 16 KiB of
   * line ends (which end any header or body the batch left open: no message is longer) and the fence. The batch is
   * over when the fence is answered or the engine has cut the connection (a stream that cannot be SIP). Returns how
   * many messages went out before the connection was cut.
   */
  const tcpBatch = async (messages: Buffer[], splits: number[]): Promise<number> => {
    const socket = net.connect({ host: '127.0.0.1', port: sipPort, localAddress: sender });
    socket.on('error', () => {});
    await new Promise<void>((resolve) => socket.once('connect', resolve).once('close', resolve));
    const local = `${sender}:${socket.localPort}`;
    const fence = fenceRequest(sipPort, local, 'TCP');
    const over = new Promise<void>((resolve) => {
      readMessages(socket, (message) => {
        answers += 1;
        if (message.includes(`Call-ID: ${fence.callId}\r\n`)) resolve();
        const answer = reply(message, local, 'TCP');
        if (answer !== undefined && socket.writable) {
          socket.write(answer);
          own += 1;
        }
      });
      socket.once('close', () => resolve());
    });
    let written = 0;
    messages.forEach((message, index) => {
      if (!socket.writable) return;
      const split = (splits[index] ?? 0) % (message.length + 1);
      socket.write(message.subarray(0, split));
      socket.write(message.subarray(split));
      written += 1;
    });
    if (socket.writable) {
      socket.write(`${'\r\n'.repeat(8_200)}${fence.text}`);
      own += 1;
    }
    await Promise.race([over, died]);
    socket.destroy();
    return written;
  };

  const target = (transport: 'UDP' | 'TCP', localPort: number): FuzzTarget => ({
    engineHost: '127.0.0.1',
    enginePort: sipPort,
    localHost: sender,
    localPort,
    rtpPort: rtp.address().port,
    transport,
    numbers: [line.e164.slice(1)],
  });
  /** A run of the property: one batch over UDP, or batches over TCP on connections at the same time. */
  const runs = {
    UDP: fc
      .array(datagram(target('UDP', udp.address().port)), { minLength: batchSize, maxLength: batchSize })
      .map((messages) => [{ messages, splits: [] as number[] }]),
    TCP: fc.array(
      fc.record({
        messages: fc.array(datagram(target('TCP', (sink.address() as net.AddressInfo).port)), {
          minLength: tcpBatchSize,
          maxLength: tcpBatchSize,
        }),
        splits: fc.array(fc.nat(), { minLength: tcpBatchSize, maxLength: tcpBatchSize }),
      }),
      { minLength: tcpConnections, maxLength: tcpConnections },
    ),
  };
  const perRun = { UDP: batchSize, TCP: tcpBatchSize * tcpConnections };

  const sent = { UDP: 0, TCP: 0 };
  let last: Buffer[] = [];
  /** `count` datagrams over `transport`, in batches; `phase` makes each phase's values differ under one seed. */
  const fuzz = async (transport: 'UDP' | 'TCP', count: number, phase: number) => {
    const property = fc.asyncProperty(runs[transport], async (batches) => {
      last = batches.flatMap((batch) => batch.messages);
      if (transport === 'UDP') sent.UDP += await udpBatch(last);
      else {
        const written = await Promise.all(batches.map((batch) => tcpBatch(batch.messages, batch.splits)));
        sent.TCP += written.reduce((sum, count) => sum + count, 0);
      }
    });
    const numRuns = Math.ceil(count / perRun[transport]);
    try {
      await fc.assert(property, { seed: seed + phase, numRuns, endOnFailure: true });
      await pendingFence;
    } catch (error) {
      // fast-check's message repeats the whole batch: its cause is what went wrong. The last batch sent goes to a file
      // (a failure in one of the engine's timers may come from an earlier one: the seed replays them all).
      const file = path.join(os.tmpdir(), `sip-fuzz-${seed}-${process.pid}.txt`);
      await writeFile(file, last.map((message) => message.toString('base64')).join('\n'));
      const reason = String((error as Error).cause ?? error);
      throw new Error(`${reason}\nseed ${seed}; the last batch sent: ${file}`, { cause: error });
    }
  };
  const scrape = async () => (await fetch(`${engine.url}/metrics`)).text();
  /** Used heap and external memory after a full collection, and the resident set, in bytes. */
  const memory = async () => {
    await Promise.race([engine.collect(), died]);
    const text = await scrape();
    return {
      heap:
        metric(text, 'switchboard_nodejs_heap_size_used_bytes') +
        metric(text, 'switchboard_nodejs_external_memory_bytes'),
      rss: metric(text, 'switchboard_process_resident_memory_bytes'),
    };
  };

  /** What the engine took of the fuzz: every message it counted (taken in, or dropped as malformed) but our own. */
  const taken = async () => {
    const text = await scrape();
    const counted = metric(text, 'switchboard_sip_messages_total', 'direction="in"');
    return counted + metric(text, 'switchboard_sip_malformed_total') - own;
  };
  // Warm-up over TCP (a tenth), then the first measure; the UDP share; the rest over TCP, until the engine has taken
  // the count (a message on a TCP connection after one that broke the stream is lost with the connection).
  const started = process.hrtime.bigint();
  await fuzz('TCP', total / 10, 0);
  const warm = await memory();
  await fuzz('UDP', total * 0.8, 1);
  for (let phase = 2, missing = total; missing > 0; phase += 1) {
    missing = total - (await taken());
    if (missing > 0) await fuzz('TCP', Math.max(missing * 1.25, 1), phase);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const fuzzed = await taken();

  // A normal call still completes.
  const call = await runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  t.is(call.code, 0, `${call.stderr}\n${call.errors}`);

  // The calls of the traffic end, and most of its transactions.
  let text = await scrape();
  while (
    metric(text, 'switchboard_sip_transactions') > settledTransactions ||
    metric(text, 'switchboard_calls_active') > 0
  ) {
    await Promise.race([delay(500), died]);
    text = await scrape();
  }
  const end = await memory();
  const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
  t.log(
    `${sent.UDP + sent.TCP} datagrams sent (${sent.UDP} over UDP, ${sent.TCP} over TCP) in ${seconds.toFixed(1)} s, ` +
      `of which the engine took ${fuzzed}, dropping ${metric(text, 'switchboard_sip_malformed_total')} as malformed; ` +
      `answered ${metric(text, 'switchboard_calls_started_total')} calls and sent ${answers} messages back; ` +
      `heap and external ${mib(warm.heap)} -> ${mib(end.heap)} MiB, resident ${mib(warm.rss)} -> ${mib(end.rss)} MiB`,
  );
  t.true(fuzzed >= total);
  t.true(end.heap - warm.heap < tolerance, `memory grew by ${mib(end.heap - warm.heap)} MiB`);
  t.is(engine.child.exitCode, null);
  t.deepEqual(
    [...engine.warnings].map(([message, { count, example }]) => `${count} × ${message}: ${example}`),
    [],
    'the engine logged warnings or errors',
  );
  t.false(/uncaught|unhandled/i.test(engine.stderr()), engine.stderr());
});
