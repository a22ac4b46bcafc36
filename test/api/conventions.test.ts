/**
 * The conventions every answer of `/api/v1` follows (spec sections 4, 5, 7 and 8), checked through real HTTP against a
 * real PostgreSQL: the envelope and shell headers, schema failures, CORS, the order of authentication and 501,
 * idempotency, list pages and cursors, the OpenAPI document, health and metrics, and what the logs may carry.
 *
 * Tests that reach past one request into the shared database (a table lock, a trigger) are serial: AVA runs serial
 * tests before the concurrent ones, so nothing else is running while they hold the table.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { purgeIdempotencyRecords } from '../../api/idempotency-upkeep.ts';
import { issueKey, resetLegacySecret } from '../../core/identity/applications.ts';
import { allScopes } from '../../core/scopes.ts';
import { type Answer, serviceForFile, workspaceWithUser } from '../helpers/service.ts';

const service = serviceForFile(test, {}, ['api', 'engine', 'operator']);
/** A second service with a small body limit, for 413. */
const small = serviceForFile(test, { BODY_LIMIT: '2048' }, ['api', 'engine', 'operator']);

const uuidRegex = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The headers the HTTP shell puts on every answer, success or failure. */
function assertShell(t: ExecutionContext, answer: Answer, label: string): void {
  t.is(answer.headers.get('cache-control'), 'no-store', `${label}: cache-control`);
  t.truthy(answer.headers.get('x-request-id'), `${label}: x-request-id`);
  t.is(answer.headers.get('access-control-allow-origin'), '*', `${label}: access-control-allow-origin`);
  t.is(answer.headers.get('access-control-allow-credentials'), null, `${label}: never allow credentials`);
}

/** A comma-separated header as a sorted list. */
function headerList(answer: Answer, name: string): string[] {
  return (answer.headers.get(name) ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
    .sort();
}

const exposedHeaders = ['Retry-After', 'X-Request-Id', 'idempotent-replayed'].sort();

/** A failure in the section 7 envelope, with its documented status and code. */
function assertError(t: ExecutionContext, answer: Answer, status: number, code: string, label = code): void {
  t.is(answer.status, status, `${label}: ${answer.text}`);
  assertShell(t, answer, label);
  t.regex(answer.headers.get('content-type') ?? '', /^application\/json/, `${label}: content-type`);
  t.is(typeof answer.body?.error?.message, 'string', `${label}: message`);
  t.true(String(answer.body?.error?.message ?? '').length > 0, `${label}: message is not empty`);
  t.is(answer.body?.error?.code, code, `${label}: code`);
  t.deepEqual(Object.keys(answer.body), ['error'], `${label}: only the envelope`);
}

function workspaceBody(externalWorkspaceId = `ws-${randomUUID()}`) {
  return { externalWorkspaceId, name: 'Acme Support', timezone: 'Europe/Paris' };
}

async function countWorkspaces(applicationId: string, externalWorkspaceId?: string): Promise<number> {
  const result = await service.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM workspaces WHERE application_id = $1 AND ($2::text IS NULL OR external_workspace_id = $2)',
    [applicationId, externalWorkspaceId ?? null],
  );
  return result.rows[0]?.n ?? -1;
}

/** Polls the database until `probe` finds what it waits for (no fixed sleeps); fails after `ms`. */
async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

async function createUsers(setup: { apiKey: string; workspace: { id: string } }, count: number, prefix: string) {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, index) =>
      service.request('POST', '/api/v1/users', {
        auth: setup.apiKey,
        workspaceId: setup.workspace.id,
        body: { externalUserId: `${prefix}-${index}`, displayName: `User ${index}` },
      }),
    ),
  );
  for (const answer of answers) if (answer.status !== 201) throw new Error(`user: ${answer.status} ${answer.text}`);
  return answers.map((answer) => answer.body as { id: string });
}

/** Replaces the character at `index` with another one of the base64url alphabet. */
function tamper(text: string, index: number): string {
  const original = text[index];
  const replacement = original === 'A' ? 'B' : 'A';
  return text.slice(0, index) + replacement + text.slice(index + 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Envelope, request id, shell headers

test('every kind of answer carries cache-control: no-store, x-request-id and the CORS origin', async (t) => {
  const setup = await workspaceWithUser(service);
  const auth = setup.apiKey;

  const created = await service.request('POST', '/api/v1/workspaces', { auth, body: workspaceBody() });
  t.is(created.status, 201, created.text);
  assertShell(t, created, '201');

  const listed = await service.request('GET', '/api/v1/workspaces', { auth });
  t.is(listed.status, 200, listed.text);
  assertShell(t, listed, '200');

  assertError(t, await service.request('GET', '/api/v1/workspaces'), 401, 'unauthorized');
  assertError(
    t,
    await service.request('POST', '/api/v1/workspaces', { auth, body: { ...workspaceBody(), name: 7 } }),
    400,
    'invalid_request',
    'schema failure',
  );

  const unknownPath = await service.request('GET', '/api/v1/no-such-thing', { auth });
  assertError(t, unknownPath, 404, 'not_found', '404 unknown path');
  const unknownRoot = await service.request('GET', '/nothing-here');
  assertError(t, unknownRoot, 404, 'not_found', '404 outside the API');

  const wrongMethod = await service.request('PUT', '/api/v1/workspaces', { auth, body: {} });
  assertError(t, wrongMethod, 405, 'method_not_allowed', '405');
  t.deepEqual(headerList(wrongMethod, 'allow'), ['GET', 'POST']);
  const wrongMethodOnItem = await service.request('PUT', `/api/v1/users/${setup.user.id}`, { auth, body: {} });
  assertError(t, wrongMethodOnItem, 405, 'method_not_allowed', '405 on an item');
  t.deepEqual(headerList(wrongMethodOnItem, 'allow'), ['DELETE', 'GET']);

  const oversize = await small.request('POST', '/api/v1/workspaces', {
    auth: (await small.application()).apiKey,
    rawBody: JSON.stringify({ ...workspaceBody(), name: 'x'.repeat(3000) }),
  });
  assertError(t, oversize, 413, 'payload_too_large', '413');

  for (const contentType of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
    const unsupported = await service.request('POST', '/api/v1/workspaces', {
      auth,
      rawBody: contentType === 'application/xml' ? '<workspace/>' : 'name=Acme',
      headers: { 'content-type': contentType },
    });
    assertError(t, unsupported, 415, 'unsupported_media_type', `415 ${contentType}`);
  }

  const malformed = await service.request('POST', '/api/v1/workspaces', { auth, rawBody: '{"name": ' });
  assertError(t, malformed, 400, 'invalid_request', 'malformed JSON');
  t.regex(malformed.body.error.message, /JSON/);

  const preflight = await service.request('OPTIONS', '/api/v1/workspaces', {
    headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
  });
  t.is(preflight.status, 204);
  assertShell(t, preflight, 'preflight');

  for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
    const answer = await service.request('GET', path);
    t.is(answer.status, 200, `${path}: ${answer.text.slice(0, 200)}`);
    assertShell(t, answer, path);
  }

  const notImplemented = await service.request('GET', '/api/v1/recordings', { auth, workspaceId: setup.workspace.id });
  assertError(t, notImplemented, 501, 'not_implemented', '501');
});

test('a valid incoming x-request-id is echoed; an invalid one is replaced by a generated id', async (t) => {
  const given = `trace-${randomUUID()}`;
  const echoed = await service.request('GET', '/healthz', { headers: { 'x-request-id': given } });
  t.is(echoed.headers.get('x-request-id'), given);

  const onError = await service.request('GET', '/api/v1/workspaces', { headers: { 'x-request-id': given } });
  t.is(onError.status, 401);
  t.is(onError.headers.get('x-request-id'), given);

  for (const invalid of ['has a space', 'x'.repeat(201)]) {
    const answer = await service.request('GET', '/healthz', { headers: { 'x-request-id': invalid } });
    t.regex(answer.headers.get('x-request-id') ?? '', uuidRegex);
  }

  const first = await service.request('GET', '/healthz');
  const second = await service.request('GET', '/healthz');
  t.regex(first.headers.get('x-request-id') ?? '', uuidRegex);
  t.not(first.headers.get('x-request-id'), second.headers.get('x-request-id'));
});

// ---------------------------------------------------------------------------------------------------------------
// Schema failures

test('schema failures are 400 invalid_request naming the offending field', async (t) => {
  const setup = await workspaceWithUser(service);
  const auth = setup.apiKey;
  const post = (body: unknown) => service.request('POST', '/api/v1/workspaces', { auth, body });
  const cases: [string, Promise<Answer>, RegExp][] = [
    ['wrong type', post({ ...workspaceBody(), name: 42 }), /^body\.name must be string/],
    [
      'no coercion of a number string',
      post({ ...workspaceBody(), limits: { concurrentCalls: '5', devicesPerUser: 1 } }),
      /body\.limits\.concurrentCalls/,
    ],
    ['unknown field', post({ ...workspaceBody(), bogus: true }), /^body\.bogus is not a known field/],
    [
      'unknown nested field',
      post({ ...workspaceBody(), limits: { concurrentCalls: 5, devicesPerUser: 1, extra: 1 } }),
      /^body\.limits\.extra is not a known field/,
    ],
    [
      'missing required field',
      post({ externalWorkspaceId: 'ws-missing', name: 'Acme' }),
      /^body\.timezone is required/,
    ],
    [
      'integer below range',
      post({ ...workspaceBody(), limits: { concurrentCalls: 0, devicesPerUser: 1 } }),
      /^body\.limits\.concurrentCalls must be >= 1/,
    ],
    [
      'integer above range',
      post({ ...workspaceBody(), limits: { concurrentCalls: 5, devicesPerUser: 51 } }),
      /^body\.limits\.devicesPerUser must be <= 50/,
    ],
    [
      'not an integer',
      post({ ...workspaceBody(), limits: { concurrentCalls: 1.5, devicesPerUser: 1 } }),
      /^body\.limits\.concurrentCalls must be integer/,
    ],
    ['string too long', post({ ...workspaceBody(), name: 'n'.repeat(201) }), /^body\.name /],
    [
      'array item',
      post({ ...workspaceBody(), destinationPolicy: { allowedPrefixes: ['+1', 'x'], blockedPrefixes: [] } }),
      /^body\.destinationPolicy\.allowedPrefixes\[1\]/,
    ],
    ['not an object', post([]), /^body must be object/],
    ['limit=0', service.request('GET', '/api/v1/workspaces?limit=0', { auth }), /^query\.limit must be >= 1/],
    ['limit=201', service.request('GET', '/api/v1/workspaces?limit=201', { auth }), /^query\.limit must be <= 200/],
    ['limit=abc', service.request('GET', '/api/v1/workspaces?limit=abc', { auth }), /^query\.limit must be integer/],
    ['limit=1.5', service.request('GET', '/api/v1/workspaces?limit=1.5', { auth }), /^query\.limit must be integer/],
    [
      'unknown query',
      service.request('GET', '/api/v1/workspaces?bogus=1', { auth }),
      /^query\.bogus is not a known field/,
    ],
    [
      'malformed UUID path',
      service.request('GET', '/api/v1/workspaces/not-a-uuid', { auth }),
      /^path\.id must be a valid uuid/,
    ],
    [
      'UUID of version 0',
      service.request('GET', '/api/v1/workspaces/12345678-1234-0234-8234-123456789012', { auth }),
      /^path\.id must be a valid uuid/,
    ],
    [
      'malformed UUID path on users',
      service.request('GET', '/api/v1/users/123', { auth, workspaceId: setup.workspace.id }),
      /^path\.id must be a valid uuid/,
    ],
    [
      'unknown field on a delete',
      service.request('DELETE', `/api/v1/users/${setup.user.id}`, {
        auth,
        workspaceId: setup.workspace.id,
        body: { bogus: 1 },
      }),
      /^body\.bogus is not a known field/,
    ],
  ];
  for (const [label, pending, message] of cases) {
    const answer = await pending;
    assertError(t, answer, 400, 'invalid_request', label);
    t.regex(answer.body.error.message, message, label);
  }
  // None of the refused requests changed anything: the user is still there and only the first workspace exists.
  t.is(await countWorkspaces(setup.applicationId), 1);
  const user = await service.request('GET', `/api/v1/users/${setup.user.id}`, {
    auth,
    workspaceId: setup.workspace.id,
  });
  t.is(user.status, 200, user.text);
  t.is(user.body.removedAt, null);
  // Boundaries that are valid.
  for (const limit of [1, 200]) {
    const answer = await service.request('GET', `/api/v1/workspaces?limit=${limit}`, { auth });
    t.is(answer.status, 200, `limit=${limit}: ${answer.text}`);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// CORS

test('CORS: any origin gets *, preflights answer 204 with the documented headers, never credentials', async (t) => {
  const allowedHeaders = [
    'authorization',
    'content-type',
    'idempotency-key',
    'x-service-workspace-id',
    'x-service-external-workspace-id',
    'x-service-application',
  ];
  for (const origin of ['https://app.example', 'http://localhost:3000', 'null']) {
    for (const path of ['/api/v1/workspaces', '/api/v1/users/00000000-0000-0000-0000-000000000000', '/api/v1/calls']) {
      const preflight = await service.request('OPTIONS', path, {
        headers: {
          origin,
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'authorization, content-type, idempotency-key, x-service-workspace-id',
        },
      });
      const label = `${origin} ${path}`;
      t.is(preflight.status, 204, label);
      t.is(preflight.text, '', label);
      assertShell(t, preflight, label);
      const allowHeaders = (preflight.headers.get('access-control-allow-headers') ?? '')
        .split(',')
        .map((name) => name.trim().toLowerCase());
      t.deepEqual([...allowHeaders].sort(), [...allowedHeaders].sort(), label);
      t.deepEqual(headerList(preflight, 'access-control-expose-headers'), exposedHeaders, label);
      const methods = new Set(headerList(preflight, 'access-control-allow-methods'));
      for (const method of ['GET', 'POST', 'PATCH', 'PUT', 'DELETE']) t.true(methods.has(method), `${label} ${method}`);
    }
    // Simple requests, success and failure alike.
    const setup = await workspaceWithUser(service);
    for (const answer of [
      await service.request('GET', '/api/v1/workspaces', { auth: setup.apiKey, headers: { origin } }),
      await service.request('GET', '/api/v1/workspaces', { headers: { origin } }),
      await service.request('GET', '/healthz', { headers: { origin } }),
    ]) {
      assertShell(t, answer, origin);
      t.deepEqual(headerList(answer, 'access-control-expose-headers'), exposedHeaders);
    }
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Authentication before 501

test('no credential is 401 everywhere, a 501 operation included; 501 not_implemented comes after authentication', async (t) => {
  const setup = await workspaceWithUser(service);
  for (const [method, path] of [
    ['GET', '/api/v1/calls'],
    ['POST', '/api/v1/calls'],
    ['GET', '/api/v1/workspaces'],
    ['POST', '/api/v1/workspaces'],
    ['GET', `/api/v1/numbers/${randomUUID()}`],
  ] as const) {
    const answer = await service.request(method, path, {
      idempotencyKey: null,
      body: method === 'POST' ? {} : undefined,
    });
    assertError(t, answer, 401, 'unauthorized', `${method} ${path}`);
  }
  assertError(t, await service.request('GET', '/api/v1/calls', { auth: 'sbk_not-a-real-key' }), 401, 'unauthorized');
  assertError(
    t,
    await service.request('GET', '/api/v1/calls', { headers: { authorization: 'Basic dXNlcjpwYXNz' } }),
    401,
    'unauthorized',
  );

  const implementedLater = await service.request('GET', '/api/v1/recordings', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  assertError(t, implementedLater, 501, 'not_implemented', 'GET /recordings with key');
  const mutationLater = await service.request('POST', '/api/v1/calls', { auth: setup.apiKey, body: {} });
  assertError(t, mutationLater, 501, 'not_implemented', 'POST /calls with key');

  // Authorization also runs before 501: a token without the scope is refused, one with it reaches the 501.
  const mint = async (scopes: string[]) => {
    const session = await service.request('POST', '/api/v1/sessions', {
      auth: setup.apiKey,
      body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes },
    });
    t.is(session.status, 201, session.text);
    return session.body.token as string;
  };
  assertError(
    t,
    await service.request('GET', '/api/v1/recordings', { auth: await mint(['devices:*']) }),
    403,
    'insufficient_scope',
  );
  assertError(
    t,
    await service.request('GET', '/api/v1/recordings', { auth: await mint(['media:read']) }),
    501,
    'not_implemented',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Idempotency

test('mutations need a well-formed idempotency-key', async (t) => {
  const app = await service.application();
  const post = (idempotencyKey: string | null, body: unknown = workspaceBody()) =>
    service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey, body });

  assertError(t, await post(null), 400, 'idempotency_key_required');
  for (const [label, key] of [
    ['256 characters', 'k'.repeat(256)],
    ['a space', 'has space'],
    ['non-ASCII', 'caf\u00e9'],
    ['a tab', 'tab\there'],
  ] as const) {
    const answer = await post(key);
    assertError(t, answer, 400, 'invalid_request', label);
    t.regex(answer.body.error.message, /idempotency-key/, label);
  }
  t.is(await countWorkspaces(app.applicationId), 0);
  const longest = await post('k'.repeat(255));
  t.is(longest.status, 201, longest.text);
  const oneChar = await post('!');
  t.is(oneChar.status, 201, oneChar.text);
  // Every mutation method needs one, before anything else is looked at.
  const setup = await workspaceWithUser(service);
  for (const [method, path] of [
    ['PATCH', `/api/v1/workspaces/${setup.workspace.id}`],
    ['DELETE', `/api/v1/users/${setup.user.id}`],
    ['DELETE', `/api/v1/application/keys/${randomUUID()}`],
  ] as const) {
    const answer = await service.request(method, path, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      idempotencyKey: null,
      body: method === 'PATCH' ? { name: 'Renamed' } : undefined,
    });
    assertError(t, answer, 400, 'idempotency_key_required', `${method} ${path}`);
  }
});

test('the same key and body replays the stored answer; a different body is 422; one row is created', async (t) => {
  const app = await service.application();
  const key = `create-${randomUUID()}`;
  const body = workspaceBody();
  const first = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
  t.is(first.status, 201, first.text);
  t.is(first.headers.get('idempotent-replayed'), null);

  // Key order of the body does not matter.
  const reordered = { timezone: body.timezone, name: body.name, externalWorkspaceId: body.externalWorkspaceId };
  for (const again of [body, reordered]) {
    const replay = await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      idempotencyKey: key,
      body: again,
    });
    t.is(replay.status, 201);
    t.is(replay.text, first.text);
    t.is(replay.headers.get('idempotent-replayed'), 'true');
    assertShell(t, replay, 'replay');
  }
  t.is(await countWorkspaces(app.applicationId), 1);

  const reused = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: key,
    body: { ...body, name: 'Another name' },
  });
  assertError(t, reused, 422, 'idempotency_key_reused');
  const elsewhere = await service.request('PATCH', `/api/v1/workspaces/${first.body.id}`, {
    auth: app.apiKey,
    idempotencyKey: key,
    body: { name: 'Renamed' },
  });
  assertError(t, elsewhere, 422, 'idempotency_key_reused', 'same key on another operation');
  t.is(await countWorkspaces(app.applicationId), 1);

  // A 4xx answer of the handler is stored and replayed too.
  const conflictKey = `conflict-${randomUUID()}`;
  const conflict = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: conflictKey,
    body,
  });
  t.is(conflict.status, 409, conflict.text);
  t.is(conflict.body.error.code, 'already_exists');
  const conflictReplay = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: conflictKey,
    body,
  });
  t.is(conflictReplay.status, 409);
  t.is(conflictReplay.text, conflict.text);
  t.is(conflictReplay.headers.get('idempotent-replayed'), 'true');
});

test('idempotency keys are scoped per application', async (t) => {
  const [one, two] = await Promise.all([service.application(), service.application()]);
  const key = `shared-${randomUUID()}`;
  const body = workspaceBody('ws-shared');
  const first = await service.request('POST', '/api/v1/workspaces', { auth: one.apiKey, idempotencyKey: key, body });
  const second = await service.request('POST', '/api/v1/workspaces', { auth: two.apiKey, idempotencyKey: key, body });
  t.is(first.status, 201, first.text);
  t.is(second.status, 201, second.text);
  t.is(second.headers.get('idempotent-replayed'), null);
  t.not(first.body.id, second.body.id);
  const other = await service.request('POST', '/api/v1/workspaces', {
    auth: two.apiKey,
    idempotencyKey: `${key}-b`,
    body: workspaceBody(),
  });
  t.is(other.status, 201);
  // The second application's different body under its own key is not a reuse of the first's.
  t.is(await countWorkspaces(one.applicationId), 1);
  t.is(await countWorkspaces(two.applicationId), 2);
  // The legacy secret acts as the same application with the default scopes, so it shares the key space and the
  // same request replays to it, as to a rotated key (test/api/idempotency-scopes.test.ts); a different one is a reuse.
  const secret = await resetLegacySecret(service.pool, one.applicationId);
  const viaSecret = (requestBody: unknown) =>
    service.request('POST', '/api/v1/workspaces', {
      auth: secret,
      headers: { 'x-service-application': one.applicationId },
      idempotencyKey: key,
      body: requestBody,
    });
  const replayed = await viaSecret(body);
  t.is(replayed.status, 201, replayed.text);
  t.is(replayed.headers.get('idempotent-replayed'), 'true');
  t.is(replayed.body.id, first.body.id);
  const reused = await viaSecret(workspaceBody());
  t.is(reused.status, 422, reused.text);
  t.is(reused.body.error.code, 'idempotency_key_reused');
  t.is(await countWorkspaces(one.applicationId), 1);
});

test('a stored answer is never replayed to another credential of the same application', async (t) => {
  const app = await service.application();
  const narrow = await service.request('POST', '/api/v1/application/keys', {
    auth: app.apiKey,
    body: { scopes: ['calls:*'] },
  });
  t.is(narrow.status, 201, narrow.text);
  const key = `leak-${randomUUID()}`;
  const issued = await service.request('POST', '/api/v1/application/keys', { auth: app.apiKey, idempotencyKey: key });
  t.is(issued.status, 201, issued.text);
  const retried = await service.request('POST', '/api/v1/application/keys', {
    auth: narrow.body.apiKey,
    idempotencyKey: key,
  });
  t.is(retried.status, 422, retried.text);
  t.is(retried.body.error.code, 'idempotency_key_reused');
  t.false(retried.text.includes(issued.body.apiKey));
});

test.serial('a retry while the first request still runs is 409 idempotency_in_progress', async (t) => {
  const app = await service.application();
  const key = `inflight-${randomUUID()}`;
  const body = workspaceBody();
  const locker = new pg.Client({ connectionString: service.databaseUrl });
  await locker.connect();
  let first: Promise<Answer> | undefined;
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE workspaces IN ACCESS EXCLUSIVE MODE');
    first = service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
    await waitFor('the first request to wait on the workspaces lock', async () => {
      const waiting = await service.pool.query(
        `SELECT pid FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'switchboard'
            AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO workspaces%'`,
      );
      return waiting.rowCount === 1 ? true : undefined;
    });
    const retry = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
    assertError(t, retry, 409, 'idempotency_in_progress');
    t.truthy(retry.headers.get('retry-after'));
    await locker.query('COMMIT');
  } finally {
    await locker.query('ROLLBACK').catch(() => {});
    await locker.end();
  }
  const answer = await first;
  t.is(answer?.status, 201, answer?.text);
  t.is(answer?.headers.get('idempotent-replayed'), null);
  const replay = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
  t.is(replay.status, 201);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.is(replay.text, answer?.text);
  t.is(await countWorkspaces(app.applicationId), 1);
});

test.serial('a 5xx is not stored: the retry with the same key acts exactly once', async (t) => {
  const app = await service.application();
  const key = `fails-once-${randomUUID()}`;
  const externalWorkspaceId = `ws-boom-${randomUUID()}`;
  const body = workspaceBody(externalWorkspaceId);
  await service.pool.query(`
    CREATE FUNCTION conventions_refuse_workspace() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.external_workspace_id LIKE 'ws-boom-%' THEN RAISE EXCEPTION 'conventions test: refused insert'; END IF;
      RETURN NEW;
    END $$`);
  await service.pool.query(`CREATE TRIGGER conventions_refuse_workspace BEFORE INSERT ON workspaces
    FOR EACH ROW EXECUTE FUNCTION conventions_refuse_workspace()`);
  let failed: Answer;
  const requestId = `boom-${randomUUID()}`;
  try {
    failed = await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      idempotencyKey: key,
      body,
      headers: { 'x-request-id': requestId },
    });
  } finally {
    await service.pool.query('DROP TRIGGER conventions_refuse_workspace ON workspaces');
    await service.pool.query('DROP FUNCTION conventions_refuse_workspace()');
  }
  assertError(t, failed, 500, 'internal_error');
  t.notRegex(failed.text, /conventions test/, 'the database error does not reach the client');
  t.is(failed.headers.get('x-request-id'), requestId);
  const logged = service.logs
    .map((line) => JSON.parse(line))
    .find((entry) => entry.requestId === requestId && entry.level >= 50);
  t.truthy(logged, 'the 5xx is logged at error level with its request id');
  const stored = await service.pool.query('SELECT 1 FROM idempotency_records WHERE key = $1', [key]);
  t.is(stored.rowCount, 0);
  t.is(await countWorkspaces(app.applicationId), 0);

  const retry = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
  t.is(retry.status, 201, retry.text);
  t.is(retry.headers.get('idempotent-replayed'), null);
  const again = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
  t.is(again.status, 201);
  t.is(again.headers.get('idempotent-replayed'), 'true');
  t.is(again.body.id, retry.body.id);
  t.is(await countWorkspaces(app.applicationId, externalWorkspaceId), 1);
});

test('10 concurrent identical requests create one row; each answer is that 201 or 409 in progress', async (t) => {
  const app = await service.application();
  const key = `burst-${randomUUID()}`;
  const body = workspaceBody();
  const answers = await Promise.all(
    Array.from({ length: 10 }, () =>
      service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body }),
    ),
  );
  const created = answers.filter((answer) => answer.status === 201);
  const busy = answers.filter((answer) => answer.status === 409);
  t.is(created.length + busy.length, 10, answers.map((answer) => `${answer.status} ${answer.text}`).join('\n'));
  t.true(created.length >= 1);
  t.is(new Set(created.map((answer) => answer.body.id)).size, 1);
  t.is(created.filter((answer) => answer.headers.get('idempotent-replayed') === null).length, 1);
  for (const answer of busy) assertError(t, answer, 409, 'idempotency_in_progress');
  t.is(await countWorkspaces(app.applicationId), 1);
  const settled = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey: key, body });
  t.is(settled.status, 201);
  t.is(settled.body.id, created[0]?.body.id);
  t.is(settled.headers.get('idempotent-replayed'), 'true');
});

test('records older than 24 hours are purged and their key can be used again', async (t) => {
  const app = await service.application();
  const key = `old-${randomUUID()}`;
  const scope = `application:${app.applicationId}`;
  const first = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: key,
    body: workspaceBody(),
  });
  t.is(first.status, 201, first.text);
  const fresh = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: `${key}-fresh`,
    body: workspaceBody(),
  });
  t.is(fresh.status, 201);
  const aged = await service.pool.query(
    `UPDATE idempotency_records SET created_at = now() - interval '25 hours' WHERE scope = $1 AND key = $2`,
    [scope, key],
  );
  t.is(aged.rowCount, 1);

  t.true((await purgeIdempotencyRecords(service.pool)) >= 1);
  const left = await service.pool.query<{ key: string }>('SELECT key FROM idempotency_records WHERE scope = $1', [
    scope,
  ]);
  t.deepEqual(
    left.rows.map((row) => row.key),
    [`${key}-fresh`],
    'the expired record is gone; the recent one stays',
  );

  const reusedBody = workspaceBody();
  const reused = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    idempotencyKey: key,
    body: reusedBody,
  });
  t.is(reused.status, 201, reused.text);
  t.is(reused.headers.get('idempotent-replayed'), null);
  t.not(reused.body.id, first.body.id);
  t.is(reused.body.externalWorkspaceId, reusedBody.externalWorkspaceId);
  t.is(await countWorkspaces(app.applicationId), 3);
});

test('one purge run removes 20,000 expired records, batch after batch, and keeps the live ones', async (t) => {
  // On the small service's database: nothing else there expires records meanwhile.
  const scope = `application:purge-${randomUUID()}`;
  const insert = (count: number, age: string, prefix: string) =>
    small.pool.query(
      `INSERT INTO idempotency_records (scope, key, fingerprint, status_code, response_body, created_at)
       SELECT $1, $2 || n, '\\x00', 201, '{}', now() - $3::interval FROM generate_series(1, $4) AS n`,
      [scope, prefix, age, count],
    );
  await insert(20_000, '25 hours', 'expired-');
  await insert(300, '23 hours', 'live-');
  const count = async (prefix: string) => {
    const result = await small.pool.query<{ n: number }>(
      'SELECT count(*)::integer AS n FROM idempotency_records WHERE scope = $1 AND key LIKE $2',
      [scope, `${prefix}%`],
    );
    return result.rows[0]?.n;
  };
  t.is(await count('expired-'), 20_000);

  t.is(await purgeIdempotencyRecords(small.pool), 20_000);
  t.is(await count('expired-'), 0, 'every expired record is gone after one run');
  t.is(await count('live-'), 300, 'the records still within 24 hours stay');
  t.is(await purgeIdempotencyRecords(small.pool), 0);
});

// ---------------------------------------------------------------------------------------------------------------
// Lists

test('lists: default page of 50, limit 1 to 200, nextCursor null on the last page', async (t) => {
  const setup = await workspaceWithUser(service);
  await createUsers(setup, 51, 'bulk');
  const get = (query: string) =>
    service.request('GET', `/api/v1/users${query}`, { auth: setup.apiKey, workspaceId: setup.workspace.id });

  const page = await get('');
  t.is(page.status, 200, page.text);
  t.deepEqual(Object.keys(page.body).sort(), ['data', 'nextCursor']);
  t.is(page.body.data.length, 50);
  t.is(typeof page.body.nextCursor, 'string');
  const rest = await get(`?cursor=${encodeURIComponent(page.body.nextCursor)}`);
  t.is(rest.status, 200, rest.text);
  t.is(rest.body.data.length, 2);
  t.is(rest.body.nextCursor, null);

  const all = await get('?limit=200');
  t.is(all.body.data.length, 52);
  t.is(all.body.nextCursor, null);
  t.deepEqual(
    [...page.body.data, ...rest.body.data].map((user: { id: string }) => user.id),
    all.body.data.map((user: { id: string }) => user.id),
  );
  const one = await get('?limit=1');
  t.is(one.body.data.length, 1);
  t.is(one.body.data[0].id, all.body.data[0].id);
  const exact = await get('?limit=52');
  t.is(exact.body.data.length, 52);
  t.is(exact.body.nextCursor, null, 'a page that ends exactly at the last row has no next cursor');

  // Newest first.
  const times = all.body.data.map((user: { createdAt: string }) => Date.parse(user.createdAt));
  t.deepEqual(
    times,
    [...times].sort((a, b) => b - a),
  );
});

test('walking a list while rows are added yields every original row exactly once, newest first', async (t) => {
  const setup = await workspaceWithUser(service);
  await createUsers(setup, 6, 'original');
  const get = (query: string) =>
    service.request('GET', `/api/v1/users${query}`, { auth: setup.apiKey, workspaceId: setup.workspace.id });
  const before = await get('?limit=200');
  const originals: string[] = before.body.data.map((user: { id: string }) => user.id);
  t.is(originals.length, 7);

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${encodeURIComponent(cursor)}`;
    const page = await get(query);
    t.is(page.status, 200, page.text);
    t.true(page.body.data.length <= 2);
    seen.push(...page.body.data.map((user: { id: string }) => user.id));
    cursor = page.body.nextCursor;
    pages += 1;
    // Newer rows arrive between the pages.
    await createUsers(setup, 1, `added-${pages}`);
  } while (cursor !== null && pages < 10);
  t.is(pages, 4);
  t.deepEqual(seen, originals);
  const after = await get('?limit=200');
  t.is(after.body.data.length, 7 + pages);
});

test('a tampered, garbage or foreign cursor is 400 invalid_cursor', async (t) => {
  const setup = await workspaceWithUser(service);
  await createUsers(setup, 2, 'cursor');
  const otherWorkspace = await service.request('POST', '/api/v1/workspaces', {
    auth: setup.apiKey,
    body: workspaceBody(),
  });
  t.is(otherWorkspace.status, 201);
  const users = (query: string, workspaceId: string = setup.workspace.id) =>
    service.request('GET', `/api/v1/users${query}`, { auth: setup.apiKey, workspaceId });

  const page = await users('?limit=1');
  const cursor: string = page.body.nextCursor;
  t.is(typeof cursor, 'string');
  const next = await users(`?limit=1&cursor=${encodeURIComponent(cursor)}`);
  t.is(next.status, 200, 'the untouched cursor works');

  const dot = cursor.indexOf('.');
  t.true(dot > 0);
  const workspacesCursor = (await service.request('GET', '/api/v1/workspaces?limit=1', { auth: setup.apiKey })).body
    .nextCursor as string;
  t.is(typeof workspacesCursor, 'string');
  const otherApp = await workspaceWithUser(service);
  await createUsers(otherApp, 1, 'foreign');
  const foreignUsersCursor = (
    await service.request('GET', '/api/v1/users?limit=1', {
      auth: otherApp.apiKey,
      workspaceId: otherApp.workspace.id,
    })
  ).body.nextCursor as string;
  t.is(typeof foreignUsersCursor, 'string');

  const refused: [string, string, string?][] = [
    ['payload changed', tamper(cursor, 0)],
    ['payload changed in the middle', tamper(cursor, Math.floor(dot / 2))],
    ['signature changed', tamper(cursor, dot + 1)],
    ['signature cut', cursor.slice(0, -2)],
    ['signature missing', cursor.slice(0, dot)],
    ['extra part', `${cursor}.x`],
    ['garbage', 'garbage'],
    ['garbage with a dot', 'not.acursor'],
    ['only dots', '...'],
    ['empty', ''],
    ['far too long', 'x'.repeat(600)],
    ['another list (workspaces)', workspacesCursor],
    ['another workspace', cursor, otherWorkspace.body.id],
    ["another application's workspace list", foreignUsersCursor],
  ];
  for (const [label, value, workspaceId] of refused) {
    const answer = await users(`?limit=1&cursor=${encodeURIComponent(value)}`, workspaceId);
    assertError(t, answer, 400, 'invalid_cursor', label);
  }
  // And the other way round: a users cursor on the workspaces list.
  assertError(
    t,
    await service.request('GET', `/api/v1/workspaces?cursor=${encodeURIComponent(cursor)}`, { auth: setup.apiKey }),
    400,
    'invalid_cursor',
    'users cursor on workspaces',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// OpenAPI, health, metrics

test('/openapi.json describes the 81 operations', async (t) => {
  const answer = await service.request('GET', '/openapi.json');
  t.is(answer.status, 200);
  const document = answer.body;
  t.regex(document.openapi, /^3\.1\./);
  const found: {
    method: string;
    path: string;
    operation: Record<string, unknown> & {
      operationId: string;
      security: unknown[];
      'x-implemented': boolean;
      'x-operation-number': number;
      requestBody?: { required: boolean; content: Record<string, { schema?: { type?: string } }> };
      parameters: { name: string; in: string; required: boolean }[];
    };
  }[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, never>>)) {
    for (const [method, operation] of Object.entries(item)) found.push({ method, path, operation });
  }
  t.is(found.length, 81);
  t.is(new Set(found.map(({ operation }) => operation.operationId)).size, 81);
  t.deepEqual(
    found.map(({ operation }) => operation['x-operation-number']).sort((a, b) => a - b),
    Array.from({ length: 81 }, (_, index) => index + 1),
  );
  const schemes = Object.keys(document.components.securitySchemes);
  // The operations built so far: identity (1-16), verifications (17, 18), numbers and routing (19-48), calls (50-54,
  // 56), agents (57, 58), devices and offers (59-66), messages (67-69), webhooks (73-79), the event log (80), live
  // figures (81).
  const implementedOperations = new Set([
    ...Array.from({ length: 18 }, (_, index) => index + 1),
    ...Array.from({ length: 30 }, (_, index) => index + 19),
    50,
    51,
    52,
    53,
    54,
    56,
    57,
    58,
    ...Array.from({ length: 8 }, (_, index) => index + 59),
    67,
    68,
    69,
    ...Array.from({ length: 7 }, (_, index) => index + 73),
    80,
    81,
  ]);
  const optionalBodies = new Set([
    'createMemberSession',
    'createApplicationKey',
    'revokeApplicationKey',
    'createWorkspaceKey',
    'deleteUser',
    'deleteWebhook',
    'replayWebhook',
    'rotateWebhookSecret',
    'releaseNumber',
    'publishRoutingPlan',
    'archiveRoutingPlan',
    'deleteQueue',
    'deleteSchedule',
    'deleteAiAgent',
    'hangupCall',
    'unregisterDevice',
    'renewPresence',
    'declineOffer',
    'issueSipCredentials',
  ]);
  for (const { method, path, operation } of found) {
    const label = `${method.toUpperCase()} ${path} (${operation.operationId})`;
    t.true(path.startsWith('/api/v1/'), label);
    t.true(Array.isArray(operation.security) && operation.security.length > 0, `${label}: security`);
    for (const requirement of operation.security as Record<string, unknown>[]) {
      for (const scheme of Object.keys(requirement)) t.true(schemes.includes(scheme), `${label}: ${scheme}`);
    }
    const implemented = implementedOperations.has(operation['x-operation-number']);
    t.is(operation['x-implemented'], implemented, `${label}: x-implemented`);
    for (const name of [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1])) {
      t.true(
        operation.parameters.some((parameter) => parameter.in === 'path' && parameter.name === name),
        `${label}: path parameter ${name}`,
      );
    }
    const mutation = method !== 'get';
    t.is(
      operation.parameters.some((parameter) => parameter.in === 'header' && parameter.name === 'idempotency-key'),
      mutation,
      `${label}: idempotency-key header`,
    );
    if (implemented && mutation) {
      const schema = operation.requestBody?.content['application/json']?.schema;
      t.is(schema?.type, 'object', `${label}: request body schema`);
      t.is(operation.requestBody?.required, !optionalBodies.has(operation.operationId), `${label}: body required`);
    }
  }
  const createWorkspace = found.find(({ operation }) => operation.operationId === 'createWorkspace')?.operation;
  const bodySchema = createWorkspace?.requestBody?.content['application/json']?.schema as {
    required?: string[];
    additionalProperties?: boolean;
  };
  t.deepEqual([...(bodySchema.required ?? [])].sort(), ['externalWorkspaceId', 'name', 'timezone']);
  t.is(bodySchema.additionalProperties, false);
  const listUsers = found.find(({ operation }) => operation.operationId === 'listUsers')?.operation;
  t.deepEqual(
    listUsers?.parameters.filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name),
    ['limit', 'cursor'],
  );
});

test('/healthz and /readyz answer 200; /readyz is 503 unavailable when a migration is missing', async (t) => {
  const health = await small.request('GET', '/healthz');
  t.is(health.status, 200);
  t.deepEqual(health.body, { status: 'ok' });
  const ready = await small.request('GET', '/readyz');
  t.is(ready.status, 200);
  t.deepEqual(ready.body, { status: 'ready' });

  // Only the small service's own database is touched here.
  const client = new pg.Client({ connectionString: small.databaseUrl });
  await client.connect();
  try {
    await client.query('ALTER TABLE schema_migrations RENAME TO schema_migrations_hidden');
    const notReady = await small.request('GET', '/readyz');
    assertError(t, notReady, 503, 'unavailable', 'readyz without migrations');
    const stillHealthy = await small.request('GET', '/healthz');
    t.is(stillHealthy.status, 200);
  } finally {
    await client.query('ALTER TABLE IF EXISTS schema_migrations_hidden RENAME TO schema_migrations');
    await client.end();
  }
  t.is((await small.request('GET', '/readyz')).status, 200);
});

test('/metrics has the request duration histogram by operation, and process metrics', async (t) => {
  const app = await service.application();
  const listed = await service.request('GET', '/api/v1/workspaces', { auth: app.apiKey });
  t.is(listed.status, 200);
  await service.request('GET', '/api/v1/definitely-unknown');
  const metrics = await service.request('GET', '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.headers.get('content-type') ?? '', /^text\/plain/);
  t.regex(metrics.text, /^# TYPE switchboard_http_request_duration_seconds histogram$/m);
  t.regex(
    metrics.text,
    /^switchboard_http_request_duration_seconds_count\{(?=[^}]*operation="listWorkspaces")(?=[^}]*method="GET")(?=[^}]*status="200")[^}]*\} [1-9]\d*$/m,
  );
  t.regex(
    metrics.text,
    /^switchboard_http_request_duration_seconds_bucket\{(?=[^}]*operation="listWorkspaces")(?=[^}]*le="\+Inf")[^}]*\} [1-9]/m,
  );
  t.regex(
    metrics.text,
    /^switchboard_http_request_duration_seconds_count\{[^}]*operation="unknown"[^}]*status="404"[^}]*\} /m,
  );
  t.regex(metrics.text, /^switchboard_process_cpu_user_seconds_total \d/m);
  t.regex(metrics.text, /^switchboard_process_start_time_seconds \d/m);
  t.regex(metrics.text, /^switchboard_nodejs_heap_size_used_bytes \d/m);
});

// ---------------------------------------------------------------------------------------------------------------
// Logs

test('logs are JSON lines with the request id and never carry a credential', async (t) => {
  const setup = await workspaceWithUser(service);
  const requestId = `logs-${randomUUID()}`;
  const listed = await service.request('GET', '/api/v1/workspaces', {
    auth: setup.apiKey,
    headers: { 'x-request-id': requestId },
  });
  t.is(listed.status, 200);

  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: {
      externalWorkspaceId: setup.workspace.externalWorkspaceId,
      externalUserId: 'alice',
      scopes: ['numbers:*'],
    },
  });
  t.is(session.status, 201, session.text);
  const userToken: string = session.body.token;
  const withToken = await service.request('GET', '/api/v1/numbers', { auth: userToken });
  t.is(withToken.status, 200, withToken.text);

  const legacySecret = await resetLegacySecret(service.pool, setup.applicationId);
  const withSecret = await service.request('GET', '/api/v1/workspaces', {
    auth: legacySecret,
    headers: { 'x-service-application': setup.applicationId },
  });
  t.is(withSecret.status, 200, withSecret.text);

  // Only a key holding verify:send issues workspace keys.
  const verifier = await issueKey(service.pool, { applicationId: setup.applicationId, scopes: allScopes });
  const workspaceKey = await service.request('POST', `/api/v1/workspaces/${setup.workspace.id}/keys`, {
    auth: verifier.secret,
  });
  t.is(workspaceKey.status, 201, workspaceKey.text);
  const withWorkspaceKey = await service.request('POST', '/api/v1/verifications', {
    auth: workspaceKey.body.apiKey,
    body: {},
  });
  // Past authentication: the empty body is what is refused.
  t.is(withWorkspaceKey.status, 400, withWorkspaceKey.text);

  // Refused credentials are not logged either.
  const wrongSecret = `sbs_${'A'.repeat(43)}`;
  const refused = await service.request('GET', '/api/v1/workspaces', {
    auth: wrongSecret,
    headers: { 'x-service-application': setup.applicationId },
  });
  t.is(refused.status, 401);

  // The last answer was read before its own "request completed" line may be written; one more request makes sure
  // the server has moved on past every request above.
  await service.request('GET', '/healthz');

  const entries = service.logs.map((line) => {
    const parsed = JSON.parse(line) as Record<string, unknown>;
    t.is(typeof parsed, 'object');
    return parsed;
  });
  t.true(
    entries.some((entry) => entry.requestId === requestId && entry.msg === 'incoming request'),
    'the incoming request id is the log request id',
  );
  for (const entry of entries) {
    if ('req' in entry || 'res' in entry) t.is(typeof entry.requestId, 'string', JSON.stringify(entry));
  }
  for (const [name, secret] of [
    ['application key', setup.apiKey],
    ['user token', userToken],
    ['legacy secret', legacySecret],
    ['workspace key', workspaceKey.body.apiKey as string],
    ['key holding verify:send', verifier.secret],
    ['refused secret', wrongSecret],
  ] as const) {
    t.true(secret.length > 20, name);
    t.false(
      service.logs.some((line) => line.includes(secret)),
      `no log line contains the ${name}`,
    );
  }
  t.false(
    service.logs.some((line) => /authorization/i.test(line)),
    'no log line carries an authorization header',
  );
});
