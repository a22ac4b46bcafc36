/**
 * Webhook delivery (spec section 6, docs/events.md) against real HTTPS receivers: a server with a certificate of the
 * test CA (test/fixtures/tls, trusted through NODE_EXTRA_CA_CERTS set by test/run.ts). Endpoints are created through
 * the API; events are appended in transactions with appendEvent, the way every component writes them. Each test has
 * a database of its own, so its dispatchers (in this process, or `switchboard engine` child processes) see only its
 * lanes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createInterface } from 'node:readline';
import { setTimeout as delay } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { inTransaction } from '../../../core/database.ts';
import { appendEvent, type AppendedEvent, appendEvents, type NewEvent } from '../../../core/events/outbox.ts';
import { eventsChannel } from '../../../core/change-notices.ts';
import { loadSigningKeys } from '../../../core/service-secret.ts';
import { describeAddress, isPublicAddress } from '../../../core/webhooks/address.ts';
import type { Clock } from '../../../core/clock.ts';
import { ConfigError, loadConfig, webhookShares } from '../../../core/config.ts';
import { Dispatcher, type DispatcherOptions } from '../../../engine/delivery/dispatcher.ts';
import { retryDelayMs, parkAfterMs } from '../../../engine/delivery/backoff.ts';
import { type ClaimedLane, claimLanes, releaseLane } from '../../../core/webhooks/deliveries.ts';
import { switchboardArgs } from '../../helpers/cli.ts';
import { freePort } from '../../helpers/free-port.ts';
import { type Received, Receiver } from '../../helpers/webhook-receiver.ts';
import { startService, type TestService } from '../../helpers/service.ts';
import { untilTrue } from '../../helpers/until.ts';

// ---------------------------------------------------------------------------------------------------------------
// A test's world: a service with the API (its own database), an application, receivers and dispatchers.

interface World {
  service: TestService;
  applicationId: string;
  apiKey: string;
  workspaceId: string;
  secretsKey: Uint8Array;
  receiver(port?: number): Promise<Receiver>;
  endpoint(url: string, eventTypes?: string[]): Promise<{ id: string; signingSecret: string }>;
  /** Another application of the service, and a way to give it endpoints. */
  otherApplication(): Promise<{ applicationId: string; endpoint(url: string): Promise<{ id: string }> }>;
  dispatcher(options?: Partial<DispatcherOptions>): Promise<Dispatcher>;
  engineProcess(): Promise<ChildProcess>;
  lane(endpointId: string, stream: string): Promise<LaneRow>;
}

interface LaneRow {
  attempts: number;
  next_attempt_at: Date | null;
  last_attempt_at: Date | null;
  last_error: string | null;
  parked_at: Date | null;
  head_first_attempt_at: Date | null;
  lease_owner: string | null;
}

/**
 * The test files share one PostgreSQL server (and its connection limit), and a world takes a few dozen connections
 * at most: at most three worlds of this file run at once.
 */
const slots = { free: 3, waiting: [] as Array<() => void> };

async function takeSlot(): Promise<() => void> {
  if (slots.free > 0) slots.free -= 1;
  else await new Promise<void>((resolve) => slots.waiting.push(resolve));
  return () => {
    const next = slots.waiting.shift();
    if (next === undefined) slots.free += 1;
    else next();
  };
}

async function world(t: ExecutionContext, env: Record<string, string> = {}, roles: ('api' | 'engine')[] = ['api']) {
  t.teardown(await takeSlot()); // registered first, so it runs last
  const service = await startService(
    { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', LOG_LEVEL: 'warn', DATABASE_POOL_SIZE: '4', ...env },
    roles,
  );
  const app = await service.application();
  const receivers: Receiver[] = [];
  const dispatchers: Dispatcher[] = [];
  const pools: pg.Pool[] = [];
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(dispatchers.map((dispatcher) => dispatcher.close()));
    await Promise.all(receivers.map((receiver) => receiver.close()));
    await Promise.all(pools.map((pool) => pool.end()));
    await service.close();
  });
  const keys = await loadSigningKeys(service.pool, undefined);
  const createEndpoint = async (apiKey: string, url: string, eventTypes?: string[]) => {
    const created = await service.request('POST', '/api/v1/webhooks', {
      auth: apiKey,
      body: { url, ...(eventTypes ? { eventTypes } : {}) },
    });
    if (created.status !== 201) throw new Error(`create webhook: ${created.status} ${created.text}`);
    return { id: created.body.endpoint.id as string, signingSecret: created.body.signingSecret as string };
  };
  const result: World = {
    service,
    applicationId: app.applicationId,
    apiKey: app.apiKey,
    workspaceId: randomUUID(),
    secretsKey: keys.webhookSecrets,
    async receiver(port) {
      const receiver = await Receiver.start(port);
      receivers.push(receiver);
      return receiver;
    },
    endpoint: (url, eventTypes) => createEndpoint(app.apiKey, url, eventTypes),
    async otherApplication() {
      const other = await service.application();
      return { applicationId: other.applicationId, endpoint: (url: string) => createEndpoint(other.apiKey, url) };
    },
    async dispatcher(options = {}) {
      const pool = new pg.Pool({ connectionString: service.databaseUrl, max: 4 });
      pools.push(pool);
      const dispatcher = new Dispatcher({
        pool,
        databaseUrl: service.databaseUrl,
        secretsKey: keys.webhookSecrets,
        allowPrivateNetworks: true,
        ...options,
      });
      dispatchers.push(dispatcher);
      await dispatcher.start();
      return dispatcher;
    },
    async engineProcess() {
      const child = spawn(process.execPath, [...switchboardArgs, 'engine'], {
        env: {
          ...process.env,
          DATABASE_URL: service.databaseUrl,
          ENGINE_HTTP_PORT: '0',
          DATABASE_POOL_SIZE: '4',
          WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(child);
      let stderr = '';
      child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
        stderr += chunk;
      });
      const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
      await new Promise<void>((resolve, reject) => {
        lines.on('line', (line) => {
          if (line.includes('"switchboard started"')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`switchboard engine exited (${code}): ${stderr}`)));
      });
      return child;
    },
    async lane(endpointId, stream) {
      const found = await service.pool.query<LaneRow>(
        `SELECT attempts, next_attempt_at, last_attempt_at, last_error, parked_at, head_first_attempt_at, lease_owner
           FROM webhook_lanes WHERE endpoint_id = $1 AND stream_key = $2`,
        [endpointId, `agent:${stream}`],
      );
      const row = found.rows[0];
      if (row === undefined) throw new Error(`no lane for ${stream}`);
      return row;
    },
  };
  return result;
}

function agentEvent(
  w: World,
  memberId: string,
  note = 'test',
  applicationId = w.applicationId,
): NewEvent<'agent.state_changed'> {
  return {
    type: 'agent.state_changed',
    streamId: memberId,
    applicationId,
    workspaceId: w.workspaceId,
    externalWorkspaceId: 'ws-test',
    fields: {
      externalUserId: 'alice',
      agent: {
        memberId,
        state: 'available',
        previousState: null,
        reason: note,
        actor: null,
        changedAt: new Date().toISOString(),
      },
    },
  };
}

/** Appends events in one transaction (streams in a fixed order, so concurrent writers never deadlock). */
async function append(w: World, ...events: NewEvent<'agent.state_changed'>[]): Promise<AppendedEvent[]> {
  const sorted = [...events].sort((a, b) => (a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0));
  return inTransaction(w.service.pool, async (client) => {
    const appended: AppendedEvent[] = [];
    for (const event of sorted) appended.push(await appendEvent(client, event));
    return appended;
  });
}

async function pendingDeliveries(w: World): Promise<number> {
  const result = await w.service.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_deliveries');
  return (result.rows[0] as { n: number }).n;
}

function hmac(secret: string, timestamp: string, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

function signatureMatches(secret: string, request: Received): boolean {
  const timestamp = String(request.headers['x-service-timestamp']);
  const expected = Buffer.from(hmac(secret, timestamp, request.body), 'hex');
  return String(request.headers['x-service-signature'])
    .split(',')
    .some((value) => {
      const given = Buffer.from(value, 'hex');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
}

/** The lanes of these endpoints that `dispatcher` holds right now (under any of its claims' lease tokens). */
async function heldBy(w: World, dispatcher: Dispatcher | string, endpointIds: readonly string[]): Promise<number> {
  const owner = typeof dispatcher === 'string' ? dispatcher : dispatcher.owner;
  const held = await w.service.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_lanes
      WHERE endpoint_id = ANY ($1::uuid[]) AND starts_with(lease_owner, $2 || '#') AND lease_until > now()`,
    [endpointIds, owner],
  );
  return (held.rows[0] as { n: number }).n;
}

/**
 * A receiver that takes connections and requests and never answers (until it is closed). The test's teardown closes
 * it before the world's, so that the dispatchers' attempts end and they can close.
 */
async function silentReceiver(t: ExecutionContext, w: World): Promise<Receiver> {
  const silent = await w.receiver();
  silent.handler = () => new Promise<never>(() => {});
  t.teardown(() => silent.close());
  return silent;
}

/** Streams (agents' member ids), new ones. */
const newStreams = (count: number) => Array.from({ length: count }, () => randomUUID());

function offsetClock(): Clock & { offsetMs: number } {
  return {
    offsetMs: 0,
    now() {
      return new Date(Date.now() + this.offsetMs);
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------

test('backoff: 1 s, doubling, at most 5 minutes; parking after 24 hours; addresses described', (t) => {
  t.deepEqual(
    [1, 2, 3, 4, 8, 9, 10, 50].map((failures) => retryDelayMs(failures)),
    [1_000, 2_000, 4_000, 8_000, 128_000, 256_000, 300_000, 300_000],
  );
  t.is(parkAfterMs, 86_400_000);
  t.is(describeAddress('10.0.0.5'), 'a private address');
  t.is(describeAddress('127.0.0.1'), 'a loopback address');
  t.is(describeAddress('169.254.169.254'), 'a link-local address');
  t.is(describeAddress('::ffff:192.168.1.1'), 'a private address');
  t.is(describeAddress('100.64.0.1'), 'a carrier-grade NAT address');
  t.false(isPublicAddress('::7f00:1'), 'IPv4-compatible ::127.0.0.1');
  t.false(isPublicAddress('fd00::1'));
  t.true(isPublicAddress('2606:4700:4700::1111'));
  t.true(isPublicAddress('8.8.8.8'));
});

test('the engine role delivers each event signed, byte for byte, well under 2 s after commit', async (t) => {
  const w = await world(t, {}, ['api', 'engine']);
  const receiver = await w.receiver();
  const { id: endpointId, signingSecret } = await w.endpoint(receiver.url());
  t.regex(signingSecret, /^whsec_/);
  const member = randomUUID();

  const committed: number[] = [];
  const appended: AppendedEvent[] = [];
  for (let n = 0; n < 3; n += 1) {
    appended.push(...(await append(w, agentEvent(w, member, `n${n}`))));
    committed.push(Date.now());
    await untilTrue('the event arrived', () => receiver.received.length === n + 1, { timeoutMs: 10_000 });
  }
  t.deepEqual(receiver.sequences(member), [1, 2, 3]);
  for (const [index, request] of receiver.received.entries()) {
    const event = appended[index] as AppendedEvent;
    const stored = await w.service.pool.query<{ payload: string; type: string }>(
      'SELECT payload, type FROM events WHERE id = $1',
      [event.id],
    );
    t.is(request.body, stored.rows[0]?.payload as string, 'the body is the stored JSON byte for byte');
    t.is(request.headers['content-type'], 'application/json');
    t.is(request.headers['x-service-event-id'], event.id);
    t.is(request.event.id, event.id);
    t.is(request.headers['x-service-event-type'], 'agent.state_changed');
    const timestamp = String(request.headers['x-service-timestamp']);
    t.regex(timestamp, /^\d{1,12}$/);
    t.true(Math.abs(Number(timestamp) - Date.now() / 1000) < 300, 'the timestamp is within 5 minutes');
    t.regex(String(request.headers['x-service-signature']), /^[0-9a-f]{64}$/, 'one signature outside a rotation');
    t.true(signatureMatches(signingSecret, request), 'the signature verifies with the signing secret');
    t.false(signatureMatches(`${signingSecret}x`, request));
    t.true(request.at - (committed[index] as number) < 2_000, 'first attempt under 2 s after commit');
  }
  await untilTrue('the deliveries are acknowledged', async () => (await pendingDeliveries(w)) === 0);
  const lane = await w.lane(endpointId, member);
  t.is(lane.attempts, 0);
  t.is(lane.next_attempt_at, null, 'an empty lane is idle');
  t.is(lane.lease_owner, null);

  const metrics = await w.service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_webhook_deliveries_total\{outcome="success"\} 3/);
  t.regex(metrics.text, /switchboard_webhook_first_attempt_delay_seconds_count 3/);
  t.regex(metrics.text, /switchboard_webhook_attempt_duration_seconds_count\{outcome="success"\} 3/);
  t.regex(metrics.text, /switchboard_webhook_lanes_pending 0/);
  t.regex(metrics.text, /switchboard_webhook_lanes_parked 0/);
});

test('appends notify only while no dispatcher is awake; an awake one claims without being told', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  await w.endpoint(receiver.url());
  const listener = new pg.Client({ connectionString: w.service.databaseUrl });
  await listener.connect();
  t.teardown(() => listener.end());
  let notices = 0;
  listener.on('notification', () => {
    notices += 1;
  });
  await listener.query(`LISTEN ${eventsChannel}`);
  const dispatcher = await w.dispatcher({ awakeMs: 60_000, pollIntervalMs: 600_000 });
  const member = randomUUID();

  // Nobody awake: the append that makes the lane due notifies, and the notice wakes the dispatcher.
  await append(w, agentEvent(w, member));
  await untilTrue('the first event arrived', () => receiver.sequences(member).length === 1);
  await untilTrue('the dispatcher is awake', async () => {
    const awake = await w.service.pool.query('SELECT 1 FROM webhook_dispatchers WHERE awake_until > now()');
    return awake.rowCount === 1;
  });
  t.is(notices, 1);

  // Awake (it has just delivered): appends skip their NOTIFY, and its own ticks (not the 10-minute poll) claim them.
  for (let n = 2; n <= 4; n += 1) {
    await append(w, agentEvent(w, member));
    await untilTrue('the event arrived', () => receiver.sequences(member).length === n, { timeoutMs: 10_000 });
  }
  t.deepEqual(receiver.sequences(member), [1, 2, 3, 4]);
  t.is(notices, 1, 'no NOTIFY while a dispatcher is awake');

  // Closing withdraws the promise: appends notify again.
  await dispatcher.close();
  t.is((await w.service.pool.query('SELECT 1 FROM webhook_dispatchers')).rowCount, 0);
  await append(w, agentEvent(w, member));
  await untilTrue('the notice came', () => notices === 2);
  t.pass();
});

test('a group appended in one statement: each stream takes its sequences in order, delivered as single appends are', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  await w.endpoint(receiver.url());
  // An endpoint of the same application that takes another type only: none of these is queued for it.
  const elsewhere = await w.receiver();
  await w.endpoint(elsewhere.url(), ['call.ended']);
  const listener = new pg.Client({ connectionString: w.service.databaseUrl });
  await listener.connect();
  t.teardown(() => listener.end());
  let notices = 0;
  listener.on('notification', () => {
    notices += 1;
  });
  await listener.query(`LISTEN ${eventsChannel}`);
  const [a, b] = [randomUUID(), randomUUID()].sort();
  // A single append first: the group goes on from its sequence.
  await append(w, agentEvent(w, a as string, 'a1'));
  await untilTrue('the first notice', () => notices === 1);
  const group = [
    agentEvent(w, b as string, 'b1'),
    agentEvent(w, a as string, 'a2'),
    agentEvent(w, b as string, 'b2'),
    agentEvent(w, a as string, 'a3'),
  ];
  const appended = await inTransaction(w.service.pool, (db) => appendEvents(db, group));
  t.deepEqual(
    appended.map((event) => [event.streamKey, event.sequence]),
    [
      [`agent:${b}`, 1],
      [`agent:${a}`, 2],
      [`agent:${b}`, 2],
      [`agent:${a}`, 3],
    ],
  );
  for (const event of appended) {
    const stored = await w.service.pool.query<{ payload: string }>('SELECT payload FROM events WHERE id = $1', [
      event.id,
    ]);
    t.is(stored.rows[0]?.payload, event.payload);
    t.like(JSON.parse(event.payload), { id: event.id, sequence: event.sequence, type: 'agent.state_changed' });
  }
  // The group's new lane (b) woke the dispatchers once; a's lane was due already.
  await untilTrue('the notice of the group', () => notices === 2);
  t.is(await pendingDeliveries(w), 5);
  await w.dispatcher();
  await untilTrue('every event delivered', () => receiver.received.length === 5);
  t.deepEqual(receiver.sequences(a as string), [1, 2, 3]);
  t.deepEqual(receiver.sequences(b as string), [1, 2]);
  t.deepEqual(
    receiver.received
      .filter((request) => request.event.agent.memberId === a)
      .map((request) => request.event.agent.reason),
    ['a1', 'a2', 'a3'],
  );
  t.is(elsewhere.received.length, 0);
  t.is(notices, 2);
});

test('during a secret rotation deliveries carry two signatures, then one', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const { id, signingSecret: first } = await w.endpoint(receiver.url());
  await w.dispatcher();
  const member = randomUUID();

  const rotated = await w.service.request('POST', `/api/v1/webhooks/${id}/rotate-secret`, {
    auth: w.apiKey,
    body: { overlapSeconds: 3600 },
  });
  t.is(rotated.status, 200, rotated.text);
  const second: string = rotated.body.signingSecret;
  await append(w, agentEvent(w, member));
  await untilTrue('the event arrived', () => receiver.received.length === 1);
  const during = receiver.received[0] as Received;
  const signatures = String(during.headers['x-service-signature']).split(',');
  t.is(signatures.length, 2);
  const timestamp = String(during.headers['x-service-timestamp']);
  t.deepEqual(signatures, [hmac(second, timestamp, during.body), hmac(first, timestamp, during.body)]);

  const ended = await w.service.request('POST', `/api/v1/webhooks/${id}/rotate-secret`, {
    auth: w.apiKey,
    body: { overlapSeconds: 0 },
  });
  t.is(ended.status, 200, ended.text);
  const third: string = ended.body.signingSecret;
  await append(w, agentEvent(w, member));
  await untilTrue('the event arrived', () => receiver.received.length === 2);
  const after = receiver.received[1] as Received;
  t.is(
    String(after.headers['x-service-signature']),
    hmac(third, String(after.headers['x-service-timestamp']), after.body),
  );

  // An overlap that has run out (by the dispatcher's clock) signs no more.
  await w.service.pool.query(
    `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = now() - interval '1 second'
      WHERE id = $1`,
    [id],
  );
  await append(w, agentEvent(w, member));
  await untilTrue('the event arrived', () => receiver.received.length === 3);
  t.is(String((receiver.received[2] as Received).headers['x-service-signature']).split(',').length, 1);
});

test('per-stream order under load, shared by two dispatcher processes: never two requests of a stream at once', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  receiver.handler = async () => {
    if (Math.random() < 0.5) await delay(Math.floor(Math.random() * 4));
    return 200;
  };
  await w.endpoint(receiver.url());
  await w.engineProcess();
  await w.dispatcher({ concurrency: 16 });
  const streams: string[] = Array.from({ length: 40 }, () => randomUUID());
  const perStream = 25;
  // Writers append concurrently: each transaction takes one to four events of random streams.
  const queue = streams.flatMap((stream) => Array.from({ length: perStream }, () => stream));
  for (let i = queue.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [queue[i], queue[j]] = [queue[j] as string, queue[i] as string];
  }
  const writers = Array.from({ length: 6 }, async () => {
    while (queue.length > 0) {
      const batch = queue.splice(0, 1 + Math.floor(Math.random() * 4));
      await append(w, ...batch.map((stream) => agentEvent(w, stream)));
    }
  });
  await Promise.all(writers);
  const total = streams.length * perStream;
  await untilTrue('every event arrived', () => receiver.received.length >= total, { timeoutMs: 60_000 });
  await untilTrue('every delivery is acknowledged', async () => (await pendingDeliveries(w)) === 0);
  t.deepEqual(receiver.overlaps, [], 'no stream had two requests in flight');
  for (const stream of streams) {
    t.deepEqual(
      receiver.sequences(stream),
      Array.from({ length: perStream }, (_, index) => index + 1),
      `stream ${stream} arrived in sequence order, each event once`,
    );
  }
});

test('a transaction that appends first and commits last is delivered in sequence order', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  await w.endpoint(receiver.url());
  await w.dispatcher();
  const slow = randomUUID();
  const other = randomUUID();

  // The long transaction takes sequence 1 of `slow` and stays open (rolled back if the test fails: an open
  // transaction holds back the event log of every database on the server).
  const client = await w.service.pool.connect();
  let open = true;
  t.teardown(async () => {
    if (open) await client.query('ROLLBACK').catch(() => {});
    client.release();
  });
  await client.query('BEGIN');
  const early = await appendEvent(client, agentEvent(w, slow, 'early'));
  t.is(early.sequence, 1);
  // A later writer of the same stream waits on it; other streams flow meanwhile.
  const later = append(w, agentEvent(w, slow, 'later'));
  await append(w, agentEvent(w, other));
  await untilTrue('the other stream was delivered', () => receiver.sequences(other).length === 1);
  t.deepEqual(receiver.sequences(slow), [], 'nothing of the open transaction is delivered');
  await client.query('COMMIT');
  open = false;
  const [second] = await later;
  t.is(second?.sequence, 2);
  await untilTrue('both events arrived', () => receiver.sequences(slow).length === 2);
  t.deepEqual(
    receiver.received.filter((request) => request.stream === slow).map((request) => request.event.agent.reason),
    ['early', 'later'],
  );
  t.deepEqual(receiver.sequences(slow), [1, 2]);
});

test('an event appended while its lane is being released is not left behind', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  await w.endpoint(receiver.url());
  await w.dispatcher();
  const member = randomUUID();
  // While the first event is acknowledged, a transaction appends the second: it holds the lane's row lock, so the
  // dispatcher's release waits for it, and its event is not in the snapshot the release started with.
  const client = await w.service.pool.connect();
  t.teardown(async () => {
    await client.query('ROLLBACK').catch(() => {}); // only if the test failed with the transaction open
    client.release();
  });
  receiver.handler = async (request) => {
    if (request.sequence === 1) {
      await client.query('BEGIN');
      await appendEvent(client, agentEvent(w, member, 'appended during the release'));
    }
    return 200;
  };
  await append(w, agentEvent(w, member));
  await untilTrue('the release waits for the appending transaction', async () => {
    const waiting = await w.service.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM webhook_deliveries%'`,
    );
    return (waiting.rows[0] as { n: number }).n > 0;
  });
  await client.query('COMMIT');
  await untilTrue('the second event arrived', () => receiver.sequences(member).length === 2, { timeoutMs: 10_000 });
  t.deepEqual(receiver.sequences(member), [1, 2]);
});

test('a receiver that is down, then up: nothing lost, in order', async (t) => {
  const w = await world(t);
  const port = await freePort();
  const { id } = await w.endpoint(`https://localhost:${port}/hook`);
  await w.dispatcher();
  const streams = [randomUUID(), randomUUID()];
  for (let n = 0; n < 4; n += 1) await append(w, ...streams.map((stream) => agentEvent(w, stream)));
  await untilTrue('two attempts failed', async () => (await w.lane(id, streams[0] as string)).attempts >= 2, {
    timeoutMs: 15_000,
  });
  const lane = await w.lane(id, streams[0] as string);
  t.regex(lane.last_error ?? '', /^connection failed: .*ECONNREFUSED/);
  t.is(await pendingDeliveries(w), 8);

  const receiver = await w.receiver(port);
  await untilTrue('every event arrived', () => receiver.received.length >= 8, { timeoutMs: 20_000 });
  for (const stream of streams) t.deepEqual(receiver.sequences(stream), [1, 2, 3, 4]);
  await untilTrue('acknowledged', async () => (await pendingDeliveries(w)) === 0);
  t.is((await w.lane(id, streams[0] as string)).attempts, 0, 'a success resets the failure count');
});

test('a stream with a backlog is claimed as a run in sequence order; a failure mid-run keeps what was acknowledged', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const member = randomUUID();
  const { id } = await w.endpoint(receiver.url());
  for (let n = 0; n < 6; n += 1) await append(w, agentEvent(w, member));

  // The claim hands out the lane's lowest sequences, in order, at most as many as asked for.
  const now = new Date();
  const claimed = await claimLanes(w.service.pool, {
    lease: 'test#1',
    now,
    leaseUntil: new Date(now.getTime() + 30_000),
    limit: 10,
    headsPerClaim: 4,
    perEndpoint: 10,
    perApplication: 10,
  });
  const lane = claimed.find((candidate) => candidate.endpointId === id);
  t.deepEqual(
    lane?.heads.map((head) => head.sequence),
    [1, 2, 3, 4],
  );
  // Released with the first two acknowledged: those go, the lane is due again for the rest.
  await releaseLane(w.service.pool, lane as ClaimedLane, [1, 2], new Date());
  t.is(await pendingDeliveries(w), 4);
  t.not((await w.lane(id, member)).next_attempt_at, null);

  let failedOnce = false;
  receiver.handler = (request) => {
    if (request.sequence === 4 && !failedOnce) {
      failedOnce = true;
      return 500;
    }
    return 200;
  };
  await w.dispatcher();
  await untilTrue('the stream was delivered', () => receiver.sequences(member).length === 5);
  t.deepEqual(receiver.sequences(member), [3, 4, 4, 5, 6], 'only the failed event is attempted again');
  await untilTrue('acknowledged', async () => (await pendingDeliveries(w)) === 0);
  t.deepEqual(receiver.overlaps, []);
});

test('a redirect, a stall and a 500 fail with backoff while another stream keeps flowing', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const [redirected, stalled, failing, healthy] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  const stalls: Array<() => void> = [];
  t.teardown(() => stalls.forEach((release) => release()));
  receiver.handler = (request) => {
    if (request.path !== '/hook') return 200;
    if (request.stream === redirected) return { status: 302, headers: { location: receiver.url('/elsewhere') } };
    if (request.stream === stalled) return new Promise((resolve) => stalls.push(() => resolve(200)));
    if (request.stream === failing) return 500;
    return 200;
  };
  const { id } = await w.endpoint(receiver.url());
  await w.dispatcher({ attemptTimeoutMs: 400 });
  await append(
    w,
    ...[redirected, stalled, failing].flatMap((stream) => [agentEvent(w, stream), agentEvent(w, stream)]),
  );

  await untilTrue('the failing lanes failed twice', async () => {
    const lanes = await Promise.all([redirected, stalled, failing].map((stream) => w.lane(id, stream)));
    return lanes.every((lane) => lane.attempts >= 2);
  });
  // The healthy stream flows while the others wait out their backoff.
  for (let n = 1; n <= 5; n += 1) {
    await append(w, agentEvent(w, healthy));
    await untilTrue('the healthy event arrived', () => receiver.sequences(healthy).length === n, { timeoutMs: 5_000 });
  }
  t.deepEqual(receiver.sequences(healthy), [1, 2, 3, 4, 5]);

  const redirectLane = await w.lane(id, redirected);
  t.regex(redirectLane.last_error ?? '', /^redirect not followed: HTTP 302 to https:\/\/localhost:\d+\/elsewhere$/);
  t.false(
    receiver.received.some((request) => request.path === '/elsewhere'),
    'the redirect is never followed',
  );
  t.regex((await w.lane(id, stalled)).last_error ?? '', /^timeout: no answer within 400 ms$/);
  const failingLane = await w.lane(id, failing);
  t.is(failingLane.last_error, 'HTTP 500: boom');
  for (const stream of [redirected, stalled, failing]) {
    t.true(
      receiver.sequences(stream).every((sequence) => sequence === 1),
      'the next event of a failing stream waits behind its head',
    );
  }

  // Backoff: after the n-th failure the lane waits 2^(n-1) s from the end of that attempt.
  const seen = new Set<number>();
  await untilTrue('the failing lane was seen after two of its failures', async () => {
    const lane = await w.lane(id, failing);
    if (lane.lease_owner === null && lane.last_attempt_at !== null && lane.next_attempt_at !== null) {
      const wait = lane.next_attempt_at.getTime() - lane.last_attempt_at.getTime();
      const expected = retryDelayMs(lane.attempts);
      // From the attempt's start: the backoff plus the attempt's own duration (short, but the machine may be busy).
      if (wait < expected || wait > expected + 3_000) throw new Error(`attempt ${lane.attempts}: waits ${wait} ms`);
      seen.add(lane.attempts);
    }
    return [...seen].filter((attempts) => attempts >= 2).length >= 2;
  });
  t.pass();
});

test('the shares of the attempts in flight: half of WEBHOOK_CONCURRENCY per application, a quarter per endpoint, or as set', (t) => {
  t.deepEqual(loadConfig({}).webhookShares, { application: 32, endpoint: 16 });
  t.deepEqual(webhookShares(64), { application: 32, endpoint: 16 });
  t.deepEqual(loadConfig({ WEBHOOK_CONCURRENCY: '10' }).webhookShares, { application: 5, endpoint: 2 });
  t.deepEqual(loadConfig({ WEBHOOK_CONCURRENCY: '1' }).webhookShares, { application: 1, endpoint: 1 });
  t.deepEqual(loadConfig({ WEBHOOK_APPLICATION_CONCURRENCY: '8' }).webhookShares, { application: 8, endpoint: 8 });
  t.deepEqual(
    loadConfig({
      WEBHOOK_CONCURRENCY: '100',
      WEBHOOK_APPLICATION_CONCURRENCY: '40',
      WEBHOOK_ENDPOINT_CONCURRENCY: '10',
    }).webhookShares,
    { application: 40, endpoint: 10 },
  );
  t.throws(() => loadConfig({ WEBHOOK_APPLICATION_CONCURRENCY: '65' }), {
    instanceOf: ConfigError,
    message: /^WEBHOOK_APPLICATION_CONCURRENCY must be at most WEBHOOK_CONCURRENCY \(64\), got 65/,
  });
  t.throws(() => loadConfig({ WEBHOOK_APPLICATION_CONCURRENCY: '4', WEBHOOK_ENDPOINT_CONCURRENCY: '5' }), {
    instanceOf: ConfigError,
    message: 'WEBHOOK_ENDPOINT_CONCURRENCY must be at most WEBHOOK_APPLICATION_CONCURRENCY (4), got 5',
  });
  t.throws(() => loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: '0' }), { instanceOf: ConfigError });
  t.throws(() => loadConfig({ WEBHOOK_APPLICATION_CONCURRENCY: 'many' }), { instanceOf: ConfigError });
});

test('claims go round-robin: the application, then the endpoint, holding fewest first, whoever holds them, never beyond their shares', async (t) => {
  const w = await world(t);
  // Application X with two endpoints (each of its events goes to both), application Y with one.
  const [x1, x2] = [await w.endpoint('https://localhost:9/x1'), await w.endpoint('https://localhost:9/x2')];
  const other = await w.otherApplication();
  const y = await other.endpoint('https://localhost:9/y');
  await append(w, ...newStreams(6).map((stream) => agentEvent(w, stream)));
  await append(w, ...newStreams(6).map((stream) => agentEvent(w, stream, 'y', other.applicationId)));
  const claim = (lease: string, limit: number) => {
    const now = new Date();
    return claimLanes(w.service.pool, {
      lease,
      now,
      leaseUntil: new Date(now.getTime() + 30_000),
      limit,
      headsPerClaim: 1,
      perEndpoint: 2,
      perApplication: 3,
    });
  };
  const count = (lanes: ClaimedLane[], endpointId: string) =>
    lanes.filter((lane) => lane.endpointId === endpointId).length;

  // Room for 4: turn by turn, one lane of each application, X's turns going to its endpoints in turn.
  const first = await claim('one#1', 4);
  t.deepEqual(
    [count(first, x1.id), count(first, x2.id), count(first, y.id)],
    [1, 1, 2],
    'X: one lane per endpoint; Y: two',
  );
  // Another dispatcher: X has room for one more lane (3 held at most), Y's endpoint none (2 at most).
  const second = await claim('two#1', 10);
  t.is(second.length, 1);
  t.is(count(second, y.id), 0);
  t.is((await heldBy(w, 'one', [x1.id, x2.id])) + (await heldBy(w, 'two', [x1.id, x2.id])), 3);
  t.is(await heldBy(w, 'one', [y.id]), 2);
  t.deepEqual(await claim('three#1', 10), [], 'every share is held, though 13 lanes are due');
  // A lane let go makes room for its own application only.
  await releaseLane(w.service.pool, first.find((lane) => lane.endpointId === y.id) as ClaimedLane, [], new Date());
  const fourth = await claim('four#1', 10);
  t.deepEqual(
    fourth.map((lane) => lane.endpointId),
    [y.id],
  );
});

test('a never-answering endpoint of one application never delays another application, over two dispatchers', async (t) => {
  const w = await world(t);
  // Application X: an endpoint on a host that takes connections and never answers, with 80 streams due.
  const silent = await silentReceiver(t, w);
  const slow = await w.otherApplication();
  const { id: slowId } = await slow.endpoint(silent.url());
  // Application Y: a healthy endpoint.
  const receiver = await w.receiver();
  await w.endpoint(receiver.url());
  // Two dispatchers of 32 attempts each: fewer than X's streams. An attempt outlasts this test, so under one cap for
  // every lane Y's events would wait for X's attempts to time out.
  const options = { concurrency: 32, attemptTimeoutMs: 150_000, leaseMs: 180_000 };
  const dispatchers = [await w.dispatcher(options), await w.dispatcher(options)];
  const endpointShare = webhookShares(32).endpoint;
  await append(w, ...newStreams(80).map((stream) => agentEvent(w, stream, 'slow', slow.applicationId)));
  await untilTrue('the silent host holds attempts', () => silent.waiting.size >= endpointShare);

  const streams = newStreams(5);
  for (let n = 0; n < 2; n += 1) await append(w, ...streams.map((stream) => agentEvent(w, stream)));
  await untilTrue('the other application’s events arrived', () => receiver.received.length === 10, {
    timeoutMs: 60_000,
  });
  for (const stream of streams) t.deepEqual(receiver.sequences(stream), [1, 2]);
  t.is(silent.waiting.size, silent.received.length, 'every attempt to the silent host is still waiting');
  const ended = await w.service.pool.query('SELECT 1 FROM webhook_lanes WHERE endpoint_id = $1 AND attempts > 0', [
    slowId,
  ]);
  t.is(ended.rowCount, 0, 'no attempt to the silent host has ended');
  for (const dispatcher of dispatchers) {
    t.true((await heldBy(w, dispatcher, [slowId])) <= endpointShare, 'the endpoint holds its share at most');
  }
});

test('a slow endpoint takes only its share: its application’s other endpoint and another application flow meanwhile', async (t) => {
  const w = await world(t);
  const silent = await silentReceiver(t, w);
  const { id: slowId } = await w.endpoint(silent.url());
  const dispatcher = await w.dispatcher({ concurrency: 32, attemptTimeoutMs: 150_000, leaseMs: 180_000 });
  const { application, endpoint } = webhookShares(32);
  t.true(endpoint < application);
  await append(w, ...newStreams(80).map((stream) => agentEvent(w, stream, 'slow')));
  await untilTrue('the slow endpoint holds its share', () => silent.waiting.size >= endpoint);

  // Then the application gets a healthy endpoint, another application one too, and events come for both (the
  // application's go to its slow endpoint as well).
  const sibling = await w.receiver();
  await w.endpoint(sibling.url());
  const other = await w.otherApplication();
  const otherReceiver = await w.receiver();
  await other.endpoint(otherReceiver.url());
  const streams = newStreams(5);
  const otherStreams = newStreams(5);
  for (let n = 0; n < 2; n += 1) {
    await append(
      w,
      ...streams.map((stream) => agentEvent(w, stream)),
      ...otherStreams.map((stream) => agentEvent(w, stream, 'other', other.applicationId)),
    );
  }
  await untilTrue('the sibling endpoint’s events arrived', () => sibling.received.length === 10, { timeoutMs: 60_000 });
  await untilTrue('the other application’s events arrived', () => otherReceiver.received.length === 10, {
    timeoutMs: 60_000,
  });
  for (const stream of streams) t.deepEqual(sibling.sequences(stream), [1, 2]);
  for (const stream of otherStreams) t.deepEqual(otherReceiver.sequences(stream), [1, 2]);
  t.is(silent.received.length, endpoint, 'the slow endpoint was given its share, no more, though 85 streams wait');
  t.is(silent.waiting.size, endpoint, 'and its attempts are all still waiting');
  t.is(await heldBy(w, dispatcher, [slowId]), endpoint);
});

test('an application’s slow endpoints together take only its share, in turn, and another application flows meanwhile', async (t) => {
  const w = await world(t);
  const silent = await silentReceiver(t, w);
  const paths = ['/a', '/b', '/c', '/d'];
  const slowIds: string[] = [];
  for (const path of paths) slowIds.push((await w.endpoint(silent.url(path))).id);
  await w.dispatcher({ concurrency: 32, attemptTimeoutMs: 150_000, leaseMs: 180_000 });
  const { application } = webhookShares(32);
  // 30 streams, each to the four endpoints, due at once.
  await append(w, ...newStreams(30).map((stream) => agentEvent(w, stream, 'slow')));
  await untilTrue('the application holds its share', () => silent.waiting.size >= application);

  const other = await w.otherApplication();
  const receiver = await w.receiver();
  await other.endpoint(receiver.url());
  const streams = newStreams(5);
  for (let n = 0; n < 2; n += 1) {
    await append(w, ...streams.map((stream) => agentEvent(w, stream, 'other', other.applicationId)));
  }
  await untilTrue('the other application’s events arrived', () => receiver.received.length === 10, {
    timeoutMs: 60_000,
  });
  t.is(silent.received.length, application, 'the application was given its share, no more');
  t.is(silent.waiting.size, application, 'and its attempts are all still waiting');
  t.deepEqual(
    paths.map((path) => silent.received.filter((request) => request.path === path).length),
    paths.map(() => application / paths.length),
    'its endpoints took the share in turn',
  );
});

test('a stream parks 24 hours after its first attempt, others keep flowing, and replay resumes it', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const [stuck, healthy] = [randomUUID(), randomUUID()];
  let stuckAnswer = 500;
  receiver.handler = (request) => (request.stream === stuck ? stuckAnswer : 200);
  const { id } = await w.endpoint(receiver.url());
  const clock = offsetClock();
  await w.dispatcher({ clock });
  await append(w, agentEvent(w, stuck, 'first'));
  await untilTrue('the first attempt failed', async () => (await w.lane(id, stuck)).attempts >= 1);
  const firstAttempt = (await w.lane(id, stuck)).head_first_attempt_at as Date;
  t.truthy(firstAttempt);

  // A day later by the dispatcher's clock, the next failure parks the lane.
  clock.offsetMs = parkAfterMs + 1_000;
  await untilTrue('the lane parked', async () => (await w.lane(id, stuck)).parked_at !== null, { timeoutMs: 15_000 });
  const parked = await w.lane(id, stuck);
  t.is(
    parked.head_first_attempt_at?.getTime(),
    firstAttempt.getTime(),
    'the parking clock starts at the first attempt',
  );
  t.true((parked.parked_at as Date).getTime() - firstAttempt.getTime() >= parkAfterMs);
  t.is(parked.lease_owner, null);
  const attemptsWhenParked = receiver.sequences(stuck).length;

  // The rest of the stream waits behind the parked head; other streams flow.
  stuckAnswer = 200;
  await append(w, agentEvent(w, stuck, 'second'));
  await append(w, agentEvent(w, healthy));
  await untilTrue('the healthy stream was delivered', () => receiver.sequences(healthy).length === 1);
  t.is(receiver.sequences(stuck).length, attemptsWhenParked, 'a parked stream is not attempted');
  t.not((await w.lane(id, stuck)).parked_at, null, 'a new event leaves the lane parked');
  const detail = await w.service.request('GET', `/api/v1/webhooks/${id}`, { auth: w.apiKey });
  t.is(detail.body.parkedCount, 1);

  const replay = await w.service.request('POST', `/api/v1/webhooks/${id}/replay`, {
    auth: w.apiKey,
    body: { scope: 'parked' },
  });
  t.is(replay.status, 200, replay.text);
  await untilTrue('the stream resumed', () => receiver.sequences(stuck).length === attemptsWhenParked + 2);
  t.deepEqual(receiver.sequences(stuck).slice(attemptsWhenParked), [1, 2], 'resumed in order');
  t.deepEqual(
    receiver.received.filter((request) => request.stream === stuck).map((request) => request.event.agent.reason),
    [...Array.from({ length: attemptsWhenParked }, () => 'first'), 'first', 'second'],
  );
  await untilTrue('acknowledged', async () => (await pendingDeliveries(w)) === 0);
  const resumed = await w.lane(id, stuck);
  t.is(resumed.parked_at, null);
  t.is(resumed.attempts, 0);
});

test('private addresses are refused unless allowed, with a clear last error', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const registry = new (await import('prom-client')).Registry();
  await w.dispatcher({ allowPrivateNetworks: false, registry });
  const byName = await w.endpoint(receiver.url());
  const literal = await w.endpoint('https://10.0.0.5/hook');
  const metadata = await w.endpoint('https://169.254.169.254/latest');
  const member = randomUUID();
  await append(w, agentEvent(w, member));
  await untilTrue('all three were refused', async () => {
    const lanes = await Promise.all([byName, literal, metadata].map((endpoint) => w.lane(endpoint.id, member)));
    return lanes.every((lane) => lane.attempts >= 1);
  });
  t.regex(
    (await w.lane(byName.id, member)).last_error ?? '',
    /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address$/,
  );
  t.is((await w.lane(literal.id, member)).last_error, 'refused: 10.0.0.5 is a private address');
  t.is((await w.lane(metadata.id, member)).last_error, 'refused: 169.254.169.254 is a link-local address');
  t.deepEqual(receiver.received, [], 'nothing was sent');
  const detail = await w.service.request('GET', `/api/v1/webhooks/${byName.id}`, { auth: w.apiKey });
  t.regex(detail.body.lastError?.message ?? '', /^refused: localhost resolves to/);
  t.regex(await registry.metrics(), /switchboard_webhook_deliveries_total\{outcome="refused"\} \d+/);
});

test('a dispatcher process killed mid-delivery: the event is delivered again, in order', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const member = randomUUID();
  const engine = await w.engineProcess();
  const killed = new Promise<void>((resolve) => engine.once('exit', () => resolve()));
  let held = false;
  receiver.handler = async (request) => {
    if (!held && request.sequence === 1) {
      held = true;
      engine.kill('SIGKILL');
      await killed;
    }
    return 200;
  };
  await w.endpoint(receiver.url());
  await append(w, agentEvent(w, member), agentEvent(w, member), agentEvent(w, member));
  await killed;
  t.deepEqual(receiver.sequences(member), [1]);
  t.is(await pendingDeliveries(w), 3, 'the held event was never acknowledged');

  // Another dispatcher takes over once the dead one's lease has run out (its clock is past the 30 s lease).
  const clock = offsetClock();
  clock.offsetMs = 31_000;
  await w.dispatcher({ clock });
  await untilTrue('the stream was delivered', () => receiver.sequences(member).length === 4);
  t.deepEqual(receiver.sequences(member), [1, 1, 2, 3]);
  await untilTrue('acknowledged', async () => (await pendingDeliveries(w)) === 0);
  t.deepEqual(receiver.overlaps, []);
});

test('closing the dispatcher lets the attempt in flight finish', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  let release = () => {};
  const arrived = new Promise<void>((resolve) => {
    receiver.handler = () =>
      new Promise((answer) => {
        release = () => answer(200);
        resolve();
      });
  });
  await w.endpoint(receiver.url());
  const dispatcher = await w.dispatcher();
  await append(w, agentEvent(w, randomUUID()));
  await arrived;
  let closed = false;
  const closing = dispatcher.close().then(() => {
    closed = true;
  });
  // A short window to see that close has not returned while the receiver holds the answer.
  await Promise.race([closing, delay(200)]);
  t.false(closed, 'close waits for the attempt');
  release();
  await closing;
  t.is(await pendingDeliveries(w), 0, 'the outcome was recorded before close returned');
});

test('lanes idle for a day are swept; parked and busy lanes stay; a swept stream delivers again', async (t) => {
  const w = await world(t);
  const receiver = await w.receiver();
  const [done, stuck] = [randomUUID(), randomUUID()];
  receiver.handler = (request) => (request.stream === stuck ? 500 : 200);
  const { id } = await w.endpoint(receiver.url());
  const clock = offsetClock();
  const dispatcher = await w.dispatcher({ clock });
  await append(w, agentEvent(w, done), agentEvent(w, stuck));
  await untilTrue('the finished stream was delivered', () => receiver.sequences(done).length === 1);
  await untilTrue('the failing stream was attempted', async () => (await w.lane(id, stuck)).attempts >= 1);
  await untilTrue('the finished lane is idle', async () => (await w.lane(id, done)).next_attempt_at === null);

  // Not yet a day idle: nothing goes.
  t.is(await dispatcher.sweep(), 0);
  // A day later by the dispatcher's clock, the idle lane goes; the lane still retrying stays.
  clock.offsetMs = 24 * 3_600_000 + 60_000;
  t.is(await dispatcher.sweep(), 1);
  await t.throwsAsync(() => w.lane(id, done), { message: /no lane/ });
  t.is((await w.lane(id, stuck)).attempts >= 1, true);

  // The swept stream's next event makes its lane again and is delivered, in sequence.
  await append(w, agentEvent(w, done, 'later'));
  await untilTrue('the swept stream delivered again', () => receiver.sequences(done).length === 2);
  t.deepEqual(receiver.sequences(done), [1, 2]);
});
