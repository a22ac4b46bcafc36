/**
 * Operations 11-14 through HTTP: application users (create, list, get, delete) within a workspace.
 *
 * One service for the whole file. Every test makes its own application, so tests run concurrently without seeing each
 * other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { identityHelpers, identityServiceForFile } from '../../helpers/identity.ts';
import { workspaceWithUser, isError } from '../../helpers/service.ts';

const { service } = identityServiceForFile(test);
const { createWorkspace, mintSession, walk } = identityHelpers(() => service);

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
