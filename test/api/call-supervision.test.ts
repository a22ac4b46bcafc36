/**
 * Operation 56, `POST /api/v1/calls/{id}/supervise` (docs/contact-center.md, "Call control"): the typed call command
 * `supervise`, recorded on a connected call under its supervisor and announced on `switchboard_call_control` in the
 * request's transaction; `calls:supervise` needed (a key or member token with `calls:*` alone is 403); 404 for a call
 * or a member the workspace does not have, 409 `call_conflict` for a call not connected, `call_ended`, and
 * `supervisor_unreachable` for a member without a live device, each with nothing recorded or announced. Calls are
 * written the way the engine writes them; a connection LISTENing on the channel stands for the engine.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { changeState, endCall } from '../../core/calls/calls.ts';
import { pendingCallCommands, takeSuperviseRequest } from '../../core/calls/commands.ts';
import { setDeviceBusy } from '../../core/devices/devices.ts';
import { issueKey } from '../../core/identity/applications.ts';
import { addAgent } from '../helpers/contact-center.ts';
import {
  isError,
  liveCall,
  workspaceWithUser,
  connectedCall,
  callControlListener,
  callCommand,
  serviceForFile,
  signingKeysForFile,
} from '../helpers/service.ts';

const service = serviceForFile(test);
const keys = signingKeysForFile(test, service);

const supervise = callCommand(service, 'supervise');

/** The ids of the member's devices. */
async function devicesOfMember(memberId: string): Promise<string[]> {
  const result = await service.pool.query<{ id: string }>('SELECT id FROM devices WHERE member_id = $1', [memberId]);
  return result.rows.map((row) => row.id);
}

async function requests(callId: string): Promise<unknown> {
  const result = await service.pool.query<{ supervise_requests: unknown }>(
    'SELECT supervise_requests FROM calls WHERE id = $1',
    [callId],
  );
  return result.rows[0]?.supervise_requests;
}

test('superviseCall of a connected call: recorded per supervisor, announced, re-read by its engine, taken up once', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const row = await connectedCall(service.pool, setup, owner);
  const supervisor = await addAgent(service.pool, keys.tokens, setup, { scopes: ['calls:supervise'] });
  const second = await addAgent(service.pool, keys.tokens, setup);
  const control = await callControlListener(t, service, row.id);

  const key = randomUUID();
  const listen = await supervise(
    setup,
    row.id.toUpperCase(),
    { memberId: supervisor.id.toUpperCase(), mode: 'listen' },
    { idempotencyKey: key },
  );
  t.is(listen.status, 200, listen.text);
  t.like(listen.body, {
    id: row.id,
    state: 'connected',
    supervision: { memberId: supervisor.id, mode: 'listen', actor: 'application' },
  });
  const again = await supervise(
    setup,
    row.id.toUpperCase(),
    { memberId: supervisor.id.toUpperCase(), mode: 'listen' },
    { idempotencyKey: key },
  );
  t.deepEqual(again.body, listen.body, 'a replay is the stored answer');

  // The supervisor's own member token changes the mode; a second supervisor has a request of their own.
  const whisper = await supervise(
    setup,
    row.id,
    { memberId: supervisor.id, mode: 'whisper' },
    { auth: supervisor.token },
  );
  t.is(whisper.status, 200, whisper.text);
  t.like(whisper.body, { supervision: { memberId: supervisor.id, mode: 'whisper', actor: `member:${supervisor.id}` } });
  t.is((await supervise(setup, row.id, { memberId: second.id, mode: 'barge' })).status, 200);

  const heard = (await control.next(3)) as Array<Record<string, unknown>>;
  t.like(heard[0], {
    action: 'supervise',
    callId: row.id,
    memberId: supervisor.id,
    mode: 'listen',
    actor: 'application',
  });
  t.like(heard[1], { action: 'supervise', memberId: supervisor.id, mode: 'whisper', actor: `member:${supervisor.id}` });
  t.like(heard[2], { action: 'supervise', memberId: second.id, mode: 'barge' });
  t.is(control.heard.length, 3, 'the replay announced nothing');

  // The engine's re-read: the newest request of each supervisor (in no particular order).
  const pending = await pendingCallCommands(service.pool, owner);
  t.deepEqual(
    pending
      .map((command) => (command.action === 'supervise' ? `${command.memberId}:${command.mode}` : command.action))
      .sort(),
    [`${supervisor.id}:whisper`, `${second.id}:barge`].sort(),
  );
  const whisperId = heard[1]!.id as string;
  t.false(await takeSuperviseRequest(service.pool, row.id, supervisor.id, heard[0]!.id as string), 'replaced');
  t.true(await takeSuperviseRequest(service.pool, row.id, supervisor.id, whisperId));
  t.false(await takeSuperviseRequest(service.pool, row.id, supervisor.id, whisperId), 'taken once');
  t.deepEqual(Object.keys((await requests(row.id)) as object), [second.id]);
  t.true(await takeSuperviseRequest(service.pool, row.id, second.id, heard[2]!.id as string));
  t.is(await requests(row.id), null);
  t.deepEqual(await pendingCallCommands(service.pool, owner), []);
});

test('superviseCall needs calls:supervise, which calls:* does not grant; user tokens never', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await connectedCall(service.pool, setup, `engine-${randomUUID()}`);
  const supervisor = await addAgent(service.pool, keys.tokens, setup);
  const body = { memberId: supervisor.id, mode: 'listen' };
  const keyWith = async (scopes: Parameters<typeof issueKey>[1]['scopes']) =>
    (await issueKey(service.pool, { applicationId: setup.applicationId, name: 'k', scopes })).secret;

  const callsOnlyKey = await keyWith(['calls:*']);
  isError(t, await supervise(setup, row.id, body, { auth: callsOnlyKey }), 403, 'insufficient_scope', 'key calls:*');
  const callsOnlyMember = await addAgent(service.pool, keys.tokens, setup, { scopes: ['calls:*', 'devices:*'] });
  isError(
    t,
    await supervise(setup, row.id, body, { auth: callsOnlyMember.token }),
    403,
    'insufficient_scope',
    'member calls:*',
  );
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: {
      externalWorkspaceId: setup.workspace.externalWorkspaceId,
      externalUserId: 'alice',
      scopes: ['calls:*', 'calls:supervise'],
    },
  });
  if (session.status === 201) {
    const userAnswer = await supervise(setup, row.id, body, { auth: session.body.token as string });
    t.is(userAnswer.status, 403, `a user token: ${userAnswer.text}`);
  } else t.is(session.status, 400, `a user token cannot even carry calls:supervise: ${session.text}`);
  t.is(await requests(row.id), null, 'nothing recorded for the refused requests');

  const supervisingKey = await keyWith(['calls:supervise']);
  const byKey = await supervise(setup, row.id, body, { auth: supervisingKey });
  t.is(byKey.status, 200, byKey.text);
  const supervisingMember = await addAgent(service.pool, keys.tokens, setup, { scopes: ['calls:supervise'] });
  const byMember = await supervise(setup, row.id, body, { auth: supervisingMember.token });
  t.is(byMember.status, 200, byMember.text);
  t.like(byMember.body, { supervision: { actor: `member:${supervisingMember.id}` } });
});

test('superviseCall refused: not connected, ended, unknown call or member, unreachable supervisor, bad body; nothing recorded', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const supervisor = await addAgent(service.pool, keys.tokens, setup);
  const body = { memberId: supervisor.id, mode: 'barge' };
  const routing = await liveCall(service.pool, setup, { engineOwner: owner });
  const control = await callControlListener(t, service, routing.id);
  await changeState(service.pool, routing.id, 'routing', { answered: true });
  isError(t, await supervise(setup, routing.id, body), 409, 'call_conflict', 'routing');
  await changeState(service.pool, routing.id, 'queued');
  isError(t, await supervise(setup, routing.id, body), 409, 'call_conflict', 'queued');
  t.is(await requests(routing.id), null);

  const connected = await connectedCall(service.pool, setup, owner);
  const deviceless = await addAgent(service.pool, keys.tokens, setup, { device: false });
  isError(
    t,
    await supervise(setup, connected.id, { memberId: deviceless.id, mode: 'listen' }),
    409,
    'supervisor_unreachable',
  );
  // A supervisor whose only device is on another call cannot be offered this one; on this call (a mode change) it can.
  const busy = await addAgent(service.pool, keys.tokens, setup);
  const [busyDevice] = await devicesOfMember(busy.id);
  // Held by another engine: its accepted request below is not among this test's owner's pending commands.
  const elsewhere = await connectedCall(service.pool, setup, `engine-${randomUUID()}`);
  await setDeviceBusy(service.pool, busyDevice!, elsewhere.id);
  isError(
    t,
    await supervise(setup, connected.id, { memberId: busy.id, mode: 'listen' }),
    409,
    'supervisor_unreachable',
    'its device is on another call',
  );
  t.is(await requests(connected.id), null, 'nothing recorded');
  const onThisCall = await supervise(setup, elsewhere.id, { memberId: busy.id, mode: 'whisper' });
  t.is(onThisCall.status, 200, onThisCall.text);
  isError(t, await supervise(setup, connected.id, { memberId: randomUUID(), mode: 'listen' }), 404, 'not_found');
  const other = await workspaceWithUser(service);
  const stranger = await addAgent(service.pool, keys.tokens, other);
  isError(
    t,
    await supervise(setup, connected.id, { memberId: stranger.id, mode: 'listen' }),
    404,
    'not_found',
    "another workspace's member",
  );
  isError(t, await supervise(other, connected.id, body), 404, 'not_found', "another workspace's call");
  isError(t, await supervise(setup, randomUUID(), body), 404, 'not_found', 'unknown call');
  isError(t, await supervise(setup, connected.id, { memberId: supervisor.id }), 400, 'invalid_request', 'no mode');
  isError(t, await supervise(setup, connected.id, { ...body, mode: 'coach' }), 400, 'invalid_request', 'a bad mode');
  isError(t, await supervise(setup, connected.id, { ...body, memberId: 'x' }), 400, 'invalid_request', 'not a uuid');
  isError(t, await supervise(setup, connected.id, { ...body, loud: true }), 400, 'invalid_request', 'unknown field');
  t.is(await requests(connected.id), null, 'a refused request records nothing');

  await endCall(service.pool, connected.id, 'caller_hangup');
  isError(t, await supervise(setup, connected.id, body), 409, 'call_ended', 'ended');
  t.deepEqual(await pendingCallCommands(service.pool, owner), []);
  // Nothing was announced for any of them (a notice of this call's would have come before this one's).
  const marker = await connectedCall(service.pool, setup, owner);
  t.is((await supervise(setup, marker.id, body)).status, 200);
  t.deepEqual(control.heard, []);
});
