/**
 * Whose idempotency keys are whose (docs/foundation.md, "Idempotency"), through HTTP against PostgreSQL: an
 * application's keys and its legacy secret share one key space, each user's and member's tokens have their own, so a
 * browser's key never blocks the backend's request nor tells it anything, and the backend's retry after a key
 * rotation still replays. Answers stored before the scopes were split (under the application's scope, fingerprinted
 * with the key's id) still replay to their sender. A scope past its most answers is 409 `limit_exceeded`, others not.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { fingerprint } from '../../api/idempotency.ts';
import { resetLegacySecret } from '../../core/identity/applications.ts';
import { type Answer, memberToken, serviceForFile, userToken, workspaceWithUser } from '../helpers/service.ts';

const service = serviceForFile(test);
/** A service whose scopes keep at most 3 answers. */
const limited = serviceForFile(test, { IDEMPOTENCY_ANSWERS_PER_SCOPE: '3' });

const replayed = (answer: Answer) => answer.headers.get('idempotent-replayed') === 'true';

test("a user's idempotency key neither blocks the backend's request with it nor another user's", async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(service, setup);
  const bob = await userToken(service, setup, ['devices:*'], 'bob');
  const key = `order-1001-${randomUUID()}`;
  const register = (auth: string) =>
    service.request('POST', '/api/v1/devices', { auth, idempotencyKey: key, body: { kind: 'browser' } });

  const first = await register(alice);
  t.is(first.status, 201, first.text);
  // The backend's POST with that key and another body runs as its own: no 422, no replay of alice's answer.
  const backend = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    idempotencyKey: key,
    body: { externalUserId: 'carol', displayName: 'Carol' },
  });
  t.is(backend.status, 201, backend.text);
  t.false(replayed(backend));
  t.is(backend.body.externalUserId, 'carol');
  // Alice's retry still replays hers; bob's request with the same key is his own.
  const again = await register(alice);
  t.is(again.status, 201, again.text);
  t.true(replayed(again));
  t.is(again.body.id, first.body.id);
  const bobs = await register(bob);
  t.is(bobs.status, 201, bobs.text);
  t.false(replayed(bobs));
  t.not(bobs.body.id, first.body.id);
  // A member's token has its own key space too.
  const { token: member } = await memberToken(service, setup);
  const members = await register(member);
  t.is(members.status, 201, members.text);
  t.false(replayed(members));
  t.not(members.body.id, first.body.id);
  // The backend's retry replays the backend's answer.
  const backendAgain = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    idempotencyKey: key,
    body: { externalUserId: 'carol', displayName: 'Carol' },
  });
  t.true(replayed(backendAgain));
  t.is(backendAgain.body.id, backend.body.id);
});

test('a user cannot learn whether the backend used a key: the same request as the backend runs as their own', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(service, setup);
  const key = `order-2002-${randomUUID()}`;
  const backend = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    idempotencyKey: key,
    body: { externalUserId: 'dave', displayName: 'Dave' },
  });
  t.is(backend.status, 201, backend.text);
  // Alice's token with the key the backend used: the answer is what it would be had the backend never used it.
  const mine = await service.request('POST', '/api/v1/devices', {
    auth: alice,
    idempotencyKey: key,
    body: { kind: 'browser' },
  });
  t.is(mine.status, 201, mine.text);
  t.false(replayed(mine));
  const again = await service.request('POST', '/api/v1/devices', {
    auth: alice,
    idempotencyKey: key,
    body: { kind: 'browser' },
  });
  t.true(replayed(again));
  t.is(again.body.id, mine.body.id);
});

test("the application's keys share its key space: a retry after a key rotation replays, the legacy secret's too", async (t) => {
  const setup = await workspaceWithUser(service);
  const key = `rotate-${randomUUID()}`;
  const body = { externalUserId: `erin-${randomUUID()}`, displayName: 'Erin' };
  const create = (headers: { auth: string; headers?: Record<string, string> }) =>
    service.request('POST', '/api/v1/users', {
      ...headers,
      workspaceId: setup.workspace.id,
      idempotencyKey: key,
      body,
    });
  const first = await create({ auth: setup.apiKey });
  t.is(first.status, 201, first.text);
  // The backend rotates its key (same scopes), revokes the old one, and retries the request whose answer it lost.
  const rotated = await service.request('POST', '/api/v1/application/keys', { auth: setup.apiKey, body: {} });
  t.is(rotated.status, 201, rotated.text);
  const listed = await service.request('GET', '/api/v1/application/keys', { auth: rotated.body.apiKey });
  const oldKeyId = listed.body.data
    .map((row: { id: string }) => row.id)
    .find((id: string) => id !== rotated.body.key.id);
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${oldKeyId}`, {
    auth: rotated.body.apiKey,
  });
  t.is(revoked.status, 200, revoked.text);
  const retried = await create({ auth: rotated.body.apiKey });
  t.is(retried.status, 201, retried.text);
  t.true(replayed(retried));
  t.is(retried.body.id, first.body.id);
  // The legacy secret is the same application: the same request replays.
  const secret = await resetLegacySecret(service.pool, setup.applicationId);
  const viaSecret = await create({ auth: secret, headers: { 'x-service-application': setup.applicationId } });
  t.is(viaSecret.status, 201, viaSecret.text);
  t.true(replayed(viaSecret));
  t.is(viaSecret.body.id, first.body.id);
});

/** A record as the version before the split stored it: the application's scope, the answer in clear text. */
async function storeOldRecord(applicationId: string, key: string, credential: string, request: object, body: object) {
  const print = fingerprint({ credential, workspaceHeaders: [undefined, undefined], ...request } as Parameters<
    typeof fingerprint
  >[0]);
  await service.pool.query(
    `INSERT INTO idempotency_records (scope, key, fingerprint, status_code, response_body, sealed)
     VALUES ($1, $2, $3, 201, $4, false)`,
    [`application:${applicationId}`, key, print, JSON.stringify(body)],
  );
}

test('answers stored before the scopes were split still replay to their sender, and to no one else', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(service, setup);
  const aliceClaims = JSON.parse(Buffer.from(alice.split('.')[1] as string, 'base64url').toString('utf8'));
  const userKey = `old-user-${randomUUID()}`;
  const stored = { id: randomUUID(), kind: 'browser', note: 'stored before the upgrade' };
  const devices = { method: 'POST', url: '/api/v1/devices', body: { kind: 'browser' } };
  await storeOldRecord(setup.applicationId, userKey, `user_token:${aliceClaims.sub}:devices:*`, devices, stored);
  const retried = await service.request('POST', '/api/v1/devices', {
    auth: alice,
    idempotencyKey: userKey,
    body: { kind: 'browser' },
  });
  t.true(replayed(retried), retried.text);
  t.deepEqual(retried.body, stored);
  // Another user with that key runs their own request: alice's old record is not theirs.
  const bob = await userToken(service, setup, ['devices:*'], 'bob');
  const bobs = await service.request('POST', '/api/v1/devices', {
    auth: bob,
    idempotencyKey: userKey,
    body: { kind: 'browser' },
  });
  t.is(bobs.status, 201, bobs.text);
  t.false(replayed(bobs));

  // The backend's own old record (fingerprinted with its key's id) replays to it, and to its rotated key.
  const keys = await service.request('GET', '/api/v1/application/keys', { auth: setup.apiKey });
  const keyId = keys.body.data[0].id as string;
  const backendKey = `old-key-${randomUUID()}`;
  const workspaces = {
    method: 'POST',
    url: '/api/v1/workspaces',
    body: { externalWorkspaceId: 'ws-old', name: 'Old', timezone: 'UTC' },
  };
  const answer = { id: randomUUID(), note: 'stored before the upgrade' };
  await storeOldRecord(setup.applicationId, backendKey, `key:${keyId}`, workspaces, answer);
  const backendRetry = await service.request('POST', '/api/v1/workspaces', {
    auth: setup.apiKey,
    idempotencyKey: backendKey,
    body: workspaces.body,
  });
  t.true(replayed(backendRetry), backendRetry.text);
  t.deepEqual(backendRetry.body, answer);
  // Alice with that key runs her own request.
  const mine = await service.request('POST', '/api/v1/devices', {
    auth: alice,
    idempotencyKey: backendKey,
    body: { kind: 'browser' },
  });
  t.is(mine.status, 201, mine.text);
  t.false(replayed(mine));
});

test("a scope past IDEMPOTENCY_ANSWERS_PER_SCOPE is 409 limit_exceeded; a user's scope and replays are not", async (t) => {
  // The workspace and alice are the application's first two answers; alice's token the third.
  const setup = await workspaceWithUser(limited);
  const mint = () =>
    limited.request('POST', '/api/v1/sessions', {
      auth: setup.apiKey,
      idempotencyKey: 'third',
      body: {
        externalWorkspaceId: setup.workspace.externalWorkspaceId,
        externalUserId: 'alice',
        scopes: ['devices:*'],
      },
    });
  const session = await mint();
  t.is(session.status, 201, session.text);
  const refused = await limited.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { externalUserId: 'carol', displayName: 'Carol' },
  });
  t.is(refused.status, 409, refused.text);
  t.deepEqual(Object.keys(refused.body), ['error']);
  t.is(refused.body.error.code, 'limit_exceeded');
  t.regex(refused.body.error.message, /at most 3/);
  const users = await limited.pool.query('SELECT 1 FROM app_users WHERE workspace_id = $1', [setup.workspace.id]);
  t.is(users.rowCount, 1, 'carol was not created');
  // The backend's retry of an answered request still replays; alice's token has a scope of its own.
  const again = await mint();
  t.true(replayed(again));
  t.is(again.body.token, session.body.token);
  const device = await limited.request('POST', '/api/v1/devices', {
    auth: session.body.token,
    body: { kind: 'browser' },
  });
  t.is(device.status, 201, device.text);
});
