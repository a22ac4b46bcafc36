/**
 * Application keys are cached per API process; a revocation reaches every process through a change notice
 * delivered when it commits. Two API processes share one database here, as two replicas would.
 */
import test from 'ava';
import { loadConfig } from '../../core/config.ts';
import { startRoles } from '../../app/roles.ts';
import { request, startService } from '../helpers/service.ts';

test('a key revoked through one API process is refused by another that had it cached', async (t) => {
  const first = await startService({}, ['api']);
  const second = await startRoles(
    loadConfig({ DATABASE_URL: first.databaseUrl, PORT: '0', LOG_LEVEL: 'silent' }),
    new Set(['api']),
  );
  t.teardown(async () => {
    await second.close();
    await first.close();
  });
  const app = await first.application();
  const rotated = await first.request('POST', '/api/v1/application/keys', { auth: app.apiKey });
  t.is(rotated.status, 201, rotated.text);

  // The second process has the key cached after using it.
  for (let i = 0; i < 3; i += 1) {
    t.is((await request(second.url, 'GET', '/api/v1/workspaces', { auth: rotated.body.apiKey })).status, 200);
  }
  const revoked = await first.request('DELETE', `/api/v1/application/keys/${rotated.body.key.id}`, {
    auth: rotated.body.apiKey,
  });
  t.is(revoked.status, 200, revoked.text);
  // In the process that revoked it: refused at once.
  t.is((await first.request('GET', '/api/v1/workspaces', { auth: rotated.body.apiKey })).status, 401);

  // The other process hears of it within milliseconds; wait for the notice, bounded.
  const deadline = Date.now() + 5000;
  const refused = async () =>
    (await request(second.url, 'GET', '/api/v1/workspaces', { auth: rotated.body.apiKey })).status;
  let status = await refused();
  while (status !== 401 && Date.now() < deadline) status = await refused();
  t.is(status, 401);
  // The key that was not revoked still works everywhere.
  t.is((await request(second.url, 'GET', '/api/v1/workspaces', { auth: app.apiKey })).status, 200);
});
