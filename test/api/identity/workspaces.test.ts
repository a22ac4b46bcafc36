/**
 * Operations 6-10 through HTTP: workspaces (create, list, get, PATCH), the workspace headers that name one
 * (x-service-workspace-id, x-service-external-workspace-id) and workspace keys (verify:send).
 *
 * One service for the whole file. Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { allScopes } from '../../../core/scopes.ts';
import { identityHelpers, identityServiceForFile } from '../../helpers/identity.ts';
import { workspaceWithUser, isError } from '../../helpers/service.ts';

const { service } = identityServiceForFile(test);
const { createWorkspace, keyOf, listKeys, mintSession, userToken, walk } = identityHelpers(() => service);

// ---------------------------------------------------------------------------------------------------------------
// Operations 6-9: workspaces and the workspace headers

test('op 6 workspaces: create answers the workspace with defaults and a canonical timezone', async (t) => {
  const app = await service.application();
  const externalWorkspaceId = `ws-${randomUUID()}`;
  const answer = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId, name: 'Acme', timezone: 'europe/paris' },
  });
  t.is(answer.status, 201, answer.text);
  t.regex(answer.body.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.is(answer.body.externalWorkspaceId, externalWorkspaceId);
  t.is(answer.body.name, 'Acme');
  t.is(answer.body.timezone, 'Europe/Paris');
  t.deepEqual(answer.body.destinationPolicy, { allowedPrefixes: [], blockedPrefixes: [] });
  t.deepEqual(answer.body.limits, { concurrentCalls: 50, devicesPerUser: 5 });
  t.false(Number.isNaN(Date.parse(answer.body.createdAt)));
  t.false(Number.isNaN(Date.parse(answer.body.updatedAt)));

  const given = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: {
      externalWorkspaceId: `ws-${randomUUID()}`,
      name: 'Beta',
      timezone: 'UTC',
      destinationPolicy: { allowedPrefixes: ['+33'], blockedPrefixes: ['+3389'] },
      limits: { concurrentCalls: 3, devicesPerUser: 2 },
    },
  });
  t.is(given.status, 201, given.text);
  t.deepEqual(given.body.destinationPolicy, { allowedPrefixes: ['+33'], blockedPrefixes: ['+3389'] });
  t.deepEqual(given.body.limits, { concurrentCalls: 3, devicesPerUser: 2 });
});

test('op 6 workspaces: a duplicate externalWorkspaceId is 409 already_exists (another application may reuse it)', async (t) => {
  const app = await service.application();
  const externalWorkspaceId = `ws-${randomUUID()}`;
  await createWorkspace(app.apiKey, externalWorkspaceId);
  isError(
    t,
    await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      body: { externalWorkspaceId, name: 'Again', timezone: 'UTC' },
    }),
    409,
    'already_exists',
  );
  const other = await service.application();
  const reused = await service.request('POST', '/api/v1/workspaces', {
    auth: other.apiKey,
    body: { externalWorkspaceId, name: 'Theirs', timezone: 'UTC' },
  });
  t.is(reused.status, 201, reused.text);

  // Concurrent creates of one id: exactly one wins, the others are 409, never 500.
  const contested = `ws-${randomUUID()}`;
  const answers = await Promise.all(
    Array.from({ length: 5 }, () =>
      service.request('POST', '/api/v1/workspaces', {
        auth: app.apiKey,
        body: { externalWorkspaceId: contested, name: 'Race', timezone: 'UTC' },
      }),
    ),
  );
  t.deepEqual(answers.map((a) => a.status).sort(), [201, 409, 409, 409, 409]);
});

test('op 6 workspaces: invalid input is 400 invalid_request naming the field; a replay is not a duplicate', async (t) => {
  const app = await service.application();
  const bad = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId: `ws-${randomUUID()}`, name: 'Acme', timezone: 'Mars/Olympus_Mons' },
  });
  isError(t, bad, 400, 'invalid_request');
  t.true(bad.body.error.message.includes('body.timezone'), bad.text);

  const missing = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId: `ws-${randomUUID()}`, timezone: 'UTC' },
  });
  isError(t, missing, 400, 'invalid_request');
  t.true(missing.body.error.message.includes('name'), missing.text);
  isError(
    t,
    await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      body: { externalWorkspaceId: '', name: 'Empty', timezone: 'UTC' },
    }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      idempotencyKey: null,
      body: { externalWorkspaceId: `ws-${randomUUID()}`, name: 'No key', timezone: 'UTC' },
    }),
    400,
    'idempotency_key_required',
  );

  const idempotencyKey = randomUUID();
  const body = { externalWorkspaceId: `ws-${randomUUID()}`, name: 'Once', timezone: 'UTC' };
  const first = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey, body });
  const replay = await service.request('POST', '/api/v1/workspaces', { auth: app.apiKey, idempotencyKey, body });
  t.is(first.status, 201, first.text);
  t.is(replay.status, 201, replay.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.is(replay.body.id, first.body.id);
});

test('op 7 workspaces: the list holds the application’s workspaces only, newest first, paged', async (t) => {
  const app = await service.application();
  const other = await service.application();
  await createWorkspace(other.apiKey);
  const created = [];
  for (let i = 0; i < 3; i += 1) created.push((await createWorkspace(app.apiKey)).id);

  const list = await service.request('GET', '/api/v1/workspaces', { auth: app.apiKey });
  t.is(list.status, 200, list.text);
  t.is(list.body.nextCursor, null);
  t.deepEqual(
    list.body.data.map((w: { id: string }) => w.id),
    [...created].reverse(),
  );
  const { items } = await walk('/api/v1/workspaces', app.apiKey, 2);
  t.deepEqual(
    items.map((w) => w.id),
    [...created].reverse(),
  );
});

test('op 8 workspaces: get one; another application’s is 403 workspace_forbidden, an unknown id 404', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await workspaceWithUser(service);
  const one = await service.request('GET', `/api/v1/workspaces/${setup.workspace.id}`, { auth: setup.apiKey });
  t.is(one.status, 200, one.text);
  t.deepEqual(one.body, setup.workspace);

  isError(
    t,
    await service.request('GET', `/api/v1/workspaces/${other.workspace.id}`, { auth: setup.apiKey }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/workspaces/${randomUUID()}`, { auth: setup.apiKey }),
    404,
    'not_found',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/workspaces/not-a-uuid', { auth: setup.apiKey }),
    400,
    'invalid_request',
  );
});

test('workspace headers: a key reaches only its application’s workspaces, by id or external id', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await workspaceWithUser(service);

  isError(
    t,
    await service.request('GET', '/api/v1/users', { auth: setup.apiKey, workspaceId: other.workspace.id }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/users', { auth: setup.apiKey, workspaceId: randomUUID() }),
    403,
    'workspace_forbidden',
  );
  const byExternal = await service.request('GET', '/api/v1/users', {
    auth: setup.apiKey,
    headers: { 'x-service-external-workspace-id': setup.workspace.externalWorkspaceId },
  });
  t.is(byExternal.status, 200, byExternal.text);
  t.deepEqual(
    byExternal.body.data.map((u: { id: string }) => u.id),
    [setup.user.id],
  );
  isError(
    t,
    await service.request('GET', '/api/v1/users', {
      auth: setup.apiKey,
      headers: { 'x-service-external-workspace-id': other.workspace.externalWorkspaceId },
    }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/users', {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      headers: { 'x-service-external-workspace-id': setup.workspace.externalWorkspaceId },
    }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/users', { auth: setup.apiKey, workspaceId: 'not-a-uuid' }),
    400,
    'invalid_request',
  );
  isError(t, await service.request('GET', '/api/v1/users', { auth: setup.apiKey }), 400, 'invalid_request');
});

test('op 9 workspaces: PATCH renames, canonicalises the timezone and merges limits and policy partially', async (t) => {
  const app = await service.application();
  const workspace = await createWorkspace(app.apiKey);
  const path = `/api/v1/workspaces/${workspace.id}`;

  const renamed = await service.request('PATCH', path, { auth: app.apiKey, body: { name: 'Renamed' } });
  t.is(renamed.status, 200, renamed.text);
  t.is(renamed.body.name, 'Renamed');
  t.is(renamed.body.timezone, 'UTC');
  t.true(Date.parse(renamed.body.updatedAt) >= Date.parse(renamed.body.createdAt));

  const zoned = await service.request('PATCH', path, { auth: app.apiKey, body: { timezone: 'america/new_york' } });
  t.is(zoned.status, 200, zoned.text);
  t.is(zoned.body.timezone, 'America/New_York');
  t.is(zoned.body.name, 'Renamed');

  const limited = await service.request('PATCH', path, { auth: app.apiKey, body: { limits: { devicesPerUser: 2 } } });
  t.is(limited.status, 200, limited.text);
  t.deepEqual(limited.body.limits, { concurrentCalls: 50, devicesPerUser: 2 });
  const limitedAgain = await service.request('PATCH', path, {
    auth: app.apiKey,
    body: { limits: { concurrentCalls: 7 } },
  });
  t.deepEqual(limitedAgain.body.limits, { concurrentCalls: 7, devicesPerUser: 2 });

  const policy = await service.request('PATCH', path, {
    auth: app.apiKey,
    body: { destinationPolicy: { blockedPrefixes: ['+1900'] } },
  });
  t.is(policy.status, 200, policy.text);
  t.deepEqual(policy.body.destinationPolicy, { allowedPrefixes: [], blockedPrefixes: ['+1900'] });

  const read = await service.request('GET', path, { auth: app.apiKey });
  t.deepEqual(read.body, policy.body);

  const bad = await service.request('PATCH', path, { auth: app.apiKey, body: { timezone: 'Nowhere/Land' } });
  isError(t, bad, 400, 'invalid_request');
  t.true(bad.body.error.message.includes('body.timezone'), bad.text);
  isError(t, await service.request('PATCH', path, { auth: app.apiKey, body: {} }), 400, 'invalid_request');
  isError(
    t,
    await service.request('PATCH', path, { auth: app.apiKey, body: { limits: { devicesPerUser: 0 } } }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('PATCH', path, { auth: app.apiKey, body: { externalWorkspaceId: 'changed' } }),
    400,
    'invalid_request',
  );
  t.deepEqual((await service.request('GET', path, { auth: app.apiKey })).body, policy.body);

  const other = await service.application();
  isError(
    t,
    await service.request('PATCH', path, { auth: other.apiKey, body: { name: 'Hijacked' } }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('PATCH', `/api/v1/workspaces/${randomUUID()}`, { auth: app.apiKey, body: { name: 'X' } }),
    404,
    'not_found',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Operation 10: workspace keys

test('op 10 workspace keys: a workspace key holds only verify:send and is not an application key', async (t) => {
  const setup = await workspaceWithUser(service);
  const verifier = await keyOf(setup.applicationId, allScopes);
  const answer = await service.request('POST', `/api/v1/workspaces/${setup.workspace.id}/keys`, {
    auth: verifier,
    body: { name: 'verification' },
  });
  t.is(answer.status, 201, answer.text);
  const { key, apiKey } = answer.body;
  t.regex(apiKey, /^sbw_[A-Za-z0-9_-]{43}$/);
  t.deepEqual(key.scopes, ['verify:send']);
  t.is(key.workspaceId, setup.workspace.id);
  t.is(key.name, 'verification');
  t.true(apiKey.startsWith(key.prefix));

  // Authenticated and authorized for verifications (the body, without a channel, is what is refused), refused for
  // key-only operations.
  isError(
    t,
    await service.request('POST', '/api/v1/verifications', { auth: apiKey, body: { to: '+33612345678' } }),
    400,
    'invalid_request',
  );
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: apiKey }), 403, 'application_key_required');
  isError(
    t,
    await mintSession(apiKey, setup.workspace.externalWorkspaceId, 'alice', []),
    403,
    'application_key_required',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/members', { auth: apiKey, workspaceId: setup.workspace.id }),
    403,
    'forbidden',
  );

  // The application's key list shows it, without its secret.
  const keys = await service.request('GET', '/api/v1/application/keys', { auth: setup.apiKey });
  t.false(keys.text.includes(apiKey));
  t.truthy(keys.body.data.find((k: { id: string }) => k.id === key.id));

  // Revoked like any key, by a key holding its verify:send.
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${key.id}`, { auth: verifier });
  t.is(revoked.status, 200, revoked.text);
  isError(
    t,
    await service.request('POST', '/api/v1/verifications', { auth: apiKey, body: { to: '+33612345678' } }),
    401,
    'unauthorized',
  );

  const other = await workspaceWithUser(service);
  isError(
    t,
    await service.request('POST', `/api/v1/workspaces/${other.workspace.id}/keys`, { auth: verifier }),
    403,
    'workspace_forbidden',
  );
  const userTok = await userToken(setup.apiKey, setup.workspace.externalWorkspaceId, []);
  isError(
    t,
    await service.request('POST', `/api/v1/workspaces/${setup.workspace.id}/keys`, { auth: userTok }),
    403,
    'application_key_required',
  );
});

test('op 10 and 5 workspace keys: only a credential holding verify:send issues or revokes one', async (t) => {
  const setup = await workspaceWithUser(service);
  const path = `/api/v1/workspaces/${setup.workspace.id}/keys`;
  // The application's first key has the default scopes: every one but verify:send.
  const refused = await service.request('POST', path, { auth: setup.apiKey, body: { name: 'verification' } });
  isError(t, refused, 403, 'insufficient_scope');
  t.regex(refused.body.error.message, /verify:send/);
  t.deepEqual(
    (await listKeys(setup.apiKey)).filter((k) => k.workspaceId !== null),
    [],
  );

  // A key holding verify:send (as `switchboard applications keys create --scopes ...,verify:send` issues it) may.
  const verifier = await keyOf(setup.applicationId, allScopes);
  const issued = await service.request('POST', path, { auth: verifier, body: { name: 'verification' } });
  t.is(issued.status, 201, issued.text);
  t.deepEqual(issued.body.key.scopes, ['verify:send']);
  const onlyVerify = await keyOf(setup.applicationId, ['verify:send']);
  const second = await service.request('POST', path, { auth: onlyVerify });
  t.is(second.status, 201, second.text);

  // Revoking a workspace key takes verify:send too.
  const revokeRefused = await service.request('DELETE', `/api/v1/application/keys/${issued.body.key.id}`, {
    auth: setup.apiKey,
  });
  isError(t, revokeRefused, 403, 'insufficient_scope');
  t.regex(revokeRefused.body.error.message, /verify:send/);
  isError(
    t,
    await service.request('POST', '/api/v1/verifications', { auth: issued.body.apiKey, body: { to: '+33612345678' } }),
    400,
    'invalid_request',
  );
  for (const [auth, key] of [
    [verifier, issued],
    [onlyVerify, second],
  ] as const) {
    const revoked = await service.request('DELETE', `/api/v1/application/keys/${key.body.key.id}`, { auth });
    t.is(revoked.status, 200, revoked.text);
    isError(
      t,
      await service.request('POST', '/api/v1/verifications', { auth: key.body.apiKey, body: { to: '+33612345678' } }),
      401,
      'unauthorized',
    );
  }
});
