/**
 * One-time codes through HTTP (operations 17-18, docs/messaging.md "One-time codes") with a workspace key. The SMS is
 * "received" the way a handset would get it, without the link: the queued message's parts are read from the database
 * and decoded with core/messages/encoding.ts. The code must show nowhere else: not in the verification's row, the
 * message's record, history or events, the stored answers, nor the logs.
 */
import test, { type ExecutionContext } from 'ava';
import { decodePart } from '../../core/messages/encoding.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { allScopes } from '../../core/scopes.ts';
import { importNumbers, claimNumber } from '../../core/numbers/numbers.ts';
import { textingSetup, newNumber } from '../helpers/messages.ts';
import { isError, userToken, serviceForFile } from '../helpers/service.ts';

const service = serviceForFile(test);

let recipients = 0;
/** A valid French mobile number no other test of the file sends to. */
function recipient(): string {
  recipients += 1;
  return `+3361${String(process.pid % 1000).padStart(3, '0')}${String(recipients).padStart(4, '0')}`;
}

/** An application, its workspace with a number that can text (unless `texting` is false), and a workspace key. */
async function verifier(options: { texting?: boolean; approved?: boolean } = {}) {
  const app = await service.application(undefined, allScopes);
  const created = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId: `ws-${recipient()}`, name: 'Acme', timezone: 'UTC' },
  });
  if (created.status !== 201) throw new Error(created.text);
  const workspace = { id: created.body.id as string, applicationId: app.applicationId, externalWorkspaceId: '' };
  workspace.externalWorkspaceId = created.body.externalWorkspaceId as string;
  const texting =
    options.texting === false
      ? undefined
      : await textingSetup(service.pool, { workspace, approved: options.approved !== false });
  const number = texting?.number;
  const key = await service.request('POST', `/api/v1/workspaces/${workspace.id}/keys`, { auth: app.apiKey });
  if (key.status !== 201) throw new Error(key.text);
  const workspaceKey = key.body.apiKey as string;
  const send = (body: unknown) =>
    service.request('POST', '/api/v1/verifications', { auth: workspaceKey, workspaceId: workspace.id, body });
  const check = (id: string, code: string, auth = workspaceKey) =>
    service.request('POST', `/api/v1/verifications/${id}/check`, { auth, workspaceId: workspace.id, body: { code } });
  return { app, workspace, number, carrier: texting?.carrier ?? '', workspaceKey, send, check };
}

/** The code as the handset gets it: the message's parts, decoded from their bytes. */
async function receivedCode(t: ExecutionContext, verificationId: string): Promise<string> {
  const parts = await service.pool.query<{ bytes: Buffer; esm_class: number; data_coding: number }>(
    `SELECT p.bytes, p.esm_class, p.data_coding FROM message_parts p
       JOIN verifications v ON v.message_id = p.message_id WHERE v.id = $1 ORDER BY p.part_index`,
    [verificationId],
  );
  t.is(parts.rows.length, 1);
  const text = parts.rows.map((part) => decodePart(part.bytes, part.esm_class, part.data_coding)?.text).join('');
  const match = /^Your code is (\d{6})\.$/.exec(text);
  if (match === null) throw new Error(`not a code: ${text}`);
  return match[1] as string;
}

/** Rows of `table` whose JSON holds `code`. */
async function rowsHolding(table: string, code: string): Promise<number> {
  const found = await service.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${table} t WHERE row_to_json(t)::text LIKE '%' || $1 || '%'`,
    [code],
  );
  return found.rows[0]?.n ?? 0;
}

test('an SMS code is sent from the texting number, approved once, and shows nowhere but in the SMS', async (t) => {
  const { send, check, number, carrier, workspace } = await verifier();
  const to = recipient();
  const sent = await send({ to, channel: 'sms' });
  t.is(sent.status, 201, sent.text);
  t.like(sent.body, { to, channel: 'sms', status: 'pending' });
  const lifetime = Date.parse(sent.body.expiresAt) - Date.now();
  t.true(lifetime > 9 * 60_000 && lifetime <= 10 * 60_000, sent.body.expiresAt);

  const code = await receivedCode(t, sent.body.id);
  const message = await service.pool.query(
    `SELECT m.from_number, m.to_number, m.text, m.status, m.workspace_id FROM messages m
       JOIN verifications v ON v.message_id = m.id WHERE v.id = $1`,
    [sent.body.id],
  );
  t.deepEqual(message.rows[0], {
    from_number: number?.e164,
    to_number: to,
    text: 'Your code is ******.',
    status: 'queued',
    workspace_id: workspace.id,
  });

  // The carrier takes it: `sent` is reported, with the text as the record shows it.
  const link = openLinkStore(service.pool);
  t.teardown(() => link.close());
  for (const part of await link.takeParts(carrier, 10)) await link.acknowledged(part.id, `smsc-${part.id}`);

  const approved = await check(sent.body.id, code);
  t.is(approved.status, 200, approved.text);
  t.deepEqual(approved.body, { status: 'approved' });
  // A code approves once.
  t.deepEqual((await check(sent.body.id, code)).body, { status: 'spent' });

  for (const table of ['verifications', 'messages', 'message_events', 'events', 'idempotency_records']) {
    t.is(await rowsHolding(table, code), 0, `${table} holds the code`);
  }
  const events = await service.pool.query<{ payload: string }>(
    `SELECT payload FROM events WHERE stream_key = $1 AND type = 'message.status'`,
    [`number:${number?.id}`],
  );
  t.is(events.rows.length, 1);
  for (const event of events.rows) t.is(JSON.parse(event.payload).message.text, 'Your code is ******.');
  await service.request('GET', '/healthz');
  t.false(
    service.logs.some((line) => line.includes(code)),
    'a log line holds the code',
  );
});

test('wrong codes count: pending while checks remain, the fifth spends it, and the right code then fails', async (t) => {
  const { send, check } = await verifier();
  const sent = await send({ to: recipient(), channel: 'sms' });
  t.is(sent.status, 201, sent.text);
  const code = await receivedCode(t, sent.body.id);
  const wrong = code === '000000' ? '000001' : '000000';
  for (let attempt = 1; attempt <= 4; attempt += 1) {
    t.deepEqual((await check(sent.body.id, wrong)).body, { status: 'pending' }, `attempt ${attempt}`);
  }
  t.deepEqual((await check(sent.body.id, 'not even digits')).body, { status: 'spent' });
  t.deepEqual((await check(sent.body.id, code)).body, { status: 'spent' });
  const row = await service.pool.query('SELECT status, checks FROM verifications WHERE id = $1', [sent.body.id]);
  t.deepEqual(row.rows[0], { status: 'spent', checks: 5 });
});

test('an expired code is expired, right or wrong, and counts no check', async (t) => {
  const { send, check } = await verifier();
  const sent = await send({ to: recipient(), channel: 'sms' });
  const code = await receivedCode(t, sent.body.id);
  // The expiry as the database keeps it, moved into the past (the API goes by the database's clock).
  await service.pool.query(
    `UPDATE verifications SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`,
    [sent.body.id],
  );
  t.deepEqual((await check(sent.body.id, code)).body, { status: 'expired' });
  t.deepEqual((await check(sent.body.id, '123')).body, { status: 'expired' });
  const row = await service.pool.query('SELECT status, checks FROM verifications WHERE id = $1', [sent.body.id]);
  t.deepEqual(row.rows[0], { status: 'expired', checks: 0 });
});

test('at most 5 codes per recipient per workspace an hour: the sixth is 409 limit_exceeded and sends nothing', async (t) => {
  const { send } = await verifier();
  const other = await verifier();
  const to = recipient();
  for (let n = 1; n <= 5; n += 1) t.is((await send({ to, channel: 'sms' })).status, 201, `send ${n}`);
  const messagesBefore = await service.pool.query('SELECT count(*)::int AS n FROM messages WHERE to_number = $1', [to]);
  isError(t, await send({ to, channel: 'sms' }), 409, 'limit_exceeded');
  const messagesAfter = await service.pool.query('SELECT count(*)::int AS n FROM messages WHERE to_number = $1', [to]);
  t.deepEqual(messagesAfter.rows, messagesBefore.rows);
  // Another recipient, and the same recipient from another workspace, are not limited by these.
  t.is((await send({ to: recipient(), channel: 'sms' })).status, 201);
  t.is((await other.send({ to, channel: 'sms' })).status, 201);
  // Sends older than the hour no longer count.
  await service.pool.query(
    `UPDATE verifications SET created_at = created_at - interval '61 minutes' WHERE to_number = $1`,
    [to],
  );
  t.is((await send({ to, channel: 'sms' })).status, 201);
});

test('an invalid recipient is 400 invalid_request; a workspace that cannot text is 422 sender_unavailable', async (t) => {
  const { send } = await verifier();
  for (const to of ['+1555', '33612345678', '+33 6 12 34 56 78', '+999123456789', 'call me']) {
    isError(t, await send({ to, channel: 'sms' }), 400, 'invalid_request', to);
  }
  isError(t, await send({ to: recipient(), channel: 'fax' }), 400, 'invalid_request', 'fax');
  const mute = await verifier({ texting: false });
  isError(t, await mute.send({ to: recipient(), channel: 'sms' }), 422, 'sender_unavailable');
  isError(t, await mute.send({ to: recipient(), channel: 'call' }), 422, 'sender_unavailable', 'call');
  // A number that can text but whose texting registration is not approved does not send codes either.
  const unregistered = await verifier({ approved: false });
  isError(t, await unregistered.send({ to: recipient(), channel: 'sms' }), 422, 'sender_unavailable', 'unapproved');
  const left = await service.pool.query('SELECT count(*)::int AS n FROM verifications WHERE workspace_id = $1', [
    mute.workspace.id,
  ]);
  t.is(left.rows[0].n, 0);
});

test('only a workspace key: an application key or a user token is 403, a wrong key 401', async (t) => {
  const { app, workspace, send, check } = await verifier();
  const sent = await send({ to: recipient(), channel: 'sms' });
  const body = { to: recipient(), channel: 'sms' };
  const withKey = await service.request('POST', '/api/v1/verifications', {
    auth: app.apiKey,
    workspaceId: workspace.id,
    body,
  });
  isError(t, withKey, 403, 'forbidden', 'application key');
  isError(t, await check(sent.body.id, '123456', app.apiKey), 403, 'forbidden', 'application key check');
  const setup = { ...app, workspace: { id: workspace.id, externalWorkspaceId: workspace.externalWorkspaceId } };
  await service.request('POST', '/api/v1/users', {
    auth: app.apiKey,
    workspaceId: workspace.id,
    body: { externalUserId: 'alice', displayName: 'Alice' },
  });
  const token = await userToken(service, setup as Parameters<typeof userToken>[1], ['messages:*']);
  isError(
    t,
    await service.request('POST', '/api/v1/verifications', { auth: token, workspaceId: workspace.id, body }),
    403,
    'forbidden',
    'user token',
  );
  isError(t, await check(sent.body.id, '123456', `sbw_${'A'.repeat(43)}`), 401, 'unauthorized', 'wrong key');
  const unchanged = await service.pool.query('SELECT checks FROM verifications WHERE id = $1', [sent.body.id]);
  t.is(unchanged.rows[0].checks, 0);
});

test("another workspace's verification is 404 and its checks do not count", async (t) => {
  const mine = await verifier();
  const theirs = await verifier();
  const sent = await theirs.send({ to: recipient(), channel: 'sms' });
  const code = await receivedCode(t, sent.body.id);
  isError(t, await mine.check(sent.body.id, code), 404, 'not_found');
  isError(t, await mine.check('6f1c2b1e-5b44-4c1a-9a55-0d0f5d1e2a3b', code), 404, 'not_found', 'unknown id');
  t.deepEqual((await theirs.check(sent.body.id, code)).body, { status: 'approved' });
});

test('a voice code goes through the dial-out policy: a blocked prefix is 403, nothing is recorded', async (t) => {
  const { send, workspace } = await verifier({ texting: false });
  const e164 = newNumber();
  await importNumbers(service.pool, 'sipp', [e164], ['voice']);
  await claimNumber(service.pool, workspace.id, e164, 'Main');
  await service.pool.query(
    `UPDATE workspaces SET destination_policy = '{"allowedPrefixes": [], "blockedPrefixes": ["+1900"]}' WHERE id = $1`,
    [workspace.id],
  );
  isError(t, await send({ to: '+19005550123', channel: 'call' }), 403, 'destination_blocked');
  // An emergency number is no phone a code can go to.
  isError(t, await send({ to: '+1911', channel: 'call' }), 400, 'invalid_request');
  const recorded = await service.pool.query('SELECT count(*)::int AS n FROM verifications WHERE workspace_id = $1', [
    workspace.id,
  ]);
  t.is(recorded.rows[0].n, 0);
});

test('a voice verification waits sealed for the engine; the row never holds the code in clear', async (t) => {
  const { send, workspace } = await verifier({ texting: false });
  const e164 = newNumber();
  await importNumbers(service.pool, 'sipp', [e164], ['voice']);
  await claimNumber(service.pool, workspace.id, e164, 'Main');
  const sent = await send({ to: recipient(), channel: 'call' });
  t.is(sent.status, 201, sent.text);
  t.like(sent.body, { channel: 'call', status: 'pending' });
  const row = await service.pool.query<{ call_state: string; sealed_code: string; message_id: null }>(
    'SELECT call_state, sealed_code, message_id FROM verifications WHERE id = $1',
    [sent.body.id],
  );
  t.is(row.rows[0]?.call_state, 'waiting');
  t.is(row.rows[0]?.message_id, null);
  t.regex(row.rows[0]?.sealed_code ?? '', /^v1\./);
});
