/**
 * No credential is stored in clear text (docs/foundation.md, Idempotency and Identity): every kind of credential is
 * made the way users make it (the CLI, the API), then a dump of the whole database (`pg_dump --data-only`) is
 * searched for each one. Answers that showed a credential once are stored for replays sealed, bound to their record,
 * and still replay byte for byte; answers stored in clear text by the previous version are sealed on upgrade.
 *
 * One service (every role) for the file, with member logins against a local OIDC issuer (test/helpers/oidc-issuer.ts).
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { sealClearAnswers } from '../../api/idempotency-upkeep.ts';
import { createMember } from '../../core/identity/members.ts';
import { allScopes } from '../../core/scopes.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { runCli } from '../helpers/cli.ts';
import { dumpDatabase } from '../helpers/database-dump.ts';
import { type OidcIssuer, startOidcIssuer } from '../helpers/oidc-issuer.ts';
import { type Answer, type RequestOptions, startService, type TestService } from '../helpers/service.ts';

let service: TestService;
let issuer: OidcIssuer;

test.before(async () => {
  issuer = await startOidcIssuer('switchboard-secrets-audience');
  service = await startService({ OIDC_ISSUER: issuer.issuer, OIDC_AUDIENCE: issuer.audience });
});

test.after.always(async () => {
  await service?.close();
  await issuer?.close();
});

/** The whole database as `pg_dump --data-only` writes it (or, for a server newer than pg_dump, every row's text). */
async function dump(): Promise<string> {
  const { text } = await dumpDatabase(service.databaseUrl);
  if (!text.includes('idempotency_records')) throw new Error('the dump holds no idempotency records');
  return text;
}

async function cli(args: string[]): Promise<Record<string, string>> {
  const result = await runCli(service.databaseUrl, args);
  if (result.code !== 0) throw new Error(`switchboard ${args.join(' ')}: ${result.code} ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, string>;
}

/** A mutation with a key of its own, so that it can be replayed. */
async function mutation(method: string, path: string, options: RequestOptions, status: number) {
  const idempotencyKey = `secret-${randomUUID()}`;
  const answer = await service.request(method, path, { ...options, idempotencyKey });
  if (answer.status !== status) throw new Error(`${method} ${path}: ${answer.status} ${answer.text}`);
  return { answer, replay: () => service.request(method, path, { ...options, idempotencyKey }) };
}

function replaysTheSame(t: ExecutionContext, first: Answer, replay: Answer, what: string) {
  t.is(replay.status, first.status, `${what}: ${replay.text}`);
  t.is(replay.headers.get('idempotent-replayed'), 'true', what);
  t.is(replay.text, first.text, `${what}: the same answer, byte for byte`);
}

test('no credential is in a dump of the whole database, and every answer that showed one replays the same', async (t) => {
  // The admin commands.
  const applicationId = `secrets-${randomUUID().slice(0, 8)}`;
  // Every scope, verify:send included: issuing a workspace key needs it (docs/foundation.md).
  const created = await cli(['applications', 'create', applicationId, '--scopes', allScopes.join(',')]);
  const recoveryKey = (await cli(['applications', 'keys', 'create', applicationId])).apiKey as string;
  const legacySecret = (await cli(['applications', 'secret', applicationId])).applicationSecret as string;
  const carrierPassword = `carrier-${randomUUID()}`;
  await cli([
    'carriers',
    'add',
    'secrets-trunk',
    '--address',
    '203.0.113.7',
    '--username',
    'acme',
    '--password',
    carrierPassword,
  ]);
  const apiKey = created.apiKey as string;

  // The API: every operation whose answer holds a credential, and one whose request does.
  const workspace = await mutation(
    'POST',
    '/api/v1/workspaces',
    { auth: apiKey, body: { externalWorkspaceId: 'acme', name: 'Acme', timezone: 'UTC' } },
    201,
  );
  const workspaceId = workspace.answer.body.id as string;
  await mutation(
    'POST',
    '/api/v1/users',
    { auth: apiKey, workspaceId, body: { externalUserId: 'alice', displayName: 'Alice' } },
    201,
  );
  const sessionBody = { externalWorkspaceId: 'acme', externalUserId: 'alice', scopes: ['calls:*'] };
  const shown = {
    'application key (op 3)': await mutation('POST', '/api/v1/application/keys', { auth: apiKey, body: {} }, 201),
    'workspace key (op 10)': await mutation('POST', `/api/v1/workspaces/${workspaceId}/keys`, { auth: apiKey }, 201),
    'user token (op 1)': await mutation('POST', '/api/v1/sessions', { auth: apiKey, body: sessionBody }, 201),
    'user token by the legacy secret (op 1)': await mutation(
      'POST',
      '/api/v1/sessions',
      { auth: legacySecret, headers: { 'x-service-application': applicationId }, body: sessionBody },
      201,
    ),
    'webhook signing secret (create)': await mutation(
      'POST',
      '/api/v1/webhooks',
      { auth: apiKey, body: { url: 'https://hooks.example.com/switchboard' } },
      201,
    ),
  };
  const endpointId = shown['webhook signing secret (create)'].answer.body.endpoint.id as string;
  const email = `member-${randomUUID()}@example.com`;
  await createMember(service.pool, { workspaceId, email, scopes: ['calls:*'] });
  const more = {
    'webhook signing secret (rotate)': await mutation(
      'POST',
      `/api/v1/webhooks/${endpointId}/rotate-secret`,
      { auth: apiKey, body: { overlapSeconds: 0 } },
      200,
    ),
    'member token (op 2)': await mutation(
      'POST',
      '/api/v1/member-sessions',
      { auth: await issuer.login(email), workspaceId },
      201,
    ),
  };
  // A SIP device's credentials (op 66), issued with a user token holding devices:*.
  const deviceToken = (
    await mutation('POST', '/api/v1/sessions', { auth: apiKey, body: { ...sessionBody, scopes: ['devices:*'] } }, 201)
  ).answer.body.token as string;
  const desk = await mutation('POST', '/api/v1/devices', { auth: deviceToken, body: { kind: 'sip' } }, 201);
  const sip = {
    'SIP device password (op 66)': await mutation(
      'POST',
      `/api/v1/devices/${desk.answer.body.id}/sip-credentials`,
      { auth: deviceToken },
      201,
    ),
  };
  const answers = { ...shown, ...more, ...sip };
  const providerKey = `sk-live-${randomUUID()}`;
  await mutation(
    'POST',
    '/api/v1/ai-agents',
    {
      auth: apiKey,
      workspaceId,
      body: {
        name: 'Receptionist',
        provider: 'provider_a',
        connection: { url: 'wss://realtime.example.com/v1/voice', model: 'voice-large-2' },
        apiKey: providerKey,
      },
    },
    201,
  );

  const credentials: Record<string, string> = {
    'application key (CLI applications create)': apiKey,
    'application key (CLI applications keys create)': recoveryKey,
    'legacy application secret (CLI applications secret)': legacySecret,
    'carrier SIP password (CLI carriers add)': carrierPassword,
    'AI provider API key (op 44)': providerKey,
    'application key (op 3)': answers['application key (op 3)'].answer.body.apiKey,
    'workspace key (op 10)': answers['workspace key (op 10)'].answer.body.apiKey,
    'user token (op 1)': answers['user token (op 1)'].answer.body.token,
    'user token by the legacy secret (op 1)': answers['user token by the legacy secret (op 1)'].answer.body.token,
    'member token (op 2)': answers['member token (op 2)'].answer.body.token,
    'webhook signing secret (create)': answers['webhook signing secret (create)'].answer.body.signingSecret,
    'webhook signing secret (rotate)': answers['webhook signing secret (rotate)'].answer.body.signingSecret,
    'SIP device password (op 66)': answers['SIP device password (op 66)'].answer.body.password,
  };
  for (const [what, credential] of Object.entries(credentials)) {
    t.true(typeof credential === 'string' && credential.length >= 20, `${what} was shown`);
  }
  const notInDump = async (when: string) => {
    const text = await dump();
    for (const [what, credential] of Object.entries(credentials)) {
      t.false(text.includes(credential), `${when}: the dump holds the ${what}`);
    }
  };
  await notInDump('after they were made');

  for (const [what, { answer, replay }] of Object.entries(answers)) {
    const again = await replay();
    replaysTheSame(t, answer, again, what);
  }
  await notInDump('after the replays');

  const logs = service.logs.join('\n');
  for (const [what, credential] of Object.entries(credentials)) {
    t.false(logs.includes(credential), `the service logged the ${what}`);
  }
});

test('a sealed answer is bound to its record: moved to another idempotency key, it does not open', async (t) => {
  const app = await service.application();
  const scope = `application:${app.applicationId}`;
  const issued = await mutation('POST', '/api/v1/application/keys', { auth: app.apiKey, body: {} }, 201);
  const other = await mutation('POST', '/api/v1/application/keys', { auth: app.apiKey, body: { name: 'b' } }, 201);
  const secret = issued.answer.body.apiKey as string;
  const records = await service.pool.query<{ key: string; response_body: string }>(
    'SELECT key, response_body FROM idempotency_records WHERE scope = $1 ORDER BY created_at',
    [scope],
  );
  t.is(records.rows.length, 2);
  const [first, second] = records.rows as [{ key: string; response_body: string }, { key: string }];
  t.false(first.response_body.includes(secret));
  await service.pool.query('UPDATE idempotency_records SET response_body = $3 WHERE scope = $1 AND key = $2', [
    scope,
    second.key,
    first.response_body,
  ]);

  const moved = await other.replay();
  t.is(moved.status, 500, moved.text);
  t.is(moved.body.error.code, 'internal_error');
  t.false(moved.text.includes(secret), 'the answer of another record is never replayed');
  replaysTheSame(t, issued.answer, await issued.replay(), 'the record the answer belongs to');
});

test('answers the previous version stored in clear text replay the same and end up sealed', async (t) => {
  const app = await service.application();
  const scope = `application:${app.applicationId}`;
  const made = [
    await mutation('POST', '/api/v1/application/keys', { auth: app.apiKey, body: { name: 'replayed' } }, 201),
    await mutation('POST', '/api/v1/application/keys', { auth: app.apiKey, body: { name: 'swept' } }, 201),
  ] as const;
  const secrets = made.map((one) => one.answer.body.apiKey as string);
  // As the previous version stored them: the answer as sent, and `sealed` left to its default.
  const records = await service.pool.query<{ key: string }>(
    'SELECT key FROM idempotency_records WHERE scope = $1 ORDER BY created_at',
    [scope],
  );
  for (const [index, record] of records.rows.entries()) {
    await service.pool.query(
      'UPDATE idempotency_records SET response_body = $3, sealed = DEFAULT WHERE scope = $1 AND key = $2',
      [scope, record.key, made[index]?.answer.text],
    );
  }
  const before = await dump();
  t.true(
    secrets.every((secret) => before.includes(secret)),
    'the upgrade starts with answers in clear text',
  );

  // A replay gives the stored answer as it is, and seals it.
  replaysTheSame(t, made[0].answer, await made[0].replay(), 'a clear-text answer');
  const afterReplay = await dump();
  t.false(afterReplay.includes(secrets[0] as string), 'sealed at its replay');
  t.true(afterReplay.includes(secrets[1] as string));

  // The upkeep (at start and every 10 minutes) seals the rest.
  const keys = await loadSigningKeys(service.pool, undefined);
  t.true((await sealClearAnswers({ pool: service.pool, key: keys.idempotentAnswers })) >= 1);
  const afterSweep = await dump();
  t.false(
    secrets.some((secret) => afterSweep.includes(secret)),
    'no answer in clear text is left',
  );
  const left = await service.pool.query('SELECT 1 FROM idempotency_records WHERE NOT sealed');
  t.is(left.rowCount, 0);
  replaysTheSame(t, made[1].answer, await made[1].replay(), 'an answer sealed by the upkeep');
});
