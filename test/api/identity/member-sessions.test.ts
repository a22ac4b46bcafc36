/**
 * Operation 2 through HTTP: member sessions (POST /api/v1/member-sessions), the member login (an OIDC access token)
 * they take and the member token they mint.
 *
 * One service for the whole file, with member logins configured against a local OIDC issuer
 * (test/helpers/oidc-issuer.ts). Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { generateKeyPair } from 'jose';
import { ConfigError, loadConfig } from '../../../core/config.ts';
import { createMember } from '../../../core/identity/members.ts';
import {
  fifteenMinutes,
  flipSignature,
  identityHelpers,
  isNumberList,
  newEmail,
  identityServiceForFile,
} from '../../helpers/identity.ts';
import { startService, workspaceWithUser, isError } from '../../helpers/service.ts';

const { service, oidc } = identityServiceForFile(test, { logins: true });
const { createWorkspace, userToken, listNumbers, addMember, login, memberSession, memberToken } = identityHelpers(
  () => service,
  () => oidc,
);

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
  t.true(oidc.discoveryRequests >= 1);
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
  t.is(loadConfig({ OIDC_ISSUER: oidc.issuer }).oidc?.allowUnverifiedEmail, false);
  t.throws(() => loadConfig({ OIDC_ALLOW_UNVERIFIED_EMAIL: 'yes' }), {
    instanceOf: ConfigError,
    message: /OIDC_ALLOW_UNVERIFIED_EMAIL/,
  });

  const relaxed = await startService(
    { OIDC_ISSUER: oidc.issuer, OIDC_AUDIENCE: oidc.audience, OIDC_ALLOW_UNVERIFIED_EMAIL: 'true' },
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
