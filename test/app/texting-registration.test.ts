/**
 * A number's texting registration (docs/messaging.md, "Texting registration"): operation 23 names a campaign
 * (`pending`) or clears it (`unregistered`), `switchboard numbers texting <e164> approved|rejected` decides, GET shows
 * it, every change is one `number.updated` carrying it, and only an approved number sends (operation 67).
 */
import test, { type ExecutionContext } from 'ava';
import { runner } from 'node-pg-migrate';
import pg from 'pg';
import { migrationsDir } from '../../core/database.ts';
import { runCli } from '../helpers/cli.ts';
import { freshDatabase } from '../helpers/database.ts';
import { textingSetup } from '../helpers/messages.ts';
import { isError, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({}, ['api']);
});

test.after.always(async () => {
  await service?.close();
});

/** The number's `number.updated` events from the event log, once there are `count` of them. */
async function registrationEvents(t: ExecutionContext, apiKey: string, numberId: string, count: number) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const log = await service.request('GET', '/api/v1/events?type=number.updated&limit=500', { auth: apiKey });
    t.is(log.status, 200, log.text);
    const events = (log.body.data as { number: { id: string; textingRegistration: string; changes: string[] } }[])
      .filter((event) => event.number.id === numberId)
      .map((event) => [event.number.textingRegistration, event.number.changes.join(',')]);
    if (events.length >= count || Date.now() > deadline) return events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('pending with a campaign, approved or rejected by the command, each change an event; only approved sends', async (t) => {
  const setup = await workspaceWithUser(service);
  const { number } = await textingSetup(service.pool, {
    workspace: {
      id: setup.workspace.id,
      applicationId: setup.applicationId,
      externalWorkspaceId: setup.workspace.externalWorkspaceId,
    },
  });
  const auth = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  const patch = (campaignId: string | null) =>
    service.request('PATCH', `/api/v1/numbers/${number.id}`, {
      ...auth,
      body: { textingRegistration: { campaignId } },
    });
  const registration = async () => {
    const got = await service.request('GET', `/api/v1/numbers/${number.id}`, auth);
    t.is(got.status, 200, got.text);
    return got.body.textingRegistration;
  };
  const decide = (decision: string, e164 = number.e164) =>
    runCli(service.databaseUrl, ['numbers', 'texting', e164, decision]);
  const send = () =>
    service.request('POST', '/api/v1/messages', {
      ...auth,
      body: { from: number.e164, to: '+14155552671', text: `Hello at ${Date.now()}` },
    });

  t.deepEqual(await registration(), { status: 'unregistered', campaignId: null });
  // Nothing to decide on without a campaign; an unknown number and an unknown decision are usage errors.
  const early = await decide('approved');
  t.is(early.code, 2, early.stdout);
  t.regex(early.stderr, /names no texting campaign/);
  const unknown = await decide('approved', '+14155550000');
  t.is(unknown.code, 2);
  t.regex(unknown.stderr, /no workspace has claimed/);
  const maybe = await decide('maybe');
  t.is(maybe.code, 2);
  t.regex(maybe.stderr, /approved or rejected/);

  t.like((await patch('C1234567')).body, { textingRegistration: { status: 'pending', campaignId: 'C1234567' } });
  t.deepEqual(await registration(), { status: 'pending', campaignId: 'C1234567' });
  isError(t, await send(), 403, 'sender_not_eligible', 'pending');

  const approved = await decide('approved');
  t.is(approved.code, 0, approved.stderr);
  t.like(JSON.parse(approved.stdout), {
    id: number.id,
    textingRegistration: { status: 'approved', campaignId: 'C1234567' },
  });
  t.deepEqual(await registration(), { status: 'approved', campaignId: 'C1234567' });
  const sent = await send();
  t.is(sent.status, 202, sent.text);
  // Deciding the same again, or naming the same campaign again, changes nothing (and writes no event).
  t.is((await decide('approved')).code, 0);
  t.like((await patch('C1234567')).body, { textingRegistration: { status: 'approved' } });

  t.is((await decide('rejected')).code, 0);
  t.deepEqual(await registration(), { status: 'rejected', campaignId: 'C1234567' });
  isError(t, await send(), 403, 'sender_not_eligible', 'rejected');
  // Naming the campaign again after a rejection asks again.
  t.like((await patch('C1234567')).body, { textingRegistration: { status: 'pending' } });
  t.is((await decide('approved')).code, 0);
  // Another campaign is another review; none is unregistered.
  t.like((await patch('C7777777')).body, { textingRegistration: { status: 'pending', campaignId: 'C7777777' } });
  t.like((await patch(null)).body, { textingRegistration: { status: 'unregistered', campaignId: null } });
  isError(t, await send(), 403, 'sender_not_eligible', 'unregistered');

  t.deepEqual(await registrationEvents(t, setup.apiKey, number.id, 7), [
    ['pending', 'textingRegistration'],
    ['approved', 'textingRegistration'],
    ['rejected', 'textingRegistration'],
    ['pending', 'textingRegistration'],
    ['approved', 'textingRegistration'],
    ['pending', 'textingRegistration'],
    ['unregistered', 'textingRegistration'],
  ]);
});

test('migration 0023 makes numbers that named a campaign pending and the others unregistered', async (t) => {
  const database = await freshDatabase({ migrate: false });
  t.teardown(() => database.drop());
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  t.teardown(() => client.end());
  const upTo = async (count: number) =>
    runner({
      dbClient: client,
      dir: migrationsDir,
      direction: 'up',
      migrationsTable: 'schema_migrations',
      count,
      singleTransaction: true,
      log: () => {},
    });
  await upTo(22);
  await client.query(
    `INSERT INTO phone_numbers (e164, carrier, capabilities, national_number, texting_campaign_id)
     VALUES ('+14155550101', 'acme', '{sms}', '4155550101', 'C1'), ('+14155550102', 'acme', '{sms}', '4155550102', NULL)`,
  );
  await upTo(Infinity);
  const rows = await client.query('SELECT e164, texting_registration FROM phone_numbers ORDER BY e164');
  t.deepEqual(rows.rows, [
    { e164: '+14155550101', texting_registration: 'pending' },
    { e164: '+14155550102', texting_registration: 'unregistered' },
  ]);
  // A campaign and a registration go together.
  await t.throwsAsync(
    client.query("UPDATE phone_numbers SET texting_registration = 'approved' WHERE e164 = '+14155550102'"),
    { message: /phone_numbers_texting_registration_campaign/ },
  );
});
