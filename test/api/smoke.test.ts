import test from 'ava';
import { serviceForFile, workspaceWithUser } from '../helpers/service.ts';

const service = serviceForFile(test, {}, ['api', 'engine', 'operator']);

test('a user token minted by the application key reads its own workspace users list only with scope', async (t) => {
  const setup = await workspaceWithUser(service);
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['calls:*'] },
  });
  t.is(session.status, 201, session.text);
  t.deepEqual(session.body.scopes, ['calls:*']);
  const refused = await service.request('GET', '/api/v1/users', { auth: session.body.token });
  t.is(refused.status, 403);
  t.is(refused.body.error.code, 'application_key_required');
});
