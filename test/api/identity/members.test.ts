/**
 * Operations 15-16 through HTTP: members (list, get), with an application key and the workspace header or with a
 * member token.
 *
 * One service for the whole file, with member logins configured against a local OIDC issuer
 * (test/helpers/oidc-issuer.ts). Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { identityHelpers, newEmail, identityServiceForFile } from '../../helpers/identity.ts';
import { workspaceWithUser, isError } from '../../helpers/service.ts';

const { service, oidc } = identityServiceForFile(test, { logins: true });
const { createWorkspace, addMember, memberToken, walk } = identityHelpers(
  () => service,
  () => oidc,
);

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
