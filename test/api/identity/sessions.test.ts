/**
 * Operation 1 through HTTP: user sessions (POST /api/v1/sessions) and the user token they mint, as an application key
 * uses it: scopes, expiry, tampering, revoked keys and removed users.
 *
 * One service for the whole file. Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { mintToken } from '../../../api/tokens.ts';
import { type Scope } from '../../../core/scopes.ts';
import { loadSigningKeys } from '../../../core/service-secret.ts';
import {
  fifteenMinutes,
  flipSignature,
  identityHelpers,
  isNumberList,
  identityServiceForFile,
} from '../../helpers/identity.ts';
import { workspaceWithUser, isError } from '../../helpers/service.ts';

const { service } = identityServiceForFile(test);
const { createKey, createKeyAnswer, mintSession, userToken, listNumbers } = identityHelpers(() => service);

// ---------------------------------------------------------------------------------------------------------------
// Operation 1: POST /api/v1/sessions

test('op 1 sessions: mints a user token for an existing user, lasting 15 minutes, with the requested scopes', async (t) => {
  const setup = await workspaceWithUser(service);
  const before = Date.now();
  const answer = await mintSession(setup.apiKey, setup.workspace.externalWorkspaceId, 'alice', [
    'numbers:*',
    'calls:*',
  ]);
  const after = Date.now();
  t.is(answer.status, 201, answer.text);
  t.is(typeof answer.body.token, 'string');
  t.is(answer.body.applicationId, setup.applicationId);
  t.is(answer.body.workspaceId, setup.workspace.id);
  t.is(answer.body.externalWorkspaceId, setup.workspace.externalWorkspaceId);
  t.is(answer.body.externalUserId, 'alice');
  t.is(answer.body.userId, setup.user.id);
  t.deepEqual(answer.body.scopes, ['numbers:*', 'calls:*']);
  const expiresAt = Date.parse(answer.body.expiresAt);
  t.regex(answer.body.expiresAt, /Z$|[+-]\d\d:\d\d$/);
  t.true(expiresAt >= before - 1000 + fifteenMinutes, answer.body.expiresAt);
  t.true(expiresAt <= after + fifteenMinutes, answer.body.expiresAt);
  isNumberList(t, await listNumbers(answer.body.token));
});

test('op 1 sessions: a token without numbers:* is refused GET /numbers with 403 insufficient_scope; with it 200', async (t) => {
  const setup = await workspaceWithUser(service);
  const ews = setup.workspace.externalWorkspaceId;
  isError(t, await listNumbers(await userToken(setup.apiKey, ews, ['calls:*'])), 403, 'insufficient_scope');
  isError(t, await listNumbers(await userToken(setup.apiKey, ews, [])), 403, 'insufficient_scope');
  isNumberList(t, await listNumbers(await userToken(setup.apiKey, ews, ['numbers:*'])));
});

test('op 1 sessions: scopes are at most the minting key’s (403 insufficient_scope beyond them)', async (t) => {
  const setup = await workspaceWithUser(service);
  const ews = setup.workspace.externalWorkspaceId;
  const narrow = await createKey(setup.apiKey, { name: 'calls only', scopes: ['calls:*'] });
  t.deepEqual(narrow.key.scopes, ['calls:*']);

  isError(t, await mintSession(narrow.apiKey, ews, 'alice', ['numbers:*']), 403, 'insufficient_scope');
  isError(t, await mintSession(narrow.apiKey, ews, 'alice', ['calls:*', 'numbers:*']), 403, 'insufficient_scope');
  const allowed = await mintSession(narrow.apiKey, ews, 'alice', ['calls:*']);
  t.is(allowed.status, 201, allowed.text);
  t.deepEqual(allowed.body.scopes, ['calls:*']);

  // Application keys never hold the workspace keys' verify:send, so they cannot hand it out either.
  isError(t, await mintSession(setup.apiKey, ews, 'alice', ['verify:send']), 403, 'insufficient_scope');
  // An unknown scope is a bad request.
  isError(t, await mintSession(setup.apiKey, ews, 'alice', ['everything']), 400, 'invalid_request');
});

test('op 1 sessions: unknown user, unknown workspace or another application’s workspace is 404 not_found', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await workspaceWithUser(service);
  isError(t, await mintSession(setup.apiKey, setup.workspace.externalWorkspaceId, 'nobody', []), 404, 'not_found');
  isError(t, await mintSession(setup.apiKey, `ws-${randomUUID()}`, 'alice', []), 404, 'not_found');
  isError(t, await mintSession(setup.apiKey, other.workspace.externalWorkspaceId, 'alice', []), 404, 'not_found');
});

test('op 1 sessions: after DELETE /users/{id} new tokens are refused at once, an issued token still works', async (t) => {
  const setup = await workspaceWithUser(service);
  const ews = setup.workspace.externalWorkspaceId;
  const issued = await userToken(setup.apiKey, ews, ['numbers:*']);

  const removed = await service.request('DELETE', `/api/v1/users/${setup.user.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(removed.status, 200, removed.text);

  isError(t, await mintSession(setup.apiKey, ews, 'alice', ['numbers:*']), 404, 'not_found');
  // Issued tokens live to their expiry.
  isNumberList(t, await listNumbers(issued));
});

test('op 1 sessions: a revoked key gets 401 unauthorized at once and cannot mint; issued tokens live on', async (t) => {
  const setup = await workspaceWithUser(service);
  const ews = setup.workspace.externalWorkspaceId;
  const second = await createKey(setup.apiKey, { name: 'to revoke' });
  const issued = await userToken(second.apiKey, ews, ['numbers:*']);

  const revoked = await service.request('DELETE', `/api/v1/application/keys/${second.key.id}`, { auth: setup.apiKey });
  t.is(revoked.status, 200, revoked.text);

  isError(t, await mintSession(second.apiKey, ews, 'alice', ['numbers:*']), 401, 'unauthorized');
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: second.apiKey }), 401, 'unauthorized');
  isNumberList(t, await listNumbers(issued));
  // The other key is untouched.
  t.is((await mintSession(setup.apiKey, ews, 'alice', [])).status, 201);
});

test('op 1 sessions: an expired token gets 401 unauthorized (a fresh one signed the same way works)', async (t) => {
  const setup = await workspaceWithUser(service);
  const keys = await loadSigningKeys(service.pool, undefined);
  const claims = {
    kind: 'user' as const,
    applicationId: setup.applicationId,
    workspaceId: setup.workspace.id,
    externalWorkspaceId: setup.workspace.externalWorkspaceId,
    subjectId: setup.user.id,
    externalUserId: 'alice',
    scopes: ['numbers:*'] as Scope[],
  };
  const fresh = await mintToken(keys.tokens, claims);
  isNumberList(t, await listNumbers(fresh.token));

  const expired = await mintToken(keys.tokens, claims, new Date(Date.now() - 16 * 60_000));
  t.true(expired.expiresAt.getTime() < Date.now());
  isError(t, await listNumbers(expired.token), 401, 'unauthorized');
});

test('op 1 sessions: a tampered token (signature or payload changed) gets 401 unauthorized', async (t) => {
  const setup = await workspaceWithUser(service);
  const token = await userToken(setup.apiKey, setup.workspace.externalWorkspaceId, ['calls:*']);
  isError(t, await listNumbers(flipSignature(token)), 401, 'unauthorized');

  // Granting oneself numbers:* by editing the payload breaks the signature.
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  t.deepEqual(claims.scp, ['calls:*']);
  const forged = Buffer.from(JSON.stringify({ ...claims, scp: ['numbers:*'] })).toString('base64url');
  isError(t, await listNumbers(`${header}.${forged}.${signature}`), 401, 'unauthorized');
  isError(t, await listNumbers('not.a.token'), 401, 'unauthorized');
  isError(t, await service.request('GET', '/api/v1/numbers'), 401, 'unauthorized');
});

test('op 1 sessions: a user token on a key-only operation gets 403 application_key_required', async (t) => {
  const setup = await workspaceWithUser(service);
  const token = await userToken(setup.apiKey, setup.workspace.externalWorkspaceId, ['numbers:*', 'calls:*']);
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: token }), 403, 'application_key_required');
  isError(
    t,
    await service.request('GET', '/api/v1/users', { auth: token, workspaceId: setup.workspace.id }),
    403,
    'application_key_required',
  );
  isError(
    t,
    await mintSession(token, setup.workspace.externalWorkspaceId, 'alice', []),
    403,
    'application_key_required',
  );
  isError(t, await createKeyAnswer(token), 403, 'application_key_required');
  // Members take a key or a member token, not a user token.
  isError(
    t,
    await service.request('GET', '/api/v1/members', { auth: token, workspaceId: setup.workspace.id }),
    403,
    'forbidden',
  );
});
