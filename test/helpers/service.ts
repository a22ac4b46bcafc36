import type { ExecutionContext, TestFn } from 'ava';
/**
 * A running service for a test file: a fresh database, the roles started in this process on a free port, real HTTP
 * requests through `fetch`, and the JSON log lines it wrote.
 */
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { mintToken } from '../../api/tokens.ts';
import { addLeg, type CallRow, changeState, type NewCall, startCall } from '../../core/calls/calls.ts';
import { parseCallCommand } from '../../core/calls/commands.ts';
import { callControlChannel } from '../../core/change-notices.ts';
import type { Clock } from '../../core/clock.ts';
import { loadConfig } from '../../core/config.ts';
import { createApplication } from '../../core/identity/applications.ts';
import { createMember, type MemberRow } from '../../core/identity/members.ts';
import { type Role, startRoles } from '../../app/roles.ts';
import { defaultKeyScopes, type Scope } from '../../core/scopes.ts';
import { loadSigningKeys, type SigningKeys } from '../../core/service-secret.ts';
import { freshDatabase } from './database.ts';

export interface Answer {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are JSON checked by the tests themselves
  body: any;
  text: string;
}

export interface RequestOptions {
  /** The bearer credential. */
  auth?: string;
  body?: unknown;
  /** A raw body sent as is (with content-type application/json unless headers say otherwise). */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Mutations get a fresh idempotency key unless one is given here, or null to send none. */
  idempotencyKey?: string | null;
  workspaceId?: string;
  /**
   * The loopback address the request leaves from (127.0.0.2, ...), for what the service counts per source address;
   * sent through node:http, as `fetch` cannot choose it.
   */
  localAddress?: string;
}

export interface TestService {
  url: string;
  /** The engine's SIP port (roles with the engine). */
  sipPort: number | undefined;
  /** The admission webhook over HTTPS (the operator role with ADMISSION_TLS_DIR). */
  admissionUrl: string | undefined;
  databaseUrl: string;
  pool: pg.Pool;
  logs: string[];
  request(method: string, path: string, options?: RequestOptions): Promise<Answer>;
  /** Creates an application the way `switchboard applications create` does; returns its first key. */
  application(id?: string, scopes?: readonly Scope[]): Promise<{ applicationId: string; apiKey: string }>;
  close(): Promise<void>;
}

export async function request(
  base: string,
  method: string,
  path: string,
  options: RequestOptions = {},
): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.auth !== undefined) headers.authorization = `Bearer ${options.auth}`;
  if (options.workspaceId !== undefined) headers['x-service-workspace-id'] = options.workspaceId;
  const mutation = ['POST', 'PUT', 'PATCH', 'DELETE'].includes(method);
  if (mutation && options.idempotencyKey !== null) headers['idempotency-key'] = options.idempotencyKey ?? randomUUID();
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined) headers['content-type'] ??= 'application/json';
  const response =
    options.localAddress === undefined
      ? await fetch(base + path, { method, headers, ...(body !== undefined ? { body } : {}) })
      : await requestFrom(options.localAddress, new URL(base + path), method, headers, body);
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/** One HTTP request from a chosen local address, answered as a fetch Response. */
function requestFrom(
  localAddress: string,
  url: URL,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
): Promise<Response> {
  return new Promise((resolve, reject) => {
    const sent = http.request(url, { method, headers, localAddress, agent: false }, (answer) => {
      const chunks: Buffer[] = [];
      answer.on('data', (chunk: Buffer) => chunks.push(chunk));
      answer.on('error', reject);
      answer.on('end', () => {
        const answerHeaders = new Headers();
        for (const [name, value] of Object.entries(answer.headers)) {
          for (const one of Array.isArray(value) ? value : [value ?? '']) answerHeaders.append(name, one);
        }
        resolve(new Response(Buffer.concat(chunks), { status: answer.statusCode ?? 0, headers: answerHeaders }));
      });
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

let applications = 0;

export async function startService(
  env: Record<string, string> = {},
  roles: readonly Role[] = ['api', 'engine', 'operator'],
  options: { clock?: Clock; hangupWaitMs?: number } = {},
): Promise<TestService> {
  const database = await freshDatabase();
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(
        ...String(chunk)
          .split('\n')
          .filter((line) => line !== ''),
      );
      done();
    },
  });
  // Recordings and prompt caches of this service only.
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-test-'));
  const config = loadConfig({
    DATABASE_URL: database.url,
    PORT: '0',
    SIP_PORT: '0',
    SWITCHBOARD_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    ...env,
  });
  const service = await startRoles(config, new Set(roles), { logStream, ...options });
  const pool = new pg.Pool({ connectionString: database.url, max: 4 });
  // pool.end() resolves once its idle clients are told to end, not when their connections are gone: one still
  // closing when drop() forces the database away gets "terminating connection", which must not crash the file.
  pool.on('error', () => {});
  return {
    url: service.url,
    sipPort: service.sipPort,
    admissionUrl: service.admissionUrl,
    databaseUrl: database.url,
    pool,
    logs,
    request: (method, path, options) => request(service.url, method, path, options),
    async application(id, scopes) {
      applications += 1;
      const applicationId = id ?? `app-${process.pid}-${applications}`;
      return createApplication(pool, applicationId, scopes ?? defaultKeyScopes);
    },
    async close() {
      await service.close();
      await pool.end();
      await database.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * One service for the whole test file, the way most API test files run: started (the API role only unless `roles`
 * says) before the file's tests, closed after them. Called at load time, `const service = serviceForFile(test);`, it
 * is the running service once the tests start. A file's services start side by side; a `before` hook of the file that
 * needs one running is a serial one (as in signingKeysForFile), which waits for the hooks registered before it.
 */
export function serviceForFile(
  test: TestFn,
  env: Record<string, string> = {},
  roles: readonly Role[] = ['api'],
  options: { clock?: Clock; hangupWaitMs?: number } = {},
): TestService {
  const service = {} as TestService;
  let started: TestService | undefined;
  test.before(async () => {
    started = await startService(env, roles, options);
    Object.defineProperties(service, Object.getOwnPropertyDescriptors(started));
  });
  test.after.always(async () => {
    await started?.close();
  });
  return service;
}

/**
 * The signing keys of the file's service (serviceForFile, called first), loaded once it runs and before the file's
 * tests: for the tests that mint member tokens or unseal secrets themselves, with the keys the service uses.
 */
export function signingKeysForFile(test: TestFn, service: TestService): SigningKeys {
  const keys = {} as SigningKeys;
  test.serial.before(async () => {
    Object.assign(keys, await loadSigningKeys(service.pool, undefined));
  });
  return keys;
}

/** An application with one workspace and one user, the common start of a test. */
export async function workspaceWithUser(service: TestService, applicationId?: string, scopes?: readonly Scope[]) {
  const app = await service.application(applicationId, scopes);
  const externalWorkspaceId = `ws-${randomUUID()}`;
  const workspace = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId, name: 'Acme Support', timezone: 'Europe/Paris' },
  });
  if (workspace.status !== 201) throw new Error(`workspace: ${workspace.status} ${workspace.text}`);
  const user = await service.request('POST', '/api/v1/users', {
    auth: app.apiKey,
    workspaceId: workspace.body.id,
    body: { externalUserId: 'alice', displayName: 'Alice' },
  });
  if (user.status !== 201) throw new Error(`user: ${user.status} ${user.text}`);
  return { ...app, workspace: workspace.body, user: user.body };
}

/** What `workspaceWithUser` makes: an application, its workspace and the user alice. */
export type WorkspaceSetup = Awaited<ReturnType<typeof workspaceWithUser>>;

/**
 * The REST API bound to the setup's workspace, asked with its application key: `api('POST', '/queues', body)`
 * requests `/api/v1/queues`. How the tests that make a workspace's resources ask.
 */
export function workspaceClient(service: TestService, setup: WorkspaceSetup) {
  return (method: string, path: string, body?: unknown): Promise<Answer> =>
    service.request(method, `/api/v1${path}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      ...(body === undefined ? {} : { body }),
    });
}

/**
 * A user token of the setup's workspace (operation 1) with these scopes; the user is created first when it is not
 * alice. Throws on any other answer than 201: a setup step, not what the test checks.
 */
export async function userToken(
  service: TestService,
  setup: WorkspaceSetup,
  scopes: readonly Scope[] = ['devices:*'],
  externalUserId = 'alice',
): Promise<string> {
  if (externalUserId !== 'alice') {
    const created = await service.request('POST', '/api/v1/users', {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      body: { externalUserId, displayName: externalUserId },
    });
    if (created.status !== 201) throw new Error(`user: ${created.status} ${created.text}`);
  }
  const answer = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId, scopes },
  });
  if (answer.status !== 201) throw new Error(`session: ${answer.status} ${answer.text}`);
  return answer.body.token as string;
}

/**
 * A new member of the setup's workspace and a member token of theirs with these scopes, minted as operation 2 mints
 * one (with the service's token key), without a sign-in.
 */
export async function memberToken(
  service: TestService,
  setup: WorkspaceSetup,
  scopes: Scope[] = ['devices:*'],
): Promise<{ member: MemberRow; token: string }> {
  const member = await createMember(service.pool, {
    workspaceId: setup.workspace.id,
    email: `member-${randomUUID()}@example.com`,
    scopes,
  });
  const keys = await loadSigningKeys(service.pool, undefined);
  const claims = {
    kind: 'member' as const,
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    externalWorkspaceId: setup.workspace.externalWorkspaceId,
    subjectId: member.id,
    externalUserId: null,
    scopes,
  };
  return { member, token: (await mintToken(keys.tokens, claims)).token };
}

/** An inbound call of the setup's workspace, written as the engine writes one (core/calls/calls.ts), at `initiated`. */
export function liveCall(pool: pg.Pool, setup: WorkspaceSetup, input: Partial<NewCall> = {}): Promise<CallRow> {
  return startCall(pool, {
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    direction: 'inbound',
    from: '+14155550100',
    to: '+14155550199',
    phoneNumberId: null,
    routingPlanId: null,
    routingPlanVersion: null,
    engineOwner: 'engine-test',
    sipCallId: randomUUID(),
    ...input,
  });
}

/** An answer in the error envelope with this status and code (and a message). */
export function isError(t: ExecutionContext, answer: Answer, status: number, code: string, label = '') {
  t.is(answer.status, status, `${label} ${answer.text}`);
  t.is(answer.body?.error?.code, code, `${label} ${answer.text}`);
  t.is(typeof answer.body?.error?.message, 'string', `${label} ${answer.text}`);
}

/**
 * A call of the setup's workspace held by `engineOwner`, answered and connected to a browser leg, written as the
 * engine writes one: what the call commands' API tests act on without an engine.
 */
export async function connectedCall(pool: pg.Pool, setup: WorkspaceSetup, engineOwner: string): Promise<CallRow> {
  const row = await liveCall(pool, setup, { engineOwner });
  await changeState(pool, row.id, 'routing', { answered: true });
  const legId = await addLeg(pool, row.id, { role: 'browser', remote: 'device x', sipCallId: null });
  await changeState(pool, row.id, 'connected', { connectedLeg: { id: legId, role: 'browser' } });
  return row;
}

/**
 * One call command of the API (`POST /api/v1/calls/{id}/hold`, `transfer`, `supervise`, ...) as a function of the
 * file: `const hold = callCommand(service, 'hold')`, then `hold(setup, callId, body)` asks it on a call of the setup's
 * workspace with the setup's key, unless `options` say otherwise. How the call commands' API tests ask.
 */
export function callCommand(service: TestService, command: string) {
  return (setup: WorkspaceSetup, callId: string, body: unknown, options: RequestOptions = {}): Promise<Answer> =>
    service.request('POST', `/api/v1/calls/${callId}/${command}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      body,
      ...options,
    });
}

/**
 * Listens on the call control channel as the engine would, until the test ends: `heard` is every command for `callId`
 * so far, `next(count)` waits for the first `count` of them. For the call commands' API tests, which run no engine.
 */
export async function callControlListener(t: ExecutionContext, service: TestService, callId: string) {
  const heard: unknown[] = [];
  let wake = () => {};
  const client = new pg.Client({ connectionString: service.databaseUrl });
  client.on('notification', (message) => {
    const command = parseCallCommand(message.payload ?? '');
    if (message.channel === callControlChannel && command?.callId === callId) heard.push(command);
    wake();
  });
  await client.connect();
  await client.query(`LISTEN ${callControlChannel}`);
  t.teardown(() => client.end());
  return {
    heard,
    next: async (count: number) => {
      while (heard.length < count) await new Promise<void>((resolve) => (wake = resolve));
      return heard.slice(0, count);
    },
  };
}
