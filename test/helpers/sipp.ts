/**
 * sipp (Debian's sip-tester) as the carrier: runs a scenario of test/sipp/ against an engine, with the scenario's
 * placeholders (MEDIA, ON_ANSWER, BEFORE_ACK, HOLD_MS, STATUS, AUDIO_PORT) filled in, and reports sipp's exit code and output. sipp exits 0 when every
 * call of the run followed the scenario.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import type { Clock } from '../../core/clock.ts';
import { loadConfig } from '../../core/config.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { type CallEngine, startCallEngine } from '../../engine/call-engine.ts';
import { freeUdpPort } from './free-port.ts';
import type { TestService } from './service.ts';
import { until } from './until.ts';

export const dtmfPcap = (digit: string) => `/usr/share/sip-tester/dtmf_2833_${digit}.pcap`;
export const audioPcap = '/usr/share/sip-tester/g711a.pcap';

/**
 * Writes test/sipp/<name>.xml into `dir` with its placeholders filled: `replacements`, then the defaults (MEDIA,
 * ON_ANSWER, BEFORE_ACK and INVITE_CHECKS empty, HOLD_MS 1000, STATUS 404, AUDIO_PORT sipp's own media port: the
 * caller's SDP may name another, a socket of the test's, test/helpers/rtp-phone.ts; OFFER_ADDRESS and ANSWER_ADDRESS
 * the `c=` address a caller's offer and a UAS's answer name: sipp's own; REFUSAL_CHECKS actions on a refusal, none;
 * CALLER_ID the user of a caller's From, +15550001111).
 * Returns the file's path.
 */
export async function writeScenario(
  name: string,
  dir: string,
  replacements: Record<string, string> = {},
): Promise<string> {
  const template = await readFile(fileURLToPath(new URL(`../sipp/${name}.xml`, import.meta.url)), 'utf8');
  const filled = Object.entries({
    MEDIA: '',
    ON_ANSWER: '',
    BEFORE_ACK: '',
    INVITE_CHECKS: '',
    HOLD_MS: '1000',
    STATUS: '404',
    AUDIO_PORT: '[media_port]',
    ANSWER_ADDRESS: 'IP[media_ip_type] [media_ip]',
    OFFER_ADDRESS: 'IP[media_ip_type] [media_ip]',
    REFUSAL_CHECKS: '',
    CALLER_ID: '+15550001111',
    ...replacements,
  }).reduce((text, [placeholder, value]) => text.replaceAll(placeholder, value), template);
  const file = path.join(dir, `${name}-${randomUUID()}.xml`);
  await writeFile(file, filled);
  return file;
}

/** The MEDIA placeholder's value that plays a pcap (RTP) to the engine. */
export function playPcap(file: string): string {
  return `<nop><action><exec play_pcap_audio="${file}"/></action></nop>`;
}

/**
 * A caller (the `caller-hangs-up` scenario, this as its MEDIA) that hangs up when the test says so, not after a pause:
 * sipp takes no other signal in the middle of a call, so the MEDIA writes sipp's port and the call's Call-ID to a file
 * and waits for a SIP INFO, which `hangUp` sends; sipp answers it 200 and sends its BYE. UDP only.
 */
export function hangsUpWhenTold(): { media: string; hangUp(): Promise<void> } {
  const file = path.join(os.tmpdir(), `sipp-caller-${randomUUID()}`);
  const media = [
    `<nop><action><exec command="echo '[local_port] [call_id]' > ${file}"/></action></nop>`,
    '<recv request="INFO" timeout="300000"/>',
    '<send><![CDATA[',
    'SIP/2.0 200 OK',
    '[last_Via:]',
    '[last_From:]',
    '[last_To:]',
    '[last_Call-ID:]',
    '[last_CSeq:]',
    'Content-Length: 0',
    ']]></send>',
  ].join('\n');
  const hangUp = async () => {
    const [, port, callId] = await until('the caller’s port and Call-ID from sipp', () =>
      readFile(file, 'utf8').then(
        (text) => /^(\d+) (\S+)$/.exec(text.trim()) ?? undefined,
        () => undefined,
      ),
    );
    await rm(file, { force: true });
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    const local = `127.0.0.1:${socket.address().port}`;
    const info = [
      `INFO sip:sipp@127.0.0.1:${port} SIP/2.0`,
      `Via: SIP/2.0/UDP ${local};branch=z9hG4bK-${randomUUID()}`,
      `From: <sip:test@${local}>;tag=${randomUUID()}`,
      `To: <sip:sipp@127.0.0.1:${port}>`,
      `Call-ID: ${callId}`,
      'CSeq: 1 INFO',
      'Max-Forwards: 70',
      'Content-Length: 0',
      '',
      '',
    ].join('\r\n');
    await new Promise<void>((resolve, reject) =>
      socket.send(info, Number(port), '127.0.0.1', (error) => (error ? reject(error) : resolve())),
    );
    socket.close();
  };
  return { media, hangUp };
}

export interface SippRun {
  code: number | null;
  stdout: string;
  stderr: string;
  errors: string;
}

export async function runSipp(options: {
  scenario:
    | 'answered'
    | 'caller-hangs-up'
    | 'refused'
    | 'options'
    | 'hold'
    | 'cancelled'
    | 'register-digest'
    | 'phone-caller'
    | 'caller-held'
    | 'caller-held-reinvites'
    | 'caller-held-refuses'
    | 'caller-held-silent'
    | 'caller-held-ends';
  /** SIP over UDP (default) or TCP. */
  transport?: 'udp' | 'tcp';
  sipPort: number;
  /** The number dialed (the Request-URI user). */
  dialed: string;
  replacements?: Record<string, string>;
  /** The address sipp sends from (default 127.0.0.1). */
  localIp?: string;
  calls?: number;
  /** Calls started per second. */
  rate?: number;
  /** Calls at once at most. */
  limit?: number;
  timeoutSeconds?: number;
  /** More arguments (for example -au and -ap, the account [authentication] answers a challenge with). */
  extraArgs?: string[];
}): Promise<SippRun> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sipp-'));
  try {
    const scenario = await writeScenario(options.scenario, dir, options.replacements);
    const errors = path.join(dir, 'errors.log');
    const localIp = options.localIp ?? '127.0.0.1';
    const args = [
      '-sf',
      scenario,
      '-m',
      String(options.calls ?? 1),
      '-r',
      String(options.rate ?? 10),
      '-l',
      String(options.limit ?? options.calls ?? 1),
      // No -p: sipp takes a local port the system picks (no race with other tests).
      '-i',
      localIp,
      '-mi',
      localIp,
      '-mp',
      String(await freeUdpPort()),
      '-s',
      options.dialed,
      '-timeout',
      `${options.timeoutSeconds ?? 60}s`,
      '-timeout_error',
      '-trace_err',
      '-error_file',
      errors,
      '-nostdin',
      ...(options.extraArgs ?? []),
      '-t',
      options.transport === 'tcp' ? 't1' : 'u1',
      `127.0.0.1:${options.sipPort}`,
    ];
    const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (exitCode) => resolve(exitCode)));
    const errorLog = await readFile(errors, 'utf8').catch(() => '');
    return { code, stdout: stdout.slice(-4000), stderr: stderr.slice(-4000), errors: errorLog.slice(-4000) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * sipp as the far end of a forward: its built-in UAS (answers, echoes RTP back, answers BYE) or one of our UAS
 * scenarios (placeholders filled from `replacements`), listening on `port` for `calls` calls. `finished` settles
 * when sipp exits.
 */
export function startSippServer(options: {
  scenario:
    | 'uas'
    | 'uas-no-answer'
    | 'uas-auth'
    | 'uas-answers-hangs-up'
    | 'uas-hears'
    | 'device-answers'
    | 'device-answers-refused'
    | 'device-held'
    | 'device-held-hangs-up';
  port: number;
  mediaPort: number;
  calls?: number;
  timeoutSeconds?: number;
  replacements?: Record<string, string>;
}): { finished: Promise<SippRun>; stop(): void } {
  let child: ChildProcess | undefined;
  let stopped = false;
  const finished = (async (): Promise<SippRun> => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sipp-uas-'));
    try {
      const scenario =
        options.scenario === 'uas'
          ? ['-sn', 'uas']
          : ['-sf', await writeScenario(options.scenario, dir, options.replacements)];
      if (stopped) return { code: null, stdout: '', stderr: 'stopped before it started', errors: '' };
      const running = spawn(
        'sipp',
        [
          ...scenario,
          '-rtp_echo',
          '-i',
          '127.0.0.1',
          '-p',
          String(options.port),
          '-mi',
          '127.0.0.1',
          '-mp',
          String(options.mediaPort),
          '-m',
          String(options.calls ?? 1),
          '-timeout',
          `${options.timeoutSeconds ?? 60}s`,
          '-timeout_error',
          '-nostdin',
        ],
        { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child = running;
      let stdout = '';
      let stderr = '';
      running.stdout?.on('data', (chunk: Buffer) => (stdout = (stdout + chunk.toString()).slice(-4000)));
      running.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
      const code = await new Promise<number | null>((resolve) => running.on('exit', (exitCode) => resolve(exitCode)));
      return { code, stdout, stderr, errors: '' };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  })();
  return {
    finished,
    stop: () => {
      stopped = true;
      child?.kill('SIGKILL');
    },
  };
}

/**
 * A second engine on `service`'s database whose registrar challenges MD5 first, for sipp to register at (Debian's
 * sipp 3.6.1 answers the first challenge and knows no other), going by `clock` like the service. `close` stops it and
 * removes its data directory.
 */
export function startMd5FirstEngine(
  service: TestService,
  clock: Clock,
): Promise<{ engine: CallEngine; close(): Promise<void> }> {
  return startEngineOn(service, { engineId: 'md5-first', clock, registrar: { algorithms: ['MD5', 'SHA-256'] } });
}

/**
 * One more call engine (SIP, media, the queue distributor) on `service`'s database, as another engine pod would be,
 * with its own id and data directory. `close` stops it and removes the directory.
 */
export async function startEngineOn(
  service: TestService,
  options: { engineId: string; clock?: Clock; registrar?: { algorithms: Array<'MD5' | 'SHA-256'> } },
): Promise<{ engine: CallEngine; close(): Promise<void> }> {
  const keys = await loadSigningKeys(service.pool, undefined);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `${options.engineId}-engine-`));
  try {
    const engine = await startCallEngine({
      config: loadConfig({
        DATABASE_URL: service.databaseUrl,
        SIP_PORT: '0',
        SWITCHBOARD_DATA_DIR: dataDir,
        ENGINE_ID: options.engineId,
      }),
      pool: service.pool,
      databaseUrl: service.databaseUrl,
      registry: new Registry(),
      log: { info() {}, warn() {}, debug() {} },
      carrierSecrets: keys.carrierSecrets,
      sipPasswords: keys.sipPasswords,
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.registrar === undefined ? {} : { registrar: options.registrar }),
    });
    return {
      engine,
      async close() {
        await engine.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}
