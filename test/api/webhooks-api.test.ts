/**
 * Webhook endpoints through HTTP: operations 73-79 (create, list, get, update, delete, replay, rotate-secret).
 *
 * Two services: one with the default settings (private hosts refused) and one with WEBHOOK_ALLOW_PRIVATE_NETWORKS.
 * Both run the API role only, so no dispatcher touches the delivery state (webhook_deliveries, webhook_lanes) that
 * the tests read; events are written with appendEvent, the way every component writes them. Every test makes its own
 * application, so tests run concurrently without seeing each other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import type pg from 'pg';
import { appendEvent } from '../../core/events/outbox.ts';
import { eventTypes } from '../../core/events/types.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { isPublicAddress } from '../../core/webhooks/address.ts';
import { openSecret } from '../../core/sealing.ts';
import { checkWebhookUrl } from '../../core/webhooks/url.ts';
import { isError, serviceForFile, type TestService, workspaceWithUser } from '../helpers/service.ts';

const service = serviceForFile(test);
const permissive = serviceForFile(test, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' });

// ---------------------------------------------------------------------------------------------------------------
// Helpers

let hosts = 0;
function hookUrl() {
  hosts += 1;
  return `https://hooks${hosts}.example.com/switchboard?tenant=${hosts}`;
}

function createAnswer(apiKey: string, body: Record<string, unknown>, on: TestService = service) {
  return on.request('POST', '/api/v1/webhooks', { auth: apiKey, body });
}

interface Created {
  endpoint: { id: string; url: string; eventTypes: string[] | null; enabled: boolean; createdAt: string };
  signingSecret: string;
}

async function createEndpoint(apiKey: string, body: Record<string, unknown> = {}): Promise<Created> {
  const answer = await createAnswer(apiKey, { url: hookUrl(), ...body });
  if (answer.status !== 201) throw new Error(`webhook: ${answer.status} ${answer.text}`);
  return answer.body as Created;
}

function getEndpoint(apiKey: string, id: string) {
  return service.request('GET', `/api/v1/webhooks/${id}`, { auth: apiKey });
}

function replay(apiKey: string, id: string, body?: Record<string, unknown>) {
  return service.request('POST', `/api/v1/webhooks/${id}/replay`, { auth: apiKey, ...(body ? { body } : {}) });
}

function rotate(apiKey: string, id: string, body?: Record<string, unknown>) {
  return service.request('POST', `/api/v1/webhooks/${id}/rotate-secret`, { auth: apiKey, ...(body ? { body } : {}) });
}

/** An agent.state_changed event on the stream `agent:<memberId>`. */
function agentEvent(db: pg.Pool, applicationId: string, memberId: string) {
  return appendEvent(db, {
    type: 'agent.state_changed',
    streamId: memberId,
    applicationId,
    workspaceId: randomUUID(),
    externalWorkspaceId: 'ws-1',
    fields: {
      externalUserId: 'alice',
      agent: {
        memberId,
        state: 'available',
        previousState: 'offline',
        reason: null,
        actor: null,
        changedAt: new Date().toISOString(),
      },
    },
  });
}

/** A call.started event on the stream `call:<callId>`. */
function callEvent(db: pg.Pool, applicationId: string, callId: string) {
  return appendEvent(db, {
    type: 'call.started',
    streamId: callId,
    applicationId,
    workspaceId: randomUUID(),
    externalWorkspaceId: 'ws-1',
    fields: {
      callId,
      call: {
        id: callId,
        direction: 'inbound',
        from: '+15555550100',
        to: '+15555550199',
        phoneNumberId: null,
        state: 'initiated',
        startedAt: new Date().toISOString(),
        answeredAt: null,
        endedAt: null,
        endReason: null,
      },
    },
  });
}

interface DeliveryRow {
  event_id: string;
  stream_key: string;
  sequence: string;
}

/** Orders by stream key (code points), then sequence. */
function byStream(a: readonly unknown[], b: readonly unknown[]): number {
  const [keyA, keyB] = [String(a[0]), String(b[0])];
  if (keyA !== keyB) return keyA < keyB ? -1 : 1;
  return Number(a[1]) - Number(b[1]);
}

/** The endpoint's queued deliveries, by stream and sequence. */
async function deliveries(endpointId: string): Promise<DeliveryRow[]> {
  const result = await service.pool.query<DeliveryRow>(
    'SELECT event_id, stream_key, sequence FROM webhook_deliveries WHERE endpoint_id = $1',
    [endpointId],
  );
  return result.rows.sort((a, b) => byStream([a.stream_key, a.sequence], [b.stream_key, b.sequence]));
}

interface LaneRow {
  stream_key: string;
  next_attempt_at: Date | null;
  attempts: number;
  head_first_attempt_at: Date | null;
  parked_at: Date | null;
  last_error: string | null;
}

async function lanes(endpointId: string): Promise<Map<string, LaneRow>> {
  const result = await service.pool.query<LaneRow>(
    `SELECT stream_key, next_attempt_at, attempts, head_first_attempt_at, parked_at, last_error
       FROM webhook_lanes WHERE endpoint_id = $1`,
    [endpointId],
  );
  return new Map(result.rows.map((row) => [row.stream_key, row]));
}

/** What a dispatcher does when it acknowledges everything queued: the delivery rows go, the lanes go idle. */
async function deliverAll(endpointId: string) {
  await service.pool.query('DELETE FROM webhook_deliveries WHERE endpoint_id = $1', [endpointId]);
  await service.pool.query('UPDATE webhook_lanes SET next_attempt_at = NULL WHERE endpoint_id = $1', [endpointId]);
}

/** What a dispatcher does after 24 hours of failures on a lane. */
async function park(endpointId: string, streamKey: string, error = 'connect ECONNREFUSED') {
  await service.pool.query(
    `UPDATE webhook_lanes SET parked_at = now(), next_attempt_at = NULL, attempts = 17,
            head_first_attempt_at = now() - interval '24 hours', last_attempt_at = now(), last_error = $3
      WHERE endpoint_id = $1 AND stream_key = $2`,
    [endpointId, streamKey, error],
  );
}

async function setOccurredAt(eventId: string, at: string) {
  await service.pool.query('UPDATE events SET occurred_at = $2 WHERE id = $1', [eventId, at]);
}

// ---------------------------------------------------------------------------------------------------------------
// The URL check and the address classification

test('isPublicAddress: public unicast only, IPv4-mapped and other embedding forms judged by their IPv4 address', (t) => {
  for (const ip of [
    '8.8.8.8',
    '1.1.1.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
  ]) {
    t.true(isPublicAddress(ip), ip);
  }
  for (const ip of [
    '127.0.0.1',
    '127.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '224.0.0.1',
    '0.0.0.0',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.1',
    '198.18.0.1',
    '::1',
    '::',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    'fec0::1',
    '2001:db8::1',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '64:ff9b::7f00:1',
    '64:ff9b:1::808:808',
    '2002:7f00:1::1',
    'not-an-address',
    '',
  ]) {
    t.false(isPublicAddress(ip), ip);
  }
});

test('checkWebhookUrl normalises the URL it accepts, and the setting lifts only the host rules', (t) => {
  t.deepEqual(checkWebhookUrl('https://Hooks.Example.COM:8443/a b?x=1', { allowPrivateNetworks: false }), {
    ok: true,
    url: 'https://hooks.example.com:8443/a%20b?x=1',
  });
  t.true(checkWebhookUrl('https://127.0.0.1:9000/hook', { allowPrivateNetworks: true }).ok);
  t.true(checkWebhookUrl('https://localhost/hook', { allowPrivateNetworks: true }).ok);
  for (const url of ['http://127.0.0.1/hook', 'https://u:p@127.0.0.1/', 'https://127.0.0.1/#x', 'ftp://a.example/']) {
    t.false(checkWebhookUrl(url, { allowPrivateNetworks: true }).ok, url);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// 73 create, 75 get, 74 list: shapes and the secret shown once

test('create answers 201 with the endpoint and a signing secret shown once, stored sealed', async (t) => {
  const app = await service.application();
  const url = hookUrl();
  const created = await createAnswer(app.apiKey, { url, description: 'CRM sync' });
  t.is(created.status, 201, created.text);
  const { endpoint, signingSecret } = created.body as Created & { endpoint: Record<string, unknown> };
  t.regex(signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/);
  t.deepEqual(Object.keys(endpoint).sort(), [
    'createdAt',
    'description',
    'enabled',
    'eventTypes',
    'id',
    'updatedAt',
    'url',
  ]);
  t.is(endpoint.url, url);
  t.is(endpoint.description, 'CRM sync');
  t.is(endpoint.eventTypes, null);
  t.is(endpoint.enabled, true);

  const stored = await service.pool.query<{ secret: string; application_id: string; previous_secret: string | null }>(
    'SELECT secret, application_id, previous_secret FROM webhook_endpoints WHERE id = $1',
    [endpoint.id],
  );
  const row = stored.rows[0];
  t.is(row?.application_id, app.applicationId);
  t.is(row?.previous_secret, null);
  t.false(row?.secret.includes(signingSecret.slice(6)), 'the secret is not stored in the clear');
  const keys = await loadSigningKeys(service.pool, undefined);
  t.is(openSecret(keys.webhookSecrets, row?.secret as string), signingSecret);

  const got = await getEndpoint(app.apiKey, endpoint.id);
  t.is(got.status, 200, got.text);
  t.false(got.text.includes(signingSecret.slice(6)));
  t.false('signingSecret' in got.body);
  const { pendingCount, parkedCount, lastError, secretRotation, ...base } = got.body;
  t.deepEqual(base, endpoint);
  t.deepEqual(
    { pendingCount, parkedCount, lastError, secretRotation },
    {
      pendingCount: 0,
      parkedCount: 0,
      lastError: null,
      secretRotation: null,
    },
  );

  const listed = await service.request('GET', '/api/v1/webhooks', { auth: app.apiKey });
  t.is(listed.status, 200, listed.text);
  t.deepEqual(listed.body, { data: [endpoint], nextCursor: null });
  t.false(listed.text.includes(signingSecret.slice(6)));
});

test('create takes eventTypes (each known, unique, non-empty; null or absent is every type) and enabled', async (t) => {
  const app = await service.application();
  const some = await createEndpoint(app.apiKey, { eventTypes: ['call.ended', 'agent.state_changed'], enabled: false });
  t.deepEqual(some.endpoint.eventTypes, ['call.ended', 'agent.state_changed']);
  t.is(some.endpoint.enabled, false);
  const all = await createEndpoint(app.apiKey, { eventTypes: null });
  t.is(all.endpoint.eventTypes, null);
  const every = await createEndpoint(app.apiKey, { eventTypes: [...eventTypes] });
  t.deepEqual(every.endpoint.eventTypes, [...eventTypes]);

  for (const [label, body] of [
    ['unknown type', { eventTypes: ['call.started', 'call.exploded'] }],
    ['duplicate', { eventTypes: ['call.ended', 'call.ended'] }],
    ['empty', { eventTypes: [] }],
    ['not strings', { eventTypes: [1] }],
    ['not an array', { eventTypes: 'call.ended' }],
    ['enabled not boolean', { enabled: 'yes' }],
    ['unknown field', { secret: 'mine' }],
    ['description too long', { description: 'x'.repeat(501) }],
  ] as const) {
    const answer = await createAnswer(app.apiKey, { url: hookUrl(), ...body });
    isError(t, answer, 400, 'invalid_request', label);
    t.regex(answer.body.error.message, /^body/, label);
  }
  isError(t, await createAnswer(app.apiKey, {}), 400, 'invalid_request', 'no url');
  const count = await service.pool.query('SELECT 1 FROM webhook_endpoints WHERE application_id = $1', [
    app.applicationId,
  ]);
  t.is(count.rowCount, 3);
});

test('the url must be https on a public host: refusals are 400 invalid_request naming body.url', async (t) => {
  const app = await service.application();
  const refused = [
    'http://hooks.example.com/x',
    'ftp://hooks.example.com/x',
    'not a url',
    '/relative/path',
    'https://localhost/x',
    'https://LOCALHOST./x',
    'https://api.localhost/x',
    'https://intranet/x',
    'https://127.0.0.1/x',
    'https://127.1/x',
    'https://0x7f000001/x',
    'https://10.0.0.8/x',
    'https://172.16.3.4/x',
    'https://192.168.0.10/x',
    'https://169.254.169.254/latest/meta-data/',
    'https://100.64.1.2/x',
    'https://0.0.0.0/x',
    'https://224.0.0.251/x',
    'https://240.1.2.3/x',
    'https://[::1]/x',
    'https://[::]/x',
    'https://[fd00::1]/x',
    'https://[fe80::1]/x',
    'https://[::ffff:127.0.0.1]/x',
    'https://[::ffff:a9fe:a9fe]/x',
    'https://user:pass@hooks.example.com/x',
    'https://user@hooks.example.com/x',
    'https://hooks.example.com/x#fragment',
    'https://hooks.example.com/x#',
    `https://hooks.example.com/${'a'.repeat(2000)}`,
  ];
  for (const url of refused) {
    const answer = await createAnswer(app.apiKey, { url });
    isError(t, answer, 400, 'invalid_request', url);
    t.regex(answer.body?.error?.message ?? '', /^body\.url /, url);
  }
  const https = await createAnswer(app.apiKey, { url: 'http://hooks.example.com/x' });
  t.regex(https.body.error.message, /https/);
  const metadata = await createAnswer(app.apiKey, { url: 'https://169.254.169.254/latest/meta-data/' });
  t.regex(metadata.body.error.message, /public host/);

  for (const url of ['https://hooks.example.com/x', 'https://8.8.8.8/hook', 'https://[2606:4700::1111]:8443/hook']) {
    const answer = await createAnswer(app.apiKey, { url });
    t.is(answer.status, 201, `${url} ${answer.text}`);
  }
  const count = await service.pool.query('SELECT 1 FROM webhook_endpoints WHERE application_id = $1', [
    app.applicationId,
  ]);
  t.is(count.rowCount, 3);
});

test('WEBHOOK_ALLOW_PRIVATE_NETWORKS=true accepts private hosts, still only https without credentials', async (t) => {
  const app = await permissive.application();
  for (const url of [
    'https://localhost:8443/hook',
    'https://127.0.0.1:9000/hook',
    'https://10.0.0.8/hook',
    'https://192.168.1.20/hook',
    'https://100.64.1.2/hook',
    'https://[::1]:8443/hook',
    'https://receiver/hook',
  ]) {
    const answer = await createAnswer(app.apiKey, { url }, permissive);
    t.is(answer.status, 201, `${url} ${answer.text}`);
  }
  for (const url of ['http://127.0.0.1:9000/hook', 'https://u:p@127.0.0.1/hook', 'https://127.0.0.1/hook#x']) {
    isError(t, await createAnswer(app.apiKey, { url }, permissive), 400, 'invalid_request', url);
  }
});

test('list: newest first, paged with a cursor, only the application’s own endpoints', async (t) => {
  const app = await service.application();
  const other = await service.application();
  const ids: string[] = [];
  for (let index = 0; index < 5; index += 1) ids.push((await createEndpoint(app.apiKey)).endpoint.id);
  await createEndpoint(other.apiKey);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${encodeURIComponent(cursor)}`;
    const page = await service.request('GET', `/api/v1/webhooks${query}`, { auth: app.apiKey });
    t.is(page.status, 200, page.text);
    t.true(page.body.data.length <= 2);
    for (const item of page.body.data) {
      t.false('signingSecret' in item);
      seen.push(item.id);
    }
    cursor = page.body.nextCursor;
    pages += 1;
  } while (cursor !== null && pages < 10);
  t.deepEqual(seen, [...ids].reverse());
  t.is(pages, 3);

  isError(
    t,
    await service.request('GET', '/api/v1/webhooks?cursor=garbage', { auth: app.apiKey }),
    400,
    'invalid_cursor',
  );
  const first = await service.request('GET', '/api/v1/webhooks?limit=1', { auth: app.apiKey });
  const foreign = await service.request('GET', `/api/v1/webhooks?cursor=${encodeURIComponent(first.body.nextCursor)}`, {
    auth: other.apiKey,
  });
  isError(t, foreign, 400, 'invalid_cursor');
  isError(t, await service.request('GET', '/api/v1/webhooks?limit=201', { auth: app.apiKey }), 400, 'invalid_request');
});

// ---------------------------------------------------------------------------------------------------------------
// The 20-endpoint limit

test('an application has at most 20 endpoints: the 21st is 409 limit_exceeded; deleting one makes room', async (t) => {
  const app = await service.application();
  const other = await service.application();
  const created: string[] = [];
  for (let index = 0; index < 20; index += 1) created.push((await createEndpoint(app.apiKey)).endpoint.id);
  const refused = await createAnswer(app.apiKey, { url: hookUrl() });
  isError(t, refused, 409, 'limit_exceeded');
  t.regex(refused.body.error.message, /20/);
  // Another application has its own 20.
  t.is((await createAnswer(other.apiKey, { url: hookUrl() })).status, 201);

  const deleted = await service.request('DELETE', `/api/v1/webhooks/${created[0]}`, { auth: app.apiKey });
  t.is(deleted.status, 200, deleted.text);
  t.is((await createAnswer(app.apiKey, { url: hookUrl() })).status, 201);
  isError(t, await createAnswer(app.apiKey, { url: hookUrl() }), 409, 'limit_exceeded');
});

test('two concurrent creates at 19 endpoints: one is created, the other is 409 limit_exceeded', async (t) => {
  const app = await service.application();
  for (let index = 0; index < 19; index += 1) await createEndpoint(app.apiKey);
  const answers = await Promise.all([
    createAnswer(app.apiKey, { url: hookUrl() }),
    createAnswer(app.apiKey, { url: hookUrl() }),
    createAnswer(app.apiKey, { url: hookUrl() }),
  ]);
  t.deepEqual(answers.map((answer) => answer.status).sort(), [201, 409, 409], answers.map((a) => a.text).join('\n'));
  for (const answer of answers.filter((answer) => answer.status === 409))
    t.is(answer.body.error.code, 'limit_exceeded');
  const count = await service.pool.query('SELECT 1 FROM webhook_endpoints WHERE application_id = $1', [
    app.applicationId,
  ]);
  t.is(count.rowCount, 20);
});

// ---------------------------------------------------------------------------------------------------------------
// 76 update, 77 delete

test('update changes url, eventTypes, enabled and description; same validation; absent fields are kept', async (t) => {
  const app = await service.application();
  const { endpoint } = await createEndpoint(app.apiKey, { eventTypes: ['call.ended'], description: 'first' });
  const patch = (body: unknown) =>
    service.request('PATCH', `/api/v1/webhooks/${endpoint.id}`, { auth: app.apiKey, body });

  const url = hookUrl();
  const moved = await patch({ url });
  t.is(moved.status, 200, moved.text);
  t.is(moved.body.url, url);
  t.deepEqual(moved.body.eventTypes, ['call.ended']);
  t.is(moved.body.description, 'first');
  t.is(moved.body.enabled, true);
  t.true(Date.parse(moved.body.updatedAt) >= Date.parse(endpoint.createdAt));
  t.is(moved.body.createdAt, endpoint.createdAt);

  const changed = await patch({ eventTypes: ['queue.left', 'call.started'], enabled: false, description: null });
  t.is(changed.status, 200, changed.text);
  t.deepEqual(changed.body.eventTypes, ['queue.left', 'call.started']);
  t.is(changed.body.enabled, false);
  t.is(changed.body.description, null);
  t.is(changed.body.url, url);

  const everything = await patch({ eventTypes: null, enabled: true });
  t.is(everything.body.eventTypes, null);
  t.is(everything.body.enabled, true);
  const got = await getEndpoint(app.apiKey, endpoint.id);
  t.is(got.body.eventTypes, null);
  t.is(got.body.url, url);

  for (const [label, body] of [
    ['empty body', {}],
    ['http', { url: 'http://hooks.example.com/x' }],
    ['loopback', { url: 'https://127.0.0.1/x' }],
    ['metadata', { url: 'https://169.254.169.254/x' }],
    ['unknown type', { eventTypes: ['nope'] }],
    ['empty types', { eventTypes: [] }],
    ['duplicate types', { eventTypes: ['call.ended', 'call.ended'] }],
    ['unknown field', { secret: 'x' }],
  ] as const) {
    isError(t, await patch(body), 400, 'invalid_request', label);
  }
  t.is((await getEndpoint(app.apiKey, endpoint.id)).body.url, url);
});

test('delete answers the endpoint and removes it with its queued deliveries and lanes', async (t) => {
  const app = await service.application();
  const { endpoint, signingSecret } = await createEndpoint(app.apiKey);
  const kept = await createEndpoint(app.apiKey);
  const memberId = randomUUID();
  await agentEvent(service.pool, app.applicationId, memberId);
  await agentEvent(service.pool, app.applicationId, memberId);
  t.is((await deliveries(endpoint.id)).length, 2);
  t.is((await lanes(endpoint.id)).size, 1);

  const deleted = await service.request('DELETE', `/api/v1/webhooks/${endpoint.id}`, { auth: app.apiKey });
  t.is(deleted.status, 200, deleted.text);
  t.is(deleted.body.id, endpoint.id);
  t.is(deleted.body.url, endpoint.url);
  t.false(deleted.text.includes(signingSecret.slice(6)));
  t.is((await deliveries(endpoint.id)).length, 0);
  t.is((await lanes(endpoint.id)).size, 0);
  isError(t, await getEndpoint(app.apiKey, endpoint.id), 404, 'not_found');
  isError(
    t,
    await service.request('DELETE', `/api/v1/webhooks/${endpoint.id}`, { auth: app.apiKey }),
    404,
    'not_found',
  );
  // The other endpoint keeps its queue, and the events stay in the log.
  t.is((await deliveries(kept.endpoint.id)).length, 2);
  const log = await service.pool.query('SELECT 1 FROM events WHERE application_id = $1', [app.applicationId]);
  t.is(log.rowCount, 2);
  // A body with fields is refused.
  isError(
    t,
    await service.request('DELETE', `/api/v1/webhooks/${kept.endpoint.id}`, {
      auth: app.apiKey,
      body: { force: true },
    }),
    400,
    'invalid_request',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// 75 get: delivery state

test('get shows pendingCount, parkedCount, lastError and secretRotation from the delivery state', async (t) => {
  const app = await service.application();
  const { endpoint } = await createEndpoint(app.apiKey, { eventTypes: ['agent.state_changed'] });
  const [memberA, memberB] = [randomUUID(), randomUUID()];
  await agentEvent(service.pool, app.applicationId, memberA);
  await agentEvent(service.pool, app.applicationId, memberA);
  await agentEvent(service.pool, app.applicationId, memberB);
  await callEvent(service.pool, app.applicationId, randomUUID()); // not a type the endpoint takes

  let got = await getEndpoint(app.apiKey, endpoint.id);
  t.is(got.body.pendingCount, 3);
  t.is(got.body.parkedCount, 0);
  t.is(got.body.lastError, null);

  await service.pool.query(
    `UPDATE webhook_lanes SET last_error = 'HTTP 500', last_attempt_at = now() - interval '1 hour', attempts = 3
      WHERE endpoint_id = $1 AND stream_key = $2`,
    [endpoint.id, `agent:${memberB}`],
  );
  await park(endpoint.id, `agent:${memberA}`, 'timed out after 10 s');
  got = await getEndpoint(app.apiKey, endpoint.id);
  t.is(got.body.pendingCount, 3);
  t.is(got.body.parkedCount, 1);
  t.is(got.body.lastError.message, 'timed out after 10 s');
  t.is(got.body.lastError.streamKey, `agent:${memberA}`);
  t.true(Math.abs(Date.parse(got.body.lastError.at) - Date.now()) < 60_000);

  const rotated = await rotate(app.apiKey, endpoint.id, { overlapSeconds: 3600 });
  got = await getEndpoint(app.apiKey, endpoint.id);
  t.deepEqual(got.body.secretRotation, { previousExpiresAt: rotated.body.previousSecretExpiresAt });
  await service.pool.query(
    `UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`,
    [endpoint.id],
  );
  t.is((await getEndpoint(app.apiKey, endpoint.id)).body.secretRotation, null, 'an ended overlap is not shown');
});

// ---------------------------------------------------------------------------------------------------------------
// 78 replay

test('replay parked (the default) resumes every parked stream, or only streamKey', async (t) => {
  const app = await service.application();
  const { endpoint } = await createEndpoint(app.apiKey);
  const [memberA, memberB, memberC] = [randomUUID(), randomUUID(), randomUUID()];
  for (const member of [memberA, memberA, memberA, memberB, memberC]) {
    await agentEvent(service.pool, app.applicationId, member);
  }
  await park(endpoint.id, `agent:${memberA}`);
  await park(endpoint.id, `agent:${memberB}`);

  const one = await replay(app.apiKey, endpoint.id, { scope: 'parked', streamKey: `agent:${memberB}` });
  t.is(one.status, 200, one.text);
  t.deepEqual(one.body, { queued: 1, lanes: 1 });
  let state = await lanes(endpoint.id);
  t.is(state.get(`agent:${memberB}`)?.parked_at, null);
  t.is(state.get(`agent:${memberB}`)?.attempts, 0);
  t.is(state.get(`agent:${memberB}`)?.head_first_attempt_at, null);
  t.true((state.get(`agent:${memberB}`)?.next_attempt_at?.getTime() ?? Infinity) <= Date.now() + 1000);
  t.not(state.get(`agent:${memberA}`)?.parked_at, null, 'the other parked stream waits');

  // No body at all: scope parked.
  const all = await replay(app.apiKey, endpoint.id);
  t.is(all.status, 200, all.text);
  t.deepEqual(all.body, { queued: 3, lanes: 1 });
  state = await lanes(endpoint.id);
  for (const lane of state.values()) {
    t.is(lane.parked_at, null);
    t.not(lane.next_attempt_at, null);
  }
  t.is((await getEndpoint(app.apiKey, endpoint.id)).body.parkedCount, 0);
  // Nothing parked any more: nothing to resume.
  t.deepEqual((await replay(app.apiKey, endpoint.id, {})).body, { queued: 0, lanes: 0 });
  // The delivery rows were never touched: same events, same sequences.
  t.deepEqual(
    (await deliveries(endpoint.id)).map((row) => [row.stream_key, row.sequence]),
    [
      [`agent:${memberA}`, '1'],
      [`agent:${memberA}`, '2'],
      [`agent:${memberA}`, '3'],
      [`agent:${memberB}`, '1'],
      [`agent:${memberC}`, '1'],
    ].sort(byStream),
  );
  isError(
    t,
    await replay(app.apiKey, endpoint.id, { since: new Date().toISOString(), scope: 'parked' }),
    400,
    'invalid_request',
  );
});

test('replay range re-queues the application’s events in [since, until) with their sequence; streamKey narrows', async (t) => {
  const app = await service.application();
  const other = await service.application();
  const { endpoint } = await createEndpoint(app.apiKey, { eventTypes: ['agent.state_changed'] });
  const [memberA, memberB] = [randomUUID(), randomUUID()];
  const a1 = await agentEvent(service.pool, app.applicationId, memberA);
  const a2 = await agentEvent(service.pool, app.applicationId, memberA);
  const a3 = await agentEvent(service.pool, app.applicationId, memberA);
  const b1 = await agentEvent(service.pool, app.applicationId, memberB);
  const call = await callEvent(service.pool, app.applicationId, randomUUID());
  const foreign = await agentEvent(service.pool, other.applicationId, randomUUID());
  await setOccurredAt(a1.id, '2030-01-01T00:00:00Z');
  await setOccurredAt(a2.id, '2030-01-02T00:00:00Z');
  await setOccurredAt(a3.id, '2030-01-09T00:00:00Z');
  await setOccurredAt(b1.id, '2030-01-02T12:00:00Z');
  await setOccurredAt(call.id, '2030-01-02T00:00:00Z');
  await setOccurredAt(foreign.id, '2030-01-02T00:00:00Z');
  await deliverAll(endpoint.id);
  t.is((await deliveries(endpoint.id)).length, 0);

  // [since, until): a1 at since is included, a3 at until is not.
  const range = { scope: 'range', since: '2030-01-01T00:00:00Z', until: '2030-01-08T00:00:00Z' };
  const narrowed = await replay(app.apiKey, endpoint.id, { ...range, streamKey: `agent:${memberA}` });
  t.is(narrowed.status, 200, narrowed.text);
  t.deepEqual(narrowed.body, { queued: 2, lanes: 1 });
  t.deepEqual(
    (await deliveries(endpoint.id)).map((row) => [row.event_id, row.stream_key, row.sequence]),
    [
      [a1.id, `agent:${memberA}`, String(a1.sequence)],
      [a2.id, `agent:${memberA}`, String(a2.sequence)],
    ],
  );
  const laneA = (await lanes(endpoint.id)).get(`agent:${memberA}`);
  t.truthy(laneA?.next_attempt_at, 'the lane is due');
  t.is(laneA?.parked_at, null);

  // Without streamKey: b1 too (the call event is of a type the endpoint does not take; the foreign one is not ours).
  // Re-queuing what is already queued is harmless.
  const whole = await replay(app.apiKey, endpoint.id, {
    since: '2030-01-01T00:00:00.000+00:00',
    until: '2030-01-08T00:00:00Z',
  });
  t.is(whole.status, 200, whole.text);
  t.deepEqual(whole.body, { queued: 3, lanes: 2 });
  t.deepEqual((await deliveries(endpoint.id)).map((row) => row.event_id).sort(), [a1.id, a2.id, b1.id].sort());

  // Exactly 7 days is allowed; a parked lane is un-parked, a lane in backoff keeps its retry time.
  await park(endpoint.id, `agent:${memberA}`);
  const backoffUntil = new Date(Date.now() + 120_000);
  await service.pool.query(
    'UPDATE webhook_lanes SET next_attempt_at = $3, attempts = 4 WHERE endpoint_id = $1 AND stream_key = $2',
    [endpoint.id, `agent:${memberB}`, backoffUntil],
  );
  const week = await replay(app.apiKey, endpoint.id, { since: '2030-01-02T00:00:00Z', until: '2030-01-09T00:00:00Z' });
  t.deepEqual(week.body, { queued: 2, lanes: 2 });
  const state = await lanes(endpoint.id);
  t.is(state.get(`agent:${memberA}`)?.parked_at, null);
  t.is(state.get(`agent:${memberA}`)?.attempts, 0);
  t.true((state.get(`agent:${memberA}`)?.next_attempt_at?.getTime() ?? Infinity) <= Date.now() + 1000);
  t.is(state.get(`agent:${memberB}`)?.next_attempt_at?.getTime(), backoffUntil.getTime());
  t.is(state.get(`agent:${memberB}`)?.attempts, 4);

  // An empty window queues nothing.
  t.deepEqual(
    (await replay(app.apiKey, endpoint.id, { since: '2031-01-01T00:00:00Z', until: '2031-01-02T00:00:00Z' })).body,
    { queued: 0, lanes: 0 },
  );

  for (const [label, body] of [
    ['more than 7 days', { scope: 'range', since: '2030-01-01T00:00:00Z', until: '2030-01-08T00:00:01Z' }],
    ['since equals until', { scope: 'range', since: '2030-01-01T00:00:00Z', until: '2030-01-01T00:00:00Z' }],
    ['since after until', { scope: 'range', since: '2030-01-03T00:00:00Z', until: '2030-01-02T00:00:00Z' }],
    ['no until', { scope: 'range', since: '2030-01-01T00:00:00Z' }],
    ['no since', { until: '2030-01-01T00:00:00Z' }],
    ['not a date', { scope: 'range', since: 'yesterday', until: '2030-01-01T00:00:00Z' }],
    ['eventIds with range', { ...range, eventIds: [a1.id] }],
    ['bad streamKey', { ...range, streamKey: 'room:1' }],
    ['unknown scope', { scope: 'everything' }],
  ] as const) {
    isError(t, await replay(app.apiKey, endpoint.id, body), 400, 'invalid_request', label);
  }
});

test('replay of event ids: at most 100, the application’s own, re-queued with their sequence; streamKey honoured', async (t) => {
  const app = await service.application();
  const other = await service.application();
  const { endpoint } = await createEndpoint(app.apiKey);
  const callId = randomUUID();
  const c1 = await callEvent(service.pool, app.applicationId, callId);
  const c2 = await callEvent(service.pool, app.applicationId, callId);
  const memberId = randomUUID();
  const m1 = await agentEvent(service.pool, app.applicationId, memberId);
  const foreign = await agentEvent(service.pool, other.applicationId, randomUUID());
  await deliverAll(endpoint.id);

  const answer = await replay(app.apiKey, endpoint.id, { eventIds: [c2.id, m1.id] });
  t.is(answer.status, 200, answer.text);
  t.deepEqual(answer.body, { queued: 2, lanes: 2 });
  t.deepEqual(
    (await deliveries(endpoint.id)).map((row) => [row.stream_key, row.sequence, row.event_id]),
    [
      [`agent:${memberId}`, '1', m1.id],
      [`call:${callId}`, '2', c2.id],
    ].sort(byStream),
  );

  // streamKey narrows to one stream: ids of that stream are queued, others are refused by name.
  const inStream = await replay(app.apiKey, endpoint.id, {
    scope: 'events',
    eventIds: [c1.id],
    streamKey: `call:${callId}`,
  });
  t.deepEqual(inStream.body, { queued: 1, lanes: 1 });
  const rows = (await deliveries(endpoint.id)).filter((row) => row.stream_key === `call:${callId}`);
  t.deepEqual(
    rows.map((row) => row.sequence),
    ['1', '2'],
    'the stream delivers its lowest sequence first',
  );
  const outside = await replay(app.apiKey, endpoint.id, { eventIds: [m1.id], streamKey: `call:${callId}` });
  isError(t, outside, 400, 'invalid_request');
  t.true(outside.body.error.message.includes(m1.id));

  const unknownId = randomUUID();
  const unknown = await replay(app.apiKey, endpoint.id, { eventIds: [c1.id, unknownId, foreign.id] });
  isError(t, unknown, 400, 'invalid_request');
  t.true(unknown.body.error.message.includes(unknownId));
  t.true(unknown.body.error.message.includes(foreign.id), 'another application’s event is unknown here');
  t.false(unknown.body.error.message.includes(c1.id));

  const manyIds = Array.from({ length: 101 }, () => randomUUID());
  isError(t, await replay(app.apiKey, endpoint.id, { eventIds: manyIds }), 400, 'invalid_request', '101 ids');
  const hundred = await replay(app.apiKey, endpoint.id, { eventIds: manyIds.slice(0, 100) });
  isError(t, hundred, 400, 'invalid_request', '100 unknown ids');
  t.regex(hundred.body.error.message, /does not have/);
  for (const [label, body] of [
    ['empty', { eventIds: [] }],
    ['not uuids', { eventIds: ['call-1'] }],
    ['duplicates', { eventIds: [c1.id, c1.id] }],
    ['events without ids', { scope: 'events' }],
    ['since with events', { eventIds: [c1.id], since: '2030-01-01T00:00:00Z' }],
  ] as const) {
    isError(t, await replay(app.apiKey, endpoint.id, body), 400, 'invalid_request', label);
  }

  // An endpoint that does not take a type refuses its events by name.
  const calls = await createEndpoint(app.apiKey, { eventTypes: ['call.started'] });
  const untaken = await replay(app.apiKey, calls.endpoint.id, { eventIds: [m1.id] });
  isError(t, untaken, 400, 'invalid_request');
  t.true(untaken.body.error.message.includes(m1.id));
});

// ---------------------------------------------------------------------------------------------------------------
// 79 rotate-secret

test('rotate-secret: default overlap 24 hours, 0 ends the old secret at once, at most 7 days', async (t) => {
  const app = await service.application();
  const { endpoint, signingSecret: first } = await createEndpoint(app.apiKey);
  const keys = await loadSigningKeys(service.pool, undefined);
  const stored = async () =>
    (
      await service.pool.query<{
        secret: string;
        previous_secret: string | null;
        previous_secret_expires_at: Date | null;
      }>('SELECT secret, previous_secret, previous_secret_expires_at FROM webhook_endpoints WHERE id = $1', [
        endpoint.id,
      ])
    ).rows[0] as { secret: string; previous_secret: string | null; previous_secret_expires_at: Date | null };

  const before = Date.now();
  const rotated = await rotate(app.apiKey, endpoint.id);
  t.is(rotated.status, 200, rotated.text);
  t.deepEqual(Object.keys(rotated.body).sort(), ['previousSecretExpiresAt', 'signingSecret']);
  const second = rotated.body.signingSecret as string;
  t.regex(second, /^whsec_[A-Za-z0-9_-]{43}$/);
  t.not(second, first);
  const expires = Date.parse(rotated.body.previousSecretExpiresAt);
  t.true(expires >= before + 86_400_000 - 5_000 && expires <= Date.now() + 86_400_000 + 5_000);
  let row = await stored();
  t.is(openSecret(keys.webhookSecrets, row.secret), second);
  t.is(openSecret(keys.webhookSecrets, row.previous_secret as string), first);
  t.is(row.previous_secret_expires_at?.toISOString(), rotated.body.previousSecretExpiresAt);
  const got = await getEndpoint(app.apiKey, endpoint.id);
  t.false(got.text.includes(second.slice(6)));
  t.false(got.text.includes(first.slice(6)));

  const week = await rotate(app.apiKey, endpoint.id, { overlapSeconds: 604_800 });
  t.is(week.status, 200, week.text);
  const third = week.body.signingSecret as string;
  t.true(Math.abs(Date.parse(week.body.previousSecretExpiresAt) - (Date.now() + 604_800_000)) < 10_000);
  row = await stored();
  t.is(openSecret(keys.webhookSecrets, row.previous_secret as string), second, 'the older previous secret ends');
  t.is(openSecret(keys.webhookSecrets, row.secret), third);

  const now = await rotate(app.apiKey, endpoint.id, { overlapSeconds: 0 });
  t.is(now.status, 200, now.text);
  t.is(now.body.previousSecretExpiresAt, null);
  row = await stored();
  t.is(row.previous_secret, null);
  t.is(row.previous_secret_expires_at, null);
  t.is(openSecret(keys.webhookSecrets, row.secret), now.body.signingSecret);
  t.is((await getEndpoint(app.apiKey, endpoint.id)).body.secretRotation, null);

  for (const overlapSeconds of [604_801, -1, 1.5, '60']) {
    isError(
      t,
      await rotate(app.apiKey, endpoint.id, { overlapSeconds }),
      400,
      'invalid_request',
      String(overlapSeconds),
    );
  }
  isError(t, await rotate(app.apiKey, endpoint.id, { overlap: 60 }), 400, 'invalid_request');
  t.is(openSecret(keys.webhookSecrets, (await stored()).secret), now.body.signingSecret, 'refusals change nothing');

  // The same idempotency key answers the same secret and rotates once.
  const idempotencyKey = randomUUID();
  const once = await service.request('POST', `/api/v1/webhooks/${endpoint.id}/rotate-secret`, {
    auth: app.apiKey,
    body: { overlapSeconds: 60 },
    idempotencyKey,
  });
  const again = await service.request('POST', `/api/v1/webhooks/${endpoint.id}/rotate-secret`, {
    auth: app.apiKey,
    body: { overlapSeconds: 60 },
    idempotencyKey,
  });
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.is(again.body.signingSecret, once.body.signingSecret);
  row = await stored();
  t.is(openSecret(keys.webhookSecrets, row.previous_secret as string), now.body.signingSecret);
});

// ---------------------------------------------------------------------------------------------------------------
// Credentials and ownership

test('application key with webhooks:* only; another application’s endpoint is 404 on every operation', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await service.application();
  const { endpoint } = await createEndpoint(setup.apiKey);
  const id = endpoint.id;
  const operations: [string, string, unknown][] = [
    ['GET', `/api/v1/webhooks/${id}`, undefined],
    ['PATCH', `/api/v1/webhooks/${id}`, { enabled: false }],
    ['DELETE', `/api/v1/webhooks/${id}`, undefined],
    ['POST', `/api/v1/webhooks/${id}/replay`, {}],
    ['POST', `/api/v1/webhooks/${id}/rotate-secret`, {}],
  ];
  for (const [method, path, body] of operations) {
    isError(
      t,
      await service.request(method, path, { auth: other.apiKey, body }),
      404,
      'not_found',
      `${method} ${path}`,
    );
  }
  const otherList = await service.request('GET', '/api/v1/webhooks', { auth: other.apiKey });
  t.deepEqual(otherList.body.data, []);
  for (const [method, path, body] of operations) {
    const answer = await service.request(method, path.replace(id, randomUUID()), { auth: setup.apiKey, body });
    isError(t, answer, 404, 'not_found', `unknown id: ${method} ${path}`);
  }
  isError(
    t,
    await service.request('GET', '/api/v1/webhooks/not-a-uuid', { auth: setup.apiKey }),
    400,
    'invalid_request',
  );

  const narrow = await service.application(undefined, ['calls:*']);
  const token = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['calls:*'] },
  });
  t.is(token.status, 201, token.text);
  const all: [string, string, unknown][] = [
    ['POST', '/api/v1/webhooks', { url: hookUrl() }],
    ['GET', '/api/v1/webhooks', undefined],
    ...operations,
  ];
  for (const [method, path, body] of all) {
    isError(
      t,
      await service.request(method, path, { auth: narrow.apiKey, body }),
      403,
      'insufficient_scope',
      `${method} ${path}`,
    );
    isError(
      t,
      await service.request(method, path, { auth: token.body.token, body }),
      403,
      'application_key_required',
      `${method} ${path}`,
    );
    isError(t, await service.request(method, path, { body }), 401, 'unauthorized', `${method} ${path}`);
  }
  // Mutations need an idempotency key.
  isError(
    t,
    await service.request('POST', '/api/v1/webhooks', {
      auth: setup.apiKey,
      body: { url: hookUrl() },
      idempotencyKey: null,
    }),
    400,
    'idempotency_key_required',
  );
  t.is((await getEndpoint(setup.apiKey, id)).body.enabled, true, 'nothing was changed');
});
