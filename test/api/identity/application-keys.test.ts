/**
 * Operations 3-5 through HTTP: application keys (create, list, revoke now or at a moment ahead, rotation, scopes held)
 * and the legacy application secret (header x-service-application).
 *
 * One service for the whole file. Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import test from 'ava';
import { resetLegacySecret } from '../../../core/identity/applications.ts';
import { allScopes, defaultKeyScopes } from '../../../core/scopes.ts';
import { identityHelpers, identityServiceForFile } from '../../helpers/identity.ts';
import { type Answer, workspaceWithUser, isError } from '../../helpers/service.ts';

const { service } = identityServiceForFile(test);
const { createWorkspace, createKey, keyOf, createKeyAnswer, listKeys, mintSession, walk } = identityHelpers(
  () => service,
);

// ---------------------------------------------------------------------------------------------------------------
// Operations 3-5: application keys

test('op 3 application keys: a new key is shown once, works at once, and the list never shows a secret', async (t) => {
  const setup = await workspaceWithUser(service);
  const answer = await createKeyAnswer(setup.apiKey, { name: 'backend 2' });
  t.is(answer.status, 201, answer.text);
  const { key, apiKey } = answer.body;
  t.regex(apiKey, /^sbk_[A-Za-z0-9_-]{43}$/);
  t.is(key.name, 'backend 2');
  t.true(apiKey.startsWith(key.prefix));
  t.true(key.prefix.length < apiKey.length);
  t.is(key.workspaceId, null);
  t.is(key.revokedAt, null);
  t.is(key.lastUsedAt, null);
  t.false(Number.isNaN(Date.parse(key.createdAt)));
  t.false('apiKey' in key);
  // Without scopes a key gets those of the key that issued it.
  t.deepEqual([...key.scopes].sort(), [...defaultKeyScopes].sort());

  const works = await service.request('GET', '/api/v1/workspaces', { auth: apiKey });
  t.is(works.status, 200, works.text);
  t.deepEqual(
    works.body.data.map((w: { id: string }) => w.id),
    [setup.workspace.id],
  );

  const list = await service.request('GET', '/api/v1/application/keys', { auth: apiKey });
  t.is(list.status, 200, list.text);
  t.false(list.text.includes(apiKey));
  t.false(list.text.includes(setup.apiKey));
  t.notRegex(list.text, /sbk_[A-Za-z0-9_-]{43}/);
  t.is(list.body.data.length, 2);
  for (const item of list.body.data) {
    t.deepEqual(Object.keys(item).sort(), [
      'createdAt',
      'id',
      'lastUsedAt',
      'name',
      'prefix',
      'revokedAt',
      'scopes',
      'workspaceId',
    ]);
  }
  const listed = list.body.data.find((k: { id: string }) => k.id === key.id);
  t.is(listed.prefix, key.prefix);
});

test('op 3 application keys: a key cannot issue a key with scopes it does not hold', async (t) => {
  const setup = await workspaceWithUser(service);
  const narrow = await createKey(setup.apiKey, { scopes: ['calls:*'] });
  isError(t, await createKeyAnswer(narrow.apiKey, { scopes: ['numbers:*'] }), 403, 'insufficient_scope');
  isError(t, await createKeyAnswer(setup.apiKey, { scopes: ['verify:send'] }), 403, 'insufficient_scope');
  const inherited = await createKeyAnswer(narrow.apiKey);
  t.is(inherited.status, 201, inherited.text);
  t.deepEqual(inherited.body.key.scopes, ['calls:*']);
  isError(t, await createKeyAnswer(setup.apiKey, { scopes: ['nonsense'] }), 400, 'invalid_request');
  isError(t, await createKeyAnswer(setup.apiKey, { secret: 'mine' }), 400, 'invalid_request');
});

test('op 3-5 application keys: rotation — the new key works before the old one is revoked, then only the new', async (t) => {
  const setup = await workspaceWithUser(service);
  const old = setup.apiKey;
  const fresh = await createKey(old, { name: 'rotated' });
  // Both work during the overlap.
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: old })).status, 200);
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: fresh.apiKey })).status, 200);

  const oldId = (await listKeys(fresh.apiKey)).find((k) => k.id !== fresh.key.id)?.id as string;
  const before = Date.now();
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${oldId}`, { auth: fresh.apiKey });
  t.is(revoked.status, 200, revoked.text);
  t.is(revoked.body.id, oldId);
  t.true(Date.parse(revoked.body.revokedAt) <= Date.now(), revoked.body.revokedAt);
  t.true(Date.parse(revoked.body.revokedAt) >= before - 5000, revoked.body.revokedAt);

  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: old }), 401, 'unauthorized');
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: fresh.apiKey })).status, 200);
  const listed = (await listKeys(fresh.apiKey)).find((k) => k.id === oldId);
  t.is(listed?.revokedAt, revoked.body.revokedAt);
});

test('op 5 application keys: revokeAt ahead keeps the key working until then; a later revocation at now ends it at once', async (t) => {
  const setup = await workspaceWithUser(service);
  const kept = await createKey(setup.apiKey, { name: 'overlap' });
  const revokeAt = new Date(Date.now() + 60 * 60_000).toISOString();
  const scheduled = await service.request('DELETE', `/api/v1/application/keys/${kept.key.id}`, {
    auth: setup.apiKey,
    body: { revokeAt },
  });
  t.is(scheduled.status, 200, scheduled.text);
  t.is(Date.parse(scheduled.body.revokedAt), Date.parse(revokeAt));
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: kept.apiKey })).status, 200);
  t.is((await mintSession(kept.apiKey, setup.workspace.externalWorkspaceId, 'alice', [])).status, 201);

  // A later date never extends a revocation.
  const later = await service.request('DELETE', `/api/v1/application/keys/${kept.key.id}`, {
    auth: setup.apiKey,
    body: { revokeAt: new Date(Date.now() + 2 * 60 * 60_000).toISOString() },
  });
  t.is(later.status, 200, later.text);
  t.is(Date.parse(later.body.revokedAt), Date.parse(revokeAt));

  // Revoking now brings it forward.
  const now = await service.request('DELETE', `/api/v1/application/keys/${kept.key.id}`, { auth: setup.apiKey });
  t.is(now.status, 200, now.text);
  t.true(Date.parse(now.body.revokedAt) <= Date.now());
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: kept.apiKey }), 401, 'unauthorized');

  // A date in the past means now; more than 30 days ahead is refused.
  const past = await createKey(setup.apiKey);
  const inThePast = await service.request('DELETE', `/api/v1/application/keys/${past.key.id}`, {
    auth: setup.apiKey,
    body: { revokeAt: '2001-01-01T00:00:00Z' },
  });
  t.is(inThePast.status, 200, inThePast.text);
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: past.apiKey }), 401, 'unauthorized');
  const far = await createKey(setup.apiKey);
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${far.key.id}`, {
      auth: setup.apiKey,
      body: { revokeAt: new Date(Date.now() + 31 * 86_400_000).toISOString() },
    }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${far.key.id}`, {
      auth: setup.apiKey,
      body: { revokeAt: 'tomorrow' },
    }),
    400,
    'invalid_request',
  );
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: far.apiKey })).status, 200);
});

test('op 5 application keys: a key revoked a moment ahead works until revokedAt and is refused from then on', async (t) => {
  const setup = await workspaceWithUser(service);
  const soon = await createKey(setup.apiKey, { name: 'soon' });
  const revokeAt = new Date(Date.now() + 2000).toISOString();
  const answer = await service.request('DELETE', `/api/v1/application/keys/${soon.key.id}`, {
    auth: setup.apiKey,
    body: { revokeAt },
  });
  t.is(answer.status, 200, answer.text);
  t.is(answer.body.revokedAt, revokeAt);
  const revokedAt = Date.parse(answer.body.revokedAt);

  // The scheduled moment can only be observed by asking again after it; poll briefly until the key is refused.
  let refused: Answer | undefined;
  const deadline = revokedAt + 10_000;
  while (refused === undefined && Date.now() < deadline) {
    const asked = Date.now();
    const attempt = await service.request('GET', '/api/v1/workspaces', { auth: soon.apiKey });
    if (attempt.status === 200) {
      t.true(asked < revokedAt, 'the key worked after its revokedAt');
      await delay(50);
    } else {
      t.true(Date.now() >= revokedAt, 'the key was refused before its revokedAt');
      refused = attempt;
    }
  }
  t.truthy(refused, 'the key was still accepted 10 s after revokedAt');
  if (refused) isError(t, refused, 401, 'unauthorized');
});

test('op 5 application keys: another application’s key id or an unknown id is 404 not_found', async (t) => {
  const mine = await service.application();
  const theirs = await service.application();
  const theirKey = await createKey(theirs.apiKey);
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${theirKey.key.id}`, { auth: mine.apiKey }),
    404,
    'not_found',
  );
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: theirKey.apiKey })).status, 200);
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${randomUUID()}`, { auth: mine.apiKey }),
    404,
    'not_found',
  );
  isError(
    t,
    await service.request('DELETE', '/api/v1/application/keys/not-a-uuid', { auth: mine.apiKey }),
    400,
    'invalid_request',
  );
  // Nor does the list show another application's keys.
  const ids = (await listKeys(mine.apiKey)).map((k) => k.id);
  t.false(ids.includes(theirKey.key.id));
  t.is(ids.length, 1);
});

test('op 4 application keys: paging with limit=1 walks every key once, newest first', async (t) => {
  const app = await service.application();
  const created: string[] = [];
  for (let i = 0; i < 4; i += 1) created.push((await createKey(app.apiKey, { name: `key ${i}` })).key.id);
  const { items, pages } = await walk('/api/v1/application/keys', app.apiKey, 1);
  const ids = items.map((k) => k.id);
  t.is(ids.length, 5);
  t.is(new Set(ids).size, 5);
  t.is(pages, 5);
  t.deepEqual(ids.slice(0, 4), [...created].reverse());

  const all = await service.request('GET', '/api/v1/application/keys?limit=200', { auth: app.apiKey });
  t.is(all.body.nextCursor, null);
  t.deepEqual(
    all.body.data.map((k: { id: string }) => k.id),
    ids,
  );
  isError(
    t,
    await service.request('GET', '/api/v1/application/keys?cursor=garbage', { auth: app.apiKey }),
    400,
    'invalid_cursor',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/application/keys?limit=0', { auth: app.apiKey }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/application/keys?limit=201', { auth: app.apiKey }),
    400,
    'invalid_request',
  );
  // Another application cannot use this list's cursor.
  const first = await service.request('GET', '/api/v1/application/keys?limit=1', { auth: app.apiKey });
  const other = await service.application();
  isError(
    t,
    await service.request('GET', `/api/v1/application/keys?cursor=${encodeURIComponent(first.body.nextCursor)}`, {
      auth: other.apiKey,
    }),
    400,
    'invalid_cursor',
  );
});

test('op 3 application keys: a new key holds at most the issuer’s scopes, asked for or by default; the refusal names what is lacking', async (t) => {
  const app = await service.application();
  const narrow = await createKey(app.apiKey, { scopes: ['calls:*', 'numbers:*'] });
  const beyond = await createKeyAnswer(narrow.apiKey, { scopes: ['calls:*', 'routing:*', 'webhooks:*'] });
  isError(t, beyond, 403, 'insufficient_scope');
  t.regex(beyond.body.error.message, /routing:\*, webhooks:\*/);
  t.notRegex(beyond.body.error.message, /calls:\*/);
  const verify = await createKeyAnswer(app.apiKey, { scopes: ['verify:send'] });
  isError(t, verify, 403, 'insufficient_scope');
  t.regex(verify.body.error.message, /verify:send/);
  // Left out, the scopes are the issuer's own, never more.
  const inherited = await createKey(narrow.apiKey);
  t.deepEqual([...inherited.key.scopes].sort(), ['calls:*', 'numbers:*']);
  const none = await createKey(narrow.apiKey, { scopes: [] });
  t.deepEqual(none.key.scopes, []);
  // A key holding verify:send may pass it on (to an application key that may then issue workspace keys).
  const verifier = await keyOf(app.applicationId, allScopes);
  const passed = await createKey(verifier, { scopes: ['verify:send'] });
  t.deepEqual(passed.key.scopes, ['verify:send']);
  // Refusals issued nothing: the first key, narrow, inherited, none, verifier and passed.
  t.is((await listKeys(app.apiKey)).length, 6);
});

test('op 5 application keys: a key revokes only keys whose scopes it holds (itself included), else 403 insufficient_scope', async (t) => {
  const app = await service.application();
  const narrow = await createKey(app.apiKey, { scopes: ['calls:*'] });
  const fullId = (await listKeys(app.apiKey)).find((k) => k.id !== narrow.key.id)?.id as string;

  // calls:* alone cannot revoke the application's full key: refused, naming what it lacks, and the key still works.
  const refused = await service.request('DELETE', `/api/v1/application/keys/${fullId}`, { auth: narrow.apiKey });
  isError(t, refused, 403, 'insufficient_scope');
  t.regex(refused.body.error.message, /numbers:\*/);
  t.regex(refused.body.error.message, /webhooks:\*/);
  t.false(refused.body.error.message.includes('calls:*'), refused.body.error.message);
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: app.apiKey })).status, 200);
  t.is((await listKeys(app.apiKey)).find((k) => k.id === fullId)?.revokedAt, null);
  // Nor later, with an overlap.
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${fullId}`, {
      auth: narrow.apiKey,
      body: { revokeAt: new Date(Date.now() + 60_000).toISOString() },
    }),
    403,
    'insufficient_scope',
  );
  t.is((await listKeys(app.apiKey)).find((k) => k.id === fullId)?.revokedAt, null);

  // Keys within its scopes it may revoke: as narrow, narrower, and itself.
  const sibling = await createKey(app.apiKey, { scopes: ['calls:*'] });
  const empty = await createKey(app.apiKey, { scopes: [] });
  for (const key of [sibling, empty]) {
    const revoked = await service.request('DELETE', `/api/v1/application/keys/${key.key.id}`, { auth: narrow.apiKey });
    t.is(revoked.status, 200, revoked.text);
    isError(t, await service.request('GET', '/api/v1/workspaces', { auth: key.apiKey }), 401, 'unauthorized');
  }
  const itself = await service.request('DELETE', `/api/v1/application/keys/${narrow.key.id}`, { auth: narrow.apiKey });
  t.is(itself.status, 200, itself.text);
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: narrow.apiKey }), 401, 'unauthorized');

  // The full key revokes narrower keys; another application's key is still 404, not 403 (its scopes stay unsaid).
  const other = await createKey(app.apiKey, { scopes: ['numbers:*'] });
  t.is((await service.request('DELETE', `/api/v1/application/keys/${other.key.id}`, { auth: app.apiKey })).status, 200);
  const foreign = await service.application(undefined, allScopes);
  const foreignKey = await createKey(foreign.apiKey, { scopes: ['calls:*'] });
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${foreignKey.key.id}`, { auth: app.apiKey }),
    404,
    'not_found',
  );
});

test('legacy application secret: it holds the default scopes, so it neither issues nor revokes workspace keys', async (t) => {
  const setup = await workspaceWithUser(service);
  const secret = await resetLegacySecret(service.pool, setup.applicationId);
  const headers = { 'x-service-application': setup.applicationId };
  const path = `/api/v1/workspaces/${setup.workspace.id}/keys`;
  isError(t, await service.request('POST', path, { auth: secret, headers }), 403, 'insufficient_scope');
  const workspaceKey = await service.request('POST', path, { auth: await keyOf(setup.applicationId, allScopes) });
  t.is(workspaceKey.status, 201, workspaceKey.text);
  isError(
    t,
    await service.request('DELETE', `/api/v1/application/keys/${workspaceKey.body.key.id}`, { auth: secret, headers }),
    403,
    'insufficient_scope',
  );
  // Within the default scopes it issues and revokes application keys.
  const issued = await service.request('POST', '/api/v1/application/keys', { auth: secret, headers });
  t.is(issued.status, 201, issued.text);
  t.deepEqual([...issued.body.key.scopes].sort(), [...defaultKeyScopes].sort());
  isError(
    t,
    await service.request('POST', '/api/v1/application/keys', {
      auth: secret,
      headers,
      body: { scopes: ['verify:send'] },
    }),
    403,
    'insufficient_scope',
  );
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${issued.body.key.id}`, {
    auth: secret,
    headers,
  });
  t.is(revoked.status, 200, revoked.text);
});

test('op 4 application keys: any application key lists every key of its application (never a secret)', async (t) => {
  const app = await service.application(undefined, allScopes);
  const workspace = await createWorkspace(app.apiKey);
  const issued = await service.request('POST', `/api/v1/workspaces/${workspace.id}/keys`, { auth: app.apiKey });
  t.is(issued.status, 201, issued.text);
  const narrow = await createKey(app.apiKey, { scopes: [] });
  const list = await service.request('GET', '/api/v1/application/keys', { auth: narrow.apiKey });
  t.is(list.status, 200, list.text);
  t.is(list.body.data.length, 3);
  t.false(list.text.includes(issued.body.apiKey));
  t.false(list.text.includes(app.apiKey));
  t.false(list.text.includes(narrow.apiKey));
});

// ---------------------------------------------------------------------------------------------------------------
// The legacy application secret (header x-service-application)

test('legacy application secret: Bearer secret with x-service-application acts as the application key', async (t) => {
  const setup = await workspaceWithUser(service);
  const secret = await resetLegacySecret(service.pool, setup.applicationId);
  const headers = { 'x-service-application': setup.applicationId };

  const list = await service.request('GET', '/api/v1/workspaces', { auth: secret, headers });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((w: { id: string }) => w.id),
    [setup.workspace.id],
  );
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: secret,
    headers,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['calls:*'] },
  });
  t.is(session.status, 201, session.text);

  const other = await service.application();
  isError(
    t,
    await service.request('GET', '/api/v1/workspaces', {
      auth: secret,
      headers: { 'x-service-application': other.applicationId },
    }),
    401,
    'unauthorized',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/workspaces', {
      auth: secret,
      headers: { 'x-service-application': 'no-such-application' },
    }),
    401,
    'unauthorized',
  );
  // The secret only works with the header, and a key does not work as a secret.
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: secret }), 401, 'unauthorized');
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: setup.apiKey, headers }), 401, 'unauthorized');

  // Resetting replaces the secret.
  const replaced = await resetLegacySecret(service.pool, setup.applicationId);
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: secret, headers }), 401, 'unauthorized');
  t.is((await service.request('GET', '/api/v1/workspaces', { auth: replaced, headers })).status, 200);
});
