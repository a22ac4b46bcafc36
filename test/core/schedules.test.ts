/**
 * Schedules (`core/routing/opening-hours.ts`): open at an instant, the next change, and the checks the JSON schema cannot
 * express. Every instant is written as an ISO string with the offset the zone has at that moment, taken from the
 * published rules (United States: second Sunday of March and first Sunday of November at 02:00; European Union: last
 * Sunday of March and of October at 01:00 UTC; New South Wales: first Sunday of April at 03:00 and of October at
 * 02:00; Japan: no daylight saving), so the expectations do not come from the code under test. In 2026: New York
 * 2026-03-08 and 2026-11-01, Paris 2026-03-29 and 2026-10-25, Sydney 2026-04-05 and 2026-10-04.
 */
import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import { compileStrict } from '../../core/validation.ts';
import {
  isOpenAt,
  nextChangeAfter,
  type ScheduleException,
  ScheduleHours,
  scheduleProblems,
  type Weekday,
  type WeeklyRange,
  weekdays,
} from '../../core/routing/opening-hours.ts';

const workdays: Weekday[] = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];

function every(days: readonly Weekday[], open: string, close: string): WeeklyRange[] {
  return days.map((day) => ({ day, open, close }));
}

function schedule(timezone: string, weeklyHours: WeeklyRange[], exceptions: ScheduleException[] = []): ScheduleHours {
  return { timezone, weeklyHours, exceptions };
}

/** `isOpenAt` at each instant is the expected state. */
function assertStates(t: ExecutionContext, hours: ScheduleHours, expected: Record<string, boolean>): void {
  for (const [iso, open] of Object.entries(expected)) {
    t.is(isOpenAt(hours, new Date(iso)), open, `${hours.timezone} at ${iso} should be ${open ? 'open' : 'closed'}`);
  }
}

/** `nextChangeAfter(from)` is the instant `to` (an ISO string), or null. */
function assertNext(t: ExecutionContext, hours: ScheduleHours, from: string, to: string | null): void {
  const next = nextChangeAfter(hours, new Date(from));
  t.is(next?.toISOString() ?? null, to === null ? null : new Date(to).toISOString(), `next change after ${from}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Office hours in four zones

test('09:00-17:00 Monday to Friday in Europe/Paris, winter (+01:00) and summer (+02:00)', (t) => {
  const hours = schedule('Europe/Paris', every(workdays, '09:00', '17:00'));
  assertStates(t, hours, {
    '2026-01-13T08:59:59+01:00': false, // Tuesday
    '2026-01-13T09:00:00+01:00': true,
    '2026-01-13T16:59:59.999+01:00': true,
    '2026-01-13T17:00:00+01:00': false,
    '2026-01-13T07:30:00Z': false, // 08:30 CET
    '2026-07-14T07:30:00Z': true, // 09:30 CEST
    '2026-07-14T15:30:00Z': false, // 17:30 CEST
    '2026-01-13T15:30:00Z': true, // 16:30 CET
    '2026-01-12T09:00:00+01:00': true, // Monday
    '2026-01-16T16:30:00+01:00': true, // Friday
    '2026-01-17T12:00:00+01:00': false, // Saturday
    '2026-01-18T12:00:00+01:00': false, // Sunday
  });
});

test('09:00-17:00 Monday to Friday in America/New_York, winter (-05:00) and summer (-04:00)', (t) => {
  const hours = schedule('America/New_York', every(workdays, '09:00', '17:00'));
  assertStates(t, hours, {
    '2026-01-13T09:00:00-05:00': true,
    '2026-01-13T08:59:59-05:00': false,
    '2026-01-13T13:00:00Z': false, // 08:00 EST
    '2026-07-14T13:00:00Z': true, // 09:00 EDT
    '2026-01-13T21:30:00Z': true, // 16:30 EST
    '2026-07-14T21:30:00Z': false, // 17:30 EDT
    '2026-07-14T16:59:00-04:00': true,
    '2026-07-14T17:00:00-04:00': false,
    '2026-01-16T21:00:00Z': true, // Friday 16:00 EST
    '2026-01-17T01:00:00Z': false, // Friday 20:00 EST, Saturday in UTC
    '2026-01-17T10:00:00-05:00': false, // Saturday
  });
});

test('09:00-17:00 Monday to Friday in Asia/Tokyo (+09:00 all year): the local date is not the UTC date', (t) => {
  const hours = schedule('Asia/Tokyo', every(workdays, '09:00', '17:00'));
  assertStates(t, hours, {
    '2026-01-11T23:59:59Z': false, // Monday 08:59:59 JST, Sunday in UTC
    '2026-01-12T00:00:00Z': true, // Monday 09:00 JST
    '2026-07-14T00:00:00Z': true, // Tuesday 09:00 JST, the same in summer
    '2026-07-14T09:00:00+09:00': true,
    '2026-07-14T17:00:00+09:00': false,
    '2026-01-16T07:59:00Z': true, // Friday 16:59 JST
    '2026-01-16T08:00:00Z': false, // Friday 17:00 JST
    '2026-01-16T23:30:00Z': false, // Saturday 08:30 JST, Friday in UTC
    '2026-01-17T01:00:00Z': false, // Saturday 10:00 JST
    '2026-01-18T23:30:00Z': false, // Monday 08:30 JST
    '2026-01-19T00:30:00Z': true, // Monday 09:30 JST
  });
});

test('09:00-17:00 Monday to Friday in Australia/Sydney: summer (+11:00) in January, winter (+10:00) in July', (t) => {
  const hours = schedule('Australia/Sydney', every(workdays, '09:00', '17:00'));
  assertStates(t, hours, {
    '2026-01-12T21:59:59Z': false, // Tuesday 08:59:59 AEDT, Monday in UTC
    '2026-01-12T22:00:00Z': true, // Tuesday 09:00 AEDT
    '2026-01-13T09:00:00+11:00': true,
    '2026-07-13T22:30:00Z': false, // Tuesday 08:30 AEST
    '2026-07-13T23:00:00Z': true, // Tuesday 09:00 AEST
    '2026-07-14T16:59:00+10:00': true,
    '2026-07-14T17:00:00+10:00': false,
    '2026-01-16T23:00:00Z': false, // Saturday 10:00 AEDT, Friday in UTC
    '2026-04-05T22:00:00Z': false, // Monday 08:00 AEST, the day after summer time ended
    '2026-04-05T23:00:00Z': true, // Monday 09:00 AEST
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Daylight saving days

test('New York spring forward (2026-03-08, 02:00 EST becomes 03:00 EDT): 01:00-03:00 lasts one real hour', (t) => {
  const hours = schedule('America/New_York', [{ day: 'sunday', open: '01:00', close: '03:00' }]);
  assertStates(t, hours, {
    '2026-03-08T00:59:59-05:00': false,
    '2026-03-08T01:00:00-05:00': true,
    '2026-03-08T01:59:59.999-05:00': true,
    '2026-03-08T03:00:00-04:00': false, // the next instant after 01:59:59.999 EST
  });
  assertNext(t, hours, '2026-03-08T01:00:00-05:00', '2026-03-08T03:00:00-04:00');
});

test('New York spring forward: a range opening at 02:30, a time that does not exist, opens at 03:00 EDT', (t) => {
  const hours = schedule('America/New_York', [{ day: 'sunday', open: '02:30', close: '05:00' }]);
  assertStates(t, hours, {
    '2026-03-08T01:59:59.999-05:00': false,
    '2026-03-08T03:00:00-04:00': true,
    '2026-03-08T04:59:59-04:00': true,
    '2026-03-08T05:00:00-04:00': false,
    // An ordinary Sunday: 02:30 exists and the range opens then.
    '2026-03-01T02:29:59-05:00': false,
    '2026-03-01T02:30:00-05:00': true,
  });
  assertNext(t, hours, '2026-03-08T00:00:00-05:00', '2026-03-08T03:00:00-04:00');
  assertNext(t, hours, '2026-03-08T03:00:00-04:00', '2026-03-08T05:00:00-04:00');
});

test('New York spring forward: a range entirely in the skipped hour is never open', (t) => {
  const hours = schedule('America/New_York', [{ day: 'sunday', open: '02:00', close: '02:30' }]);
  assertStates(t, hours, { '2026-03-08T01:59:59-05:00': false, '2026-03-08T03:00:00-04:00': false });
  // The next change is the following Sunday's 02:00, which exists (EDT).
  assertNext(t, hours, '2026-03-08T00:00:00-05:00', '2026-03-15T02:00:00-04:00');
});

test('New York fall back (2026-11-01, 02:00 EDT becomes 01:00 EST): 01:30 happens twice and is open both times', (t) => {
  const hours = schedule('America/New_York', [{ day: 'sunday', open: '01:00', close: '03:00' }]);
  assertStates(t, hours, {
    '2026-11-01T00:59:59-04:00': false,
    '2026-11-01T01:00:00-04:00': true,
    '2026-11-01T01:30:00-04:00': true, // 05:30Z
    '2026-11-01T01:30:00-05:00': true, // 06:30Z
    '2026-11-01T02:59:59-05:00': true,
    '2026-11-01T03:00:00-05:00': false,
  });
  // Three real hours: 05:00Z to 08:00Z.
  assertNext(t, hours, '2026-11-01T01:00:00-04:00', '2026-11-01T03:00:00-05:00');
});

test('New York fall back: a close inside the repeated hour is reached twice (the wall clock decides)', (t) => {
  const hours = schedule('America/New_York', [{ day: 'sunday', open: '00:00', close: '01:30' }]);
  assertStates(t, hours, {
    '2026-11-01T01:29:59-04:00': true,
    '2026-11-01T01:30:00-04:00': false,
    '2026-11-01T01:00:00-05:00': true,
    '2026-11-01T01:29:59-05:00': true,
    '2026-11-01T01:30:00-05:00': false,
  });
  assertNext(t, hours, '2026-11-01T01:30:00-04:00', '2026-11-01T01:00:00-05:00');
  assertNext(t, hours, '2026-11-01T01:00:00-05:00', '2026-11-01T01:30:00-05:00');
});

test('Paris spring forward (2026-03-29, 02:00 CET becomes 03:00 CEST): 01:00-03:00 and a range opening at 02:30', (t) => {
  const short = schedule('Europe/Paris', [{ day: 'sunday', open: '01:00', close: '03:00' }]);
  assertStates(t, short, {
    '2026-03-29T00:59:59+01:00': false,
    '2026-03-29T01:00:00+01:00': true,
    '2026-03-29T01:59:59+01:00': true,
    '2026-03-29T03:00:00+02:00': false,
  });
  assertNext(t, short, '2026-03-29T01:00:00+01:00', '2026-03-29T03:00:00+02:00');

  const late = schedule('Europe/Paris', [{ day: 'sunday', open: '02:30', close: '05:00' }]);
  assertStates(t, late, {
    '2026-03-29T01:59:59.999+01:00': false,
    '2026-03-29T03:00:00+02:00': true,
    '2026-03-29T05:00:00+02:00': false,
  });
  assertNext(t, late, '2026-03-29T00:00:00+01:00', '2026-03-29T03:00:00+02:00');
});

test('Paris fall back (2026-10-25, 03:00 CEST becomes 02:00 CET): 02:30 happens twice, 01:00-03:00 lasts 3 hours', (t) => {
  const hours = schedule('Europe/Paris', [{ day: 'sunday', open: '01:00', close: '03:00' }]);
  assertStates(t, hours, {
    '2026-10-25T00:59:59+02:00': false,
    '2026-10-25T01:00:00+02:00': true,
    '2026-10-25T02:30:00+02:00': true, // 00:30Z
    '2026-10-25T02:30:00+01:00': true, // 01:30Z
    '2026-10-25T02:59:59+01:00': true,
    '2026-10-25T03:00:00+01:00': false,
  });
  assertNext(t, hours, '2026-10-25T01:00:00+02:00', '2026-10-25T03:00:00+01:00');
});

// ---------------------------------------------------------------------------------------------------------------
// Overnight ranges, 24:00, exceptions

test('Friday 22:00-02:00 is open on Saturday at 01:59 and closed at 02:00', (t) => {
  const hours = schedule('Europe/Paris', [{ day: 'friday', open: '22:00', close: '02:00' }]);
  assertStates(t, hours, {
    '2026-01-16T21:59:59+01:00': false,
    '2026-01-16T22:00:00+01:00': true,
    '2026-01-16T23:59:59.999+01:00': true,
    '2026-01-17T00:00:00+01:00': true,
    '2026-01-17T01:59:00+01:00': true,
    '2026-01-17T01:59:59.999+01:00': true,
    '2026-01-17T02:00:00+01:00': false,
    '2026-01-16T01:00:00+01:00': false, // Friday early morning: Thursday has no range
    '2026-01-18T01:00:00+01:00': false, // Sunday early morning: Saturday has no range
  });
  assertNext(t, hours, '2026-01-16T23:00:00+01:00', '2026-01-17T02:00:00+01:00');
});

test('a close of 24:00 (and of 00:00 after a later open) ends at midnight', (t) => {
  const untilMidnight = schedule('Europe/Paris', [{ day: 'saturday', open: '18:00', close: '24:00' }]);
  assertStates(t, untilMidnight, {
    '2026-01-17T23:59:59.999+01:00': true,
    '2026-01-18T00:00:00+01:00': false,
  });
  assertNext(t, untilMidnight, '2026-01-17T20:00:00+01:00', '2026-01-18T00:00:00+01:00');

  const zeroClose = schedule('Europe/Paris', [{ day: 'saturday', open: '18:00', close: '00:00' }]);
  assertStates(t, zeroClose, {
    '2026-01-17T23:59:59.999+01:00': true,
    '2026-01-18T00:00:00+01:00': false,
  });

  const wholeDay = schedule('Europe/Paris', [{ day: 'saturday', open: '00:00', close: '24:00' }]);
  assertStates(t, wholeDay, {
    '2026-01-16T23:59:59+01:00': false,
    '2026-01-17T00:00:00+01:00': true,
    '2026-01-17T23:59:59+01:00': true,
    '2026-01-18T00:00:00+01:00': false,
  });
});

test('adjacent and overlapping ranges are one stretch: no change at the seam', (t) => {
  const adjacent = schedule('Europe/Paris', [
    { day: 'friday', open: '18:00', close: '24:00' },
    { day: 'saturday', open: '00:00', close: '02:00' },
  ]);
  t.true(isOpenAt(adjacent, new Date('2026-01-17T00:00:00+01:00')));
  assertNext(t, adjacent, '2026-01-16T19:00:00+01:00', '2026-01-17T02:00:00+01:00');

  const overlapping = schedule('Europe/Paris', [
    { day: 'monday', open: '09:00', close: '12:00' },
    { day: 'monday', open: '11:00', close: '17:00' },
  ]);
  t.deepEqual(scheduleProblems(overlapping), []);
  assertStates(t, overlapping, {
    '2026-01-12T11:30:00+01:00': true,
    '2026-01-12T12:30:00+01:00': true,
    '2026-01-12T17:00:00+01:00': false,
  });
  assertNext(t, overlapping, '2026-01-12T09:00:00+01:00', '2026-01-12T17:00:00+01:00');
});

test('an exception closes a weekday, or gives it other hours', (t) => {
  const weekly = every(workdays, '09:00', '17:00');
  t.true(isOpenAt(schedule('Europe/Paris', weekly), new Date('2026-12-25T10:00:00+01:00')), 'Friday without it');

  const christmas = schedule('Europe/Paris', weekly, [
    { date: '2026-12-25', name: 'Christmas Day', hours: [] },
    { date: '2026-12-24', name: 'Christmas Eve', hours: [{ open: '09:00', close: '12:00' }] },
  ]);
  assertStates(t, christmas, {
    '2026-12-25T10:00:00+01:00': false,
    '2026-12-24T11:59:59+01:00': true,
    '2026-12-24T12:00:00+01:00': false,
    '2026-12-24T16:00:00+01:00': false,
    '2026-12-23T16:00:00+01:00': true, // Wednesday: weekly hours
    '2026-12-28T10:00:00+01:00': true, // the next Monday
  });
  assertNext(t, christmas, '2026-12-24T12:00:00+01:00', '2026-12-28T09:00:00+01:00');
});

test('an exception opens a Sunday', (t) => {
  const hours = schedule('Europe/Paris', every(workdays, '09:00', '17:00'), [
    { date: '2026-12-20', name: 'Christmas shopping', hours: [{ open: '10:00', close: '16:00' }] },
  ]);
  assertStates(t, hours, {
    '2026-12-20T09:59:59+01:00': false,
    '2026-12-20T10:00:00+01:00': true,
    '2026-12-20T15:59:59+01:00': true,
    '2026-12-20T16:00:00+01:00': false,
    '2026-12-13T12:00:00+01:00': false, // the Sunday before
    '2026-12-27T12:00:00+01:00': false, // the Sunday after
  });
});

test("an exception's date is the local date of the schedule's zone", (t) => {
  const hours = schedule('Asia/Tokyo', every(weekdays, '00:00', '24:00'), [{ date: '2026-12-25', hours: [] }]);
  assertStates(t, hours, {
    '2026-12-24T14:59:59Z': true, // December 24, 23:59:59 JST
    '2026-12-24T15:00:00Z': false, // December 25, 00:00 JST (still the 24th in UTC)
    '2026-12-25T14:59:59Z': false,
    '2026-12-25T15:00:00Z': true, // December 26, 00:00 JST
  });
  assertNext(t, hours, '2026-12-24T12:00:00Z', '2026-12-24T15:00:00Z');
  assertNext(t, hours, '2026-12-24T15:00:00Z', '2026-12-25T15:00:00Z');
});

test('an exception replaces its whole date, including the previous night range after midnight', (t) => {
  // 2026-12-24 is a Thursday, 2026-12-25 a Friday.
  const night = [{ day: 'thursday', open: '22:00', close: '02:00' }] satisfies WeeklyRange[];
  t.true(isOpenAt(schedule('Europe/Paris', night), new Date('2026-12-25T01:00:00+01:00')), 'without exception');

  // Closed all day on the 25th: the Thursday night range stops at midnight.
  const closedChristmas = schedule('Europe/Paris', night, [{ date: '2026-12-25', hours: [] }]);
  assertStates(t, closedChristmas, {
    '2026-12-24T23:00:00+01:00': true,
    '2026-12-24T23:59:59.999+01:00': true,
    '2026-12-25T00:00:00+01:00': false,
    '2026-12-25T01:00:00+01:00': false,
  });
  assertNext(t, closedChristmas, '2026-12-24T23:00:00+01:00', '2026-12-25T00:00:00+01:00');

  // To keep the end of the night shift, the exception says so.
  const keepNight = schedule('Europe/Paris', night, [
    {
      date: '2026-12-25',
      hours: [
        { open: '00:00', close: '02:00' },
        { open: '10:00', close: '14:00' },
      ],
    },
  ]);
  assertStates(t, keepNight, {
    '2026-12-25T01:00:00+01:00': true,
    '2026-12-25T02:00:00+01:00': false,
    '2026-12-25T12:00:00+01:00': true,
  });

  // Closing the 24th cancels its night range, the part after midnight included.
  const closedEve = schedule('Europe/Paris', night, [{ date: '2026-12-24', hours: [] }]);
  assertStates(t, closedEve, { '2026-12-24T23:00:00+01:00': false, '2026-12-25T01:00:00+01:00': false });

  // An exception's own overnight range runs into an ordinary next date...
  const lateEve = schedule('Europe/Paris', night, [{ date: '2026-12-24', hours: [{ open: '20:00', close: '03:00' }] }]);
  assertStates(t, lateEve, {
    '2026-12-24T21:00:00+01:00': true,
    '2026-12-25T02:30:00+01:00': true,
    '2026-12-25T03:00:00+01:00': false,
  });

  // ...but not into a date with an exception of its own.
  const newYear = schedule(
    'Europe/Paris',
    [],
    [
      { date: '2026-12-31', hours: [{ open: '20:00', close: '04:00' }] },
      { date: '2027-01-01', hours: [] },
    ],
  );
  assertStates(t, newYear, { '2026-12-31T23:00:00+01:00': true, '2027-01-01T01:00:00+01:00': false });
});

// ---------------------------------------------------------------------------------------------------------------
// nextChangeAfter

test('nextChangeAfter crosses daylight saving changes on the local clock', (t) => {
  const newYork = schedule('America/New_York', every(workdays, '09:00', '17:00'));
  // Friday close, Monday open: 64 hours later in local time, 63 real hours (not 2026-03-09T14:00Z).
  assertNext(t, newYork, '2026-03-06T17:00:00-05:00', '2026-03-09T09:00:00-04:00');
  assertNext(t, newYork, '2026-10-30T17:00:00-04:00', '2026-11-02T09:00:00-05:00');

  const paris = schedule('Europe/Paris', every(workdays, '09:00', '17:00'));
  assertNext(t, paris, '2026-03-27T17:00:00+01:00', '2026-03-30T09:00:00+02:00');
  assertNext(t, paris, '2026-10-23T17:00:00+02:00', '2026-10-26T09:00:00+01:00');

  const sydney = schedule('Australia/Sydney', every(workdays, '09:00', '17:00'));
  assertNext(t, sydney, '2026-04-03T17:00:00+11:00', '2026-04-06T09:00:00+10:00');
  assertNext(t, sydney, '2026-10-02T17:00:00+10:00', '2026-10-05T09:00:00+11:00');

  const tokyo = schedule('Asia/Tokyo', every(workdays, '09:00', '17:00'));
  assertNext(t, tokyo, '2026-01-13T10:00:00+09:00', '2026-01-13T17:00:00+09:00');
});

test('nextChangeAfter is strictly after the instant', (t) => {
  const hours = schedule('Asia/Tokyo', every(workdays, '09:00', '17:00'));
  assertNext(t, hours, '2026-01-13T09:00:00+09:00', '2026-01-13T17:00:00+09:00'); // opens exactly then
  assertNext(t, hours, '2026-01-13T17:00:00+09:00', '2026-01-14T09:00:00+09:00'); // closes exactly then
  assertNext(t, hours, '2026-01-13T16:59:59.999+09:00', '2026-01-13T17:00:00+09:00');
});

test('nextChangeAfter finds a change up to 8 days ahead and gives null beyond', (t) => {
  const mondays = schedule('Europe/Paris', [{ day: 'monday', open: '09:00', close: '10:00' }]);
  assertNext(t, mondays, '2026-01-12T10:00:00+01:00', '2026-01-19T09:00:00+01:00');

  const oneSunday = schedule('Europe/Paris', [], [{ date: '2026-12-20', hours: [{ open: '10:00', close: '16:00' }] }]);
  assertNext(t, oneSunday, '2026-12-13T00:00:00+01:00', '2026-12-20T10:00:00+01:00');
  assertNext(t, oneSunday, '2026-12-10T00:00:00+01:00', null);
});

test('nextChangeAfter is null for a schedule that is always closed or open 24/7, daylight saving included', (t) => {
  const closed = schedule('America/New_York', []);
  const allWeek = schedule('America/New_York', every(weekdays, '00:00', '24:00'));
  for (const from of ['2026-03-07T12:00:00-05:00', '2026-10-31T12:00:00-04:00', '2026-06-15T08:00:00-04:00']) {
    assertNext(t, closed, from, null);
    assertNext(t, allWeek, from, null);
    t.false(isOpenAt(closed, new Date(from)));
    t.true(isOpenAt(allWeek, new Date(from)));
  }
  const parisAllWeek = schedule('Europe/Paris', every(weekdays, '00:00', '24:00'));
  assertNext(t, parisAllWeek, '2026-10-24T12:00:00+02:00', null);
  assertNext(t, parisAllWeek, '2026-03-28T12:00:00+01:00', null);
});

/**
 * Zones and the local dates of their 2026 offset changes (checked against the tz rules, see the header), plus zones
 * without daylight saving on an ordinary day. Lord Howe moves by 30 minutes; Santiago changes at midnight (2026-04-04
 * 24:00 becomes 23:00, and 2026-09-06 starts at 01:00).
 */
const propertyCases: [string, string][] = [
  ['Europe/Paris', '2026-03-29'],
  ['Europe/Paris', '2026-10-25'],
  ['America/New_York', '2026-03-08'],
  ['America/New_York', '2026-11-01'],
  ['Australia/Sydney', '2026-04-05'],
  ['Australia/Sydney', '2026-10-04'],
  ['Australia/Lord_Howe', '2026-04-05'],
  ['Australia/Lord_Howe', '2026-10-04'],
  ['America/Santiago', '2026-04-04'],
  ['America/Santiago', '2026-09-06'],
  ['Asia/Kathmandu', '2026-06-15'],
  ['Asia/Tokyo', '2026-12-24'],
  ['UTC', '2026-02-28'],
];

/** Half hours, more often those around the offset changes (23:00-04:30). */
const halfHour = fc
  .oneof(fc.integer({ min: 0, max: 47 }), fc.integer({ min: 0, max: 9 }), fc.constantFrom(46, 47))
  .map((n) => `${String(Math.floor(n / 2)).padStart(2, '0')}:${n % 2 ? '30' : '00'}`);
const closeTime = fc.oneof(halfHour, fc.constant('24:00'));
const range = fc.record({ open: halfHour, close: closeTime }).filter((r) => r.open !== r.close);
/** Days from the case's date, mostly the date of the change and the day before. */
const dayOffset = fc.oneof(fc.constantFrom(0, -1), fc.integer({ min: -2, max: 8 }));

test('chained nextChangeAfter finds every change isOpenAt shows minute by minute (random schedules, DST days)', (t) => {
  // fast-check's error names the smallest failing schedule and instant.
  t.notThrows(() =>
    fc.assert(
      fc.property(
        fc.constantFrom(...propertyCases),
        // Minutes from noon UTC of that date: mostly starting a day or two before the change, sometimes after.
        fc.oneof(fc.integer({ min: -3 * 24 * 60, max: -24 * 60 }), fc.integer({ min: -24 * 60, max: 24 * 60 })),
        fc.integer({ min: 0, max: 59_999 }),
        fc.array(fc.record({ day: fc.constantFrom(...weekdays), open: halfHour, close: closeTime }), { maxLength: 6 }),
        fc.uniqueArray(fc.record({ offset: dayOffset, hours: fc.array(range, { maxLength: 3 }) }), {
          maxLength: 3,
          selector: (exception) => exception.offset,
        }),
        ([timezone, day], minutes, ms, weekly, dated) => {
          const weeklyHours = weekly.filter((r) => r.open !== r.close);
          const exceptions = dated.map(({ offset, hours }) => ({
            date: new Date(Date.parse(`${day}T00:00:00Z`) + offset * 86_400_000).toISOString().slice(0, 10),
            hours,
          }));
          const hours = schedule(timezone, weeklyHours, exceptions);
          if (scheduleProblems(hours).length > 0) throw new Error('generated an invalid schedule');
          const start = Date.parse(`${day}T12:00:00Z`) + minutes * 60_000 + ms;
          const end = start + 4 * 86_400_000;
          // Every change in 4 days, minute by minute (all boundaries and offset changes fall on whole minutes).
          const expected: number[] = [];
          let state = isOpenAt(hours, new Date(start));
          for (let at = Math.ceil((start + 1) / 60_000) * 60_000; at < end; at += 60_000) {
            const open = isOpenAt(hours, new Date(at));
            if (open !== state) expected.push(at);
            state = open;
          }
          // The same, chaining nextChangeAfter from the start.
          const found: number[] = [];
          for (let next = nextChangeAfter(hours, new Date(start)); next !== null && next.getTime() < end;) {
            found.push(next.getTime());
            next = nextChangeAfter(hours, next);
          }
          return JSON.stringify(found) === JSON.stringify(expected);
        },
      ),
      { numRuns: 60 },
    ),
  );
});

test('isOpenAt and nextChangeAfter refuse an invalid instant or time zone', (t) => {
  const hours = schedule('Europe/Paris', every(workdays, '09:00', '17:00'));
  t.throws(() => isOpenAt(hours, new Date('not a date')), { instanceOf: RangeError });
  t.throws(() => nextChangeAfter(hours, new Date(Number.NaN)), { instanceOf: RangeError });
  t.throws(() => isOpenAt({ ...hours, timezone: 'Mars/Olympus_Mons' }, new Date()), { instanceOf: RangeError });
  t.throws(() => isOpenAt({ ...hours, timezone: '+01:00' }, new Date()), { instanceOf: RangeError });
});

// ---------------------------------------------------------------------------------------------------------------
// scheduleProblems and the schema

const valid: ScheduleHours = {
  timezone: 'Europe/Paris',
  weeklyHours: [
    ...every(workdays, '09:00', '17:00'),
    { day: 'friday', open: '22:00', close: '02:00' },
    { day: 'saturday', open: '10:00', close: '24:00' },
    { day: 'sunday', open: '20:00', close: '00:00' },
  ],
  exceptions: [
    { date: '2026-12-25', name: 'Christmas Day', hours: [] },
    { date: '2026-12-24', hours: [{ open: '09:00', close: '12:00' }] },
    { date: '2024-02-29', hours: [{ open: '00:00', close: '24:00' }] },
    { date: '2000-02-29', hours: [] },
  ],
};

function fields(hours: ScheduleHours): string[] {
  return scheduleProblems(hours).map((problem) => problem.field);
}

test('scheduleProblems accepts a valid schedule and time zone aliases the runtime accepts', (t) => {
  t.deepEqual(scheduleProblems(valid), []);
  for (const timezone of ['UTC', 'Etc/UTC', 'America/Argentina/Buenos_Aires', 'Asia/Kathmandu', 'Europe/Kyiv']) {
    t.deepEqual(scheduleProblems({ ...valid, timezone }), [], timezone);
  }
  // US/Eastern is a backward-compatible alias; this runtime (Node 20, ICU) accepts it.
  t.notThrows(() => new Intl.DateTimeFormat('en', { timeZone: 'US/Eastern' }));
  t.deepEqual(scheduleProblems({ ...valid, timezone: 'US/Eastern' }), []);
});

test('scheduleProblems refuses an unknown time zone and UTC offsets', (t) => {
  for (const timezone of ['Mars/Olympus_Mons', 'Europe/Pariss', '+01:00', '-05:00', 'UTC+1', 'Paris', '']) {
    const problems = scheduleProblems({ ...valid, timezone });
    t.deepEqual(
      problems.map((problem) => problem.field),
      ['timezone'],
      timezone,
    );
    t.regex(problems[0]?.message ?? '', /IANA time zone/);
  }
});

test('scheduleProblems refuses times out of range, 24:00 as an opening time, and equal open and close', (t) => {
  const weeklyCases: [WeeklyRange, string][] = [
    [{ day: 'monday', open: '24:30', close: '10:00' }, 'weeklyHours[0].open'],
    [{ day: 'monday', open: '25:00', close: '10:00' }, 'weeklyHours[0].open'],
    [{ day: 'monday', open: '09:60', close: '10:00' }, 'weeklyHours[0].open'],
    [{ day: 'monday', open: '24:00', close: '10:00' }, 'weeklyHours[0].open'],
    [{ day: 'monday', open: '9:00', close: '10:00' }, 'weeklyHours[0].open'],
    [{ day: 'monday', open: '09:00', close: '24:30' }, 'weeklyHours[0].close'],
    [{ day: 'monday', open: '09:00', close: '24:01' }, 'weeklyHours[0].close'],
    [{ day: 'monday', open: '09:00', close: '25:00' }, 'weeklyHours[0].close'],
    [{ day: 'monday', open: '09:00', close: '17:99' }, 'weeklyHours[0].close'],
    [{ day: 'monday', open: '09:00', close: '09:00' }, 'weeklyHours[0].close'],
    [{ day: 'monday', open: '00:00', close: '00:00' }, 'weeklyHours[0].close'],
  ];
  for (const [range, field] of weeklyCases) {
    t.deepEqual(fields({ ...valid, weeklyHours: [range] }), [field], `${range.open}-${range.close}`);
  }
  const openAtMidnight = scheduleProblems({
    ...valid,
    weeklyHours: [{ day: 'monday', open: '24:00', close: '10:00' }],
  });
  t.regex(openAtMidnight[0]?.message ?? '', /only a close time/);
  const equal = scheduleProblems({ ...valid, weeklyHours: [{ day: 'monday', open: '09:00', close: '09:00' }] });
  t.regex(equal[0]?.message ?? '', /00:00-24:00/);

  const exception = (open: string, close: string): ScheduleException => ({
    date: '2026-12-24',
    hours: [
      { open: '08:00', close: '09:00' },
      { open, close },
    ],
  });
  t.deepEqual(fields({ ...valid, exceptions: [exception('24:30', '10:00')] }), ['exceptions[0].hours[1].open']);
  t.deepEqual(fields({ ...valid, exceptions: [exception('10:00', '25:00')] }), ['exceptions[0].hours[1].close']);
  t.deepEqual(fields({ ...valid, exceptions: [exception('12:00', '12:00')] }), ['exceptions[0].hours[1].close']);
  t.deepEqual(fields({ ...valid, exceptions: [exception('24:00', '24:30')] }), [
    'exceptions[0].hours[1].open',
    'exceptions[0].hours[1].close',
  ]);
});

test('scheduleProblems refuses impossible calendar dates', (t) => {
  for (const date of [
    '2026-02-30',
    '2025-02-29',
    '1900-02-29',
    '2026-04-31',
    '2026-13-01',
    '2026-00-10',
    '2026-01-00',
  ]) {
    t.deepEqual(fields({ ...valid, exceptions: [{ date, hours: [] }] }), ['exceptions[0].date'], date);
  }
  t.deepEqual(fields({ ...valid, exceptions: [{ date: '2026-12-31', hours: [] }] }), []);
});

test('scheduleProblems refuses the same date twice in exceptions, naming the repeat', (t) => {
  const problems = scheduleProblems({
    ...valid,
    exceptions: [
      { date: '2026-12-25', hours: [] },
      { date: '2026-12-24', hours: [] },
      { date: '2026-12-25', name: 'Again', hours: [{ open: '10:00', close: '12:00' }] },
    ],
  });
  t.deepEqual(
    problems.map((problem) => problem.field),
    ['exceptions[2].date'],
  );
  t.regex(problems[0]?.message ?? '', /exceptions\[0\]\.date/);
});

test('scheduleProblems reports every problem at once, in order', (t) => {
  t.deepEqual(
    fields({
      timezone: 'Nowhere/Land',
      weeklyHours: [
        { day: 'monday', open: '09:00', close: '17:00' },
        { day: 'tuesday', open: '24:00', close: '25:00' },
      ],
      exceptions: [
        { date: '2026-02-30', hours: [{ open: '10:00', close: '10:00' }] },
        { date: '2026-12-25', hours: [] },
        { date: '2026-12-25', hours: [] },
      ],
    }),
    [
      'timezone',
      'weeklyHours[1].open',
      'weeklyHours[1].close',
      'exceptions[0].date',
      'exceptions[0].hours[0].close',
      'exceptions[2].date',
    ],
  );
});

test('the ScheduleHours schema takes a valid schedule and refuses unknown fields, days and sizes', (t) => {
  const check = compileStrict(ScheduleHours);
  t.true(check(valid), JSON.stringify(check.errors));
  const refused: [string, unknown][] = [
    ['extra field', { ...valid, note: 'x' }],
    ['missing exceptions', { timezone: valid.timezone, weeklyHours: valid.weeklyHours }],
    ['unknown day', { ...valid, weeklyHours: [{ day: 'holiday', open: '09:00', close: '17:00' }] }],
    ['extra range field', { ...valid, weeklyHours: [{ day: 'monday', open: '09:00', close: '17:00', x: 1 }] }],
    ['time pattern', { ...valid, weeklyHours: [{ day: 'monday', open: '9:00', close: '17:00' }] }],
    ['date pattern', { ...valid, exceptions: [{ date: '25/12/2026', hours: [] }] }],
    ['empty name', { ...valid, exceptions: [{ date: '2026-12-25', name: '', hours: [] }] }],
    ['long name', { ...valid, exceptions: [{ date: '2026-12-25', name: 'x'.repeat(201), hours: [] }] }],
    ['missing hours', { ...valid, exceptions: [{ date: '2026-12-25' }] }],
    ['empty time zone', { ...valid, timezone: '' }],
    ['long time zone', { ...valid, timezone: 'x'.repeat(101) }],
    ['101 weekly ranges', { ...valid, weeklyHours: Array.from({ length: 101 }, () => valid.weeklyHours[0]) }],
    [
      '501 exceptions',
      {
        ...valid,
        exceptions: Array.from({ length: 501 }, (_, index) => ({
          date: new Date(Date.UTC(2026, 0, 1 + index)).toISOString().slice(0, 10),
          hours: [],
        })),
      },
    ],
  ];
  for (const [label, value] of refused) t.false(check(value), label);
  t.true(check({ ...valid, weeklyHours: Array.from({ length: 100 }, () => valid.weeklyHours[0]) }), '100 ranges');
});
