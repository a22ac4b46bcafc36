/**
 * Schedules through HTTP: operations 39-43 (create, list, get, update, delete), whether a schedule is open at an
 * instant and when that next changes, and the refusal to delete (409 `in_use`) a schedule a routing plan's hours step
 * names. The schedule logic itself is tested in test/core/schedules.test.ts; the setup shared with queues.test.ts and
 * ai-agents.test.ts is in test/helpers/routing-config.ts.
 *
 * One service running the API role only. Every test makes its own application and workspace, so tests run
 * concurrently without seeing each other's data. Schedule expectations are written from the published rules of
 * America/New_York (UTC-5 in winter, UTC-4 from the second Sunday of March 02:00 to the first Sunday of November
 * 02:00; in 2026: 2026-03-08 and 2026-11-01), not from the code under test.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { isError, serviceForFile } from '../helpers/service.ts';
import {
  hangup,
  isInUse,
  isInvalid,
  isoRegex,
  newYork,
  routingConfigHelpers,
  uuidRegex,
  workdays,
} from '../helpers/routing-config.ts';

const service = serviceForFile(test);
const { tenant, secondWorkspace, call, createPlan, archivePlan, createSchedule } = routingConfigHelpers(() => service);

// ---------------------------------------------------------------------------------------------------------------
// Helpers

function hoursPlan(scheduleId: string) {
  return { entry: 'h', steps: { h: { type: 'hours', scheduleId, open: 'bye', closed: 'bye' }, bye: hangup } };
}

const allDays = [...workdays, 'saturday', 'sunday'];

// ---------------------------------------------------------------------------------------------------------------
// Schedules

test('a schedule is created with its time zone, weekly hours and exceptions', async (t) => {
  const owner = await tenant();
  const before = Date.now();
  const answer = await call(owner, 'POST', '/schedules', newYork);
  const after = Date.now();
  t.is(answer.status, 201, answer.text);
  t.regex(answer.body.id, uuidRegex);
  t.like(answer.body, {
    workspaceId: owner.workspaceId,
    name: newYork.name,
    timezone: newYork.timezone,
    weeklyHours: newYork.weeklyHours,
    exceptions: newYork.exceptions,
  });
  t.is(typeof answer.body.openNow, 'boolean');
  t.true(answer.body.nextChangeAt === null || isoRegex.test(answer.body.nextChangeAt), answer.text);
  t.regex(answer.body.evaluatedAt, isoRegex);
  const evaluated = Date.parse(answer.body.evaluatedAt);
  t.true(evaluated >= before - 1000 && evaluated <= after + 1000, 'evaluated now');
  t.regex(answer.body.createdAt, isoRegex);

  const withoutExceptions = await call(owner, 'POST', '/schedules', {
    name: 'Plain',
    timezone: 'UTC',
    weeklyHours: [{ day: 'monday', open: '00:00', close: '24:00' }],
  });
  t.is(withoutExceptions.status, 201, withoutExceptions.text);
  t.deepEqual(withoutExceptions.body.exceptions, []);

  const leapDay = await call(owner, 'POST', '/schedules', {
    name: 'Leap',
    timezone: 'Europe/Paris',
    weeklyHours: [],
    exceptions: [{ date: '2028-02-29', hours: [] }],
  });
  t.is(leapDay.status, 201, leapDay.text);

  const list = await call(owner, 'GET', '/schedules');
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((schedule: { id: string }) => schedule.id),
    [leapDay.body.id, withoutExceptions.body.id, answer.body.id],
  );
  const page = await call(owner, 'GET', '/schedules?limit=2');
  t.is(page.body.data.length, 2);
  const rest = await call(owner, 'GET', `/schedules?limit=2&cursor=${encodeURIComponent(page.body.nextCursor)}`);
  t.deepEqual(
    rest.body.data.map((schedule: { id: string }) => schedule.id),
    [answer.body.id],
  );
  t.is(rest.body.nextCursor, null);
});

test('GET with at= says whether the schedule is open then and when that next changes, across daylight saving', async (t) => {
  const owner = await tenant();
  const schedule = await createSchedule(owner);
  // [at, open then, next change]
  const cases: [string, boolean, string | null][] = [
    // Tuesday 2026-01-13, winter (UTC-5).
    ['2026-01-13T13:59:59Z', false, '2026-01-13T14:00:00.000Z'],
    ['2026-01-13T09:00:00-05:00', true, '2026-01-13T22:00:00.000Z'],
    ['2026-01-13T21:59:59.999Z', true, '2026-01-13T22:00:00.000Z'],
    // Friday 17:00 closes until Sunday 01:00.
    ['2026-01-16T22:00:00Z', false, '2026-01-18T06:00:00.000Z'],
    // Tuesday 2026-07-14, summer (UTC-4).
    ['2026-07-14T13:00:00Z', true, '2026-07-14T21:00:00.000Z'],
    ['2026-07-14T21:30:00Z', false, '2026-07-15T13:00:00.000Z'],
    // Sunday 2026-03-08: 02:00 EST becomes 03:00 EDT, so 01:00-03:00 lasts one real hour.
    ['2026-03-08T05:59:59Z', false, '2026-03-08T06:00:00.000Z'],
    ['2026-03-08T06:30:00Z', true, '2026-03-08T07:00:00.000Z'],
    ['2026-03-08T07:00:00Z', false, '2026-03-09T13:00:00.000Z'],
    // Friday 2026-03-06 09:00 EST is 14:00Z; Monday 2026-03-09 09:00 EDT is 13:00Z.
    ['2026-03-06T13:30:00Z', false, '2026-03-06T14:00:00.000Z'],
    ['2026-03-09T13:30:00Z', true, '2026-03-09T21:00:00.000Z'],
    // Sunday 2026-11-01: 02:00 EDT becomes 01:00 EST, so 01:00-03:00 lasts three real hours.
    ['2026-11-01T04:59:59Z', false, '2026-11-01T05:00:00.000Z'],
    ['2026-11-01T05:00:00Z', true, '2026-11-01T08:00:00.000Z'],
    ['2026-11-01T06:30:00Z', true, '2026-11-01T08:00:00.000Z'],
    ['2026-11-01T08:00:00Z', false, '2026-11-02T14:00:00.000Z'],
    // Christmas Eve (Thursday) 09:00-12:00 only; Christmas Day (Friday) closed; Sunday 01:00 opens next.
    ['2026-12-24T16:00:00Z', true, '2026-12-24T17:00:00.000Z'],
    ['2026-12-24T18:00:00Z', false, '2026-12-27T06:00:00.000Z'],
    ['2026-12-25T15:00:00Z', false, '2026-12-27T06:00:00.000Z'],
  ];
  for (const [at, open, next] of cases) {
    const answer = await call(owner, 'GET', `/schedules/${schedule.id}?at=${encodeURIComponent(at)}`);
    t.is(answer.status, 200, answer.text);
    t.is(answer.body.openNow, open, `open at ${at}`);
    t.is(answer.body.nextChangeAt, next, `next change after ${at}`);
    t.is(answer.body.evaluatedAt, new Date(at).toISOString(), `evaluated at ${at}`);
    t.like(answer.body, { id: schedule.id, timezone: 'America/New_York', weeklyHours: newYork.weeklyHours });
  }

  const before = Date.now();
  const now = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.is(now.status, 200, now.text);
  const evaluated = Date.parse(now.body.evaluatedAt);
  t.true(evaluated >= before - 1000 && evaluated <= Date.now() + 1000, 'without at: evaluated now');

  isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?at=tomorrow`), /at/, 'at not an instant');
  // Instants the date-time format lets through but a Date cannot hold: a leap second, an offset without minutes.
  for (const at of ['2026-12-31T23:59:60Z', '2026-01-13T14:00:00+05']) {
    isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?at=${encodeURIComponent(at)}`), /at/, at);
  }
  isInvalid(t, await call(owner, 'GET', `/schedules/${schedule.id}?when=now`), /when/, 'unknown query field');
  isError(t, await call(owner, 'GET', `/schedules/${randomUUID()}`), 404, 'not_found');
  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'GET', `/schedules/${schedule.id}`), 404, 'not_found', 'other workspace');
});

test('schedule problems are refused with 400 naming the field', async (t) => {
  const owner = await tenant();
  const base = { name: 'S', timezone: 'Europe/Paris', weeklyHours: [], exceptions: [] };
  const monday = (open: string, close: string) => [{ day: 'monday', open, close }];
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['unknown time zone', { timezone: 'Mars/Olympus_Mons' }, /timezone/],
    ['UTC offset', { timezone: '+01:00' }, /timezone/],
    ['no time zone', { timezone: undefined }, /timezone/],
    ['close 25:00', { weeklyHours: monday('09:00', '25:00') }, /weeklyHours\[0\]\.close/],
    [
      'open 25:00',
      { weeklyHours: [...monday('08:00', '09:00'), ...monday('25:00', '26:00')] },
      /weeklyHours\[1\]\.open/,
    ],
    ['open 24:00', { weeklyHours: monday('24:00', '02:00') }, /weeklyHours\[0\]\.open/],
    ['minute 60', { weeklyHours: monday('09:60', '10:00') }, /weeklyHours\[0\]\.open/],
    ['open equals close', { weeklyHours: monday('09:00', '09:00') }, /weeklyHours\[0\]\.close/],
    ['not a time', { weeklyHours: monday('9am', '17:00') }, /weeklyHours\[0\]\.open/],
    ['unknown weekday', { weeklyHours: [{ day: 'funday', open: '09:00', close: '17:00' }] }, /weeklyHours\[0\]\.day/],
    ['2026-02-30', { exceptions: [{ date: '2026-02-30', hours: [] }] }, /exceptions\[0\]\.date/],
    ['2027-02-29', { exceptions: [{ date: '2027-02-29', hours: [] }] }, /exceptions\[0\]\.date/],
    ['month 13', { exceptions: [{ date: '2026-13-01', hours: [] }] }, /exceptions\[0\]\.date/],
    ['not a date', { exceptions: [{ date: '25/12/2026', hours: [] }] }, /exceptions\[0\]\.date/],
    [
      'duplicated date',
      {
        exceptions: [
          { date: '2026-12-25', hours: [] },
          { date: '2026-12-26', hours: [] },
          { date: '2026-12-25', hours: [{ open: '10:00', close: '12:00' }] },
        ],
      },
      /exceptions\[2\]\.date/,
    ],
    [
      'exception hours',
      { exceptions: [{ date: '2026-12-25', hours: [{ open: '10:00', close: '24:01' }] }] },
      /exceptions\[0\]\.hours\[0\]\.close/,
    ],
  ];
  for (const [label, change, field] of cases) {
    const body: Record<string, unknown> = { ...base, ...change };
    if (body.timezone === undefined) delete body.timezone;
    isInvalid(t, await call(owner, 'POST', '/schedules', body), field, label);
  }
  const list = await call(owner, 'GET', '/schedules');
  t.deepEqual(list.body.data, [], 'no schedule was made');

  // PATCH is checked against the schedule it would make, and a refused PATCH changes nothing.
  const schedule = await createSchedule(owner);
  isInvalid(t, await call(owner, 'PATCH', `/schedules/${schedule.id}`, { timezone: 'Nowhere/Town' }), /timezone/);
  isInvalid(
    t,
    await call(owner, 'PATCH', `/schedules/${schedule.id}`, {
      exceptions: [...newYork.exceptions, { date: '2026-12-24', hours: [] }],
    }),
    /exceptions\[2\]\.date/,
  );
  isInvalid(
    t,
    await call(owner, 'PATCH', `/schedules/${schedule.id}`, { weeklyHours: monday('10:00', '25:00') }),
    /close/,
  );
  isInvalid(t, await call(owner, 'PATCH', `/schedules/${schedule.id}`, {}), /body/, 'empty PATCH');
  const read = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.like(read.body, {
    name: newYork.name,
    timezone: newYork.timezone,
    weeklyHours: newYork.weeklyHours,
    exceptions: newYork.exceptions,
    updatedAt: schedule.updatedAt,
  });
});

test('PATCH replacing the weekly hours changes whether the schedule is open', async (t) => {
  const owner = await tenant();
  const closed = await createSchedule(owner, { name: 'Never', timezone: 'UTC', weeklyHours: [] });
  t.false(closed.openNow);
  t.is(closed.nextChangeAt, null, 'never opens');

  const always = allDays.map((day) => ({ day, open: '00:00', close: '24:00' }));
  const opened = await call(owner, 'PATCH', `/schedules/${closed.id}`, { weeklyHours: always });
  t.is(opened.status, 200, opened.text);
  t.true(opened.body.openNow);
  t.is(opened.body.nextChangeAt, null, 'never closes');
  t.like(opened.body, { name: 'Never', timezone: 'UTC', weeklyHours: always, exceptions: [] });
  t.is(opened.body.createdAt, closed.createdAt);

  // Mondays 09:00-17:00 UTC only: 2026-01-12 is a Monday.
  const monday = await call(owner, 'PATCH', `/schedules/${closed.id}`, {
    name: 'Mondays',
    weeklyHours: [{ day: 'monday', open: '09:00', close: '17:00' }],
  });
  t.is(monday.status, 200, monday.text);
  const at = (iso: string) => call(owner, 'GET', `/schedules/${closed.id}?at=${encodeURIComponent(iso)}`);
  const mondayNoon = await at('2026-01-12T12:00:00Z');
  t.like(mondayNoon.body, { name: 'Mondays', openNow: true, nextChangeAt: '2026-01-12T17:00:00.000Z' });
  const tuesdayNoon = await at('2026-01-13T12:00:00Z');
  t.like(tuesdayNoon.body, { openNow: false, nextChangeAt: '2026-01-19T09:00:00.000Z' });

  // Changing the time zone alone moves the same wall-clock hours.
  const tokyo = await call(owner, 'PATCH', `/schedules/${closed.id}`, { timezone: 'Asia/Tokyo' });
  t.is(tokyo.status, 200, tokyo.text);
  t.deepEqual(tokyo.body.weeklyHours, [{ day: 'monday', open: '09:00', close: '17:00' }]);
  const tokyoMorning = await at('2026-01-12T01:00:00Z'); // 10:00 in Tokyo
  t.like(tokyoMorning.body, { openNow: true, nextChangeAt: '2026-01-12T08:00:00.000Z' });

  // An exception closing that Monday.
  const holiday = await call(owner, 'PATCH', `/schedules/${closed.id}`, {
    exceptions: [{ date: '2026-01-12', name: 'Coming of Age Day', hours: [] }],
  });
  t.is(holiday.status, 200, holiday.text);
  const holidayMorning = await at('2026-01-12T01:00:00Z');
  t.like(holidayMorning.body, { openNow: false, nextChangeAt: '2026-01-19T00:00:00.000Z' });

  isError(t, await call(owner, 'PATCH', `/schedules/${randomUUID()}`, { name: 'x' }), 404, 'not_found');
});

test('a schedule an hours step uses cannot be deleted until the plan is archived', async (t) => {
  const owner = await tenant();
  const schedule = await createSchedule(owner);
  const unused = await createSchedule(owner, { ...newYork, name: 'Unused' });
  const planName = 'After hours';
  const planId = await createPlan(t, owner, planName, hoursPlan(schedule.id));

  isInUse(t, await call(owner, 'DELETE', `/schedules/${schedule.id}`), planId, planName);
  const still = await call(owner, 'GET', `/schedules/${schedule.id}`);
  t.is(still.status, 200, still.text);

  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'DELETE', `/schedules/${unused.id}`), 404, 'not_found', 'other workspace');
  const deletedUnused = await call(owner, 'DELETE', `/schedules/${unused.id}`);
  t.is(deletedUnused.status, 200, deletedUnused.text);
  t.like(deletedUnused.body, { id: unused.id, name: 'Unused', timezone: 'America/New_York' });

  await archivePlan(t, owner, planId);
  const deleted = await call(owner, 'DELETE', `/schedules/${schedule.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: schedule.id, name: newYork.name });
  isError(t, await call(owner, 'GET', `/schedules/${schedule.id}`), 404, 'not_found');
  isError(t, await call(owner, 'DELETE', `/schedules/${schedule.id}`), 404, 'not_found', 'deleted twice');
  const list = await call(owner, 'GET', '/schedules');
  t.deepEqual(list.body.data, []);
});
