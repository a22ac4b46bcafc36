/**
 * Operation 54, `POST /api/v1/calls/{id}/hold` (docs/contact-center.md, "Call control"): the typed call command
 * `hold`, recorded on a connected call and announced on `switchboard_call_control` in the request's transaction;
 * refused for a call that is not connected (409 call_conflict) or has ended (409 call_ended), 404 for another
 * workspace's call. Calls are written the way the engine writes them (core/calls/calls.ts); a connection LISTENing on
 * the channel stands for the engine and hears what it would. API role only: no engine acts behind the tests' backs.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { addLeg, changeState, endCall } from '../../core/calls/calls.ts';
import { pendingCallCommands } from '../../core/calls/commands.ts';
import {
  isError,
  liveCall,
  workspaceWithUser,
  connectedCall,
  callControlListener,
  callCommand,
  serviceForFile,
} from '../helpers/service.ts';

const service = serviceForFile(test);

const hold = callCommand(service, 'hold');

async function heldColumn(callId: string): Promise<boolean | null | undefined> {
  const result = await service.pool.query<{ hold_requested: boolean | null }>(
    'SELECT hold_requested FROM calls WHERE id = $1',
    [callId],
  );
  return result.rows[0]?.hold_requested;
}

test('holdCall of a connected call: recorded, announced as a typed command, re-read by its engine, idempotent', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const row = await connectedCall(service.pool, setup, owner);
  const { next: heard } = await callControlListener(t, service, row.id);

  const key = randomUUID();
  const held = await hold(setup, row.id, { hold: true }, { idempotencyKey: key });
  t.is(held.status, 200, held.text);
  t.like(held.body, { id: row.id, state: 'connected', hold: true });
  t.is(await heldColumn(row.id), true);
  t.deepEqual(await pendingCallCommands(service.pool, owner), [{ action: 'hold', callId: row.id, hold: true }]);
  // The same request again is the stored answer, not a second command.
  const again = await hold(setup, row.id, { hold: true }, { idempotencyKey: key });
  t.is(again.status, 200, again.text);
  t.deepEqual(again.body, held.body);

  const resumed = await hold(setup, row.id, { hold: false });
  t.is(resumed.status, 200, resumed.text);
  t.like(resumed.body, { id: row.id, hold: false });
  t.deepEqual(await pendingCallCommands(service.pool, owner), [{ action: 'hold', callId: row.id, hold: false }]);
  // The engine hears both, in commit order.
  t.deepEqual(await heard(2), [
    { action: 'hold', callId: row.id, hold: true },
    { action: 'hold', callId: row.id, hold: false },
  ]);

  // A new connection (a transfer, the next agent) starts unheld.
  const legId = await addLeg(service.pool, row.id, { role: 'forward', remote: 'x', sipCallId: null });
  await changeState(service.pool, row.id, 'connected', { connectedLeg: { id: legId, role: 'forward' } });
  t.is(await heldColumn(row.id), null);
  t.deepEqual(await pendingCallCommands(service.pool, owner), []);
});

test('holdCall: 409 call_conflict when not connected, 409 call_ended, 404 elsewhere, 400 for a bad body, 403 without calls:*', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const routing = await liveCall(service.pool, setup, { engineOwner: owner });
  await changeState(service.pool, routing.id, 'routing', { answered: true });
  isError(t, await hold(setup, routing.id, { hold: true }), 409, 'call_conflict', 'routing');
  await changeState(service.pool, routing.id, 'queued');
  isError(t, await hold(setup, routing.id, { hold: true }), 409, 'call_conflict', 'queued');
  t.is(await heldColumn(routing.id), null, 'a refused hold records nothing');
  t.deepEqual(await pendingCallCommands(service.pool, owner), []);

  const connected = await connectedCall(service.pool, setup, owner);
  isError(t, await hold(setup, connected.id, {}), 400, 'invalid_request', 'no hold');
  isError(t, await hold(setup, connected.id, { hold: 'yes' }), 400, 'invalid_request', 'not a boolean');
  isError(t, await hold(setup, connected.id, { hold: true, music: 'x' }), 400, 'invalid_request', 'unknown field');
  const other = await workspaceWithUser(service);
  isError(t, await hold(other, connected.id, { hold: true }), 404, 'not_found', 'another workspace');
  isError(t, await hold(setup, randomUUID(), { hold: true }), 404, 'not_found', 'unknown call');
  t.is(await heldColumn(connected.id), null);

  // A user token needs calls:*.
  const token = async (scopes: string[]) => {
    const session = await service.request('POST', '/api/v1/sessions', {
      auth: setup.apiKey,
      body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes },
    });
    t.is(session.status, 201, session.text);
    return session.body.token as string;
  };
  isError(
    t,
    await hold(setup, connected.id, { hold: true }, { auth: await token(['devices:*']) }),
    403,
    'insufficient_scope',
  );
  const allowed = await hold(setup, connected.id, { hold: true }, { auth: await token(['calls:*']) });
  t.is(allowed.status, 200, allowed.text);

  await endCall(service.pool, connected.id, 'caller_hangup');
  isError(t, await hold(setup, connected.id, { hold: false }), 409, 'call_ended', 'ended');
  t.deepEqual(await pendingCallCommands(service.pool, owner), []);
});
