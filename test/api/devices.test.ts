/**
 * Operations 59-62 and 66 through HTTP (docs/phones.md): devices registered by user and member tokens, re-registered
 * by their clientId, refused while on a call (`device_busy`) and past the workspace's limits.devicesPerUser (`limit_exceeded`); each token
 * sees its own person's devices only, a key the whole workspace's; the 60-second presence lease; SIP credentials
 * shown once and kept sealed; a removed user's devices and credentials gone with the user.
 *
 * One service for the file (API role only). Every test makes its own application, so tests run concurrently.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { setDeviceBusy } from '../../core/devices/devices.ts';
import { sipCredentialsOf } from '../../core/devices/sip-credentials.ts';
import type { Scope } from '../../core/scopes.ts';
import {
  type Answer,
  isError,
  liveCall,
  memberToken as memberTokenOf,
  userToken as sessionToken,
  workspaceWithUser,
  serviceForFile,
  signingKeysForFile,
  type WorkspaceSetup,
} from '../helpers/service.ts';

const service = serviceForFile(test);
const keys = signingKeysForFile(test, service);

/** A user token of the setup's workspace (the user is created first when it is not alice). */
const userToken = (setup: WorkspaceSetup, externalUserId = 'alice', scopes: Scope[] = ['devices:*']) =>
  sessionToken(service, setup, scopes, externalUserId);

/** A member of the setup's workspace and a member token of theirs. */
const memberToken = (setup: WorkspaceSetup, scopes: Scope[] = ['devices:*']) => memberTokenOf(service, setup, scopes);

function register(auth: string, body: Record<string, unknown>, idempotencyKey?: string): Promise<Answer> {
  return service.request('POST', '/api/v1/devices', { auth, body, ...(idempotencyKey ? { idempotencyKey } : {}) });
}

async function registered(auth: string, body: Record<string, unknown>) {
  const answer = await register(auth, body);
  if (answer.status !== 201) throw new Error(`register: ${answer.status} ${answer.text}`);
  return answer.body as { id: string; kind: string; sipUsername: string | null };
}

function list(auth: string, workspaceId?: string, query = '') {
  return service.request('GET', `/api/v1/devices${query}`, { auth, ...(workspaceId ? { workspaceId } : {}) });
}

const ids = (answer: Answer) => (answer.body.data as { id: string }[]).map((device) => device.id).sort();

async function databaseNow(): Promise<number> {
  const result = await service.pool.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return (result.rows[0] as { now: Date }).now.getTime();
}

const aCall = (setup: WorkspaceSetup) => liveCall(service.pool, setup);

test('op 59: a user token registers its phone (201); the same clientId re-registers it (200, same id)', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const before = await databaseNow();
  const first = await register(alice, { kind: 'browser', name: 'Laptop', clientId: 'tab-1' });
  const after = await databaseNow();
  t.is(first.status, 201, first.text);
  const device = first.body;
  t.deepEqual(Object.keys(device).sort(), [
    'busy',
    'clientId',
    'createdAt',
    'externalUserId',
    'id',
    'kind',
    'memberId',
    'name',
    'presence',
    'sipUsername',
  ]);
  t.like(device, {
    kind: 'browser',
    name: 'Laptop',
    clientId: 'tab-1',
    memberId: null,
    externalUserId: 'alice',
    busy: false,
    sipUsername: null,
  });
  // Registering starts the presence lease, as a renewal does.
  t.true(device.presence.live);
  const expires = Date.parse(device.presence.expiresAt);
  t.true(expires >= before + 60_000 && expires <= after + 60_000, device.presence.expiresAt);

  const again = await register(alice, { kind: 'mobile', name: 'Phone', clientId: 'tab-1' });
  t.is(again.status, 200, again.text);
  t.is(again.body.id, device.id);
  t.like(again.body, { kind: 'mobile', name: 'Phone', clientId: 'tab-1', createdAt: device.createdAt });

  // Without a clientId, every registration is a device of its own; another clientId is another device.
  const other = await registered(alice, { kind: 'browser' });
  t.not(other.id, device.id);
  t.like(other, { name: null, clientId: null });
  const third = await registered(alice, { kind: 'browser', clientId: 'tab-2' });
  const listed = await list(alice);
  t.is(listed.status, 200, listed.text);
  t.deepEqual(ids(listed), [device.id, other.id, third.id].sort());
  t.is(listed.body.nextCursor, null);
  t.is(listed.body.data[0].id, third.id, 'newest first');
});

test('op 59: re-registering a device that is on a call is 409 device_busy; free again, it re-registers', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const device = await registered(alice, { kind: 'browser', clientId: 'desk' });
  const call = await aCall(setup);
  await setDeviceBusy(service.pool, device.id, call.id);
  t.true((await list(alice)).body.data[0].busy);

  const refused = await register(alice, { kind: 'browser', name: 'New', clientId: 'desk' });
  isError(t, refused, 409, 'device_busy');
  t.true(refused.body.error.message.includes(device.id), refused.text);
  t.is((await list(alice)).body.data[0].name, null, 'unchanged');
  // Another registration is not held up by it.
  t.is((await register(alice, { kind: 'browser', clientId: 'other' })).status, 201);

  await setDeviceBusy(service.pool, device.id, null);
  const again = await register(alice, { kind: 'browser', name: 'New', clientId: 'desk' });
  t.is(again.status, 200, again.text);
  t.like(again.body, { id: device.id, name: 'New', busy: false });
});

test('op 59: a person has at most limits.devicesPerUser devices (default 5): one more is 409 limit_exceeded; unregistering one makes room', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const devices = [];
  for (let index = 0; index < 5; index += 1) {
    devices.push(await registered(alice, { kind: 'browser', clientId: `tab-${index}` }));
  }
  const sixth = await register(alice, { kind: 'browser', clientId: 'tab-5' });
  isError(t, sixth, 409, 'limit_exceeded');
  t.regex(sixth.body.error.message, /at most 5 devices/);
  // Re-registering one it has is not one more.
  t.is((await register(alice, { kind: 'mobile', clientId: 'tab-3' })).status, 200);
  // The limit is per person: another person of the workspace still registers.
  const bob = await userToken(setup, 'bob');
  t.is((await register(bob, { kind: 'browser' })).status, 201);

  const removed = await service.request('DELETE', `/api/v1/devices/${devices[0]?.id}`, { auth: alice });
  t.is(removed.status, 200, removed.text);
  t.is(removed.body.id, devices[0]?.id);
  t.is((await register(alice, { kind: 'browser', clientId: 'tab-5' })).status, 201);
  isError(t, await register(alice, { kind: 'browser' }), 409, 'limit_exceeded');

  // The workspace's limit decides: raised to 7, two more fit, and no third.
  const raised = await service.request('PATCH', `/api/v1/workspaces/${setup.workspace.id}`, {
    auth: setup.apiKey,
    body: { limits: { devicesPerUser: 7 } },
  });
  t.is(raised.status, 200, raised.text);
  t.is((await register(alice, { kind: 'browser' })).status, 201);
  t.is((await register(alice, { kind: 'browser' })).status, 201);
  const eighth = await register(alice, { kind: 'browser' });
  isError(t, eighth, 409, 'limit_exceeded');
  t.regex(eighth.body.error.message, /at most 7 devices/);
});

test('op 59: registrations of one person at the same time never pass the limit', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const answers = await Promise.all(Array.from({ length: 12 }, () => register(alice, { kind: 'browser' })));
  t.is(answers.filter((answer) => answer.status === 201).length, 5);
  for (const answer of answers.filter((one) => one.status !== 201)) isError(t, answer, 409, 'limit_exceeded');
  t.is((await list(alice)).body.data.length, 5);
});

test("a token sees and acts on its own person's devices only: another person's is 404", async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const bob = await userToken(setup, 'bob');
  const { token: member, member: memberRow } = await memberToken(setup);
  const aliceSip = await registered(alice, { kind: 'sip', clientId: 'desk' });
  const aliceTab = await registered(alice, { kind: 'browser' });
  const bobs = await registered(bob, { kind: 'browser' });
  const members = await registered(member, { kind: 'mobile' });
  t.like(members, { memberId: memberRow.id, externalUserId: null });

  t.deepEqual(ids(await list(alice)), [aliceSip.id, aliceTab.id].sort());
  t.deepEqual(ids(await list(bob)), [bobs.id]);
  t.deepEqual(ids(await list(member)), [members.id]);

  for (const [auth, other] of [
    [bob, aliceTab.id],
    [member, aliceSip.id],
    [alice, members.id],
  ] as const) {
    isError(t, await service.request('DELETE', `/api/v1/devices/${other}`, { auth }), 404, 'not_found');
    isError(t, await service.request('POST', `/api/v1/devices/${other}/presence`, { auth }), 404, 'not_found');
    isError(t, await service.request('POST', `/api/v1/devices/${other}/sip-credentials`, { auth }), 404, 'not_found');
  }
  isError(t, await service.request('DELETE', `/api/v1/devices/${randomUUID()}`, { auth: alice }), 404, 'not_found');
  // Bob's clientId "desk" is his own: it does not re-register Alice's desk phone.
  const bobsDesk = await register(bob, { kind: 'sip', clientId: 'desk' });
  t.is(bobsDesk.status, 201, bobsDesk.text);
  t.not(bobsDesk.body.id, aliceSip.id);
  t.deepEqual(ids(await list(alice)), [aliceSip.id, aliceTab.id].sort(), "Alice's are untouched");
});

test("an application key lists the whole workspace's devices and unregisters any; another workspace's are never seen", async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const { token: member } = await memberToken(setup);
  const mine = [
    await registered(alice, { kind: 'browser' }),
    await registered(alice, { kind: 'sip' }),
    await registered(member, { kind: 'mobile' }),
  ];
  // Another workspace of the same application, and another application.
  const otherWorkspace = await service.request('POST', '/api/v1/workspaces', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: `ws-${randomUUID()}`, name: 'Other', timezone: 'UTC' },
  });
  const sibling = { ...setup, workspace: otherWorkspace.body };
  await service.request('POST', '/api/v1/users', {
    auth: setup.apiKey,
    workspaceId: sibling.workspace.id,
    body: { externalUserId: 'alice', displayName: 'Alice elsewhere' },
  });
  const siblingAlice = await userToken(sibling);
  const siblings = await registered(siblingAlice, { kind: 'browser' });
  const stranger = await workspaceWithUser(service);
  const strangers = await registered(await userToken(stranger), { kind: 'browser' });

  const all = await list(setup.apiKey, setup.workspace.id);
  t.is(all.status, 200, all.text);
  t.deepEqual(ids(all), mine.map((device) => device.id).sort());
  t.deepEqual(ids(await list(setup.apiKey, sibling.workspace.id)), [siblings.id]);
  t.deepEqual(ids(await list(siblingAlice)), [siblings.id], "a token of the other workspace: that workspace's");
  isError(t, await list(setup.apiKey, stranger.workspace.id), 403, 'workspace_forbidden');
  isError(t, await list(alice, sibling.workspace.id), 403, 'workspace_forbidden');

  // Pages: two at a time, every device once; a token's cursor is not the key's.
  const first = await list(setup.apiKey, setup.workspace.id, '?limit=2');
  t.is(first.body.data.length, 2);
  const rest = await list(
    setup.apiKey,
    setup.workspace.id,
    `?limit=2&cursor=${encodeURIComponent(first.body.nextCursor)}`,
  );
  t.deepEqual([...ids(first), ...ids(rest)].sort(), ids(all));
  t.is(rest.body.nextCursor, null);
  isError(
    t,
    await list(alice, undefined, `?cursor=${encodeURIComponent(first.body.nextCursor)}`),
    400,
    'invalid_cursor',
  );

  // The key unregisters any device of the workspace, but not another workspace's.
  const gone = await service.request('DELETE', `/api/v1/devices/${mine[2]?.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(gone.status, 200, gone.text);
  isError(
    t,
    await service.request('DELETE', `/api/v1/devices/${strangers.id}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
    }),
    404,
    'not_found',
  );
  isError(
    t,
    await service.request('DELETE', `/api/v1/devices/${siblings.id}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
    }),
    404,
    'not_found',
  );
  t.deepEqual(ids(await list(setup.apiKey, setup.workspace.id)), [mine[0]?.id, mine[1]?.id].sort());
  // A key registers no device, renews no presence, issues no credentials: a phone is always someone's.
  const asKey = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  isError(
    t,
    await service.request('POST', '/api/v1/devices', { ...asKey, body: { kind: 'browser' } }),
    403,
    'forbidden',
  );
  isError(t, await service.request('POST', `/api/v1/devices/${mine[0]?.id}/presence`, asKey), 403, 'forbidden');
});

test('op 62: renewing presence moves expiresAt 60 s ahead of now; a lapsed lease is not live', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const device = await registered(alice, { kind: 'browser' });
  // As if the last renewal had been missed.
  await service.pool.query(
    "UPDATE devices SET presence_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1",
    [device.id],
  );
  const lapsed = (await list(alice)).body.data[0];
  t.false(lapsed.presence.live);
  t.is(typeof lapsed.presence.expiresAt, 'string');

  const before = await databaseNow();
  const renewed = await service.request('POST', `/api/v1/devices/${device.id}/presence`, { auth: alice });
  const after = await databaseNow();
  t.is(renewed.status, 200, renewed.text);
  t.is(renewed.body.id, device.id);
  t.true(renewed.body.presence.live);
  const expires = Date.parse(renewed.body.presence.expiresAt);
  t.true(expires >= before + 60_000 && expires <= after + 60_000, renewed.body.presence.expiresAt);
  t.deepEqual((await list(alice)).body.data[0].presence, renewed.body.presence);

  // An empty body is no body; a field is refused.
  const empty = await service.request('POST', `/api/v1/devices/${device.id}/presence`, { auth: alice, body: {} });
  t.is(empty.status, 200, empty.text);
  isError(
    t,
    await service.request('POST', `/api/v1/devices/${device.id}/presence`, { auth: alice, body: { seconds: 600 } }),
    400,
    'invalid_request',
  );

  // A sip device's presence is its registration binding: no lease here.
  const desk = await registered(alice, { kind: 'sip' });
  t.deepEqual((await list(alice)).body.data.find((one: { id: string }) => one.id === desk.id).presence, {
    live: false,
    expiresAt: null,
  });
  const sip = await service.request('POST', `/api/v1/devices/${desk.id}/presence`, { auth: alice });
  isError(t, sip, 400, 'invalid_request');
  t.regex(sip.body.error.message, /REGISTER/);
});

test('op 66: SIP credentials are shown once, kept sealed, replaced when issued again, for sip devices only', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const desk = await registered(alice, { kind: 'sip', name: 'Desk phone', clientId: 'desk' });
  t.is(desk.sipUsername, null);

  const issued = await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: alice });
  t.is(issued.status, 201, issued.text);
  const { username, password } = issued.body;
  t.deepEqual(Object.keys(issued.body).sort(), ['deviceId', 'issuedAt', 'password', 'username']);
  t.is(issued.body.deviceId, desk.id);
  t.regex(username, /^sb[0-9a-f]{24}$/);
  t.true(password.length >= 32);

  // Never shown again: the device shows the username only.
  const listed = await list(alice);
  t.is(listed.body.data[0].sipUsername, username);
  t.false(listed.text.includes(password));
  const keyList = await list(setup.apiKey, setup.workspace.id);
  t.false(keyList.text.includes(password));

  // Stored sealed, bound to its device and username; the registrar opens it.
  const stored = await service.pool.query<{ password_sealed: string }>(
    'SELECT password_sealed FROM sip_credentials WHERE device_id = $1',
    [desk.id],
  );
  t.false(stored.rows[0]?.password_sealed.includes(password));
  t.regex(stored.rows[0]?.password_sealed ?? '', /^v1\./);
  t.deepEqual(await sipCredentialsOf(service.pool, keys.sipPasswords, username), { deviceId: desk.id, password });

  // Issuing again replaces both at once.
  const again = await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: alice });
  t.is(again.status, 201, again.text);
  t.not(again.body.username, username);
  t.not(again.body.password, password);
  t.is(await sipCredentialsOf(service.pool, keys.sipPasswords, username), undefined);
  t.deepEqual(await sipCredentialsOf(service.pool, keys.sipPasswords, again.body.username), {
    deviceId: desk.id,
    password: again.body.password,
  });

  // Other kinds of device have none; re-registering the desk phone as a browser revokes them.
  const tab = await registered(alice, { kind: 'browser' });
  const refused = await service.request('POST', `/api/v1/devices/${tab.id}/sip-credentials`, { auth: alice });
  isError(t, refused, 400, 'invalid_request');
  t.regex(refused.body.error.message, /sip devices only/);
  const browser = await register(alice, { kind: 'browser', clientId: 'desk' });
  t.is(browser.status, 200, browser.text);
  t.is(browser.body.sipUsername, null);
  t.is(await sipCredentialsOf(service.pool, keys.sipPasswords, again.body.username), undefined);

  // Unregistering a sip device revokes its credentials.
  const second = await registered(alice, { kind: 'sip' });
  const secondIssued = await service.request('POST', `/api/v1/devices/${second.id}/sip-credentials`, { auth: alice });
  t.is((await service.request('DELETE', `/api/v1/devices/${second.id}`, { auth: alice })).status, 200);
  t.is(await sipCredentialsOf(service.pool, keys.sipPasswords, secondIssued.body.username), undefined);
});

test('op 14: removing a user removes their devices and SIP credentials at once; their token registers no more', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const bob = await userToken(setup, 'bob');
  const desk = await registered(alice, { kind: 'sip' });
  await registered(alice, { kind: 'browser', clientId: 'tab' });
  const bobs = await registered(bob, { kind: 'sip' });
  const credentials = await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: alice });
  const bobsCredentials = await service.request('POST', `/api/v1/devices/${bobs.id}/sip-credentials`, { auth: bob });

  const removed = await service.request('DELETE', `/api/v1/users/${setup.user.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(removed.status, 200, removed.text);

  const left = await service.pool.query('SELECT 1 FROM devices WHERE app_user_id = $1', [setup.user.id]);
  t.is(left.rowCount, 0);
  t.is(await sipCredentialsOf(service.pool, keys.sipPasswords, credentials.body.username), undefined);
  t.deepEqual(ids(await list(setup.apiKey, setup.workspace.id)), [bobs.id]);
  t.truthy(await sipCredentialsOf(service.pool, keys.sipPasswords, bobsCredentials.body.username), "Bob's stay");

  // Alice's token lives to its expiry (section 4), but her person is gone: no device, no new one.
  t.deepEqual((await list(alice)).body.data, []);
  isError(t, await register(alice, { kind: 'browser', clientId: 'tab' }), 403, 'forbidden');
  isError(
    t,
    await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: alice }),
    404,
    'not_found',
  );
});

test('member tokens work as user tokens do: register, list, renew, credentials, unregister', async (t) => {
  const setup = await workspaceWithUser(service);
  const { token, member } = await memberToken(setup);
  const desk = await registered(token, { kind: 'sip', clientId: 'desk' });
  t.like(desk, { memberId: member.id, externalUserId: null });
  const again = await register(token, { kind: 'sip', name: 'Front desk', clientId: 'desk' });
  t.is(again.status, 200, again.text);
  t.is(again.body.id, desk.id);
  const tab = await registered(token, { kind: 'browser' });
  t.is((await service.request('POST', `/api/v1/devices/${tab.id}/presence`, { auth: token })).status, 200);
  const issued = await service.request('POST', `/api/v1/devices/${desk.id}/sip-credentials`, { auth: token });
  t.is(issued.status, 201, issued.text);
  t.deepEqual(ids(await list(token)), [desk.id, tab.id].sort());
  t.is((await service.request('DELETE', `/api/v1/devices/${desk.id}`, { auth: token })).status, 200);
  t.deepEqual(ids(await list(token)), [tab.id]);
  t.is(await sipCredentialsOf(service.pool, keys.sipPasswords, issued.body.username), undefined);
});

test('devices:* is needed; bad input is 400 invalid_request in the envelope and registers nothing', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const callsOnly = await userToken(setup, 'alice', ['calls:*']);
  isError(t, await register(callsOnly, { kind: 'browser' }), 403, 'insufficient_scope');
  isError(t, await list(callsOnly), 403, 'insufficient_scope');
  const { token: memberCallsOnly } = await memberToken(setup, ['calls:*']);
  isError(t, await register(memberCallsOnly, { kind: 'browser' }), 403, 'insufficient_scope');
  isError(t, await service.request('GET', '/api/v1/devices'), 401, 'unauthorized');

  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['no kind', { name: 'x' }, /kind/],
    ['an unknown kind', { kind: 'fax' }, /body\.kind/],
    ['a kind of another type', { kind: 1 }, /body\.kind/],
    ['a name too long', { kind: 'browser', name: 'x'.repeat(101) }, /body\.name/],
    ['an empty name', { kind: 'browser', name: '' }, /body\.name/],
    ['a control character in the name', { kind: 'browser', name: 'a\u0001b' }, /body\.name .*U\+0001/],
    ['a NUL in the clientId', { kind: 'browser', clientId: 'a\u0000' }, /body\.clientId .*U\+0000/],
    ['a space in the clientId', { kind: 'browser', clientId: 'a b' }, /body\.clientId/],
    ['a clientId too long', { kind: 'browser', clientId: 'x'.repeat(201) }, /body\.clientId/],
    ['an unknown field', { kind: 'browser', ring: true }, /ring|additional/],
  ];
  for (const [label, body, message] of cases) {
    const answer = await register(alice, body);
    isError(t, answer, 400, 'invalid_request', label);
    t.regex(answer.body.error.message, message, label);
  }
  t.is((await register(alice, { kind: 'browser', name: 'x'.repeat(100), clientId: 'x'.repeat(200) })).status, 201);
  isError(
    t,
    await service.request('POST', '/api/v1/devices', { auth: alice, rawBody: '{"kind":' }),
    400,
    'invalid_request',
  );
  isError(t, await service.request('POST', '/api/v1/devices', { auth: alice }), 400, 'invalid_request');
  isError(t, await service.request('DELETE', '/api/v1/devices/not-a-uuid', { auth: alice }), 400, 'invalid_request');
  isError(t, await list(alice, undefined, '?limit=0'), 400, 'invalid_request');
  isError(t, await list(alice, undefined, '?cursor=forged'), 400, 'invalid_cursor');
  t.is((await list(alice)).body.data.length, 1, 'only the valid one was registered');
});

test('a registration retried with its idempotency key replays the same answer and registers once', async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const key = `register-${randomUUID()}`;
  const first = await register(alice, { kind: 'browser', clientId: 'tab' }, key);
  t.is(first.status, 201, first.text);
  const replay = await register(alice, { kind: 'browser', clientId: 'tab' }, key);
  t.is(replay.status, 201);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.is(replay.text, first.text);
  t.is((await list(alice)).body.data.length, 1);
});
