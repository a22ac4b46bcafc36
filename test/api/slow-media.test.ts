/**
 * No tenant slows the others through a slow network peer (core/held-connections.ts; docs/foundation.md, Database):
 * ten MMS sends with one user token, their media on a host that takes the connection and never answers, hold no
 * database connection while they wait, so with a pool of 4 the ten fetches wait at once, and another application's
 * request and a carrier's call are answered meanwhile, while every fetch still waits. Before, each send fetched inside
 * its transaction: at most the pool's size waited at once, and everything else queued behind them for up to 10 s.
 */
import type { ServerResponse } from 'node:http';
import test from 'ava';
import { sippFailed } from '../helpers/engine-service.ts';
import { httpsServer } from '../helpers/https-server.ts';
import { newNumber, textingSetup } from '../helpers/messages.ts';
import { addSippCarrier, numberRunning } from '../helpers/phone-lines.ts';
import { startService, type TestService, userToken, workspaceWithUser } from '../helpers/service.ts';
import { runSipp } from '../helpers/sipp.ts';
import { until } from '../helpers/until.ts';

let service: TestService;
/** The media host: every request is held, never answered. */
const waiting: ServerResponse[] = [];
let silent: Awaited<ReturnType<typeof httpsServer>>;

test.before(async () => {
  silent = await httpsServer((_request, _body, response) => void waiting.push(response));
  service = await startService({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', DATABASE_POOL_SIZE: '4' }, ['api', 'engine']);
  await addSippCarrier(service);
});

test.after.always(async () => {
  for (const response of waiting) response.destroy();
  await service?.close();
  await silent?.close();
});

test('ten MMS sends waiting on a silent media host hold no connection: other requests and calls go on', async (t) => {
  const setup = await workspaceWithUser(service);
  const { number } = await textingSetup(service.pool, {
    capabilities: ['voice', 'sms', 'mms'],
    approved: true,
    mmsUrl: 'https://carrier.example/mms',
    workspace: {
      id: setup.workspace.id,
      applicationId: setup.applicationId,
      externalWorkspaceId: setup.workspace.externalWorkspaceId,
    },
  });
  const token = await userToken(service, setup, ['messages:*']);
  // Another application, and a number of another workspace whose plan hangs up, made before the sends.
  const other = await workspaceWithUser(service);
  const line = await numberRunning(t, service, { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } });
  const sends = Array.from({ length: 10 }, (_, index) =>
    service.request('POST', '/api/v1/messages', {
      auth: token,
      body: { from: number.e164, to: newNumber(), text: `photo ${index}`, mediaUrls: [silent.url(`/${index}.png`)] },
    }),
  );
  // A pool of 4 connections: ten fetches can wait at once only when none of them holds one.
  await until('all ten fetches waiting on the host at once', () => (waiting.length === 10 ? true : undefined));

  // Another application's request, and a carrier's call to another workspace's number, while they all wait.
  const listed = await service.request('GET', '/api/v1/workspaces', { auth: other.apiKey });
  t.is(listed.status, 200, listed.text);
  const call = await runSipp({ scenario: 'answered', sipPort: service.sipPort as number, dialed: line.e164.slice(1) });
  t.is(call.code, 0, sippFailed(call));
  t.true(
    waiting.every((response) => !response.writableEnded && !response.destroyed),
    'every fetch was still waiting while the others were answered',
  );

  // The host never answers: each send is refused once its fetch times out (10 s), nothing written.
  for (const response of waiting) response.destroy();
  for (const sent of await Promise.all(sends)) {
    t.is(sent.status, 422, sent.text);
    t.is(sent.body.error.code, 'invalid_media');
  }
});
