/**
 * Operation 53, `POST /api/v1/calls/{id}/transfer` (docs/contact-center.md, "Transfer"): the typed call commands
 * `transfer` and `finish_transfer`, recorded on a connected call (`calls.transfer_request`, with an id the engine takes
 * up once) and announced in the request's transaction; refused for a call not connected (409 call_conflict), ended
 * (409 call_ended), another workspace's (404), a target the workspace does not have (404 target_not_found), a warm
 * transfer to a queue (400), and `complete`/`cancel` with no warm transfer being consulted (409 call_conflict). Calls
 * are written the way the engine writes them; the engine's side of a transfer (core/calls/commands.ts) is driven
 * here as the engine drives it. API role only.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { changeState, endCall } from '../../core/calls/calls.ts';
import {
  type CallCommand,
  pendingCallCommands,
  recordTransferred,
  setConsulting,
  takeTransferRequest,
} from '../../core/calls/commands.ts';
import { createMember } from '../../core/identity/members.ts';
import { createQueue } from '../../core/queues/queues.ts';
import { streamEvents } from '../helpers/queue-lines.ts';
import {
  isError,
  liveCall,
  workspaceWithUser,
  connectedCall,
  callCommand,
  serviceForFile,
  type WorkspaceSetup,
} from '../helpers/service.ts';

const service = serviceForFile(test);

const transfer = callCommand(service, 'transfer');

async function member(setup: WorkspaceSetup): Promise<string> {
  const created = await createMember(service.pool, {
    workspaceId: setup.workspace.id as string,
    email: `m-${randomUUID()}@example.com`,
    scopes: ['calls:*'],
  });
  return created.id;
}

type Commands = Extract<CallCommand, { action: 'transfer' | 'finish_transfer' }>[];

async function transfers(owner: string): Promise<Commands> {
  return (await pendingCallCommands(service.pool, owner)).filter(
    (command) => command.action === 'transfer' || command.action === 'finish_transfer',
  ) as Commands;
}

test('a blind transfer is recorded with its target, warm false and the actor; the engine takes it up once', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const row = await connectedCall(service.pool, setup, owner);
  const memberId = await member(setup);

  const answered = await transfer(setup, row.id, { target: { memberId: memberId.toUpperCase() } });
  t.is(answered.status, 200, answered.text);
  t.like(answered.body, { id: row.id, state: 'connected', transfer: { target: { memberId }, warm: false } });
  t.is(answered.body.transfer.actor, 'application');
  const [command] = await transfers(owner);
  t.like(command, { action: 'transfer', callId: row.id, target: { memberId }, warm: false, actor: 'application' });
  if (command?.action !== 'transfer') return;
  // Taken up once, whichever of the notice and the re-read comes first.
  t.true(await takeTransferRequest(service.pool, row.id, command.id));
  t.false(await takeTransferRequest(service.pool, row.id, command.id));
  t.deepEqual(await transfers(owner), []);
  t.true(await recordTransferred(service.pool, row.id, { target: command.target, warm: false, actor: command.actor }));
  const events = await streamEvents(service, `call:${row.id}`);
  const transferred = events.find((event) => event.type === 'call.transferred');
  t.deepEqual(transferred?.payload.transfer, { target: { memberId }, warm: false, actor: 'application' });

  // To a number and to a queue, by a member token (its actor).
  const queue = await createQueue(service.pool, setup.workspace.id as string, {
    name: 'Sales',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [],
  });
  const toNumber = await transfer(setup, row.id, { target: { e164: '+14155550123' }, warm: false });
  t.is(toNumber.status, 200, toNumber.text);
  const toQueue = await transfer(setup, row.id, { target: { queueId: queue.id } });
  t.is(toQueue.status, 200, toQueue.text);
  // The newer request replaces the one not taken up yet.
  t.like((await transfers(owner))[0], { target: { queueId: queue.id } });
});

test('a warm transfer: a second one is refused while consulted; complete and cancel only then', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const row = await connectedCall(service.pool, setup, owner);
  const memberId = await member(setup);
  isError(t, await transfer(setup, row.id, { action: 'complete' }), 409, 'call_conflict', 'nothing consulted');

  const started = await transfer(setup, row.id, { target: { memberId }, warm: true });
  t.is(started.status, 200, started.text);
  const [command] = await transfers(owner);
  if (command?.action !== 'transfer') return t.fail('no transfer recorded');
  t.true(await takeTransferRequest(service.pool, row.id, command.id));
  await setConsulting(service.pool, row.id, { target: command.target, warm: true, actor: command.actor });

  isError(t, await transfer(setup, row.id, { target: { e164: '+14155550123' } }), 409, 'call_conflict', 'consulting');
  const cancelled = await transfer(setup, row.id, { action: 'cancel' });
  t.is(cancelled.status, 200, cancelled.text);
  t.like((await transfers(owner))[0], { action: 'finish_transfer', finish: 'cancel' });
  const completed = await transfer(setup, row.id, { action: 'complete' });
  t.is(completed.status, 200, completed.text);
  t.like((await transfers(owner))[0], { action: 'finish_transfer', finish: 'complete' });

  await setConsulting(service.pool, row.id, null);
  isError(t, await transfer(setup, row.id, { action: 'cancel' }), 409, 'call_conflict', 'consultation over');
});

test('transferCall refuses: not connected, ended, elsewhere, unknown targets, bad bodies, warm to a queue, no scope', async (t) => {
  const setup = await workspaceWithUser(service);
  const owner = `engine-${randomUUID()}`;
  const memberId = await member(setup);
  const routing = await liveCall(service.pool, setup, { engineOwner: owner });
  await changeState(service.pool, routing.id, 'routing', { answered: true });
  isError(t, await transfer(setup, routing.id, { target: { memberId } }), 409, 'call_conflict', 'routing');
  t.deepEqual(await transfers(owner), [], 'a refused transfer records nothing');

  const row = await connectedCall(service.pool, setup, owner);
  isError(t, await transfer(setup, row.id, { target: { memberId: randomUUID() } }), 404, 'target_not_found');
  isError(t, await transfer(setup, row.id, { target: { queueId: randomUUID() } }), 404, 'target_not_found');
  const other = await workspaceWithUser(service);
  const stranger = await member(other);
  isError(t, await transfer(setup, row.id, { target: { memberId: stranger } }), 404, 'target_not_found', 'other ws');
  for (const body of [
    {},
    { target: {} },
    { target: { e164: '4155550123' } },
    { target: { e164: '+1', memberId } },
    { target: { memberId: 'x' } },
    { target: { memberId }, warm: 'yes' },
    { target: { memberId }, music: true },
    { action: 'finish' },
    { target: { memberId }, action: 'complete' },
    { action: 'cancel', warm: true },
  ]) {
    isError(t, await transfer(setup, row.id, body), 400, 'invalid_request', JSON.stringify(body));
  }
  // A number goes through the dial-out policy every call the service places goes through.
  isError(t, await transfer(setup, row.id, { target: { e164: '+1911' } }), 422, 'emergency_unavailable');
  isError(t, await transfer(setup, row.id, { target: { e164: '+44112' } }), 422, 'emergency_unavailable');
  isError(t, await transfer(setup, row.id, { target: { e164: '+999123456' } }), 400, 'invalid_destination');
  await service.pool.query(
    `UPDATE workspaces SET destination_policy = '{"allowedPrefixes": [], "blockedPrefixes": ["+1900"]}' WHERE id = $1`,
    [setup.workspace.id],
  );
  isError(t, await transfer(setup, row.id, { target: { e164: '+19005550123' } }), 403, 'destination_blocked');
  const queue = await createQueue(service.pool, setup.workspace.id as string, {
    name: 'Q',
    strategy: 'longest_idle',
    wrapUpSecs: 0,
    memberIds: [],
  });
  isError(t, await transfer(setup, row.id, { target: { queueId: queue.id }, warm: true }), 400, 'invalid_request');
  isError(t, await transfer(other, row.id, { target: { memberId } }), 404, 'not_found', 'another workspace');
  t.deepEqual(await transfers(owner), []);

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
    await transfer(setup, row.id, { target: { memberId } }, { auth: await token(['devices:*']) }),
    403,
    'insufficient_scope',
  );
  const byUser = await transfer(setup, row.id, { target: { memberId } }, { auth: await token(['calls:*']) });
  t.is(byUser.status, 200, byUser.text);
  t.is(byUser.body.transfer.actor, 'user:alice');

  await endCall(service.pool, row.id, 'caller_hangup');
  isError(t, await transfer(setup, row.id, { target: { memberId } }), 409, 'call_ended');
  t.deepEqual(await transfers(owner), []);
});
