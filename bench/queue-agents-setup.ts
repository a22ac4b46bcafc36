/**
 * The queue-agents bench's contact center (bench/queue-agents.ts): a workspace made through the REST API (key), one
 * queue of AGENTS members, each member with one `sip` device and its SIP credentials (operations 65 and 66's core
 * functions: members have no session a bench can open without a login), a number whose plan puts callers in the
 * queue; the devices registered by sipp with digest, and the agents' phones (sipp UAS) listening where they
 * registered from.
 *
 * Registration: Debian's sipp 3.6.1 answers the first challenge and knows MD5 only, and the engine challenges
 * SHA-256 first, so the devices register at a second call engine started in this process whose registrar offers MD5
 * first (as test/engine/calls/steps/ring/sip-device.test.ts does), closed once they are; a binding is rung by whichever engine holds
 * the call, at the binding's source (docs/phones.md).
 *
 * Phones: one sipp UAS serves `perPhone` agents. Each agent's binding has its own contact (sip:<username>@host:port)
 * and the engine's INVITE names it as the Request-URI, so the phone's trace says which agent was rung; several
 * agents registered from one port share the process. An idle sipp takes about 2% of a core (its poll loop wakes
 * every millisecond), so 50 of them would take about one of the machine's two cores away from the engine.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { loadConfig } from '../core/config.ts';
import { registerDevice } from '../core/devices/devices.ts';
import { issueSipCredentials } from '../core/devices/sip-credentials.ts';
import { createApplication } from '../core/identity/applications.ts';
import { createMember } from '../core/identity/members.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import { loadSigningKeys } from '../core/service-secret.ts';
import { startCallEngine } from '../engine/call-engine.ts';
import { freeUdpPort } from '../test/helpers/free-port.ts';
import { writeScenario } from '../test/helpers/sipp.ts';
import { type ApiCall, apiCaller, numberRunning } from './engine-process.ts';
import { type Sipp, startSipp } from './sipp-runs.ts';

export interface BenchAgent {
  memberId: string;
  deviceId: string;
  username: string;
  password: string;
  /** The phone (index into the phones) that answers for this agent. */
  phone: number;
}

export interface QueueCenter {
  call: ApiCall;
  workspaceId: string;
  queueId: string;
  /** The number whose plan queues the caller (E.164). */
  number: string;
  agents: BenchAgent[];
}

/** The workspace, its agents with their `sip` devices and credentials, the queue and its number. */
export async function setUpQueue(
  pool: pg.Pool,
  apiUrl: string,
  options: { agents: number; perPhone: number; wrapUpSecs: number; secret: string | undefined },
): Promise<QueueCenter> {
  const { apiKey } = await createApplication(pool, 'bench', defaultKeyScopes);
  const call = apiCaller(apiUrl, apiKey);
  const workspace = await call('POST', '/workspaces', {
    externalWorkspaceId: 'bench-queue',
    name: 'Bench queue',
    timezone: 'Europe/Paris',
    limits: { concurrentCalls: 10_000, devicesPerUser: 5 },
  });
  const keys = await loadSigningKeys(pool, options.secret);
  const agents: BenchAgent[] = [];
  for (let index = 0; index < options.agents; index += 1) {
    const member = await createMember(pool, {
      workspaceId: workspace.id,
      email: `agent-${index}@example.com`,
      scopes: ['calls:*', 'devices:*'],
    });
    const device = { kind: 'sip' as const, name: `desk ${index}`, clientId: null };
    const registered = await registerDevice(pool, workspace.id, { memberId: member.id }, device);
    if (registered.outcome !== 'created') throw new Error(`bench: device ${registered.outcome}`);
    const issued = await issueSipCredentials(pool, keys.sipPasswords, registered.device.id);
    agents.push({
      memberId: member.id,
      deviceId: registered.device.id,
      username: issued.username,
      password: issued.password,
      phone: Math.floor(index / options.perPhone),
    });
  }
  const queue = await call(
    'POST',
    '/queues',
    {
      name: 'Bench queue',
      strategy: 'longest_idle',
      wrapUpSecs: options.wrapUpSecs,
      members: agents.map((agent) => agent.memberId),
    },
    workspace.id,
  );
  const number = await numberRunning(pool, call, workspace.id, '640', {
    entry: 'q',
    steps: {
      q: { type: 'queue', queueId: queue.id, maxWaitSecs: 1800, overflow: 'full', offerCallback: false },
      full: { type: 'hangup', message: null },
    },
  });
  return { call, workspaceId: workspace.id, queueId: queue.id, number, agents };
}

/**
 * Registers every agent's device for an hour with sipp (register-digest.xml, MD5) from its phone's port, at a call
 * engine of this process whose registrar offers MD5 first; the engine is closed afterwards (the bindings stay).
 * Agents of one phone register one after another (one port), the phones side by side.
 */
export async function registerAgents(options: {
  pool: pg.Pool;
  databaseUrl: string;
  secret: string | undefined;
  work: string;
  agents: readonly BenchAgent[];
  phonePorts: readonly number[];
}): Promise<void> {
  const keys = await loadSigningKeys(options.pool, options.secret);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-bench-registrar-'));
  const registrar = await startCallEngine({
    config: loadConfig({
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      SIP_PORT: '0',
      SWITCHBOARD_DATA_DIR: dataDir,
      ENGINE_ID: 'bench-registrar',
      LOG_LEVEL: 'warn',
    }),
    pool: options.pool,
    databaseUrl: options.databaseUrl,
    registry: new Registry(),
    log: { info() {}, warn() {}, debug() {} },
    carrierSecrets: keys.carrierSecrets,
    sipPasswords: keys.sipPasswords,
    registrar: { algorithms: ['MD5', 'SHA-256'] },
  });
  try {
    const scenario = await writeScenario('register-digest', options.work, { EXPIRES: '3600', STATUS: '200' });
    const register = async (agent: BenchAgent) => {
      const sipp = startSipp(
        [
          '-sf',
          scenario,
          '-s',
          agent.username,
          '-au',
          agent.username,
          '-ap',
          agent.password,
          '-i',
          '127.0.0.1',
          '-p',
          String(options.phonePorts[agent.phone]),
          '-mi',
          '127.0.0.1',
          '-mp',
          String(await freeUdpPort()),
          '-m',
          '1',
          '-timeout',
          '15s',
          '-timeout_error',
          '-nostdin',
          `127.0.0.1:${registrar.sipPort}`,
        ],
        options.work,
      );
      const done = await sipp.done;
      if (done.code !== 0) throw new Error(`registering ${agent.username}: sipp exited ${done.code}: ${done.output}`);
    };
    await Promise.all(
      options.phonePorts.map(async (_port, phone) => {
        for (const agent of options.agents.filter((one) => one.phone === phone)) await register(agent);
      }),
    );
  } finally {
    await registrar.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

export interface Phone {
  sipp: Sipp;
  /** Its message trace (`-trace_msg`). */
  messages: string;
}

/** The agents' phones: one sipp UAS (bench/sipp/agent-phone.xml) on each port, ringing `ringMs`, talking `talkMs` (± `jitterMs`). */
export async function startPhones(options: {
  work: string;
  ports: readonly number[];
  ringMs: number;
  talkMs: number;
  /** Talk times drawn uniformly from talkMs ± jitterMs when > 0. */
  jitterMs: number;
}): Promise<Phone[]> {
  const template = fileURLToPath(new URL('./sipp/agent-phone.xml', import.meta.url));
  const scenario = await writeScenarioFrom(template, options.work, {
    RING_MS: String(options.ringMs),
    TALK:
      options.jitterMs > 0
        ? `distribution="uniform" min="${options.talkMs - options.jitterMs}" max="${options.talkMs + options.jitterMs}"`
        : `milliseconds="${options.talkMs}"`,
  });
  const phones: Phone[] = [];
  for (const [index, port] of options.ports.entries()) {
    const messages = path.join(options.work, `phone-${index}-messages.log`);
    const args = ['-sf', scenario, '-i', '127.0.0.1', '-p', String(port), '-mi', '127.0.0.1'];
    args.push('-mp', String(await freeUdpPort()), '-trace_msg', '-message_file', messages, '-nostdin');
    phones.push({ sipp: startSipp(args, options.work), messages });
  }
  return phones;
}

/** A scenario of bench/sipp/ written into `dir` with its placeholders filled. */
export async function writeScenarioFrom(
  template: string,
  dir: string,
  replacements: Record<string, string>,
): Promise<string> {
  const filled = Object.entries(replacements).reduce(
    (text, [placeholder, value]) => text.replaceAll(placeholder, value),
    await readFile(template, 'utf8'),
  );
  const file = path.join(dir, path.basename(template));
  await writeFile(file, filled);
  return file;
}
