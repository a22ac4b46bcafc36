/**
 * Routing plans run by the real engine, with sipp as the carrier: `split` shares calls between its branches by the
 * call id, `hours` follows a schedule, many calls at once all end with their events delivered in order, a plan
 * published mid-call leaves that call on its version, the API's hangup ends a live call, and a restarted engine ends
 * the calls it owned.
 *
 * One service for the file (API and engine roles); each test has its own workspace and numbers.
 */
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import test, { type ExecutionContext } from 'ava';
import { startCall } from '../../../core/calls/calls.ts';
import { loadConfig } from '../../../core/config.ts';
import { startRoles } from '../../../app/roles.ts';
import { splitBranch } from '../../../engine/calls/runner.ts';
import { startService, type TestService } from '../../helpers/service.ts';
import { addSippCarrier, numberRunning as lineRunning, workspaceApi } from '../../helpers/phone-lines.ts';
import { runSipp, type SippRun } from '../../helpers/sipp.ts';
import { Receiver } from '../../helpers/webhook-receiver.ts';
import { until } from '../../helpers/until.ts';

let service: TestService;
let sipPort: number;

/**
 * The engine's clock for plan steps, fixed for the file: Monday 9 March 2026, 13:30 UTC, the first Monday of
 * daylight saving time in New York (09:30 EDT; it would be 08:30 under standard time). Only `hours` reads it.
 */
const engineInstant = new Date('2026-03-09T13:30:00Z');

test.before(async () => {
  // The webhook receiver listens on 127.0.0.1.
  service = await startService({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, ['api', 'engine'], {
    clock: { now: () => engineInstant },
  });
  sipPort = service.sipPort as number;
  await addSippCarrier(service);
});

test.after.always(async () => {
  await service?.close();
});

const workspace = () => workspaceApi(service);
const numberRunning = (t: ExecutionContext, definition: unknown, existing?: Awaited<ReturnType<typeof workspace>>) =>
  lineRunning(t, service, definition, existing);

interface CallRecord {
  id: string;
  state: string;
  end_reason: string | null;
  routing_plan_version: number | null;
  steps_taken: string[];
  ended: boolean;
}

/** The calls to `e164`, oldest first. */
async function callsTo(e164: string): Promise<CallRecord[]> {
  const result = await service.pool.query<CallRecord>(
    `SELECT id, state, end_reason, routing_plan_version, steps_taken, ended_at IS NOT NULL AS ended
       FROM calls WHERE to_number = $1 ORDER BY started_at, id`,
    [e164],
  );
  return result.rows;
}

/**
 * The `count` calls to `e164` once every one has ended and has its steps (the engine writes `steps_taken` when the
 * plan run returns, just after the call's end).
 */
function finishedCalls(e164: string, count: number): Promise<CallRecord[]> {
  return until(`${count} finished calls to ${e164}`, async () => {
    const calls = await callsTo(e164);
    return calls.length === count && calls.every((call) => call.ended && call.steps_taken.length > 0)
      ? calls
      : undefined;
  });
}

/** The only live call to `e164` once it is in state `routing`. */
function routingCall(e164: string): Promise<CallRecord> {
  return until(`a routing call to ${e164}`, async () => {
    const calls = await callsTo(e164);
    return calls.length === 1 && calls[0]?.state === 'routing' ? calls[0] : undefined;
  });
}

/** Each call's events as `sequence type`, by call id. */
async function eventsOf(callIds: string[]): Promise<Map<string, string[]>> {
  const result = await service.pool.query<{ stream_key: string; sequence: string; type: string }>(
    'SELECT stream_key, sequence, type FROM events WHERE stream_key = ANY($1) ORDER BY stream_key, sequence',
    [callIds.map((id) => `call:${id}`)],
  );
  const byCall = new Map<string, string[]>(callIds.map((id) => [id, []]));
  for (const row of result.rows) byCall.get(row.stream_key.slice('call:'.length))?.push(`${row.sequence} ${row.type}`);
  return byCall;
}

const startedAnsweredEnded = ['1 call.started', '2 call.answered', '3 call.ended'];

const sippFailed = (run: SippRun) => `${run.stderr}\n${run.errors}`;

test('split: about percentToA of the calls take a, each by its call id; every call started, answered, ended', async (t) => {
  const line = await numberRunning(t, {
    entry: 's',
    steps: {
      s: { type: 'split', percentToA: 30, a: 'a', b: 'b' },
      a: { type: 'hangup', message: null },
      b: { type: 'hangup', message: null },
    },
  });
  const run = await runSipp({
    scenario: 'answered',
    sipPort,
    dialed: line.e164.slice(1),
    calls: 200,
    rate: 40,
    limit: 40,
  });
  t.is(run.code, 0, sippFailed(run));
  const calls = await finishedCalls(line.e164, 200);
  const toA = calls.filter((call) => call.steps_taken[1] === 'a').length;
  // n = 200, p = 0.3: the mean is 60 and sigma 6.5; 30 to 90 is 4.6 sigma either way.
  t.true(toA >= 30 && toA <= 90, `${toA} of 200 took a`);
  for (const call of calls) {
    t.deepEqual(call.steps_taken, ['s', splitBranch(call.id, 30)], call.id);
    t.like(call, { state: 'ended', end_reason: 'plan_hangup', routing_plan_version: 1 });
  }
  const events = await eventsOf(calls.map((call) => call.id));
  for (const [id, found] of events) t.deepEqual(found, startedAnsweredEnded, id);
});

test('hours at a fixed instant: open and closed by each schedule’s own time zone, daylight saving and exceptions', async (t) => {
  const tenant = await workspace();
  const weekdays = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];
  const schedule = async (name: string, timezone: string, open: string, close: string, exceptions: unknown[] = []) => {
    const weeklyHours = weekdays.map((day) => ({ day, open, close }));
    const created = await tenant.api('POST', '/schedules', { name, timezone, weeklyHours, exceptions });
    t.is(created.status, 201, created.text);
    return created.body.id as string;
  };
  const cases = [
    // 09:30 in New York (EDT): inside 09:00-17:00.
    {
      name: 'New York office',
      id: await schedule('New York office', 'America/New_York', '09:00', '17:00'),
      open: true,
    },
    // 22:30 in Tokyo: after 17:00.
    { name: 'Tokyo office', id: await schedule('Tokyo office', 'Asia/Tokyo', '09:00', '17:00'), open: false },
    // 08:00-09:00 New York: open at 13:30 UTC only if daylight saving were ignored.
    { name: 'New York early', id: await schedule('New York early', 'America/New_York', '08:00', '09:00'), open: false },
    // The New York hours, but that Monday is a dated exception closed all day.
    {
      name: 'New York, closed that day',
      id: await schedule('New York, closed that day', 'America/New_York', '09:00', '17:00', [
        { date: '2026-03-09', name: 'Training day', hours: [] },
      ]),
      open: false,
    },
    // Closed on weekdays by the weekly hours, opened that Monday by an exception (09:00 New York = 13:00 UTC).
    {
      name: 'New York, opened that day',
      id: await schedule('New York, opened that day', 'America/New_York', '18:00', '19:00', [
        { date: '2026-03-09', hours: [{ open: '09:00', close: '10:00' }] },
      ]),
      open: true,
    },
  ];
  const lines = [];
  for (const entry of cases) {
    lines.push(
      await numberRunning(
        t,
        {
          entry: 'h',
          steps: {
            h: { type: 'hours', scheduleId: entry.id, open: 'open', closed: 'closed' },
            open: { type: 'hangup', message: null },
            closed: { type: 'hangup', message: null },
          },
        },
        tenant,
      ),
    );
  }
  const runs = await Promise.all(
    lines.map((line) => runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) })),
  );
  for (const run of runs) t.is(run.code, 0, sippFailed(run));
  for (const [index, entry] of cases.entries()) {
    const [call] = await finishedCalls((lines[index] as { e164: string }).e164, 1);
    t.deepEqual(call?.steps_taken, ['h', entry.open ? 'open' : 'closed'], entry.name);
    // The schedule's own answer at that instant agrees.
    const shown = await tenant.api('GET', `/schedules/${entry.id}?at=${engineInstant.toISOString()}`);
    t.is(shown.body.openNow, entry.open, entry.name);
  }
});

test('hours: a schedule open all week takes open, one never open takes closed', async (t) => {
  const tenant = await workspace();
  const schedule = async (name: string, weeklyHours: unknown[]) => {
    const created = await tenant.api('POST', '/schedules', { name, timezone: 'UTC', weeklyHours });
    t.is(created.status, 201, created.text);
    return created.body.id as string;
  };
  const days = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];
  const always = await schedule(
    'Always',
    days.map((day) => ({ day, open: '00:00', close: '24:00' })),
  );
  const never = await schedule('Never', []);
  const plan = (scheduleId: string) => ({
    entry: 'h',
    steps: {
      h: { type: 'hours', scheduleId, open: 'open', closed: 'closed' },
      open: { type: 'hangup', message: null },
      closed: { type: 'hangup', message: null },
    },
  });
  const open = await numberRunning(t, plan(always), tenant);
  const closed = await numberRunning(t, plan(never), tenant);
  const runs = await Promise.all(
    [open, closed].map((line) => runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) })),
  );
  for (const run of runs) t.is(run.code, 0, sippFailed(run));
  const [openCall] = await finishedCalls(open.e164, 1);
  const [closedCall] = await finishedCalls(closed.e164, 1);
  t.deepEqual(openCall?.steps_taken, ['h', 'open']);
  t.deepEqual(closedCall?.steps_taken, ['h', 'closed']);
  // The API shows the same steps.
  const shown = await open.api('GET', `/calls/${openCall?.id}`);
  t.is(shown.status, 200, shown.text);
  t.like(shown.body, { stepsTaken: ['h', 'open'], routingPlanVersion: 1, endReason: 'plan_hangup' });
});

// Serial (ava runs serial tests before the others): fifty calls load the service's one database pool and the CPU, and
// the file's other tests time single calls (a hangup answered within its 5 s wait) that must not share that load.
test.serial(
  '50 calls at once all complete; each call’s events reach a webhook in order, one request at a time',
  async (t) => {
    const receiver = await Receiver.start();
    t.teardown(() => receiver.close());
    const line = await numberRunning(t, {
      entry: 'bye',
      steps: { bye: { type: 'hangup', message: 'Thank you for calling.' } },
    });
    const endpoint = await service.request('POST', '/api/v1/webhooks', {
      auth: line.apiKey,
      body: { url: receiver.url() },
    });
    t.is(endpoint.status, 201, endpoint.text);

    const run = await runSipp({
      scenario: 'answered',
      sipPort,
      dialed: line.e164.slice(1),
      calls: 50,
      rate: 100,
      limit: 50,
    });
    t.is(run.code, 0, sippFailed(run));
    const calls = await finishedCalls(line.e164, 50);
    for (const call of calls) t.like(call, { end_reason: 'plan_hangup', steps_taken: ['bye'] });
    const ids = calls.map((call) => call.id);
    await until(
      'every call event at the receiver',
      async () => (ids.every((id) => receiver.sequences(id).length >= 3) ? true : undefined),
      30_000,
    );
    for (const id of ids) {
      const received = receiver.received.filter((request) => request.stream === id);
      t.deepEqual(
        received.map((request) => `${request.sequence} ${request.event.type}`),
        startedAnsweredEnded,
        id,
      );
    }
    t.deepEqual(receiver.overlaps, []);
    t.is(new Set(receiver.received.map((request) => request.stream)).size, 50, 'no other streams');
  },
);

test('a plan published mid-call does not change that call; the next call runs the new version', async (t) => {
  const menu = (noInput: string) => ({
    type: 'menu',
    prompt: { tts: 'Hello.' },
    options: { '1': 'one' },
    noInput,
    timeoutSecs: 3,
    maxRetries: 0,
  });
  const hangup = { type: 'hangup', message: null };
  const line = await numberRunning(t, { entry: 'menu', steps: { menu: menu('first'), first: hangup, one: hangup } });
  const first = runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  const live = await routingCall(line.e164);
  const saved = await line.api('PATCH', `/routing-plans/${line.planId}`, {
    definition: { entry: 'menu', steps: { menu: menu('second'), second: hangup, one: hangup } },
  });
  t.is(saved.status, 200, saved.text);
  const published = await line.api('POST', `/routing-plans/${line.planId}/publish`);
  t.is(published.status, 200, published.text);
  t.like(published.body, { publishedVersion: 2 });
  // Still mid-call: the menu waits 3 s for a key.
  const stillLive = await callsTo(line.e164);
  t.like(stillLive[0], { id: live.id, state: 'routing' });

  const run = await first;
  t.is(run.code, 0, sippFailed(run));
  const [ended] = await finishedCalls(line.e164, 1);
  const shown = await line.api('GET', `/calls/${ended?.id}`);
  t.is(shown.status, 200, shown.text);
  t.like(shown.body, { routingPlanVersion: 1, stepsTaken: ['menu', 'first'], endReason: 'plan_hangup' });

  const next = await runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  t.is(next.code, 0, sippFailed(next));
  const [, later] = await finishedCalls(line.e164, 2);
  t.like(later, { routing_plan_version: 2, steps_taken: ['menu', 'second'], end_reason: 'plan_hangup' });
});

test('POST /calls/{id}/hangup ends a live call the engine holds: 200 ended, and the caller gets the BYE', async (t) => {
  const line = await numberRunning(t, {
    entry: 'menu',
    steps: {
      menu: {
        type: 'menu',
        prompt: { tts: 'Please hold.' },
        options: { '1': 'bye' },
        noInput: 'bye',
        timeoutSecs: 30,
        maxRetries: 3,
      },
      bye: { type: 'hangup', message: null },
    },
  });
  const caller = runSipp({ scenario: 'answered', sipPort, dialed: line.e164.slice(1) });
  const live = await routingCall(line.e164);
  const hungUp = await line.api('POST', `/calls/${live.id}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  t.like(hungUp.body, { id: live.id, state: 'ended', endReason: 'hangup_requested' });
  t.is(hungUp.body.hangupRequested, undefined, 'the engine ended it within the wait');
  const run = await caller;
  t.is(run.code, 0, sippFailed(run));
  const [ended] = await finishedCalls(line.e164, 1);
  t.deepEqual(ended?.steps_taken, ['menu']);
  const events = await eventsOf([live.id]);
  t.deepEqual(events.get(live.id), startedAnsweredEnded);
});

test('an engine that starts ends the calls its previous run owned, with engine_restarted', async (t) => {
  const { setup } = await workspace();
  const live = (engineOwner: string) =>
    startCall(service.pool, {
      applicationId: setup.applicationId,
      workspaceId: setup.workspace.id,
      direction: 'inbound',
      from: '+15550001111',
      to: `+1628${randomInt(1_000_000, 9_999_999)}`,
      phoneNumberId: null,
      routingPlanId: null,
      routingPlanVersion: null,
      engineOwner,
      sipCallId: `restart-${randomInt(1_000_000)}@127.0.0.1`,
    });
  const owned = await live('engine-under-test');
  const other = await live('another-engine');

  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-engine-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const logs: string[] = [];
  const engine = await startRoles(
    loadConfig({
      DATABASE_URL: service.databaseUrl,
      PORT: '0',
      ENGINE_HTTP_PORT: '0',
      SIP_PORT: '0',
      ENGINE_ID: 'engine-under-test',
      LOG_LEVEL: 'warn',
      SWITCHBOARD_DATA_DIR: dataDir,
    }),
    new Set(['engine']),
    {
      logStream: new Writable({
        write(chunk, _encoding, done) {
          logs.push(String(chunk));
          done();
        },
      }),
    },
  );
  try {
    const result = await service.pool.query<{ id: string; state: string; end_reason: string | null }>(
      'SELECT id, state, end_reason FROM calls WHERE id = ANY($1)',
      [[owned.id, other.id]],
    );
    const byId = new Map(result.rows.map((row) => [row.id, row]));
    t.like(byId.get(owned.id), { state: 'ended', end_reason: 'engine_restarted' });
    t.like(byId.get(other.id), { state: 'initiated', end_reason: null }, 'another engine’s call goes on');
    const events = await service.pool.query<{ sequence: string; type: string; payload: string }>(
      'SELECT sequence, type, payload FROM events WHERE stream_key = $1 ORDER BY sequence',
      [`call:${owned.id}`],
    );
    t.deepEqual(
      events.rows.map((row) => `${row.sequence} ${row.type}`),
      ['1 call.started', '2 call.ended'],
    );
    t.like(JSON.parse(events.rows[1]?.payload ?? '{}'), {
      callId: owned.id,
      previousState: 'initiated',
      connected: false,
      durationSeconds: null,
      call: { state: 'ended', endReason: 'engine_restarted' },
    });
    t.true(
      logs.some((line) => line.includes('"ended":1') && line.includes('engine-under-test')),
      logs.join('\n'),
    );
  } finally {
    await engine.close();
  }
});
