/**
 * Requests as fetch wrappers and many HTTP clients send them (issue 12, item 8): `content-type: application/json` on
 * every request, with an empty body where there is nothing to send. Where the operation's body may be left out (every
 * DELETE, and the POSTs whose OpenAPI `requestBody.required` is false) an empty body is no body; where it is required
 * the answer is 400 `invalid_request` saying so. The operations come from `GET /openapi.json`, so none is forgotten.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { allScopes } from '../../core/scopes.ts';
import { createMember } from '../../core/identity/members.ts';
import { startOidcIssuer, type OidcIssuer } from '../helpers/oidc-issuer.ts';
import { documentOperations, type DocumentOperation } from '../helpers/request-corpus.ts';
import { type Answer, isError, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;
let issuer: OidcIssuer;

test.before(async () => {
  issuer = await startOidcIssuer();
  service = await startService({ OIDC_ISSUER: issuer.issuer, OIDC_AUDIENCE: issuer.audience }, ['api']);
});
test.after.always(async () => {
  await service?.close();
  await issuer?.close();
});

const json = { 'content-type': 'application/json' };

test('DELETE /users/{id} with content-type application/json and an empty body removes the user', async (t) => {
  const setup = await workspaceWithUser(service);
  const answer = await service.request('DELETE', `/api/v1/users/${setup.user.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    rawBody: '',
    headers: json,
  });
  t.is(answer.status, 200, answer.text);
  t.is(answer.body.id, setup.user.id);
  t.not(answer.body.removedAt, null);
});

test('DELETE /application/keys/{id} with content-type application/json and an empty body revokes the key now', async (t) => {
  const app = await service.application();
  const created = await service.request('POST', '/api/v1/application/keys', {
    auth: app.apiKey,
    rawBody: '',
    headers: json,
  });
  t.is(created.status, 201, created.text);
  const before = Date.now();
  const revoked = await service.request('DELETE', `/api/v1/application/keys/${created.body.key.id}`, {
    auth: app.apiKey,
    rawBody: '',
    headers: json,
  });
  t.is(revoked.status, 200, revoked.text);
  t.true(Date.parse(revoked.body.revokedAt) <= Date.now() && Date.parse(revoked.body.revokedAt) >= before - 1000);
  const refused = await service.request('GET', '/api/v1/application/keys', { auth: created.body.apiKey });
  isError(t, refused, 401, 'unauthorized');
});

test('every operation whose body may be left out takes an empty JSON body as no body; the others say the body is required', async (t) => {
  // Every scope, so that the application key may issue the workspace key the one-time codes take.
  const setup = await workspaceWithUser(service, undefined, allScopes);
  const email = `member-${randomUUID()}@example.com`;
  await createMember(service.pool, { workspaceId: setup.workspace.id, email, scopes: ['routing:*'] });
  const login = await issuer.login(email);
  const documentAnswer = await service.request('GET', '/openapi.json');
  const operations = documentOperations(documentAnswer.body).filter((operation) => operation.implemented);

  // A user token for the operations only user and member tokens take (devices).
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['devices:*'] },
  });
  t.is(session.status, 201, session.text);
  // A workspace key for the operations only it takes (one-time codes).
  const workspaceKey = await service.request('POST', `/api/v1/workspaces/${setup.workspace.id}/keys`, {
    auth: setup.apiKey,
  });
  t.is(workspaceKey.status, 201, workspaceKey.text);
  const credential = (operation: DocumentOperation) => {
    if (operation.security.some((requirement) => 'applicationKey' in requirement)) return setup.apiKey;
    if (operation.security.some((requirement) => 'workspaceKey' in requirement))
      return workspaceKey.body.apiKey as string;
    if (operation.security.some((requirement) => 'userToken' in requirement)) return session.body.token as string;
    return login;
  };
  /** The operation's request with unknown ids in the path (nothing is changed but what a POST creates). */
  const send = (operation: DocumentOperation, body: { rawBody: string; headers: Record<string, string> } | object) =>
    service.request(
      operation.method,
      operation.path.replace(/\{\w+\}/g, () => randomUUID()),
      {
        auth: credential(operation),
        workspaceId: setup.workspace.id,
        ...body,
      },
    );
  const outcome = (answer: Answer) => `${answer.status} ${answer.body?.error?.code ?? ''}`;

  const optional = operations.filter(
    (operation) => operation.method === 'DELETE' || operation.body?.required === false,
  );
  const required = operations.filter((operation) => operation.method !== 'DELETE' && operation.body?.required === true);
  t.true(optional.length >= 15, `operations whose body may be left out: ${optional.length}`);
  t.true(required.length >= 15, `operations whose body is required: ${required.length}`);
  for (const operation of operations.filter((operation) => operation.method === 'DELETE')) {
    t.false(operation.body?.required, `${operation.operationId}: a DELETE's body is optional in the document`);
  }

  for (const operation of optional) {
    const label = `${operation.operationId} (${operation.method} ${operation.path})`;
    const empty = await send(operation, { rawBody: '', headers: json });
    const none = await send(operation, {});
    const emptyObject = await send(operation, { body: {} });
    t.not(empty.body?.error?.code === 'invalid_request' && empty.status === 400, true, `${label}: ${empty.text}`);
    // An empty JSON body is answered as no body at all, and as `{}`: it reaches the same check of the handler.
    t.is(outcome(empty), outcome(none), `${label}: empty ${empty.text} / none ${none.text}`);
    t.is(outcome(empty), outcome(emptyObject), `${label}: empty ${empty.text} / {} ${emptyObject.text}`);
  }

  for (const operation of required) {
    const label = `${operation.operationId} (${operation.method} ${operation.path})`;
    for (const [how, body] of [
      ['an empty JSON body', { rawBody: '', headers: json }],
      ['no body', {}],
    ] as const) {
      const answer = await send(operation, body);
      isError(t, answer, 400, 'invalid_request', `${label}, ${how}`);
      t.regex(answer.body?.error?.message ?? '', /^the body is required/, `${label}, ${how}`);
    }
  }
});
