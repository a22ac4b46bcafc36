/**
 * Calls through HTTP: operations 50-52 (list, get with legs, hang up). Calls are written the way the engine writes
 * them (core/calls/calls.ts). A hangup is asked of the engine that owns the call by a notice on
 * `switchboard_call_control`: the tests run a tiny fake engine (a connection that LISTENs there and ends the call
 * it hears about), or none, to see the answer after the 5-second wait. The tests of hangups that wait start a
 * service of their own whose hangups wait far longer, and end the calls themselves, as the engine would.
 *
 * One service for the file (API role only: no engine ends calls behind the tests' backs). Every test makes its own
 * application, so tests run concurrently without seeing each other's calls.
 */
import { randomInt, randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { callControlChannel } from '../../core/change-notices.ts';
import { importNumbers } from '../../core/numbers/numbers.ts';
import { addLeg, type CallRow, changeState, endCall, type NewCall } from '../../core/calls/calls.ts';
import {
  type Answer,
  isError,
  liveCall,
  startService,
  type TestService,
  workspaceWithUser,
  serviceForFile,
  type WorkspaceSetup,
} from '../helpers/service.ts';

const service = serviceForFile(test);

let calls = 0;

/** A call of the setup's workspace, written as the engine writes one (on the file's service unless told). */
async function newCall(
  setup: WorkspaceSetup,
  input: Partial<NewCall> = {},
  on: TestService = service,
): Promise<CallRow> {
  calls += 1;
  return liveCall(on.pool, setup, { from: `+1415555${String(1000 + calls).slice(-4)}`, ...input });
}

/** The item the API answers for a call row, spelled out field by field. */
function expectedCall(row: CallRow) {
  return {
    id: row.id,
    direction: row.direction,
    from: row.from_number,
    to: row.to_number,
    phoneNumberId: row.phone_number_id,
    state: row.state,
    startedAt: row.started_at.toISOString(),
    answeredAt: row.answered_at?.toISOString() ?? null,
    endedAt: row.ended_at?.toISOString() ?? null,
    endReason: row.end_reason,
    workspaceId: row.workspace_id,
    routingPlanId: row.routing_plan_id,
    routingPlanVersion: row.routing_plan_version,
    connectedAt: row.connected_at?.toISOString() ?? null,
    stepsTaken: row.steps_taken,
  };
}

function list(setup: WorkspaceSetup, query = '', auth: string = setup.apiKey) {
  return service.request('GET', `/api/v1/calls${query}`, { auth, workspaceId: setup.workspace.id });
}

function hangup(setup: WorkspaceSetup, callId: string, options: { idempotencyKey?: string; body?: unknown } = {}) {
  return service.request('POST', `/api/v1/calls/${callId}/hangup`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    ...options,
  });
}

async function userToken(t: ExecutionContext, setup: WorkspaceSetup, scopes: string[]): Promise<string> {
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: setup.workspace.externalWorkspaceId, externalUserId: 'alice', scopes },
  });
  t.is(session.status, 201, session.text);
  return session.body.token as string;
}

/** A claimed number of the workspace (calls reference phone_numbers). */
async function claimedNumber(t: ExecutionContext, setup: WorkspaceSetup): Promise<string> {
  const e164 = `+1628${randomInt(1_000_000, 9_999_999)}`;
  await importNumbers(service.pool, 'acme', [e164], ['voice']);
  const claim = await service.request('POST', '/api/v1/numbers', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { e164 },
  });
  t.is(claim.status, 201, claim.text);
  return claim.body.id as string;
}

/**
 * A fake engine: LISTENs on the call control channel and ends the calls it is told to hang up (only `callIds`, so
 * that concurrent tests' hangups find no engine). Every notice it hears is kept.
 */
async function fakeEngine(callIds: readonly string[]) {
  const heard: unknown[] = [];
  const ended: Promise<unknown>[] = [];
  const client = new pg.Client({ connectionString: service.databaseUrl });
  client.on('notification', (message) => {
    if (message.channel !== callControlChannel) return;
    const notice = JSON.parse(message.payload ?? 'null') as { callId?: string; action?: string };
    heard.push(notice);
    if (notice.action === 'hangup' && callIds.includes(notice.callId as string)) {
      ended.push(endCall(service.pool, notice.callId as string, 'hangup_requested'));
    }
  });
  await client.connect();
  await client.query(`LISTEN ${callControlChannel}`);
  return {
    heard,
    async stop() {
      await Promise.all(ended);
      await client.end();
    },
  };
}

/** The application's `call.ended` events for a call, once there is one (the log serves what committed below the
 * oldest running transaction, so it may lag concurrent tests' transactions). */
async function callEndedEvents(t: ExecutionContext, setup: WorkspaceSetup, callId: string) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const log = await service.request('GET', '/api/v1/events?type=call.ended&limit=500', { auth: setup.apiKey });
    t.is(log.status, 200, log.text);
    const events = (log.body.data as { callId: string }[]).filter((event) => event.callId === callId);
    if (events.length > 0 || Date.now() > deadline) return events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Operation 50: GET /api/v1/calls

test('listCalls: the workspace calls newest first, paged by cursor; another workspace sees none', async (t) => {
  const setup = await workspaceWithUser(service);
  const rows: CallRow[] = [];
  for (let index = 0; index < 5; index += 1) rows.push(await newCall(setup));
  const answered = await changeState(service.pool, (rows[1] as CallRow).id, 'routing', { answered: true });
  const connected = await changeState(service.pool, (rows[2] as CallRow).id, 'connected', {
    answered: true,
    connectedLeg: { id: randomUUID(), role: 'forward' },
  });
  const ended = await endCall(service.pool, (rows[3] as CallRow).id, 'caller_hangup');
  const current = [rows[0], answered, connected, ended, rows[4]] as CallRow[];
  const newestFirst = [...current].reverse();

  const all = await list(setup);
  t.is(all.status, 200, all.text);
  t.deepEqual(all.body, { data: newestFirst.map(expectedCall), nextCursor: null });
  t.is(all.body.data[1].state, 'ended');
  t.is(all.body.data[1].endReason, 'caller_hangup');
  t.truthy(all.body.data[2].connectedAt);
  t.truthy(all.body.data[2].answeredAt);
  t.is(all.body.data[3].connectedAt, null);

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: string = `?limit=2${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const page = await list(setup, query);
    t.is(page.status, 200, page.text);
    t.true(page.body.data.length <= 2);
    seen.push(...(page.body.data as { id: string }[]).map((call) => call.id));
    cursor = page.body.nextCursor;
    pages += 1;
  } while (cursor !== null && pages < 10);
  t.is(pages, 3);
  t.deepEqual(
    seen,
    newestFirst.map((row) => row.id),
  );

  const first = await list(setup, '?limit=2');
  const other = await workspaceWithUser(service);
  await newCall(other);
  const foreign = await list(other, `?cursor=${encodeURIComponent(first.body.nextCursor as string)}`);
  isError(t, foreign, 400, 'invalid_cursor', "another workspace's cursor");
  const otherList = await list(other);
  t.is(otherList.status, 200, otherList.text);
  t.is(otherList.body.data.length, 1);
  t.false((otherList.body.data as { id: string }[]).some((call) => current.some((row) => row.id === call.id)));

  const empty = await workspaceWithUser(service);
  t.deepEqual((await list(empty)).body, { data: [], nextCursor: null });

  isError(t, await list(setup, '?limit=0'), 400, 'invalid_request', 'limit=0');
  isError(t, await list(setup, '?cursor=nonsense'), 400, 'invalid_cursor', 'made-up cursor');
});

test('listCalls filters by state, phoneNumberId and since', async (t) => {
  const setup = await workspaceWithUser(service);
  const numberId = await claimedNumber(t, setup);
  const early = await newCall(setup, { phoneNumberId: numberId });
  const routed = await newCall(setup);
  await changeState(service.pool, routed.id, 'routing');
  // The next calls start in a later millisecond than these (answers carry milliseconds).
  await new Promise((resolve) => setTimeout(resolve, 5));
  const late = await newCall(setup, { phoneNumberId: numberId });
  const lateEnded = await newCall(setup);
  await endCall(service.pool, lateEnded.id, 'caller_hangup');

  const ids = (answer: Answer) => {
    t.is(answer.status, 200, answer.text);
    return (answer.body.data as { id: string }[]).map((call) => call.id);
  };
  t.deepEqual(ids(await list(setup, '?state=routing')), [routed.id]);
  t.deepEqual(ids(await list(setup, '?state=initiated')), [late.id, early.id]);
  t.deepEqual(ids(await list(setup, '?state=ended')), [lateEnded.id]);
  // States may grow: a state unknown today is a filter that matches nothing, not an error.
  t.deepEqual(ids(await list(setup, '?state=parked')), []);
  t.deepEqual(ids(await list(setup, `?phoneNumberId=${numberId}`)), [late.id, early.id]);
  t.deepEqual(ids(await list(setup, `?phoneNumberId=${numberId.toUpperCase()}`)), [late.id, early.id]);
  t.deepEqual(ids(await list(setup, `?phoneNumberId=${randomUUID()}`)), []);

  const since = late.started_at.toISOString();
  t.deepEqual(ids(await list(setup, `?since=${encodeURIComponent(since)}`)), [lateEnded.id, late.id]);
  t.deepEqual(ids(await list(setup, `?since=${encodeURIComponent(since)}&state=initiated&phoneNumberId=${numberId}`)), [
    late.id,
  ]);
  t.is(ids(await list(setup, '?since=2000-01-01T00:00:00Z')).length, 4);
  t.deepEqual(ids(await list(setup, '?since=2999-01-01T00:00:00%2B02:00')), []);

  // A filtered list pages within the filter.
  const page = await list(setup, `?phoneNumberId=${numberId}&limit=1`);
  t.deepEqual(ids(page), [late.id]);
  const next = await list(
    setup,
    `?phoneNumberId=${numberId}&limit=1&cursor=${encodeURIComponent(page.body.nextCursor as string)}`,
  );
  t.deepEqual(ids(next), [early.id]);
  t.is(next.body.nextCursor, null);

  isError(t, await list(setup, `?state=${'x'.repeat(101)}`), 400, 'invalid_request', 'state too long');
  isError(t, await list(setup, '?state='), 400, 'invalid_request', 'empty state');
  isError(t, await list(setup, '?phoneNumberId=not-a-uuid'), 400, 'invalid_request', 'phoneNumberId');
  isError(t, await list(setup, '?since=yesterday'), 400, 'invalid_request', 'since');
  isError(t, await list(setup, '?since=2026-03-08T09:30:00%2B05'), 400, 'invalid_request', 'since hour offset');
  isError(t, await list(setup, '?direction=inbound'), 400, 'invalid_request', 'unknown filter');
});

test('a user token with calls:* lists the workspace calls; one without the scope is 403', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  const other = await workspaceWithUser(service);
  await newCall(other);

  const token = await userToken(t, setup, ['calls:*']);
  const listed = await list(setup, '', token);
  t.is(listed.status, 200, listed.text);
  t.deepEqual(
    (listed.body.data as { id: string }[]).map((call) => call.id),
    [row.id],
  );
  // The token's own workspace, without a header too.
  const unscoped = await service.request('GET', '/api/v1/calls', { auth: token });
  t.is(unscoped.status, 200, unscoped.text);
  t.deepEqual(unscoped.body.data, listed.body.data);
  const got = await service.request('GET', `/api/v1/calls/${row.id}`, { auth: token });
  t.is(got.status, 200, got.text);
  t.is(got.body.id, row.id);

  const without = await userToken(t, setup, ['numbers:*']);
  isError(t, await list(setup, '', without), 403, 'insufficient_scope', 'list without calls:*');
  isError(
    t,
    await service.request('GET', `/api/v1/calls/${row.id}`, { auth: without }),
    403,
    'insufficient_scope',
    'get without calls:*',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Operation 51: GET /api/v1/calls/{id}

test('getCall: the call with its legs oldest first; 404 outside the workspace', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  const caller = await addLeg(service.pool, row.id, {
    role: 'caller',
    remote: 'sip:+14155551234@carrier',
    sipCallId: 'a',
  });
  const forward = await addLeg(service.pool, row.id, {
    role: 'forward',
    remote: 'sip:+33612345678@carrier',
    sipCallId: null,
  });
  const connected = (await changeState(service.pool, row.id, 'connected', {
    answered: true,
    connectedLeg: { id: forward, role: 'forward' },
  })) as CallRow;

  const got = await service.request('GET', `/api/v1/calls/${row.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(got.status, 200, got.text);
  const { legs, ...call } = got.body;
  t.deepEqual(call, expectedCall(connected));
  t.deepEqual(
    (legs as { id: string }[]).map((leg) => leg.id),
    [caller, forward],
  );
  t.deepEqual(Object.keys(legs[0]).sort(), [
    'answeredAt',
    'endedAt',
    'id',
    'packetsIn',
    'packetsOut',
    'remote',
    'role',
    'startedAt',
    'state',
  ]);
  t.like(legs[0], {
    role: 'caller',
    remote: 'sip:+14155551234@carrier',
    state: 'ringing',
    answeredAt: null,
    endedAt: null,
  });
  t.like(legs[1], { role: 'forward', remote: 'sip:+33612345678@carrier', state: 'ringing' });
  t.true(Date.parse(legs[0].startedAt) <= Date.parse(legs[1].startedAt));

  // Ending the call ends its legs.
  await endCall(service.pool, row.id, 'caller_hangup');
  const after = await service.request('GET', `/api/v1/calls/${row.id.toUpperCase()}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(after.status, 200, after.text);
  t.is(after.body.state, 'ended');
  t.is(after.body.endReason, 'caller_hangup');
  t.true(
    (after.body.legs as { state: string; endedAt: string | null }[]).every(
      (leg) => leg.state === 'ended' && leg.endedAt !== null,
    ),
  );

  const noLegs = await newCall(setup);
  const bare = await service.request('GET', `/api/v1/calls/${noLegs.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(bare.status, 200, bare.text);
  t.deepEqual(bare.body.legs, []);

  const other = await workspaceWithUser(service);
  isError(
    t,
    await service.request('GET', `/api/v1/calls/${row.id}`, { auth: other.apiKey, workspaceId: other.workspace.id }),
    404,
    'not_found',
    'another workspace',
  );
  isError(
    t,
    await service.request('GET', `/api/v1/calls/${randomUUID()}`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
    }),
    404,
    'not_found',
    'unknown call',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/calls/not-a-uuid', { auth: setup.apiKey, workspaceId: setup.workspace.id }),
    400,
    'invalid_request',
    'bad id',
  );
});

// ---------------------------------------------------------------------------------------------------------------
// Operation 52: POST /api/v1/calls/{id}/hangup

test('hangupCall with a user token: calls:* hangs up any call of its workspace (a browser phone ending its call); without it 403', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  await changeState(service.pool, row.id, 'routing', { answered: true });
  const other = await workspaceWithUser(service);
  const elsewhere = await newCall(other);
  const engine = await fakeEngine([row.id]);
  t.teardown(() => engine.stop());

  const without = await userToken(t, setup, ['devices:*']);
  isError(
    t,
    await service.request('POST', `/api/v1/calls/${row.id}/hangup`, { auth: without }),
    403,
    'insufficient_scope',
    'without calls:*',
  );
  const token = await userToken(t, setup, ['devices:*', 'calls:*']);
  // The token acts within its own workspace only.
  isError(
    t,
    await service.request('POST', `/api/v1/calls/${elsewhere.id}/hangup`, { auth: token }),
    404,
    'not_found',
    'a call of another workspace',
  );
  const answer = await service.request('POST', `/api/v1/calls/${row.id}/hangup`, { auth: token });
  t.is(answer.status, 200, answer.text);
  t.like(answer.body, { id: row.id, state: 'ended', endReason: 'hangup_requested' });
});

test('hangupCall: an ended call is 409 call_ended; a call of another workspace is 404', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  await endCall(service.pool, row.id, 'caller_hangup');
  // The body may be left out.
  isError(t, await hangup(setup, row.id), 409, 'call_ended', 'no body');
  isError(t, await hangup(setup, row.id, { body: {} }), 409, 'call_ended', 'empty body');
  isError(t, await hangup(setup, row.id, { body: { reason: 'x' } }), 400, 'invalid_request', 'unknown field');

  const live = await newCall(setup);
  const other = await workspaceWithUser(service);
  isError(t, await hangup(other, live.id), 404, 'not_found', 'another workspace');
  isError(t, await hangup(setup, randomUUID()), 404, 'not_found', 'unknown call');
  isError(
    t,
    await service.request('POST', `/api/v1/calls/${live.id}/hangup`, {
      auth: setup.apiKey,
      workspaceId: setup.workspace.id,
      idempotencyKey: null,
    }),
    400,
    'idempotency_key_required',
  );
  const still = await service.pool.query<{ ended_at: Date | null }>('SELECT ended_at FROM calls WHERE id = $1', [
    live.id,
  ]);
  t.is(still.rows[0]?.ended_at, null, 'a refused hangup touches nothing');
});

test('hangupCall of a live call: the owning engine hears it, ends the call, and the answer is the ended call', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  await addLeg(service.pool, row.id, { role: 'caller', remote: 'sip:+14155551234@carrier', sipCallId: null });
  await changeState(service.pool, row.id, 'routing', { answered: true });
  const engine = await fakeEngine([row.id]);
  t.teardown(() => engine.stop());

  const key = randomUUID();
  const answer = await hangup(setup, row.id, { idempotencyKey: key });
  t.is(answer.status, 200, answer.text);
  t.false(
    service.logs.some((line) => line.includes('did not end the call in time') && line.includes(row.id)),
    'answered once the engine ended the call, not after the wait',
  );
  t.like(answer.body, { id: row.id, state: 'ended', endReason: 'hangup_requested', workspaceId: setup.workspace.id });
  t.truthy(answer.body.endedAt);
  t.false('hangupRequested' in answer.body);
  t.false('legs' in answer.body);
  t.deepEqual(
    engine.heard.filter((notice) => (notice as { callId: string }).callId === row.id),
    [{ callId: row.id, action: 'hangup' }],
  );

  // A retry with the same key replays the stored answer; a new key finds the call ended.
  const replay = await hangup(setup, row.id, { idempotencyKey: key });
  t.is(replay.status, 200, replay.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(replay.body, answer.body);
  isError(t, await hangup(setup, row.id), 409, 'call_ended', 'a new key');
  t.is(engine.heard.filter((notice) => (notice as { callId: string }).callId === row.id).length, 1);

  const got = await service.request('GET', `/api/v1/calls/${row.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(got.body.state, 'ended');
  t.is(got.body.legs[0].state, 'ended');

  const events = await callEndedEvents(t, setup, row.id);
  t.is(events.length, 1);
  t.like(events[0], {
    type: 'call.ended',
    callId: row.id,
    previousState: 'routing',
    connected: false,
    call: { id: row.id, state: 'ended', endReason: 'hangup_requested' },
  });
});

test('hangupCall with no engine listening answers within about 5 s with hangupRequested and the call still live', async (t) => {
  const setup = await workspaceWithUser(service);
  const row = await newCall(setup);
  const key = randomUUID();
  const started = Date.now();
  const answer = await hangup(setup, row.id, { idempotencyKey: key });
  const took = Date.now() - started;
  t.is(answer.status, 200, answer.text);
  // About the 5 s wait: not before it, and not held on for long after (a busy machine's slack allowed).
  t.true(took >= 4_900 && took < 20_000, `answered after ${took} ms`);
  t.deepEqual(answer.body, { ...expectedCall(row), hangupRequested: true });
  t.true(
    service.logs.some(
      (line) => line.includes('hangup: the engine did not end the call in time') && line.includes(row.id),
    ),
    'a warning is logged',
  );

  const still = await service.request('GET', `/api/v1/calls/${row.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(still.body.state, 'initiated');
  t.is(still.body.endedAt, null);

  const replay = await hangup(setup, row.id, { idempotencyKey: key });
  t.is(replay.status, 200, replay.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(replay.body, answer.body);
});

/** The call control notices of a service's database, as the engines hear them: wait for those of given calls. */
async function controlNotices(databaseUrl: string) {
  const heard = new Set<string>();
  const waiting: { ids: readonly string[]; resolve: () => void }[] = [];
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('notification', (message) => {
    if (message.channel !== callControlChannel) return;
    heard.add((JSON.parse(message.payload ?? '{}') as { callId: string }).callId);
    for (const wait of waiting) if (wait.ids.every((id) => heard.has(id))) wait.resolve();
  });
  await client.connect();
  await client.query(`LISTEN ${callControlChannel}`);
  return {
    /** Resolves once a hangup of each call was announced (its request committed). */
    of(ids: readonly string[]): Promise<void> {
      return new Promise((resolve) => {
        if (ids.every((id) => heard.has(id))) resolve();
        else waiting.push({ ids, resolve });
      });
    },
    stop: () => client.end(),
  };
}

test('200 hangups at once wait for the engine holding no connection: other requests answer meanwhile', async (t) => {
  // A service of its own whose hangups wait for the engine far longer than the test takes: they answer only when
  // the test ends their calls, as the owning engine would. Its pool holds 10 connections.
  const own = await startService({ DATABASE_POOL_SIZE: '10' }, ['api'], { hangupWaitMs: 60 * 60_000 });
  t.teardown(() => own.close());
  const setup = await workspaceWithUser(own);
  const rows: CallRow[] = [];
  for (let index = 0; index < 200; index += 1) {
    rows.push(
      await newCall(
        setup,
        { from: `+1415556${String(index).padStart(4, '0')}`, engineOwner: 'engine-not-running' },
        own,
      ),
    );
  }
  const ids = rows.map((row) => row.id);
  // Whatever happens below, the calls end (as the engine would end them) so that no hangup is left waiting.
  const endAll = async () => {
    for (const id of ids) await endCall(own.pool, id, 'hangup_requested');
  };
  let ended = false;
  t.teardown(async () => {
    if (!ended) await endAll();
  });
  const notices = await controlNotices(own.databaseUrl);
  t.teardown(() => notices.stop());
  const ask = { auth: setup.apiKey, workspaceId: setup.workspace.id };

  const answered: Answer[] = [];
  let firstAnswer: (answer: Answer) => void = () => {};
  const anyAnswered = new Promise<Answer>((resolve) => (firstAnswer = resolve));
  const keys = rows.map(() => randomUUID());
  const burst = Date.now();
  const hangups = rows.map((row, index) => {
    const idempotencyKey = keys[index] as string;
    return own.request('POST', `/api/v1/calls/${row.id}/hangup`, { ...ask, idempotencyKey }).then((answer) => {
      answered.push(answer);
      firstAnswer(answer);
      return { row, idempotencyKey, answer };
    });
  });

  // Every hangup is recorded and announced (its transaction committed) before any answers: none waits for a
  // connection that another one holds while it waits for the engine.
  const early = await Promise.race([notices.of(ids).then(() => undefined), anyAnswered]);
  t.is(early, undefined, `a hangup answered before all 200 were recorded: ${early?.status} ${early?.text}`);
  t.is(answered.length, 0);
  t.log(`200 hangups recorded and waiting ${Date.now() - burst} ms after the burst`);

  // While all 200 wait, no connection of the service is held in a transaction...
  const held = await own.pool.query<{ n: number }>(
    `SELECT count(*)::integer AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'switchboard' AND state = 'idle in transaction'`,
  );
  t.is(held.rows[0]?.n, 0, 'no connection is held in a transaction while the hangups wait');
  // ... and other requests, reads and a mutation, go through.
  const [list, one, user, ready] = await Promise.all([
    own.request('GET', '/api/v1/calls?limit=200', ask),
    own.request('GET', `/api/v1/calls/${ids[0]}`, ask),
    own.request('POST', '/api/v1/users', { ...ask, body: { externalUserId: 'bob', displayName: 'Bob' } }),
    own.request('GET', '/readyz'),
  ]);
  t.is(list.status, 200, list.text);
  t.is(list.body.data.length, 200);
  t.true((list.body.data as { state: string }[]).every((call) => call.state === 'initiated'));
  t.is(one.status, 200, one.text);
  t.is(user.status, 201, user.text);
  t.is(ready.status, 200, ready.text);
  t.is(answered.length, 0, 'every hangup still waits for the engine');
  // A retry of a waiting hangup is told that it still runs, and acts on nothing.
  const retry = await own.request('POST', `/api/v1/calls/${ids[0]}/hangup`, { ...ask, idempotencyKey: keys[0] });
  isError(t, retry, 409, 'idempotency_in_progress', 'a retry while the hangup waits');
  t.is(retry.headers.get('retry-after'), '1');
  t.is(answered.length, 0);

  // The engine ends the calls: each hangup wakes on its call's end and answers the ended call.
  const ending = Date.now();
  await endAll();
  ended = true;
  const results = await Promise.all(hangups);
  t.log(`200 calls ended and every hangup answered in ${Date.now() - ending} ms`);
  for (const { row, answer } of results) {
    t.is(answer.status, 200, answer.text);
    t.like(answer.body, { id: row.id, state: 'ended', endReason: 'hangup_requested' });
    t.false('hangupRequested' in answer.body);
  }
  // Replays give the same answer, byte for byte.
  for (const { row, idempotencyKey, answer } of results.slice(0, 5)) {
    const replay = await own.request('POST', `/api/v1/calls/${row.id}/hangup`, { ...ask, idempotencyKey });
    t.is(replay.status, 200, replay.text);
    t.is(replay.headers.get('idempotent-replayed'), 'true');
    t.is(replay.text, answer.text);
  }
});

test('a hangup whose process died while it waited: a retry after its time gets the provisional answer, and so does the request if it finishes after all', async (t) => {
  const own = await startService({}, ['api'], { hangupWaitMs: 60 * 60_000 });
  t.teardown(() => own.close());
  const setup = await workspaceWithUser(own);
  const row = await newCall(setup, { from: '+14155557000', engineOwner: 'engine-not-running' }, own);
  const notices = await controlNotices(own.databaseUrl);
  t.teardown(() => notices.stop());
  const ask = { auth: setup.apiKey, workspaceId: setup.workspace.id, idempotencyKey: randomUUID() };
  const waiting = own.request('POST', `/api/v1/calls/${row.id}/hangup`, ask);
  await notices.of([row.id]);

  isError(t, await own.request('POST', `/api/v1/calls/${row.id}/hangup`, ask), 409, 'idempotency_in_progress');
  // The request's time to finish its answer runs out (as when its process dies): a retry settles the record with
  // the answer stored when the hangup was recorded.
  const expired = await own.pool.query(
    `UPDATE idempotency_records SET pending_until = clock_timestamp() - interval '1 second'
      WHERE key = $1 AND pending_until IS NOT NULL`,
    [ask.idempotencyKey],
  );
  t.is(expired.rowCount, 1);
  const settled = await own.request('POST', `/api/v1/calls/${row.id}/hangup`, ask);
  t.is(settled.status, 200, settled.text);
  t.is(settled.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(settled.body, { ...expectedCall(row), hangupRequested: true });

  // The first request, finishing after all (the call ends), answers what is stored: every answer to the key agrees.
  await endCall(own.pool, row.id, 'hangup_requested');
  const late = await waiting;
  t.is(late.status, 200, late.text);
  t.is(late.text, settled.text);
  const again = await own.request('POST', `/api/v1/calls/${row.id}/hangup`, ask);
  t.is(again.text, settled.text);
  t.is(again.headers.get('idempotent-replayed'), 'true');
});
