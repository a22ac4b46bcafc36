/**
 * Identity through HTTP: operations 1-16 (sessions, member sessions, application keys, workspaces, workspace keys,
 * application users, members) and the credentials of section 5 (application key, legacy application secret,
 * workspace key, user token, member token, member login).
 *
 * One service for the whole file, with member logins configured against a local OIDC issuer served here. Every test
 * makes its own application, so tests run concurrently without seeing each other's data.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { exportJWK, type GenerateKeyPairResult, generateKeyPair, SignJWT } from 'jose';
import { mintToken } from '../api/tokens.ts';
import { ConfigError, loadConfig } from '../core/config.ts';
import { issueKey, resetLegacySecret } from '../core/identity/applications.ts';
import { createMember } from '../core/identity/members.ts';
import { allScopes, defaultKeyScopes, type Scope } from '../core/scopes.ts';
import { loadSigningKeys } from '../core/service-secret.ts';
import { type Answer, startService, type TestService, workspaceWithUser, isError } from './helpers/service.ts';

const audience = 'switchboard-test-audience';
const loginKid = 'login-key-1';
const fifteenMinutes = 15 * 60_000;

let service: TestService;
let oidcServer: Server;
let issuer: string;
let loginKeys: GenerateKeyPairResult;
let discoveryRequests = 0;

test.before(async () => {
  loginKeys = await generateKeyPair('ES256');
  const publicJwk = { ...(await exportJWK(loginKeys.publicKey)), kid: loginKid, alg: 'ES256', use: 'sig' };
  oidcServer = createServer((request, response) => {
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.url === '/.well-known/openid-configuration') {
      discoveryRequests += 1;
      send(200, { issuer, jwks_uri: `${issuer}/jwks` });
    } else if (request.url === '/jwks') {
      send(200, { keys: [publicJwk] });
    } else {
      send(404, { error: 'not found' });
    }
  });
  await new Promise<void>((resolve) => oidcServer.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(oidcServer.address() as AddressInfo).port}`;
  service = await startService({ OIDC_ISSUER: issuer, OIDC_AUDIENCE: audience });
});

test.after.always(async () => {
  await service?.close();
  await new Promise<void>((resolve) => (oidcServer ? oidcServer.close(() => resolve()) : resolve()));
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers

async function createWorkspace(apiKey: string, externalWorkspaceId = `ws-${randomUUID()}`, timezone = 'UTC') {
  const answer = await service.request('POST', '/api/v1/workspaces', {
    auth: apiKey,
    body: { externalWorkspaceId, name: `Workspace ${externalWorkspaceId}`, timezone },
  });
  if (answer.status !== 201) throw new Error(`workspace: ${answer.status} ${answer.text}`);
  return answer.body as { id: string; externalWorkspaceId: string; name: string; timezone: string };
}

async function createKey(apiKey: string, body: { name?: string; scopes?: string[] } = {}) {
  const answer = await service.request('POST', '/api/v1/application/keys', { auth: apiKey, body });
  if (answer.status !== 201) throw new Error(`key: ${answer.status} ${answer.text}`);
  return answer.body as { key: { id: string; prefix: string; scopes: string[] }; apiKey: string };
}

/** A key holding `scopes`, issued the way `switchboard applications keys create --scopes` issues it. */
async function keyOf(applicationId: string, scopes: readonly Scope[]) {
  return (await issueKey(service.pool, { applicationId, name: 'created by switchboard applications keys', scopes }))
    .secret;
}

function createKeyAnswer(auth: string, body: Record<string, unknown> = {}) {
  return service.request('POST', '/api/v1/application/keys', { auth, body });
}

async function listKeys(apiKey: string) {
  const answer = await service.request('GET', '/api/v1/application/keys', { auth: apiKey });
  if (answer.status !== 200) throw new Error(`keys: ${answer.status} ${answer.text}`);
  return answer.body.data as { id: string; scopes: string[]; revokedAt: string | null; workspaceId: string | null }[];
}

function mintSession(apiKey: string, externalWorkspaceId: string, externalUserId: string, scopes: string[]) {
  return service.request('POST', '/api/v1/sessions', {
    auth: apiKey,
    body: { externalWorkspaceId, externalUserId, scopes },
  });
}

async function userToken(apiKey: string, externalWorkspaceId: string, scopes: string[], externalUserId = 'alice') {
  const answer = await mintSession(apiKey, externalWorkspaceId, externalUserId, scopes);
  if (answer.status !== 201) throw new Error(`session: ${answer.status} ${answer.text}`);
  return answer.body.token as string;
}

/** A request that only an authenticated credential holding `numbers:*` gets past (the workspace's numbers). */
function listNumbers(auth: string) {
  return service.request('GET', '/api/v1/numbers', { auth });
}

/** The answer of a credential that got past authentication and authorization: the (empty) list of numbers. */
function isNumberList(t: ExecutionContext, answer: Answer) {
  t.is(answer.status, 200, answer.text);
  t.deepEqual(answer.body, { data: [], nextCursor: null });
}

function newEmail(name = 'member') {
  return `${name}-${randomUUID()}@example.com`;
}

function addMember(workspaceId: string, email: string, scopes: Scope[] = ['calls:*', 'routing:*'], name?: string) {
  return createMember(service.pool, { workspaceId, email, scopes, ...(name ? { name } : {}) });
}

interface LoginOptions {
  key?: GenerateKeyPairResult['privateKey'];
  kid?: string;
  audience?: string;
  issuer?: string;
  /** Expiry in seconds since the epoch. */
  exp?: number;
  claims?: Record<string, unknown>;
}

/** A login (OIDC access token) as the configured issuer would sign it, with a verified email unless claims say. */
async function login(email: string, options: LoginOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ email, email_verified: true, ...options.claims })
    .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? loginKid })
    .setSubject(`subject-${email}`)
    .setIssuer(options.issuer ?? issuer)
    .setAudience(options.audience ?? audience)
    .setIssuedAt(now)
    .setExpirationTime(options.exp ?? now + 300)
    .sign(options.key ?? loginKeys.privateKey);
}

function memberSession(loginToken: string, body?: { scopes?: string[] }, workspaceId?: string) {
  return service.request('POST', '/api/v1/member-sessions', {
    auth: loginToken,
    ...(body ? { body } : {}),
    ...(workspaceId ? { workspaceId } : {}),
  });
}

async function memberToken(workspaceId: string, scopes?: Scope[]) {
  const email = newEmail();
  const member = await addMember(workspaceId, email, scopes);
  const answer = await memberSession(await login(email), undefined, workspaceId);
  if (answer.status !== 201) throw new Error(`member session: ${answer.status} ${answer.text}`);
  return { member, token: answer.body.token as string };
}

/** Every item of a list, following `nextCursor` with the given page size. */
async function walk(path: string, auth: string, limit: number, workspaceId?: string) {
  const items: { id: string }[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const page: Answer = await service.request('GET', `${path}?${query}`, {
      auth,
      ...(workspaceId ? { workspaceId } : {}),
    });
    if (page.status !== 200) throw new Error(`${path}: ${page.status} ${page.text}`);
    if (page.body.data.length > limit) throw new Error(`${path}: page larger than ${limit}`);
    items.push(...page.body.data);
    cursor = page.body.nextCursor;
    pages += 1;
    if (pages > 1000) throw new Error(`${path}: the cursor never ends`);
  } while (cursor !== null);
  return { items, pages };
}

function flipSignature(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const first = signature[0] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${first}${signature.slice(1)}`;
}

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

// ---------------------------------------------------------------------------------------------------------------
// Operation 2: POST /api/v1/member-sessions

test('op 2 member sessions: a valid login of a member mints a 15-minute member token with the member’s scopes', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail('bob');
  const member = await addMember(setup.workspace.id, email, ['calls:*', 'routing:*'], 'Bob');
  const before = Date.now();
  const answer = await memberSession(await login(email), undefined, setup.workspace.id);
  const after = Date.now();
  t.is(answer.status, 201, answer.text);
  t.is(answer.body.memberId, member.id);
  t.is(answer.body.workspaceId, setup.workspace.id);
  t.is(answer.body.externalWorkspaceId, setup.workspace.externalWorkspaceId);
  t.is(answer.body.applicationId, setup.applicationId);
  t.is(answer.body.externalUserId, null);
  t.deepEqual([...answer.body.scopes].sort(), ['calls:*', 'routing:*']);
  const expiresAt = Date.parse(answer.body.expiresAt);
  t.true(expiresAt >= before - 1000 + fifteenMinutes && expiresAt <= after + fifteenMinutes, answer.body.expiresAt);

  const token = answer.body.token as string;
  const list = await service.request('GET', '/api/v1/members', { auth: token });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((m: { id: string }) => m.id),
    [member.id],
  );
  const one = await service.request('GET', `/api/v1/members/${member.id}`, { auth: token });
  t.is(one.status, 200, one.text);
  t.is(one.body.email, email);
  t.is(one.body.name, 'Bob');
  // The OIDC discovery document was read to find the key set.
  t.true(discoveryRequests >= 1);
});

test('op 2 member sessions: the login email matches the member case-insensitively', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail('carol');
  const member = await addMember(setup.workspace.id, email);
  const answer = await memberSession(await login(email.toUpperCase()), undefined, setup.workspace.id);
  t.is(answer.status, 201, answer.text);
  t.is(answer.body.memberId, member.id);
});

test('op 2 member sessions: requested scopes narrow the token; scopes beyond the member’s are 403 insufficient_scope', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail();
  await addMember(setup.workspace.id, email, ['calls:*', 'routing:*']);
  const narrowed = await memberSession(await login(email), { scopes: ['calls:*'] }, setup.workspace.id);
  t.is(narrowed.status, 201, narrowed.text);
  t.deepEqual(narrowed.body.scopes, ['calls:*']);
  isError(
    t,
    await memberSession(await login(email), { scopes: ['numbers:*'] }, setup.workspace.id),
    403,
    'insufficient_scope',
  );
  isError(
    t,
    await memberSession(await login(email), { scopes: ['calls:*', 'calls:supervise'] }, setup.workspace.id),
    403,
    'insufficient_scope',
  );
});

test('op 2 member sessions: the member token carries its scopes (numbers:* gates GET /numbers)', async (t) => {
  const setup = await workspaceWithUser(service);
  const withNumbers = await memberToken(setup.workspace.id, ['numbers:*']);
  const without = await memberToken(setup.workspace.id, ['calls:*']);
  isNumberList(t, await listNumbers(withNumbers.token));
  isError(t, await listNumbers(without.token), 403, 'insufficient_scope');
});

test('op 2 member sessions: logins signed by an unknown key, for another audience or issuer, or expired get 401', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail();
  await addMember(setup.workspace.id, email);
  const stranger = await generateKeyPair('ES256');
  const now = Math.floor(Date.now() / 1000);

  const cases: [string, string][] = [
    ['unknown key id', await login(email, { key: stranger.privateKey, kid: 'someone-elses-key' })],
    ['known key id, wrong key', await login(email, { key: stranger.privateKey })],
    ['wrong audience', await login(email, { audience: 'another-api' })],
    ['expired', await login(email, { exp: now - 60 })],
    ['email not verified', await login(email, { claims: { email_verified: false } })],
    ['no email claim', await login('', {})],
    ['tampered signature', flipSignature(await login(email))],
  ];
  for (const [name, token] of cases) {
    const answer = await memberSession(token, undefined, setup.workspace.id);
    t.is(answer.status, 401, `${name}: ${answer.text}`);
    t.is(answer.body?.error?.code, 'unauthorized', name);
  }
  // Another issuer is not the configured one: refused before any key is looked up.
  isError(
    t,
    await memberSession(await login(email, { issuer: 'https://elsewhere.example' }), undefined, setup.workspace.id),
    401,
    'unauthorized',
  );
  // The same login, valid, works: the refusals above were about the token alone.
  t.is((await memberSession(await login(email), undefined, setup.workspace.id)).status, 201);
});

test('op 2 member sessions: a valid login that is no member gets 403 forbidden', async (t) => {
  const setup = await workspaceWithUser(service);
  isError(t, await memberSession(await login(newEmail('stranger')), undefined, setup.workspace.id), 403, 'forbidden');
  // Nor of the workspace it names.
  const email = newEmail();
  await addMember(setup.workspace.id, email);
  const elsewhere = await createWorkspace(setup.apiKey);
  isError(t, await memberSession(await login(email), undefined, elsewhere.id), 403, 'forbidden');
  isError(t, await memberSession(await login(email), undefined, randomUUID()), 403, 'workspace_forbidden');
});

test('op 2 member sessions: a member of two workspaces must name one (400 without the header, 201 with it)', async (t) => {
  const first = await workspaceWithUser(service);
  const second = await workspaceWithUser(service);
  const email = newEmail('dave');
  const inFirst = await addMember(first.workspace.id, email);
  const inSecond = await addMember(second.workspace.id, email);

  isError(t, await memberSession(await login(email)), 400, 'invalid_request');
  const chosen = await memberSession(await login(email), undefined, second.workspace.id);
  t.is(chosen.status, 201, chosen.text);
  t.is(chosen.body.memberId, inSecond.id);
  t.is(chosen.body.workspaceId, second.workspace.id);
  t.is(chosen.body.applicationId, second.applicationId);
  const other = await memberSession(await login(email), undefined, first.workspace.id);
  t.is(other.status, 201, other.text);
  t.is(other.body.memberId, inFirst.id);
});

test('op 2 member sessions: credentials are kept apart (member token, login, key and user token)', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail();
  await addMember(setup.workspace.id, email);
  const loginToken = await login(email);
  const { token } = await memberToken(setup.workspace.id);

  // A member token is not a key.
  isError(
    t,
    await service.request('GET', '/api/v1/users', { auth: token, workspaceId: setup.workspace.id }),
    403,
    'application_key_required',
  );
  isError(t, await service.request('GET', '/api/v1/users', { auth: token }), 403, 'application_key_required');
  // Minting a member token takes the login itself, not a member token, key or user token.
  isError(t, await memberSession(token), 403, 'forbidden');
  isError(t, await memberSession(setup.apiKey), 403, 'forbidden');
  isError(
    t,
    await memberSession(await userToken(setup.apiKey, setup.workspace.externalWorkspaceId, [])),
    403,
    'forbidden',
  );
  // The login itself reaches nothing but member sessions.
  isError(t, await service.request('GET', '/api/v1/members', { auth: loginToken }), 403, 'forbidden');
  isError(t, await service.request('GET', '/api/v1/workspaces', { auth: loginToken }), 403, 'application_key_required');
});

test('op 2 member sessions: a login needs email_verified: true (false, missing or not the boolean true is 401)', async (t) => {
  const setup = await workspaceWithUser(service);
  const email = newEmail();
  await addMember(setup.workspace.id, email);
  const cases: [string, Record<string, unknown>][] = [
    ['false', { email_verified: false }],
    ['missing', { email_verified: undefined }],
    ['the string "true"', { email_verified: 'true' }],
    ['the number 1', { email_verified: 1 }],
  ];
  for (const [name, claims] of cases) {
    const answer = await memberSession(await login(email, { claims }), undefined, setup.workspace.id);
    isError(t, answer, 401, 'unauthorized', name);
    t.regex(answer.body.error.message, /email_verified/, name);
  }
  t.is((await memberSession(await login(email), undefined, setup.workspace.id)).status, 201);
});

test('op 2 member sessions: OIDC_ALLOW_UNVERIFIED_EMAIL=true accepts a login whose email is not said to be verified', async (t) => {
  t.is(loadConfig({ OIDC_ISSUER: issuer }).oidc?.allowUnverifiedEmail, false);
  t.throws(() => loadConfig({ OIDC_ALLOW_UNVERIFIED_EMAIL: 'yes' }), {
    instanceOf: ConfigError,
    message: /OIDC_ALLOW_UNVERIFIED_EMAIL/,
  });

  const relaxed = await startService(
    { OIDC_ISSUER: issuer, OIDC_AUDIENCE: audience, OIDC_ALLOW_UNVERIFIED_EMAIL: 'true' },
    ['api'],
  );
  t.teardown(() => relaxed.close());
  const setup = await workspaceWithUser(relaxed);
  const email = newEmail();
  const member = await createMember(relaxed.pool, { workspaceId: setup.workspace.id, email, scopes: ['calls:*'] });
  for (const claims of [{ email_verified: false }, { email_verified: undefined }, {}]) {
    const answer = await relaxed.request('POST', '/api/v1/member-sessions', {
      auth: await login(email, { claims }),
      workspaceId: setup.workspace.id,
    });
    t.is(answer.status, 201, `${JSON.stringify(claims)}: ${answer.text}`);
    t.is(answer.body.memberId, member.id);
  }
  // Relaxed is not open: the signature, audience and membership are still checked.
  const stranger = await generateKeyPair('ES256');
  const forged = await login(email, { key: stranger.privateKey, claims: { email_verified: false } });
  isError(
    t,
    await relaxed.request('POST', '/api/v1/member-sessions', { auth: forged, workspaceId: setup.workspace.id }),
    401,
    'unauthorized',
  );
  isError(
    t,
    await relaxed.request('POST', '/api/v1/member-sessions', {
      auth: await login(newEmail('stranger'), { claims: { email_verified: false } }),
      workspaceId: setup.workspace.id,
    }),
    403,
    'forbidden',
  );
});

test('op 2 member sessions: the member is matched in the workspace the login names, never in another application', async (t) => {
  const first = await workspaceWithUser(service);
  const second = await workspaceWithUser(service);
  t.not(first.applicationId, second.applicationId);
  const email = newEmail('erin');
  const inFirst = await addMember(first.workspace.id, email, ['calls:*'], 'Erin at A');
  const inSecond = await addMember(second.workspace.id, email, ['routing:*'], 'Erin at B');

  // Asking for A's workspace gets A's member, with A's member's scopes, and B's are out of reach.
  const atFirst = await memberSession(await login(email), undefined, first.workspace.id);
  t.is(atFirst.status, 201, atFirst.text);
  t.is(atFirst.body.memberId, inFirst.id);
  t.is(atFirst.body.applicationId, first.applicationId);
  t.is(atFirst.body.workspaceId, first.workspace.id);
  t.is(atFirst.body.externalWorkspaceId, first.workspace.externalWorkspaceId);
  t.deepEqual(atFirst.body.scopes, ['calls:*']);
  isError(
    t,
    await memberSession(await login(email), { scopes: ['routing:*'] }, first.workspace.id),
    403,
    'insufficient_scope',
  );
  const token = atFirst.body.token as string;
  const members = await service.request('GET', '/api/v1/members', { auth: token });
  t.is(members.status, 200, members.text);
  t.deepEqual(
    members.body.data.map((m: { id: string }) => m.id),
    [inFirst.id],
  );
  isError(t, await service.request('GET', `/api/v1/members/${inSecond.id}`, { auth: token }), 404, 'not_found');
  isError(
    t,
    await service.request('GET', '/api/v1/members', { auth: token, workspaceId: second.workspace.id }),
    403,
    'workspace_forbidden',
  );

  // Asking for B's workspace gets B's member (the same person is a member there too), never A's.
  const atSecond = await memberSession(await login(email), undefined, second.workspace.id);
  t.is(atSecond.status, 201, atSecond.text);
  t.is(atSecond.body.memberId, inSecond.id);
  t.is(atSecond.body.applicationId, second.applicationId);

  // A member of B alone is not found by asking for A's workspace, nor by asking for no workspace at all.
  const onlyInSecond = newEmail('frank');
  await addMember(second.workspace.id, onlyInSecond);
  isError(t, await memberSession(await login(onlyInSecond), undefined, first.workspace.id), 403, 'forbidden');
  const unnamed = await memberSession(await login(onlyInSecond));
  isError(t, unnamed, 400, 'invalid_request');
  t.regex(unnamed.body.error.message, /x-service-workspace-id/);
  // An external workspace id means nothing without an application: refused too.
  isError(
    t,
    await service.request('POST', '/api/v1/member-sessions', {
      auth: await login(onlyInSecond),
      headers: { 'x-service-external-workspace-id': second.workspace.externalWorkspaceId },
    }),
    400,
    'invalid_request',
  );
});

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
    501,
    'not_implemented',
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

// ---------------------------------------------------------------------------------------------------------------
// Operations 6-10: workspaces and workspace keys

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

  // Authenticated and authorized for verifications (not built yet: 501), refused for key-only operations.
  isError(
    t,
    await service.request('POST', '/api/v1/verifications', { auth: apiKey, body: { to: '+33612345678' } }),
    501,
    'not_implemented',
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

// ---------------------------------------------------------------------------------------------------------------
// Operations 11-14: application users

test('op 11 users: create answers the user; a cell must be E.164', async (t) => {
  const setup = await workspaceWithUser(service);
  const answer = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { externalUserId: 'bob', displayName: 'Bob', cell: '+33612345678' },
  });
  t.is(answer.status, 201, answer.text);
  t.is(answer.body.externalUserId, 'bob');
  t.is(answer.body.displayName, 'Bob');
  t.is(answer.body.cell, '+33612345678');
  t.is(answer.body.workspaceId, setup.workspace.id);
  t.is(answer.body.removedAt, null);
  t.false(Number.isNaN(Date.parse(answer.body.createdAt)));
  t.is(setup.user.cell, null);

  for (const cell of ['0612345678', '+0612345678', '+33 6 12 34 56 78', '+1234567890123456', 'call me']) {
    const bad = await service.request('POST', '/api/v1/users', {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      body: { externalUserId: `bad-${randomUUID()}`, displayName: 'Bad', cell },
    });
    isError(t, bad, 400, 'invalid_request');
    t.true(bad.body.error.message.includes('body.cell'), `${cell}: ${bad.text}`);
  }
  const missing = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { externalUserId: 'nameless' },
  });
  isError(t, missing, 400, 'invalid_request');
  t.true(missing.body.error.message.includes('displayName'), missing.text);
  isError(
    t,
    await service.request('POST', '/api/v1/users', {
      auth: setup.apiKey,
      body: { externalUserId: 'nowhere', displayName: 'Nowhere' },
    }),
    400,
    'invalid_request',
  );
});

test('op 11 users: a duplicate externalUserId is 409 already_exists, never 500, even when concurrent', async (t) => {
  const setup = await workspaceWithUser(service);
  isError(
    t,
    await service.request('POST', '/api/v1/users', {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      body: { externalUserId: 'alice', displayName: 'Alice again' },
    }),
    409,
    'already_exists',
  );
  const answers = await Promise.all(
    Array.from({ length: 5 }, (_, i) =>
      service.request('POST', '/api/v1/users', {
        auth: setup.apiKey,
        workspaceId: setup.workspace.id,
        body: { externalUserId: 'erin', displayName: `Erin ${i}` },
      }),
    ),
  );
  t.deepEqual(answers.map((a) => a.status).sort(), [201, 409, 409, 409, 409]);
  // The same id in another workspace is another user.
  const elsewhere = await createWorkspace(setup.apiKey);
  const there = await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: elsewhere.id,
    body: { externalUserId: 'alice', displayName: 'Other Alice' },
  });
  t.is(there.status, 201, there.text);
  t.not(there.body.id, setup.user.id);
});

test('op 12-13 users: list and get within the workspace only', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await workspaceWithUser(service);
  const ids = [setup.user.id];
  for (const name of ['bob', 'carol']) {
    const created = await service.request('POST', '/api/v1/users', {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      body: { externalUserId: name, displayName: name },
    });
    ids.push(created.body.id);
  }
  const list = await service.request('GET', '/api/v1/users', { auth: setup.apiKey, workspaceId: setup.workspace.id });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((u: { id: string }) => u.id),
    [...ids].reverse(),
  );
  t.is(list.body.nextCursor, null);
  const { items } = await walk('/api/v1/users', setup.apiKey, 1, setup.workspace.id);
  t.deepEqual(
    items.map((u) => u.id),
    [...ids].reverse(),
  );

  const one = await service.request('GET', `/api/v1/users/${setup.user.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(one.status, 200, one.text);
  t.deepEqual(one.body, setup.user);

  // Another workspace's user is not found through this workspace, and not reachable through theirs.
  const sibling = await createWorkspace(setup.apiKey);
  isError(
    t,
    await service.request('GET', `/api/v1/users/${setup.user.id}`, { auth: setup.apiKey, workspaceId: sibling.id }),
    404,
    'not_found',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/users/${other.user.id}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
    }),
    404,
    'not_found',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/users/${other.user.id}`, {
      auth: setup.apiKey,
      workspaceId: other.workspace.id,
    }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/users/${randomUUID()}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
    }),
    404,
    'not_found',
  );
});

test('op 14 users: delete removes the user; get is then 404 and the externalUserId can be used again', async (t) => {
  const setup = await workspaceWithUser(service);
  const path = `/api/v1/users/${setup.user.id}`;
  const ws = { auth: setup.apiKey, workspaceId: setup.workspace.id };

  const removed = await service.request('DELETE', path, ws);
  t.is(removed.status, 200, removed.text);
  t.is(removed.body.id, setup.user.id);
  t.false(Number.isNaN(Date.parse(removed.body.removedAt)));

  isError(t, await service.request('GET', path, ws), 404, 'not_found');
  isError(t, await service.request('DELETE', path, ws), 404, 'not_found');
  const list = await service.request('GET', '/api/v1/users', ws);
  t.deepEqual(list.body.data, []);

  const again = await service.request('POST', '/api/v1/users', {
    ...ws,
    body: { externalUserId: 'alice', displayName: 'Alice II' },
  });
  t.is(again.status, 201, again.text);
  t.not(again.body.id, setup.user.id);
  const session = await mintSession(setup.apiKey, setup.workspace.externalWorkspaceId, 'alice', []);
  t.is(session.status, 201, session.text);
  t.is(session.body.userId, again.body.id);

  // Another application cannot delete this workspace's users.
  const other = await service.application();
  isError(
    t,
    await service.request('DELETE', `/api/v1/users/${again.body.id}`, {
      auth: other.apiKey,
      workspaceId: setup.workspace.id,
    }),
    403,
    'workspace_forbidden',
  );
  t.is((await service.request('GET', `/api/v1/users/${again.body.id}`, ws)).status, 200);
});

// ---------------------------------------------------------------------------------------------------------------
// Operations 15-16: members

test('op 15-16 members: list and get with an application key and the workspace header', async (t) => {
  const setup = await workspaceWithUser(service);
  const sibling = await createWorkspace(setup.apiKey);
  const first = await addMember(setup.workspace.id, newEmail('first'), ['calls:*'], 'First');
  const second = await addMember(setup.workspace.id, newEmail('second'), ['routing:*']);
  const elsewhere = await addMember(sibling.id, newEmail('elsewhere'));
  const ws = { auth: setup.apiKey, workspaceId: setup.workspace.id };

  const list = await service.request('GET', '/api/v1/members', ws);
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((m: { id: string }) => m.id),
    [second.id, first.id],
  );
  const { items } = await walk('/api/v1/members', setup.apiKey, 1, setup.workspace.id);
  t.deepEqual(
    items.map((m) => m.id),
    [second.id, first.id],
  );

  const one = await service.request('GET', `/api/v1/members/${first.id}`, ws);
  t.is(one.status, 200, one.text);
  t.deepEqual(one.body, {
    id: first.id,
    workspaceId: setup.workspace.id,
    email: first.email,
    name: 'First',
    scopes: ['calls:*'],
    createdAt: first.created_at.toISOString(),
  });
  const byExternal = await service.request('GET', `/api/v1/members/${first.id}`, {
    auth: setup.apiKey,
    headers: { 'x-service-external-workspace-id': setup.workspace.externalWorkspaceId },
  });
  t.is(byExternal.status, 200, byExternal.text);

  isError(t, await service.request('GET', `/api/v1/members/${elsewhere.id}`, ws), 404, 'not_found');
  isError(t, await service.request('GET', `/api/v1/members/${randomUUID()}`, ws), 404, 'not_found');
  isError(t, await service.request('GET', '/api/v1/members', { auth: setup.apiKey }), 400, 'invalid_request');
  const other = await workspaceWithUser(service);
  isError(
    t,
    await service.request('GET', '/api/v1/members', { auth: other.apiKey, workspaceId: setup.workspace.id }),
    403,
    'workspace_forbidden',
  );
});

test('op 15-16 members: a member token lists and gets its own workspace’s members only', async (t) => {
  const setup = await workspaceWithUser(service);
  const sibling = await createWorkspace(setup.apiKey);
  const colleague = await addMember(setup.workspace.id, newEmail('colleague'));
  const elsewhere = await addMember(sibling.id, newEmail('elsewhere'));
  const { member, token } = await memberToken(setup.workspace.id);

  const list = await service.request('GET', '/api/v1/members', { auth: token });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((m: { id: string }) => m.id),
    [member.id, colleague.id],
  );
  const sameHeader = await service.request('GET', '/api/v1/members', { auth: token, workspaceId: setup.workspace.id });
  t.is(sameHeader.status, 200, sameHeader.text);

  const one = await service.request('GET', `/api/v1/members/${colleague.id}`, { auth: token });
  t.is(one.status, 200, one.text);
  t.is(one.body.email, colleague.email);

  isError(t, await service.request('GET', `/api/v1/members/${elsewhere.id}`, { auth: token }), 404, 'not_found');
  // A token naming another workspace is refused.
  isError(
    t,
    await service.request('GET', '/api/v1/members', { auth: token, workspaceId: sibling.id }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/members/${elsewhere.id}`, { auth: token, workspaceId: sibling.id }),
    403,
    'workspace_forbidden',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/members', {
      auth: token,
      headers: { 'x-service-external-workspace-id': setup.workspace.externalWorkspaceId },
    }),
    400,
    'invalid_request',
  );
});
