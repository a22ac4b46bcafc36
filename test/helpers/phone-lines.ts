/**
 * What the call tests need around the engine: sipp registered as a carrier, and numbers that run a routing plan
 * (a fresh workspace, a number of the inventory claimed, the plan published and assigned, through the REST API).
 */
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import type { ExecutionContext } from 'ava';
import { liveSipBindings } from '../../core/devices/sip-bindings.ts';
import { importNumbers } from '../../core/numbers/numbers.ts';
import type { RingMode } from '../../core/routing/definition.ts';
import { runCli } from './cli.ts';
import { freeUdpPort } from './free-port.ts';
import { sippFailed } from './engine-service.ts';
import { runSipp, startSippServer } from './sipp.ts';
import { type Answer, type TestService, workspaceClient, workspaceWithUser } from './service.ts';

export type Api = (method: string, path: string, body?: unknown) => Promise<Answer>;

/** A fresh workspace (and application) with the REST API bound to it. */
export async function workspaceApi(service: TestService) {
  const setup = await workspaceWithUser(service);
  const api: Api = workspaceClient(service, setup);
  return { setup, api };
}

export interface Line {
  e164: string;
  planId: string;
  applicationId: string;
  apiKey: string;
  workspaceId: string;
  api: Api;
}

/** sipp (which sends from 127.0.0.1) as the service's carrier `sipp`, added with `switchboard carriers add`. */
export async function addSippCarrier(service: TestService): Promise<void> {
  const added = await runCli(service.databaseUrl, [
    'carriers',
    'add',
    'sipp',
    '--address',
    '127.0.0.1',
    '--port',
    '5060',
    '--transport',
    'udp',
  ]);
  if (added.code !== 0) throw new Error(`carriers add: ${added.stderr}`);
}

/**
 * A far end on loopback `port` as the service's carrier `far-<port>` (its name; with the account, when given),
 * added with `switchboard carriers add`: where a forward, a cell or a dial-out goes.
 */
export async function addFarCarrier(
  t: ExecutionContext,
  service: TestService,
  port: number,
  account?: { username: string; password: string },
): Promise<string> {
  const carrier = `far-${port}`;
  const added = await runCli(service.databaseUrl, [
    'carriers',
    'add',
    carrier,
    '--address',
    '127.0.0.1',
    '--port',
    String(port),
    ...(account ? ['--username', account.username, '--password', account.password] : []),
  ]);
  t.is(added.code, 0, added.stderr);
  return carrier;
}

/**
 * A sipp far end that answers, echoes and hangs up `holdMs` after answering (`calls` calls, one by default), on a
 * port of its own, as the carrier `addFarCarrier` adds: the carrier's name and the sipp run (`finished` once it hung
 * up); stopped with the test.
 */
export async function farEndCarrier(t: ExecutionContext, service: TestService, holdMs: number, calls = 1) {
  const port = await freeUdpPort();
  const far = startSippServer({
    scenario: 'uas-answers-hangs-up',
    port,
    mediaPort: await freeUdpPort(),
    calls,
    replacements: { HOLD_MS: String(holdMs) },
    timeoutSeconds: 150,
  });
  t.teardown(() => far.stop());
  return { carrier: await addFarCarrier(t, service, port), far };
}

/**
 * A far end that must never be called: a UDP socket on a port of its own, as the carrier `addFarCarrier` adds. Its
 * `datagrams` counts whatever reaches it (an INVITE would); closed with the test.
 */
export async function watchedFarEnd(t: ExecutionContext, service: TestService) {
  const socket = dgram.createSocket('udp4');
  let datagrams = 0;
  socket.on('message', () => (datagrams += 1));
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  t.teardown(() => socket.close());
  const carrier = await addFarCarrier(t, service, socket.address().port);
  return {
    carrier,
    get datagrams() {
      return datagrams;
    },
  };
}

/** A number (of carrier `sipp`) running `definition`, published and assigned, in a new or the given workspace. */
export async function numberRunning(
  t: ExecutionContext,
  service: TestService,
  definition: unknown,
  existing?: Awaited<ReturnType<typeof workspaceApi>>,
): Promise<Line> {
  const { setup, api } = existing ?? (await workspaceApi(service));
  const e164 = `+1628${randomInt(1_000_000, 9_999_999)}`;
  await importNumbers(service.pool, 'sipp', [e164], ['voice']);
  const number = await api('POST', '/numbers', { e164 });
  t.is(number.status, 201, number.text);
  const plan = await api('POST', '/routing-plans', { name: 'Test plan', definition, publish: true });
  t.is(plan.status, 201, plan.text);
  const assigned = await api('POST', `/routing-plans/${plan.body.id}/assign`, { phoneNumberId: number.body.id });
  t.is(assigned.status, 200, assigned.text);
  return {
    e164,
    planId: plan.body.id,
    applicationId: setup.applicationId,
    apiKey: setup.apiKey,
    workspaceId: setup.workspace.id,
    api,
  };
}

/** A plan of one `ring` step of `targets`, then a hangup (the step's `next`, and the call's end once answered). */
export function ringThenHangUp(
  targets: readonly object[],
  options: { timeoutSecs?: number; strategy?: 'simultaneous' | 'sequential' } = {},
) {
  return {
    entry: 'r',
    steps: {
      r: {
        type: 'ring',
        targets,
        strategy: options.strategy ?? 'simultaneous',
        timeoutSecs: options.timeoutSecs ?? 20,
        next: 'bye',
      },
      bye: { type: 'hangup', message: null },
    },
  };
}

/**
 * A number whose plan rings the workspace's user alice (then hangs up; `mode` as the ring step's), and alice's `sip`
 * device registered by sipp with digest at the engine's `sipPort` from `localPort`, for `expires` seconds; its live
 * binding (by the engine's clock `now`) comes from `localPort`.
 */
export async function deskLine(
  t: ExecutionContext,
  service: TestService,
  options: { sipPort: number; localPort: number; expires: number; mode?: RingMode; now(): Date },
) {
  const tenant = await workspaceApi(service);
  const { setup } = tenant;
  const { mode, localPort } = options;
  const line = await numberRunning(
    t,
    service,
    ringThenHangUp([{ userId: setup.user.id, ...(mode === undefined ? {} : { mode }) }]),
    tenant,
  );
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['devices:*'] },
  });
  t.is(session.status, 201, session.text);
  const token = session.body.token as string;
  const device = await service.request('POST', '/api/v1/devices', { auth: token, body: { kind: 'sip' } });
  t.is(device.status, 201, device.text);
  const issued = await service.request('POST', `/api/v1/devices/${device.body.id}/sip-credentials`, { auth: token });
  t.is(issued.status, 201, issued.text);
  const username = issued.body.username as string;
  const registered = await runSipp({
    scenario: 'register-digest',
    sipPort: options.sipPort,
    dialed: username,
    replacements: { EXPIRES: String(options.expires), STATUS: '200' },
    extraArgs: ['-au', username, '-ap', issued.body.password as string, '-p', String(localPort)],
    timeoutSeconds: 15,
  });
  t.is(registered.code, 0, sippFailed(registered));
  const deviceId = device.body.id as string;
  const [binding] = await liveSipBindings(service.pool, deviceId, options.now());
  t.is(binding?.source.port, localPort);
  return { line, token, deviceId, username, binding };
}
