/**
 * The event log (operation 80, `GET /api/v1/events`; spec sections 4, 6 and 8) through real HTTP, over events written
 * by `appendEvent` inside real PostgreSQL transactions: commit-order paging and its limits, the type and workspace
 * filters, `hasMore` and the cursor to poll from, the late committer that must hold the log back rather than be
 * overtaken, resuming from an event id, refused positions, per-stream sequences, and the 15 event schemas.
 *
 * One service for the whole file; every test makes its own application, so tests run concurrently without seeing each
 * other's events. The log serves only transactions older than every one still running in the cluster, so a test waits
 * (polling, no fixed sleeps) until the events it wrote are served. The late committer holds a transaction open and is
 * serial, so that no other test of this file is waiting behind it.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sealCursor } from '../../api/pagination.ts';
import { inTransaction, type Queryable } from '../../core/database.ts';
import { type AppendedEvent, appendEvent, type NewEvent } from '../../core/events/outbox.ts';
import { type EventType, eventSchemas, eventTypes, streamOf } from '../../core/events/types.ts';
import type { Scope } from '../../core/scopes.ts';
import { compileStrict } from '../../core/validation.ts';
import { type Answer, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;
/** The test's own connections to the service's database, for transactions it drives by hand. */
let pool: pg.Pool;

test.before(async () => {
  service = await startService();
  pool = new pg.Pool({ connectionString: service.databaseUrl, max: 12 });
  // A connection still closing when the database is dropped at the end gets "terminating connection": not a failure.
  pool.on('error', () => {});
});
test.after.always(async () => {
  await pool?.end();
  await service?.close();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers

interface Workspace {
  id: string;
  externalWorkspaceId: string;
}

/** An application with a workspace: what events are written for and read by. */
interface Setup {
  applicationId: string;
  apiKey: string;
  workspace: Workspace;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- served events are JSON checked by the tests
type Served = Record<string, any> & { id: string; type: string; sequence: number };

interface Page {
  data: Served[];
  nextCursor: string;
  hasMore: boolean;
}

async function setup(): Promise<Setup> {
  const created = await workspaceWithUser(service);
  return { applicationId: created.applicationId, apiKey: created.apiKey, workspace: created.workspace };
}

async function addWorkspace(owner: Setup): Promise<Workspace> {
  const answer = await service.request('POST', '/api/v1/workspaces', {
    auth: owner.apiKey,
    body: { externalWorkspaceId: `ws-${randomUUID()}`, name: 'Acme Sales', timezone: 'Europe/Paris' },
  });
  if (answer.status !== 201) throw new Error(`workspace: ${answer.status} ${answer.text}`);
  return answer.body as Workspace;
}

const at = '2025-03-04T10:15:30.123Z';

function callObject(callId: string, state = 'initiated') {
  return {
    id: callId,
    direction: 'inbound',
    from: '+33612345678',
    to: '+33198765432',
    phoneNumberId: null,
    state,
    startedAt: at,
    answeredAt: null,
    endedAt: null,
    endReason: null,
  };
}

/** Appends a `call.started` in `db` (a transaction's client, or the pool for a transaction of its own). */
function appendCall(db: Queryable, owner: Setup, callId = randomUUID(), workspace = owner.workspace) {
  return appendEvent(db, {
    type: 'call.started',
    streamId: callId,
    applicationId: owner.applicationId,
    workspaceId: workspace.id,
    externalWorkspaceId: workspace.externalWorkspaceId,
    fields: { callId, call: callObject(callId) },
  });
}

/** Appends `count` call events, each in a transaction of its own committed before the next begins. */
async function appendSequentially(owner: Setup, count: number, workspace = owner.workspace): Promise<AppendedEvent[]> {
  const appended: AppendedEvent[] = [];
  for (let index = 0; index < count; index += 1) {
    appended.push(await inTransaction(pool, (db) => appendCall(db, owner, randomUUID(), workspace)));
  }
  return appended;
}

function getEvents(
  owner: Setup,
  query: Record<string, string | undefined> = {},
  headers: Record<string, string> = {},
): Promise<Answer> {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.set(name, value);
  const suffix = search.size > 0 ? `?${search.toString()}` : '';
  return service.request('GET', `/api/v1/events${suffix}`, { auth: owner.apiKey, headers });
}

async function getPage(
  t: ExecutionContext,
  owner: Setup,
  query: Record<string, string | undefined> = {},
  headers: Record<string, string> = {},
): Promise<Page> {
  const answer = await getEvents(owner, query, headers);
  t.is(answer.status, 200, answer.text);
  t.deepEqual(Object.keys(answer.body ?? {}).sort(), ['data', 'hasMore', 'nextCursor']);
  t.is(typeof answer.body.nextCursor, 'string');
  t.is(typeof answer.body.hasMore, 'boolean');
  return answer.body as Page;
}

/**
 * Pages from `after` (absent: the start of the log) until every event of `expected` has been served and the log says
 * there is nothing more for now. Polls without sleeping while the log lags behind transactions still running.
 * Returns everything served, in order, and the cursor to poll from.
 */
async function collect(
  owner: Setup,
  after: string | undefined,
  expected: readonly string[],
  query: Record<string, string> = {},
  headers: Record<string, string> = {},
): Promise<{ events: Served[]; cursor: string }> {
  const events: Served[] = [];
  let cursor = after;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const answer = await getEvents(owner, { ...query, after: cursor }, headers);
    if (answer.status !== 200) throw new Error(`events: ${answer.status} ${answer.text}`);
    const page = answer.body as Page;
    events.push(...page.data);
    cursor = page.nextCursor;
    if (page.hasMore) continue;
    const served = new Set(events.map((event) => event.id));
    if (expected.every((id) => served.has(id))) return { events, cursor };
    if (Date.now() > deadline) throw new Error(`the log did not serve ${expected.length} events in time`);
    await yieldTurn();
  }
}

/** Polls until `probe` finds what it waits for; no fixed sleeps. */
async function waitFor(what: string, probe: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await yieldTurn();
  }
}

const ids = (events: readonly { id: string }[]) => events.map((event) => event.id);

function assertOnce(t: ExecutionContext, served: readonly Served[], label: string): void {
  t.is(new Set(ids(served)).size, served.length, `${label}: no event served twice`);
}

function assertError(t: ExecutionContext, answer: Answer, status: number, code: string, label: string): void {
  t.is(answer.status, status, `${label}: ${answer.text}`);
  t.is(answer.body?.error?.code, code, label);
  t.is(typeof answer.body?.error?.message, 'string', label);
}

/** Replaces the character at `index` with another one of the base64url alphabet. */
function tamper(text: string, index: number): string {
  const replacement = text[index] === 'A' ? 'B' : 'A';
  return text.slice(0, index) + replacement + text.slice(index + 1);
}

// ---------------------------------------------------------------------------------------------------------------
// Paging, limits, filters

test('pages the log in commit order; hasMore is true while more events are listed, false at the end', async (t) => {
  const owner = await setup();
  const appended = await appendSequentially(owner, 7);
  await collect(owner, undefined, ids(appended));

  const pages: Page[] = [];
  let after: string | undefined;
  do {
    const page = await getPage(t, owner, { limit: '3', after });
    pages.push(page);
    after = page.nextCursor;
  } while (pages[pages.length - 1]?.hasMore === true && pages.length < 10);
  t.deepEqual(
    pages.map((page) => page.data.length),
    [3, 3, 1],
  );
  t.deepEqual(
    pages.map((page) => page.hasMore),
    [true, true, false],
  );
  t.deepEqual(ids(pages.flatMap((page) => page.data)), ids(appended), 'commit order, each event once');

  const one = await getPage(t, owner, { limit: '1' });
  t.deepEqual(ids(one.data), ids(appended.slice(0, 1)));
  t.true(one.hasMore);
  const second = await getPage(t, owner, { limit: '1', after: one.nextCursor });
  t.deepEqual(ids(second.data), ids(appended.slice(1, 2)));

  // A page that takes exactly the rest is full, but nothing more is listed.
  const exact = await getPage(t, owner, { limit: '7' });
  t.deepEqual(ids(exact.data), ids(appended));
  t.false(exact.hasMore);
  const most = await getPage(t, owner, { limit: '500' });
  t.deepEqual(ids(most.data), ids(appended));
  t.false(most.hasMore);
});

test('limit defaults to 50 and accepts 1 to 500; 0, 501, abc and other non-integers are 400', async (t) => {
  const owner = await setup();
  // 51 events of one transaction: log order within it is the order they were appended.
  const appended = await inTransaction(pool, async (db) => {
    const list: AppendedEvent[] = [];
    for (let index = 0; index < 51; index += 1) list.push(await appendCall(db, owner));
    return list;
  });
  await collect(owner, undefined, ids(appended));

  const first = await getPage(t, owner);
  t.is(first.data.length, 50);
  t.true(first.hasMore);
  t.deepEqual(ids(first.data), ids(appended.slice(0, 50)));
  const rest = await getPage(t, owner, { after: first.nextCursor });
  t.deepEqual(ids(rest.data), ids(appended.slice(50)));
  t.false(rest.hasMore);

  const all = await getPage(t, owner, { limit: '500' });
  t.is(all.data.length, 51);

  for (const limit of ['0', '501', 'abc', '-1', '2.5', '', '1e3']) {
    const answer = await getEvents(owner, { limit });
    assertError(t, answer, 400, 'invalid_request', `limit=${limit}`);
    t.regex(answer.body?.error?.message ?? '', /limit/, `limit=${limit}: the message names limit`);
  }
});

test('type narrows the log to a comma-separated list of types; an unknown type is 400 naming it', async (t) => {
  const owner = await setup();
  const callId = randomUUID();
  const memberId = randomUUID();
  const written = await inTransaction(pool, async (db) => {
    const base = {
      applicationId: owner.applicationId,
      workspaceId: owner.workspace.id,
      externalWorkspaceId: owner.workspace.externalWorkspaceId,
    };
    const started = await appendCall(db, owner, callId);
    const agent = await appendExample(db, owner, 'agent.state_changed', memberId);
    const ended = await appendEvent(db, {
      ...base,
      type: 'call.ended',
      streamId: callId,
      fields: {
        callId,
        call: { ...callObject(callId, 'ended'), endedAt: at, endReason: 'hangup' },
        previousState: 'connected',
        connected: true,
        durationSeconds: 61,
      },
    });
    const again = await appendCall(db, owner);
    return { started, agent, ended, again };
  });
  await collect(owner, undefined, ids(Object.values(written)));

  const filtered = await getPage(t, owner, { type: 'call.started,agent.state_changed' });
  t.deepEqual(ids(filtered.data), ids([written.started, written.agent, written.again]));
  t.false(filtered.hasMore);
  const spaced = await getPage(t, owner, { type: ' call.ended , ' });
  t.deepEqual(ids(spaced.data), ids([written.ended]));

  // Paging through a filter skips the other types without losing one of the listed.
  const first = await getPage(t, owner, { type: 'call.started', limit: '1' });
  t.deepEqual(ids(first.data), ids([written.started]));
  t.true(first.hasMore);
  const next = await getPage(t, owner, { type: 'call.started', limit: '1', after: first.nextCursor });
  t.deepEqual(ids(next.data), ids([written.again]));
  t.false(next.hasMore);

  for (const type of ['call.exploded', 'call.started,call.exploded', 'CALL.STARTED', 'unrecognized']) {
    const answer = await getEvents(owner, { type });
    assertError(t, answer, 400, 'invalid_request', `type=${type}`);
    const unknown = type.split(',').find((name) => name !== 'call.started') as string;
    t.true(String(answer.body?.error?.message).includes(unknown), `type=${type}: names ${unknown}`);
  }
  // An empty list would serve nothing and still move the cursor past every event: it is refused, not skipped.
  for (const type of ['', ',', ' , ']) {
    assertError(t, await getEvents(owner, { type }), 400, 'invalid_request', `type="${type}"`);
  }
});

test('a workspace header narrows the log to that workspace; another application’s workspace is refused', async (t) => {
  const owner = await setup();
  const second = await addWorkspace(owner);
  const inFirst = await appendSequentially(owner, 2);
  const inSecond = await appendSequentially(owner, 2, second);
  const interleaved = await appendSequentially(owner, 1);
  await collect(owner, undefined, ids([...inFirst, ...inSecond, ...interleaved]));

  const byId = await getPage(t, owner, {}, { 'x-service-workspace-id': owner.workspace.id });
  t.deepEqual(ids(byId.data), ids([...inFirst, ...interleaved]));
  t.true(byId.data.every((event) => event.workspaceId === owner.workspace.id));
  const byExternalId = await getPage(t, owner, {}, { 'x-service-external-workspace-id': second.externalWorkspaceId });
  t.deepEqual(ids(byExternalId.data), ids(inSecond));
  t.true(byExternalId.data.every((event) => event.externalWorkspaceId === second.externalWorkspaceId));
  const everything = await getPage(t, owner);
  t.deepEqual(ids(everything.data), ids([...inFirst, ...inSecond, ...interleaved]));

  // Paging within one workspace, limit 1.
  const one = await getPage(t, owner, { limit: '1' }, { 'x-service-workspace-id': second.id });
  t.deepEqual(ids(one.data), ids(inSecond.slice(0, 1)));
  t.true(one.hasMore);
  const two = await getPage(t, owner, { limit: '1', after: one.nextCursor }, { 'x-service-workspace-id': second.id });
  t.deepEqual(ids(two.data), ids(inSecond.slice(1)));
  t.false(two.hasMore);

  const other = await setup();
  const foreign = await getEvents(owner, {}, { 'x-service-workspace-id': other.workspace.id });
  assertError(t, foreign, 403, 'workspace_forbidden', 'another application’s workspace');
});

test('another application’s events never appear in the log', async (t) => {
  const [mine, theirs] = await Promise.all([setup(), setup()]);
  const written: AppendedEvent[] = [];
  const foreign: AppendedEvent[] = [];
  // Interleaved, some in one transaction with events of both applications.
  for (let round = 0; round < 3; round += 1) {
    written.push(await appendCall(pool, mine));
    foreign.push(await appendCall(pool, theirs));
    const both = await inTransaction(pool, async (db) => [await appendCall(db, theirs), await appendCall(db, mine)]);
    foreign.push(both[0] as AppendedEvent);
    written.push(both[1] as AppendedEvent);
  }
  const { events } = await collect(mine, undefined, ids(written), { limit: '2' });
  t.deepEqual(ids(events), ids(written));
  t.true(events.every((event) => event.applicationId === mine.applicationId));
  const { events: theirEvents } = await collect(theirs, undefined, ids(foreign));
  t.deepEqual(ids(theirEvents), ids(foreign));
});

test('the nextCursor of the last page is where to poll from: later events appear after it, none repeated', async (t) => {
  const owner = await setup();
  const before = await appendSequentially(owner, 3);
  const first = await collect(owner, undefined, ids(before), { limit: '2' });
  t.deepEqual(ids(first.events), ids(before));

  const idle = await getPage(t, owner, { after: first.cursor });
  t.deepEqual(idle.data, [], 'nothing new yet');
  t.false(idle.hasMore);

  const later = await appendSequentially(owner, 2);
  const fromLast = await collect(owner, first.cursor, ids(later));
  t.deepEqual(ids(fromLast.events), ids(later), 'only the new events, in commit order');
  // The cursor of an empty poll is as good as the one before it.
  const fromIdle = await collect(owner, idle.nextCursor, ids(later));
  t.deepEqual(ids(fromIdle.events), ids(later));

  const last = await appendSequentially(owner, 1);
  const third = await collect(owner, fromLast.cursor, ids(last));
  t.deepEqual(ids(third.events), ids(last));
});

// ---------------------------------------------------------------------------------------------------------------
// The late committer

test.serial('a late committer holds the log back and is served once it commits; no cursor is overtaken', async (t) => {
  const owner = await setup();
  const earlier = await appendSequentially(owner, 1);
  const start = await collect(owner, undefined, ids(earlier));

  const late = await pool.connect();
  let open = false;
  try {
    await late.query('BEGIN');
    open = true;
    const eventA = await appendCall(late, owner);
    const eventB = await inTransaction(pool, (db) => appendCall(db, owner));
    const committed = await pool.query('SELECT count(*)::int AS n FROM events WHERE id = $1', [eventB.id]);
    t.is(committed.rows[0]?.n, 1, 'B has committed');

    // While A is open, B (which took its position after A) is held back, whichever way the log is read.
    const fromStart = await getPage(t, owner);
    t.deepEqual(ids(fromStart.data), ids(earlier), 'from the start: only what committed before A began');
    t.false(fromStart.hasMore);
    const held = await getPage(t, owner, { after: start.cursor });
    t.deepEqual(held.data, [], 'B is not served past A');
    t.false(held.hasMore);
    // Resuming from B's id may serve earlier events again, but neither A nor B while A is open.
    const resumedFromB = await getPage(t, owner, { after: eventB.id });
    t.deepEqual(
      ids(resumedFromB.data).filter((id) => id === eventA.id || id === eventB.id),
      [],
      'not even when resuming from B’s own id',
    );
    t.false(resumedFromB.hasMore);
    const handedOutWhileOpen = [fromStart.nextCursor, held.nextCursor, resumedFromB.nextCursor];

    await late.query('COMMIT');
    open = false;

    // Every cursor handed out before or while A was open serves A and B, each exactly once.
    for (const [label, cursor] of [
      ['the cursor before A began', start.cursor],
      ['the cursor from the start while A was open', handedOutWhileOpen[0]],
      ['the cursor of the held page', handedOutWhileOpen[1]],
      ['the cursor of the page resumed from B', handedOutWhileOpen[2]],
    ] as const) {
      const served = await collect(owner, cursor, [eventA.id, eventB.id], { limit: '1' });
      assertOnce(t, served.events, label);
      // A cursor resumed from an event id may serve events near it again (dedupe by id); the others serve exactly A, B.
      const expected = label.endsWith('from B') ? [...ids(earlier), eventA.id, eventB.id] : [eventA.id, eventB.id];
      const again = ids(served.events).filter((id) => !expected.includes(id));
      t.deepEqual(again, [], `${label}: nothing but these`);
      const servedIds = new Set(ids(served.events));
      t.true(servedIds.has(eventA.id) && servedIds.has(eventB.id), `${label}: A and B are served`);
      if (!label.endsWith('from B')) t.is(served.events.length, 2, label);
    }
    const whole = await collect(owner, undefined, [eventA.id, eventB.id]);
    t.deepEqual(ids(whole.events).sort(), [...ids(earlier), eventA.id, eventB.id].sort());
    assertOnce(t, whole.events, 'the whole log');
  } finally {
    if (open) await late.query('ROLLBACK');
    late.release();
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Resuming from an event id

test('after=<event id> resumes where that event committed: nothing committed after it is skipped', async (t) => {
  const owner = await setup();
  const before = await appendSequentially(owner, 2);

  // L takes its position first, then `pivot` commits while L is still open; a webhook receiver can get `pivot`
  // before L commits, and L's event must not be lost when it resumes from `pivot`.
  const slow = await pool.connect();
  let open = false;
  let lateEvent: AppendedEvent;
  let pivot: AppendedEvent;
  try {
    await slow.query('BEGIN');
    open = true;
    lateEvent = await appendCall(slow, owner);
    pivot = await inTransaction(pool, (db) => appendCall(db, owner));
    const beforeLate = await getPage(t, owner, { after: pivot.id });
    t.false(
      ids(beforeLate.data).some((id) => id === lateEvent.id || id === pivot.id),
      'nothing past the open transaction is served yet',
    );
    await slow.query('COMMIT');
    open = false;
  } finally {
    if (open) await slow.query('ROLLBACK');
    slow.release();
  }
  const after = await appendSequentially(owner, 2);
  const committedAfterPivot = [lateEvent.id, ...ids(after)];

  for (const limit of ['1', '50']) {
    const resumed = await collect(owner, pivot.id, committedAfterPivot, { limit });
    assertOnce(t, resumed.events, `limit ${limit}`);
    const served = new Set(ids(resumed.events));
    for (const id of committedAfterPivot) t.true(served.has(id), `limit ${limit}: ${id} is not skipped`);
    // Whatever is served again is from near the pivot, never from outside this application's log.
    const known = new Set([...ids(before), lateEvent.id, pivot.id, ...ids(after)]);
    t.true(
      ids(resumed.events).every((id) => known.has(id)),
      `limit ${limit}: only this application's events`,
    );
  }

  // Resuming from the last event: nothing after it is skipped either, and new events follow.
  const last = after[after.length - 1] as AppendedEvent;
  const tail = await collect(owner, last.id, []);
  assertOnce(t, tail.events, 'tail');
  const more = await appendSequentially(owner, 1);
  const polled = await collect(owner, tail.cursor, ids(more));
  t.deepEqual(ids(polled.events), ids(more));

  // Resuming from an id while narrowed to a type still serves the later events of that type.
  const typed = await collect(owner, pivot.id, committedAfterPivot, { type: 'call.started' });
  for (const id of committedAfterPivot) t.true(ids(typed.events).includes(id));
});

test('a position the log never handed out is 400 invalid_cursor', async (t) => {
  const [owner, other] = await Promise.all([setup(), setup()]);
  const [mine] = await appendSequentially(owner, 1);
  const [theirs] = await appendSequentially(other, 1);
  const valid = await collect(owner, undefined, [(mine as AppendedEvent).id]);
  const theirCursor = await collect(other, undefined, [(theirs as AppendedEvent).id]);
  t.is((await getEvents(owner, { after: valid.cursor })).status, 200, 'the genuine cursor works');
  t.is((await getEvents(owner, { after: (mine as AppendedEvent).id })).status, 200, 'an own event id works');

  const [payload, signature] = valid.cursor.split('.') as [string, string];
  // A cursor of another list of this service (the workspace list), sealed with the same key.
  await addWorkspace(owner);
  const workspaces = await service.request('GET', '/api/v1/workspaces?limit=1', { auth: owner.apiKey });
  t.is(workspaces.status, 200, workspaces.text);
  const workspaceCursor = workspaces.body.nextCursor as string;
  t.is(typeof workspaceCursor, 'string');

  const refused: [string, string][] = [
    ['an unknown UUID', randomUUID()],
    ['another application’s event id', (theirs as AppendedEvent).id],
    ['another application’s cursor', theirCursor.cursor],
    ['a tampered cursor payload', `${tamper(payload, 0)}.${signature}`],
    ['a tampered cursor signature', `${payload}.${tamper(signature, 0)}`],
    ['a cursor signed with another key', sealCursor(randomBytes(32), ['events', owner.applicationId, '1', '0'])],
    ['a cursor of another list', workspaceCursor],
    ['a cursor with an extra part', `${valid.cursor}.x`],
    ['the payload alone', payload],
    ['garbage', 'garbage'],
    ['an empty after', ''],
    ['a UUID of version 0', '00000000-0000-0000-0000-000000000001'],
    ['a very long string', 'A'.repeat(2000)],
    ['an event position in clear', '12345:1'],
  ];
  for (const [label, after] of refused) {
    assertError(t, await getEvents(owner, { after }), 400, 'invalid_cursor', label);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Streams and sequences

test('two writers of one stream: the second waits for the first, and sequences follow commit order', async (t) => {
  const owner = await setup();
  const callId = randomUUID();
  const first = await pool.connect();
  const second = await pool.connect();
  try {
    const secondPid = (await second.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    let firstHolds = () => {};
    const firstAppended = new Promise<void>((resolve) => (firstHolds = resolve));
    const commits: string[] = [];

    const [one, two] = await Promise.all([
      (async () => {
        await first.query('BEGIN');
        const event = await appendCall(first, owner, callId);
        firstHolds();
        await waitFor('the second writer to wait for the stream', async () => {
          const activity = await pool.query<{ wait: string | null }>(
            'SELECT wait_event_type AS wait FROM pg_stat_activity WHERE pid = $1',
            [secondPid],
          );
          return activity.rows[0]?.wait === 'Lock';
        });
        await first.query('COMMIT');
        commits.push(event.id);
        return event;
      })(),
      (async () => {
        await firstAppended;
        await second.query('BEGIN');
        const event = await appendCall(second, owner, callId);
        // It got its sequence only once the first writer had committed.
        const visible = await pool.query('SELECT 1 FROM events WHERE stream_key = $1 AND sequence = 1', [
          `call:${callId}`,
        ]);
        t.is(visible.rowCount, 1, 'the first writer committed before the second got its sequence');
        await second.query('COMMIT');
        commits.push(event.id);
        return event;
      })(),
    ]);
    t.is(one.sequence, 1);
    t.is(two.sequence, 2);
    t.deepEqual(commits, [one.id, two.id]);

    const { events } = await collect(owner, undefined, [one.id, two.id]);
    const byId = new Map(events.map((event) => [event.id, event]));
    t.is(byId.get(one.id)?.sequence, 1);
    t.is(byId.get(two.id)?.sequence, 2);
  } finally {
    await first.query('ROLLBACK').catch(() => {});
    await second.query('ROLLBACK').catch(() => {});
    first.release();
    second.release();
  }
});

test('concurrent writers of one stream get distinct sequences 1..n; separate streams count on their own', async (t) => {
  const owner = await setup();
  const callId = randomUUID();
  const otherCallId = randomUUID();
  const writers = await Promise.all(
    Array.from({ length: 6 }, (_, index) =>
      inTransaction(pool, (db) => appendCall(db, owner, index % 2 === 0 ? callId : otherCallId)),
    ),
  );
  const { events } = await collect(owner, undefined, ids(writers));
  const sequencesOf = (stream: string) =>
    events
      .filter((event) => event.callId === stream)
      .map((event) => event.sequence)
      .sort((a, b) => a - b);
  t.deepEqual(sequencesOf(callId), [1, 2, 3]);
  t.deepEqual(sequencesOf(otherCallId), [1, 2, 3]);
  for (const writer of writers) {
    t.is(events.find((event) => event.id === writer.id)?.sequence, writer.sequence);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Payloads: validation and the 15 types

type Examples = { [T in EventType]: (subject: string, owner: Setup) => NewEvent<T>['fields'] };

/** One valid example of each type; `subject` is the stream's subject (call, number or member id). */
const examples: Examples = {
  'call.started': (callId) => ({ callId, call: callObject(callId) }),
  'call.ringing': (callId) => ({
    callId,
    call: callObject(callId, 'offering'),
    ring: {
      ringSeq: 1,
      memberIds: [randomUUID()],
      externalUserIds: ['alice'],
      offerId: randomUUID(),
      expiresAt: '2025-03-04T10:16:00+01:00',
    },
  }),
  'call.answered': (callId) => ({ callId, call: { ...callObject(callId, 'connected'), answeredAt: at } }),
  'call.connected': (callId) => ({
    callId,
    call: { ...callObject(callId, 'connected'), answeredAt: at, agent: { memberId: null, externalUserId: 'alice' } },
    leg: { id: randomUUID(), role: 'agent', memberId: randomUUID(), externalUserId: null },
  }),
  'call.transferred': (callId) => ({
    callId,
    call: callObject(callId, 'connected'),
    transfer: { target: { queueId: randomUUID() }, warm: true, actor: 'alice' },
  }),
  'call.ended': (callId) => ({
    callId,
    call: { ...callObject(callId, 'ended'), endedAt: at, endReason: 'caller_hangup' },
    previousState: 'queued',
    connected: false,
    durationSeconds: null,
  }),
  'queue.entered': (callId) => ({
    callId,
    queue: { queueId: randomUUID(), entryId: randomUUID(), state: 'waiting', priority: -3, enqueuedAt: at },
  }),
  'queue.left': (callId) => ({
    callId,
    queue: { queueId: randomUUID(), entryId: randomUUID(), state: 'abandoned', priority: 0, enqueuedAt: at },
  }),
  'agent.state_changed': (memberId) => ({
    externalUserId: 'alice',
    agent: { memberId, state: 'available', previousState: 'offline', reason: null, actor: null, changedAt: at },
  }),
  'recording.ready': (callId) => ({
    callId,
    recording: { id: randomUUID(), kind: 'call', durationSeconds: 95, contentType: 'audio/wav' },
  }),
  'transcript.ready': (callId) => ({
    callId,
    transcript: {
      id: randomUUID(),
      recordingId: randomUUID(),
      language: 'fr-FR',
      text: 'Bonjour. Bonjour, je vous écoute.',
      segments: [
        { party: 'caller', startSeconds: 0, endSeconds: 1.2, text: 'Bonjour.' },
        { party: 'agent', startSeconds: 1.5, endSeconds: 3.25, text: 'Bonjour, je vous écoute.' },
      ],
      channels: 2,
    },
  }),
  'voicemail.ready': (callId) => ({
    callId,
    voicemail: {
      id: randomUUID(),
      recordingId: randomUUID(),
      from: '+33612345678',
      to: '+33198765432',
      durationSeconds: 17,
    },
  }),
  'message.received': (numberId) => ({
    message: {
      id: randomUUID(),
      phoneNumberId: numberId,
      direction: 'inbound',
      from: '+33612345678',
      to: '+33198765432',
      text: 'Are you open on Sunday?',
      media: [],
      status: 'received',
      error: null,
      segments: 1,
      createdAt: at,
    },
  }),
  'message.status': (numberId) => ({
    message: {
      id: randomUUID(),
      phoneNumberId: numberId,
      direction: 'outbound',
      from: '+33198765432',
      to: '+33612345678',
      text: 'We are open from 10 to 4.',
      media: [],
      status: 'failed',
      error: { code: 'UNDELIV', message: 'err:001' },
      segments: 1,
      createdAt: at,
    },
  }),
  'number.updated': (numberId, owner) => ({
    number: {
      id: numberId,
      e164: '+33198765432',
      status: 'active',
      voiceLane: 'ready',
      textingRegistration: 'none',
      workspaceId: owner.workspace.id,
      routingPlanId: null,
      changes: ['workspaceId', 'status'],
    },
  }),
};

function appendExample<T extends EventType>(db: Queryable, owner: Setup, type: T, subject: string) {
  return appendEvent(db, {
    type,
    streamId: subject,
    applicationId: owner.applicationId,
    workspaceId: owner.workspace.id,
    externalWorkspaceId: owner.workspace.externalWorkspaceId,
    fields: examples[type](subject, owner),
  });
}

test('each of the 15 types is accepted and served with the common fields, valid against its schema', async (t) => {
  t.is(eventTypes.length, 15);
  const owner = await setup();
  const written = new Map<EventType, { appended: AppendedEvent; subject: string }>();
  await inTransaction(pool, async (db) => {
    for (const type of eventTypes) {
      const subject = randomUUID();
      written.set(type, { appended: await appendExample(db, owner, type, subject), subject });
    }
  });
  const { events } = await collect(
    owner,
    undefined,
    [...written.values()].map(({ appended }) => appended.id),
  );
  t.deepEqual(
    events.map((event) => event.type),
    eventTypes,
    'one of each, in the order written',
  );

  for (const type of eventTypes) {
    const { appended, subject } = written.get(type) as { appended: AppendedEvent; subject: string };
    const served = events.find((event) => event.id === appended.id);
    if (served === undefined) {
      t.fail(`${type} was not served`);
      continue;
    }
    t.is(served.type, type);
    t.regex(served.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `${type}: id`);
    t.false(Number.isNaN(Date.parse(served.occurredAt)), `${type}: occurredAt`);
    t.regex(served.occurredAt, /(Z|[+-]\d\d:\d\d)$/, `${type}: occurredAt has a zone`);
    t.is(served.applicationId, owner.applicationId, `${type}: applicationId`);
    t.is(served.workspaceId, owner.workspace.id, `${type}: workspaceId`);
    t.is(served.externalWorkspaceId, owner.workspace.externalWorkspaceId, `${type}: externalWorkspaceId`);
    t.is(served.sequence, 1, `${type}: sequence of a new stream`);
    t.is(appended.streamKey, `${streamOf[type]}:${subject}`, `${type}: stream`);
    if (streamOf[type] === 'call') t.is(served.callId, subject, `${type}: callId`);
    else t.false('callId' in served, `${type}: no callId`);
    if (type === 'agent.state_changed') t.is(served.externalUserId, 'alice');
    t.deepEqual(served, JSON.parse(appended.payload), `${type}: served exactly as written`);

    const validate = compileStrict(eventSchemas[type]);
    t.true(validate(served), `${type}: ${JSON.stringify(validate.errors)}`);
  }
});

test('an invalid event makes appendEvent throw and writes nothing, not even a sequence number', async (t) => {
  const owner = await setup();
  const callId = randomUUID();
  const base = {
    type: 'call.started' as const,
    streamId: callId,
    applicationId: owner.applicationId,
    workspaceId: owner.workspace.id,
    externalWorkspaceId: owner.workspace.externalWorkspaceId,
  };
  const invalid: [string, Record<string, unknown>][] = [
    ['a callId that is no UUID', { ...base, fields: { callId: 'not-a-uuid', call: callObject(callId) } }],
    ['a call id that is no UUID', { ...base, fields: { callId, call: callObject('call-1') } }],
    ['from of 65 characters', { ...base, fields: { callId, call: { ...callObject(callId), from: '1'.repeat(65) } } }],
    ['to of 0 characters', { ...base, fields: { callId, call: { ...callObject(callId), to: '' } } }],
    ['no call', { ...base, fields: { callId } }],
    ['no callId', { ...base, fields: { call: callObject(callId) } }],
    [
      'a startedAt without a zone',
      { ...base, fields: { callId, call: { ...callObject(callId), startedAt: '2025-03-04T10:15:30' } } },
    ],
    ['an unknown field', { ...base, fields: { callId, call: callObject(callId), colour: 'blue' } }],
    ['a workspaceId that is no UUID', { ...base, workspaceId: 'acme', fields: { callId, call: callObject(callId) } }],
    [
      'a null externalWorkspaceId on a call event',
      { ...base, externalWorkspaceId: null, fields: { callId, call: callObject(callId) } },
    ],
    ['an invalid applicationId', { ...base, applicationId: 'Acme!', fields: { callId, call: callObject(callId) } }],
  ];

  const written = await inTransaction(pool, async (db) => {
    for (const [label, event] of invalid) {
      await t.throwsAsync(appendEvent(db, event as unknown as NewEvent<'call.started'>), { message: /invalid/ }, label);
    }
    // The transaction is untouched: a valid event after the refusals commits, and is the stream's first.
    return appendCall(db, owner, callId);
  });
  t.is(written.sequence, 1, 'the refused events took no sequence number');

  const rows = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE application_id = $1', [
    owner.applicationId,
  ]);
  t.is(rows.rows[0]?.n, 1, 'only the valid event was written');
  const { events } = await collect(owner, undefined, [written.id]);
  t.deepEqual(ids(events), [written.id]);
  t.is(events[0]?.sequence, 1);

  // On its own, outside any transaction of the caller's, a refused event leaves no stream behind.
  const lone = randomUUID();
  await t.throwsAsync(
    appendEvent(pool, {
      ...base,
      streamId: lone,
      fields: { callId: lone, call: { ...callObject(lone), from: 'x'.repeat(65) } },
    }),
    { message: /invalid call\.started event/ },
  );
  const streams = await pool.query('SELECT 1 FROM event_streams WHERE stream_key = $1', [`call:${lone}`]);
  t.is(streams.rowCount, 0);
});

// ---------------------------------------------------------------------------------------------------------------
// Credentials

test('the log needs an application key with webhooks:*', async (t) => {
  const owner = await setup();
  const narrow = await service.application(undefined, ['calls:*'] satisfies Scope[]);
  assertError(t, await getEvents({ ...owner, apiKey: narrow.apiKey }), 403, 'insufficient_scope', 'no webhooks:*');

  const session = await service.request('POST', '/api/v1/sessions', {
    auth: owner.apiKey,
    body: { externalWorkspaceId: owner.workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['webhooks:*'] },
  });
  t.is(session.status, 201, session.text);
  assertError(
    t,
    await getEvents({ ...owner, apiKey: session.body.token }),
    403,
    'application_key_required',
    'a user token',
  );
  assertError(t, await service.request('GET', '/api/v1/events'), 401, 'unauthorized', 'no credential');
});
