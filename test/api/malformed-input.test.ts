/**
 * Bad input never answers 5xx (issue 12, item 11): a corpus of malformed requests generated from `GET /openapi.json`
 * (test/helpers/request-corpus.ts) is sent to every implemented operation with a valid credential and workspace, so
 * that it gets past authentication to parsing, validation and the handlers. Every answer must be below 500, every
 * error in the envelope `{ error: { code, message } }` as JSON, nothing may be logged as a failure of ours, and the
 * service must still answer normal requests afterwards. A few requests the HTTP parser itself refuses (control
 * characters in a header, oversized headers, broken framing) are sent over a raw socket.
 */
import { randomUUID } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import test from 'ava';
import { allScopes } from '../../core/scopes.ts';
import { startCall } from '../../core/calls/calls.ts';
import { makeOffers } from '../../core/devices/offers.ts';
import { createMember } from '../../core/identity/members.ts';
import { importNumbers } from '../../core/numbers/numbers.ts';
import { identityServiceForFile } from '../helpers/identity.ts';
import { type DocumentOperation, documentOperations, type Probe, probesFor } from '../helpers/request-corpus.ts';
import { type Answer, isError, workspaceWithUser } from '../helpers/service.ts';

const { service, oidc: issuer } = identityServiceForFile(test, { logins: true });

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });
test.after.always(() => agent.destroy());

function send(url: URL, probe: Probe, defaults: Record<string, string>): Promise<Reply> {
  const headers: Record<string, string> = { ...defaults };
  if (probe.body !== undefined) {
    headers['content-type'] = 'application/json';
    // Node's client sends a GET's body without framing unless told its length.
    headers['content-length'] = String(Buffer.byteLength(probe.body));
  }
  for (const [name, value] of Object.entries(probe.headers)) {
    if (value === null) delete headers[name];
    else headers[name] = value;
  }
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      { host: url.hostname, port: url.port, method: probe.method, path: probe.target, headers, agent },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    // A request the service never answers is a failure to report, not a test that hangs.
    outgoing.setTimeout(30_000, () => outgoing.destroy(new Error('no answer within 30 s')));
    outgoing.end(probe.body);
  });
}

/** An SDP offer as the engine makes one, and a browser's answer to it (shortened). */
const sdpOffer = [
  'v=0',
  'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'm=audio 9 UDP/TLS/RTP/SAVPF 111 0',
  'c=IN IP4 0.0.0.0',
  'a=rtpmap:111 opus/48000/2',
  'a=rtpmap:0 PCMU/8000',
  'a=sendrecv',
  '',
].join('\r\n');
const sdpAnswer = sdpOffer.replace('4611731400430051336', '8402283922311234567');

/** What is wrong with an answer, or undefined when it is a fine answer to bad input. */
function problemWith(reply: Pick<Reply, 'status' | 'text'> & { contentType: string | undefined }): string | undefined {
  if (reply.status >= 500 || reply.status < 200) return `status ${reply.status}`;
  if (reply.status < 400) return undefined;
  if (!/^application\/json/.test(reply.contentType ?? '')) return `content-type ${reply.contentType}`;
  let body: { error?: { code?: unknown; message?: unknown } };
  try {
    body = JSON.parse(reply.text);
  } catch {
    return 'a body that is not JSON';
  }
  if (Object.keys(body).join() !== 'error') return 'a body that is not the envelope';
  if (typeof body.error?.code !== 'string' || body.error.code === '') return 'no error.code';
  if (typeof body.error?.message !== 'string' || body.error.message === '') return 'no error.message';
  return undefined;
}

/** 400 `invalid_request` with the message of the rule on what no field may hold (core/validation.ts). */
function refusedByRule(reply: Reply): boolean {
  if (reply.status !== 400) return false;
  const error = (JSON.parse(reply.text) as { error: { code: string; message: string } }).error;
  return (
    error.code === 'invalid_request' &&
    /control character U\+[0-9A-F]{4}|not valid Unicode|nested more than 64 levels/.test(error.message)
  );
}

/** Runs `work` over `items`, at most `concurrency` at a time. */
async function eachLimited<T>(items: readonly T[], concurrency: number, work: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** A raw HTTP/1.1 exchange: what the server wrote before it closed the connection. */
function rawExchange(url: URL, bytes: Buffer | string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
    socket.setTimeout(30_000, () => socket.destroy(new Error('the connection was not closed within 30 s')));
    socket.write(bytes);
  });
}

function parseRaw(raw: string) {
  const [head = '', ...rest] = raw.split('\r\n\r\n');
  const [statusLine = '', ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(
    headerLines.map((line) => [
      line.slice(0, line.indexOf(':')).toLowerCase(),
      line.slice(line.indexOf(':') + 1).trim(),
    ]),
  );
  return {
    status: Number(statusLine.split(' ')[1]),
    contentType: headers['content-type'],
    text: rest.join('\r\n\r\n'),
  };
}

test('a corpus of malformed requests over every implemented operation of /openapi.json never gets a 5xx', async (t) => {
  const started = Date.now();
  // Every scope, so that the application key may issue the workspace key the one-time codes take.
  const setup = await workspaceWithUser(service, undefined, allScopes);
  const auth = { authorization: `Bearer ${setup.apiKey}`, 'x-service-workspace-id': setup.workspace.id };
  const api = async (method: string, path: string, body?: unknown) => {
    const answer = await service.request(method, path, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      ...(body === undefined ? {} : { body }),
    });
    if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`);
    return answer.body;
  };

  // One existing resource of each kind, so that requests with a well-formed id reach the handlers' queries.
  const email = `member-${randomUUID()}@example.com`;
  const member = await createMember(service.pool, {
    workspaceId: setup.workspace.id,
    email,
    scopes: ['calls:*', 'routing:*', 'numbers:*', 'metrics:read'],
  });
  const claimed = `+1415${String(Date.now()).slice(-7)}`;
  const free = `+1416${String(Date.now()).slice(-7)}`;
  await importNumbers(service.pool, 'acme', [claimed, free], ['voice', 'sms']);
  const number = await api('POST', '/api/v1/numbers', { e164: claimed });
  const definition = { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } };
  const plan = await api('POST', '/api/v1/routing-plans', { name: 'Plan', definition, publish: true });
  const queue = await api('POST', '/api/v1/queues', { name: 'Queue', members: [member.id] });
  const schedule = await api('POST', '/api/v1/schedules', {
    name: 'Hours',
    timezone: 'Europe/Paris',
    weeklyHours: [{ day: 'monday', open: '09:00', close: '17:00' }],
  });
  const agentRecord = await api('POST', '/api/v1/ai-agents', {
    name: 'Agent',
    provider: 'provider_a',
    connection: { url: 'https://ai.example.com/realtime' },
  });
  const webhook = await api('POST', '/api/v1/webhooks', { url: 'https://hooks.example.com/switchboard' });
  // Another key to revoke: the corpus must not revoke the key it sends.
  const victim = await api('POST', '/api/v1/application/keys', { name: 'Victim' });
  // Two users, so that a list of one has a next page whose cursor can be tampered with.
  await api('POST', '/api/v1/users', { externalUserId: 'bob', displayName: 'Bob' });
  const page = await api('GET', '/api/v1/users?limit=1');
  t.is(typeof page.nextCursor, 'string');

  // A user token for the operations only user and member tokens take (devices), and a device of that user.
  const session = await api('POST', '/api/v1/sessions', {
    externalWorkspaceId: setup.workspace.externalWorkspaceId,
    externalUserId: 'alice',
    scopes: ['devices:*'],
  });
  const userAuth = { ...auth, authorization: `Bearer ${session.token}` };
  const device = await service.request('POST', '/api/v1/devices', {
    auth: session.token,
    body: { kind: 'browser', clientId: 'corpus' },
  });
  t.is(device.status, 201, device.text);
  // Two calls offered to that device: the probes act on the first offer (one may accept or decline it); the second
  // keeps an offer waiting, so that the device's long-polls answer at once instead of holding for 10 s each.
  const offerIds: string[] = [];
  for (const sipCallId of [randomUUID(), randomUUID()]) {
    const call = await startCall(service.pool, {
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      direction: 'inbound',
      from: '+14155550100',
      to: claimed,
      phoneNumberId: number.id,
      routingPlanId: null,
      routingPlanVersion: null,
      engineOwner: 'engine-corpus',
      sipCallId,
    });
    const made = await makeOffers(service.pool, {
      callId: call.id,
      workspaceId: setup.workspace.id,
      ringSeq: 1,
      devices: [{ deviceId: device.body.id, sdpOffer }],
      expiresAt: new Date(Date.now() + 3_600_000),
    });
    t.is(made.offers.length, 1);
    offerIds.push((made.offers[0] as { id: string }).id);
  }

  const existing = new Map<string, string>([
    ['/api/v1/devices', device.body.id],
    ['/api/v1/offers', offerIds[0] as string],
    ['/api/v1/workspaces', setup.workspace.id],
    ['/api/v1/users', setup.user.id],
    ['/api/v1/members', member.id],
    ['/api/v1/numbers', number.id],
    ['/api/v1/routing-plans', plan.id],
    ['/api/v1/queues', queue.id],
    ['/api/v1/schedules', schedule.id],
    ['/api/v1/ai-agents', agentRecord.id],
    ['/api/v1/webhooks', webhook.id],
    ['/api/v1/application/keys', victim.key.id],
  ]);
  const context = {
    existing,
    cursor: page.nextCursor as string,
    realistic: {
      timezone: 'Europe/Paris',
      definition,
      url: 'https://hooks.example.com/switchboard',
      e164: free,
      externalWorkspaceId: setup.workspace.externalWorkspaceId,
      externalUserId: 'alice',
      phoneNumberId: number.id,
      members: [member.id],
      connection: { url: 'https://ai.example.com/realtime' },
      sdp: sdpAnswer,
    },
  };

  const document = await api('GET', '/openapi.json');
  const operations = documentOperations(document).filter((operation) => operation.implemented);
  t.true(operations.length >= 50, `implemented operations: ${operations.length}`);
  const login = await issuer.login(email, 3600);
  const workspaceKey = (await api('POST', `/api/v1/workspaces/${setup.workspace.id}/keys`)) as { apiKey: string };
  const credentialFor = (operation: DocumentOperation): Record<string, string> => {
    const kinds = operation.security.flatMap((requirement) => Object.keys(requirement));
    if (kinds.includes('applicationKey')) return auth;
    if (kinds.includes('workspaceKey')) return { ...auth, authorization: `Bearer ${workspaceKey.apiKey}` };
    if (kinds.includes('memberLogin')) return { ...auth, authorization: `Bearer ${login}` };
    if (kinds.includes('userToken')) return userAuth;
    throw new Error(`${operation.operationId}: no credential of this test fits ${kinds.join(', ')}`);
  };

  // DELETEs last: once one has removed a resource, requests naming it stop at 404.
  const ordered = [...operations].sort((a, b) => Number(a.method === 'DELETE') - Number(b.method === 'DELETE'));
  const probes = ordered.flatMap((operation) =>
    probesFor(operation, context).map((probe) => ({ probe, operation, defaults: credentialFor(operation) })),
  );
  const covered = new Set(probes.map(({ operation }) => operation.operationId));
  t.deepEqual(
    [...covered].sort(),
    operations.map((operation) => operation.operationId).sort(),
    'every implemented operation has probes',
  );
  t.true(probes.length >= 5_000, `probes: ${probes.length}`);

  const url = new URL(service.url);
  const failures: string[] = [];
  const statuses = new Map<number, number>();
  const phases = [
    probes.filter(({ probe }) => probe.method !== 'DELETE'),
    probes.filter(({ probe }) => probe.method === 'DELETE'),
  ];
  for (const phase of phases) {
    await eachLimited(phase, 8, async ({ probe, defaults }) => {
      const headers = { ...defaults, ...(probe.method === 'GET' ? {} : { 'idempotency-key': randomUUID() }) };
      let reply: Reply;
      try {
        reply = await send(url, probe, headers);
      } catch (error) {
        failures.push(`${probe.operationId} ${probe.what}: ${(error as Error).message}`);
        return;
      }
      statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
      const contentType = reply.headers['content-type'];
      let problem = problemWith({ ...reply, contentType: Array.isArray(contentType) ? contentType[0] : contentType });
      if (problem === undefined && probe.refused === true && !refusedByRule(reply)) {
        problem = 'not refused by the rule on control characters, lone surrogates and nesting';
      }
      if (problem !== undefined) {
        failures.push(`${probe.operationId} ${probe.what}: ${problem}: ${reply.status} ${reply.text.slice(0, 200)}`);
      }
    });
  }

  // What the HTTP parser refuses before any route: the answer is still the envelope.
  const host = `Host: ${url.host}\r\n`;
  const raw: [string, string | Buffer][] = [
    [
      'a control character in a header',
      `GET /api/v1/users HTTP/1.1\r\n${host}x-service-workspace-id: a\u0001b\r\n\r\n`,
    ],
    [
      'a NUL in a header',
      Buffer.from(`GET /api/v1/users HTTP/1.1\r\n${host}x-service-external-workspace-id: a\u0000b\r\n\r\n`),
    ],
    ['headers over the size limit', `GET /api/v1/users HTTP/1.1\r\n${host}x-big: ${'x'.repeat(20_000)}\r\n\r\n`],
    ['a URL over the size limit', `GET /api/v1/users?cursor=${'x'.repeat(20_000)} HTTP/1.1\r\n${host}\r\n`],
    ['a malformed request line', `GET\r\n${host}\r\n`],
    ['a space in the path', `GET /api/v1/us ers HTTP/1.1\r\n${host}\r\n`],
    ['a negative content-length', `POST /api/v1/queues HTTP/1.1\r\n${host}content-length: -1\r\n\r\n`],
    ['two content-lengths', `POST /api/v1/queues HTTP/1.1\r\n${host}content-length: 1\r\ncontent-length: 2\r\n\r\nab`],
    [
      'a broken chunk',
      `POST /api/v1/queues HTTP/1.1\r\n${host}transfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`,
    ],
  ];
  for (const [what, bytes] of raw) {
    const reply = parseRaw(await rawExchange(url, bytes));
    const problem = problemWith(reply);
    if (problem !== undefined) failures.push(`raw ${what}: ${problem}: ${reply.status} ${reply.text.slice(0, 200)}`);
  }

  // Nothing was logged as a failure of ours.
  const internal = service.logs.filter((line) => line.includes('"level":50'));
  for (const line of internal.slice(0, 10)) failures.push(`logged: ${line.slice(0, 300)}`);

  const seconds = (Date.now() - started) / 1000;
  t.log(
    `${probes.length + raw.length} requests over ${operations.length} operations in ${seconds.toFixed(1)} s;`,
    `statuses: ${[...statuses]
      .sort(([a], [b]) => a - b)
      .map(([status, count]) => `${status}×${count}`)
      .join(' ')}`,
  );
  t.deepEqual(failures.slice(0, 40), [], `${failures.length} failures`);

  // The service is still up and serves a normal request and a normal change.
  const workspace = await service.request('GET', `/api/v1/workspaces/${setup.workspace.id}`, { auth: setup.apiKey });
  t.is(workspace.status, 200, workspace.text);
  const created = await service.request('POST', '/api/v1/queues', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { name: 'After the corpus' },
  });
  t.is(created.status, 201, created.text);
});

// ---------------------------------------------------------------------------------------------------------------
// The rule on what no field may hold, and the refusals before any route, one by one

test('a NUL character is 400 invalid_request naming where it is: bodies, field names, queries and paths', async (t) => {
  const setup = await workspaceWithUser(service);
  const as = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  const nul = /must not contain the control character U\+0000/;
  const cases: [string, Promise<Answer>, RegExp][] = [
    [
      "a key's name",
      service.request('POST', '/api/v1/application/keys', { ...as, body: { name: 'a\u0000b' } }),
      /^body\.name /,
    ],
    ["a queue's name", service.request('POST', '/api/v1/queues', { ...as, body: { name: '\u0000' } }), /^body\.name /],
    [
      "a webhook's description",
      service.request('POST', '/api/v1/webhooks', {
        ...as,
        body: { url: 'https://hooks.example.com/x', description: 'a\u0000' },
      }),
      /^body\.description /,
    ],
    [
      'a string deep in a routing plan definition',
      service.request('POST', '/api/v1/routing-plans/validate', {
        ...as,
        body: { definition: { entry: 'a', steps: { a: { type: 'hangup', message: ['x', 'y\u0000'] } } } },
      }),
      /^body\.definition\.steps\.a\.message\[1\] /,
    ],
    [
      'a field name',
      service.request('PATCH', `/api/v1/workspaces/${setup.workspace.id}`, {
        ...as,
        body: { limits: { '\u0000': 1 } },
      }),
      /^a field name in body\.limits /,
    ],
    ['a query value', service.request('GET', '/api/v1/calls?state=a%00b', as), /^query\.state /],
    ['a path parameter', service.request('GET', '/api/v1/users/%00', as), /^path\.id /],
  ];
  for (const [label, pending, where] of cases) {
    const answer = await pending;
    isError(t, answer, 400, 'invalid_request', label);
    t.regex(answer.body?.error?.message ?? '', where, label);
    t.regex(answer.body?.error?.message ?? '', nul, label);
  }
  // Nothing was written.
  const queues = await service.request('GET', '/api/v1/queues', as);
  t.deepEqual(queues.body.data, []);
  const keys = await service.pool.query("SELECT 1 FROM api_keys WHERE name LIKE 'a%b'");
  t.is(keys.rowCount, 0);
});

test('other C0 control characters and lone surrogates are refused; tab, line breaks and the rest of Unicode are kept', async (t) => {
  const setup = await workspaceWithUser(service);
  const as = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  const createQueue = (name: string) => service.request('POST', '/api/v1/queues', { ...as, body: { name } });

  for (const [character, code] of [
    ['\u0001', 'U+0001'],
    ['\u0008', 'U+0008'],
    ['\u000b', 'U+000B'],
    ['\u000c', 'U+000C'],
    ['\u001b', 'U+001B'],
    ['\u001f', 'U+001F'],
  ] as const) {
    const answer = await createQueue(`a${character}b`);
    isError(t, answer, 400, 'invalid_request', code);
    t.regex(
      answer.body.error.message,
      new RegExp(`^body\\.name must not contain the control character ${code.replace('+', '\\+')}`),
    );
  }
  // A lone surrogate used to be stored as U+FFFD without a word; it is not Unicode, so it is refused.
  for (const [text, code] of [
    ['a\ud800b', 'U+D800'],
    ['a\udfff', 'U+DFFF'],
    ['\ud83d', 'U+D83D'],
  ] as const) {
    const answer = await createQueue(text);
    isError(t, answer, 400, 'invalid_request', code);
    t.regex(
      answer.body.error.message,
      new RegExp(`^body\\.name is not valid Unicode: it has a lone surrogate \\(${code.replace('+', '\\+')}\\)`),
    );
  }
  const kept = 'a\tb\r\nc \u007f \u0085 \u00a0 \u2028 \ufeff 😀 \u{10ffff}';
  const created = await createQueue(kept);
  t.is(created.status, 201, created.text);
  const read = await service.request('GET', `/api/v1/queues/${created.body.id}`, as);
  t.is(read.body.name, kept);
});

test('a body nested deeper than 64 levels is refused; 64 levels reach the handler', async (t) => {
  const setup = await workspaceWithUser(service);
  const as = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  // The body is the first level, `definition` the second: 63 arrays make 64 levels.
  const validate = (arrays: number) =>
    service.request('POST', '/api/v1/routing-plans/validate', {
      ...as,
      rawBody: `{"definition":${'['.repeat(arrays)}${']'.repeat(arrays)}}`,
    });
  const deepest = await validate(63);
  t.is(deepest.status, 200, deepest.text);
  t.false(deepest.body.valid);
  for (const arrays of [64, 1_000, 200_000]) {
    const answer = await validate(arrays);
    isError(t, answer, 400, 'invalid_request', `${arrays} arrays`);
    t.regex(answer.body.error.message, /^body\.definition(\[0\])* is nested more than 64 levels deep$/);
  }
});

test('date-times that Date or PostgreSQL cannot hold are 400 invalid_request; the others name their instant', async (t) => {
  const setup = await workspaceWithUser(service);
  const as = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  const key = await service.request('POST', '/api/v1/application/keys', { ...as, body: { name: 'Rotated' } });
  for (const revokeAt of [
    '2016-12-31T23:59:60Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:00:00+01:00',
    '9999-12-31T23:59:59-23:59',
    '2030-01-01T00:00:00+05',
  ]) {
    const answer = await service.request('DELETE', `/api/v1/application/keys/${key.body.key.id}`, {
      ...as,
      body: { revokeAt },
    });
    isError(t, answer, 400, 'invalid_request', revokeAt);
    t.is(answer.body.error.message, 'body.revokeAt must be a valid date-time', revokeAt);
  }
  const schedule = await service.request('GET', `/api/v1/schedules/${randomUUID()}?at=2016-12-31T23:59:60Z`, as);
  isError(t, schedule, 400, 'invalid_request', 'schedule at');
  t.is(schedule.body.error.message, 'query.at must be a valid date-time');

  // A day from now, written with a +02:00 offset: the wall time two hours ahead of UTC.
  const later = Math.floor(Date.now() / 1000) * 1000 + 86_400_000;
  const offset = `${new Date(later + 2 * 3_600_000).toISOString().slice(0, 19)}+02:00`;
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${key.body.key.id}`, {
    ...as,
    body: { revokeAt: offset },
  });
  t.is(revoked.status, 200, revoked.text);
  t.is(Date.parse(revoked.body.revokedAt), later);
});

test('integers are bounded: every integer of a request in /openapi.json has a maximum PostgreSQL can hold', async (t) => {
  const setup = await workspaceWithUser(service);
  const document = (await service.request('GET', '/openapi.json')).body;
  const unbounded: string[] = [];
  const visit = (schema: Record<string, unknown>, at: string) => {
    if (schema.type === 'integer' && !(typeof schema.maximum === 'number' && schema.maximum <= 2 ** 31 - 1)) {
      unbounded.push(at);
    }
    for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Record<string, unknown>>)) {
      visit(child, `${at}.${name}`);
    }
    if (schema.items) visit(schema.items as Record<string, unknown>, `${at}[]`);
    for (const branch of (schema.anyOf ?? []) as Record<string, unknown>[]) visit(branch, at);
  };
  for (const operation of documentOperations(document).filter((operation) => operation.implemented)) {
    if (operation.body) visit(operation.body.schema, `${operation.operationId} body`);
    for (const parameter of operation.parameters) {
      visit(parameter.schema, `${operation.operationId} ${parameter.in}.${parameter.name}`);
    }
  }
  t.deepEqual(unbounded, []);

  const plan = await service.request('POST', '/api/v1/routing-plans', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { name: 'Plan', definition: { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } } },
  });
  t.is(plan.status, 201, plan.text);
  const publish = await service.request('POST', `/api/v1/routing-plans/${plan.body.id}/publish`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { version: 2 ** 31 },
  });
  isError(t, publish, 400, 'invalid_request');
  t.is(publish.body.error.message, 'body.version must be <= 2147483647');
});

test('what the HTTP parser and the router refuse before any route is answered in the envelope', async (t) => {
  const url = new URL(service.url);
  const host = `Host: ${url.host}\r\n`;
  const shell = (label: string, raw: string) => {
    t.regex(raw, /\r\ncache-control: no-store\r\n/i, label);
    t.regex(raw, /\r\nx-request-id: \S+\r\n/i, label);
    t.regex(raw, /\r\naccess-control-allow-origin: \*\r\n/i, label);
  };
  for (const [label, bytes, status, code] of [
    [
      'oversized headers',
      `GET /api/v1/users HTTP/1.1\r\n${host}x-big: ${'x'.repeat(20_000)}\r\n\r\n`,
      431,
      'headers_too_large',
    ],
    [
      'a control character in a header',
      `GET /api/v1/users HTTP/1.1\r\n${host}x-a: a\u0001b\r\n\r\n`,
      400,
      'invalid_request',
    ],
    [
      'broken chunked framing',
      `POST /api/v1/queues HTTP/1.1\r\n${host}transfer-encoding: chunked\r\n\r\nzz\r\n\r\n`,
      400,
      'invalid_request',
    ],
  ] as const) {
    const raw = await rawExchange(url, bytes);
    const answer = parseRaw(raw);
    t.is(answer.status, status, `${label}: ${raw}`);
    t.regex(answer.contentType ?? '', /^application\/json/, label);
    t.is(JSON.parse(answer.text).error.code, code, label);
    t.regex(raw, /\r\nconnection: close\r\n/i, label);
    shell(label, raw);
  }
  const setup = await workspaceWithUser(service);
  for (const [label, path, message] of [
    ['a malformed percent-encoding', '/api/v1/users/%zz', 'the path has a malformed percent-encoding'],
    [
      'an overlong path segment',
      `/api/v1/users/${'x'.repeat(201)}`,
      'a segment of the path is longer than 200 characters',
    ],
  ] as const) {
    const answer = await service.request('GET', path, { auth: setup.apiKey, workspaceId: setup.workspace.id });
    isError(t, answer, 400, 'invalid_request', label);
    t.is(answer.body.error.message, message, label);
    t.is(answer.headers.get('cache-control'), 'no-store', label);
    t.truthy(answer.headers.get('x-request-id'), label);
  }
});

test('a member login whose email claim holds a NUL or a lone surrogate is no login (401), not a failure of ours', async (t) => {
  const setup = await workspaceWithUser(service);
  for (const email of ['a\u0000b@example.com', 'a\ud800@example.com']) {
    const answer = await service.request('POST', '/api/v1/member-sessions', {
      auth: await issuer.login(email),
      workspaceId: setup.workspace.id,
    });
    isError(t, answer, 401, 'unauthorized', JSON.stringify(email));
  }
});
