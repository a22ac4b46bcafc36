/**
 * Schedules (business hours) as pure code, no database: whether a schedule is open at an instant, when it next opens
 * or closes, and the checks its JSON schema cannot express. The API stores `ScheduleHours` and calls these; a routing
 * plan's `hours` step branches on `isOpenAt`.
 *
 * Rules
 * - Every time and date is local wall-clock time in the schedule's `timezone`: an IANA name such as `Europe/Paris`, or
 *   an alias the runtime accepts (`UTC`, `Etc/UTC`, `US/Eastern`). UTC offsets such as `+01:00` are refused: they
 *   have no daylight saving and are not IANA names.
 * - A range is open from `open` (inclusive) to `close` (exclusive): 09:00-17:00 is open at 16:59:59.999 and closed at
 *   17:00:00. `open` is 00:00-23:59; `close` is 00:00-24:00, and 24:00 is the end of the day.
 * - A `close` earlier than `open` runs past midnight into the next day: Friday 22:00-02:00 is open from Friday 22:00
 *   to Saturday 02:00 (and a `close` of 00:00 ends at midnight, like 24:00). A `close` equal to `open` is refused:
 *   it could mean an empty range or 24 hours; a whole day is 00:00-24:00.
 * - Overlapping and adjacent ranges are allowed: the schedule is open when any range covers the instant (the union),
 *   so Friday 18:00-24:00 with Saturday 00:00-02:00 stays open through midnight.
 * - A dated exception replaces the whole local calendar date: its `hours` are that date's only ranges (empty: closed
 *   all day), instead of the weekly ranges of that weekday, and the previous day's overnight range does not run into
 *   it. With Thursday 22:00-02:00 and an exception closing Friday 2026-12-25, the schedule closes at 00:00 on the 25th,
 *   not at 02:00: "closed all day on Christmas" means every minute of the 25th, and the owner who wants the night
 *   shift to finish writes `00:00-02:00` in the exception. Conversely an exception closing the 24th cancels the
 *   24th's own 22:00-02:00 range, including its part after midnight on the 25th; an exception's own overnight range
 *   runs into the next date unless that date has an exception too. So what an exception says about its date is
 *   exactly what happens on that date.
 * - Daylight saving: the wall clock decides. On a spring-forward day the skipped times never happen: in New York on
 *   2026-03-08 (02:00 EST becomes 03:00 EDT) a range 01:00-03:00 lasts one real hour, and a range opening at 02:30
 *   opens at 03:00 EDT, the first instant whose wall time is past 02:30. On a fall-back day the repeated times happen
 *   twice and are open both times: on 2026-11-01 (02:00 EDT becomes 01:00 EST) 01:30 is open at 05:30Z and 06:30Z,
 *   and 01:00-03:00 lasts three real hours. A boundary inside the repeated hour is therefore crossed twice: 00:00-01:30
 *   that night closes at 01:30 EDT, is open again from 01:00 EST (the clock shows 01:00 again) and closes at 01:30
 *   EST. Rare (only ranges starting or ending between 01:00 and 02:00 that one night) and predictable: the wall clock
 *   is the single rule, decided from the instant alone.
 * - `nextChangeAfter` looks 8 days ahead (a week, plus a daylight-saving shift): null means the state does not change
 *   in that window (always closed, open 24/7, or the next change is further away, such as an exception in a month).
 *
 * `scheduleProblems` names fields relative to the schedule object (`timezone`, `weeklyHours[2].close`,
 * `exceptions[0].hours[1].open`, `exceptions[3].date`) with a message completing the sentence (`must be ...`), so the
 * API can prefix the request part (`body.`) the way `core/validation.ts` names fields. Overlaps are not problems.
 * `isOpenAt` and `nextChangeAfter` expect a schedule without problems and throw a RangeError on an unknown time zone
 * or an unreadable time (a duplicated exception date would be read as its first occurrence).
 *
 * Longer than 400 lines because the rules above govern the checks and the evaluation alike, and a reader of one needs
 * them beside the other; the table's SQL is in schedules.ts.
 */
import { type Static, Type } from 'typebox';

export const weekdays = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'] as const;
export type Weekday = (typeof weekdays)[number];

const timePattern = '^[0-9]{2}:[0-9]{2}$';
const datePattern = '^[0-9]{4}-[0-9]{2}-[0-9]{2}$';

const OpenTime = Type.String({
  pattern: timePattern,
  description: 'Local wall time HH:MM from 00:00 to 23:59 at which the range opens (inclusive)',
});
const CloseTime = Type.String({
  pattern: timePattern,
  description:
    'Local wall time HH:MM from 00:00 to 24:00 at which the range closes (exclusive); earlier than open: the range ' +
    'runs past midnight into the next day; equal to open: refused (a whole day is 00:00-24:00)',
});

export const ScheduleTimezone = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'IANA time zone of every time and date of the schedule, e.g. Europe/Paris',
});

export const WeeklyRange = Type.Object(
  {
    day: Type.Enum(weekdays, { description: 'The weekday the range opens on' }),
    open: OpenTime,
    close: CloseTime,
  },
  { additionalProperties: false, description: 'Open every such weekday from open to close' },
);
export type WeeklyRange = Static<typeof WeeklyRange>;

export const TimeRange = Type.Object(
  { open: OpenTime, close: CloseTime },
  { additionalProperties: false, description: 'Open from open to close' },
);
export type TimeRange = Static<typeof TimeRange>;

export const ScheduleException = Type.Object(
  {
    date: Type.String({ pattern: datePattern, description: 'Local calendar date YYYY-MM-DD' }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'e.g. Christmas Day' })),
    hours: Type.Array(TimeRange, {
      maxItems: 20,
      description: "The date's ranges instead of the weekly ones; empty: closed all day",
    }),
  },
  {
    additionalProperties: false,
    description:
      "Replaces the whole date: the weekly ranges of its weekday and the previous day's ranges past midnight",
  },
);
export type ScheduleException = Static<typeof ScheduleException>;

export const ScheduleHours = Type.Object(
  {
    timezone: ScheduleTimezone,
    weeklyHours: Type.Array(WeeklyRange, {
      maxItems: 100,
      description: 'Weekly open ranges; overlapping ranges are allowed (open when any range is)',
    }),
    exceptions: Type.Array(ScheduleException, {
      maxItems: 500,
      description: 'Dated exceptions, at most one per date',
    }),
  },
  { additionalProperties: false, description: 'Business hours: weekly open ranges and dated exceptions' },
);
export type ScheduleHours = Static<typeof ScheduleHours>;

export interface ScheduleProblem {
  field: string;
  message: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Validation

const minuteMs = 60_000;
const hourMs = 60 * minuteMs;
const dayMs = 24 * hourMs;
const dayMinutes = 24 * 60;
/** How far `nextChangeAfter` looks. */
const windowMs = 8 * dayMs;
/** How often `nextChangeAfter` samples the zone's offset for changes. */
const sampleMs = 6 * hourMs;

/** Minutes since midnight of `HH:MM` (24:00 is 1440), or undefined when not a time of day. */
function minutesOf(text: string): number | undefined {
  const match = /^([0-9]{2}):([0-9]{2})$/.exec(text);
  if (match === null) return undefined;
  const hours = Number(match[1]);
  const minutes = Number(match[2]);
  if (minutes > 59) return undefined;
  const total = hours * 60 + minutes;
  return total <= dayMinutes ? total : undefined;
}

function isCalendarDate(text: string): boolean {
  const match = /^([0-9]{4})-([0-9]{2})-([0-9]{2})$/.exec(text);
  if (match === null) return false;
  const year = Number(match[1]);
  const month = Number(match[2]);
  const day = Number(match[3]);
  if (month < 1 || month > 12 || day < 1) return false;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  return day <= (lengths[month - 1] ?? 0);
}

let supportedTimezones: Set<string> | undefined;

/** Whether the runtime knows `name` as an IANA time zone or an alias of one (not a UTC offset). */
export function isKnownTimezone(name: string): boolean {
  supportedTimezones ??= new Set(Intl.supportedValuesOf('timeZone'));
  if (supportedTimezones.has(name)) return true;
  if (name === '' || /^[+-]/.test(name)) return false;
  try {
    const resolved = new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
    // Newer runtimes take offsets such as +01:00 (or resolve to them); they are not IANA names.
    return !/^[+-]/.test(resolved);
  } catch {
    return false;
  }
}

function rangeProblems(range: { open: string; close: string }, at: string): ScheduleProblem[] {
  const problems: ScheduleProblem[] = [];
  const open = minutesOf(range.open);
  const close = minutesOf(range.close);
  if (open === undefined || open === dayMinutes) {
    const why = open === dayMinutes ? ' (24:00 is only a close time)' : '';
    problems.push({
      field: `${at}.open`,
      message: `must be a time HH:MM from 00:00 to 23:59${why}, got ${JSON.stringify(range.open)}`,
    });
  }
  if (close === undefined) {
    problems.push({
      field: `${at}.close`,
      message: `must be a time HH:MM from 00:00 to 24:00, got ${JSON.stringify(range.close)}`,
    });
  } else if (open !== undefined && open === close) {
    problems.push({
      field: `${at}.close`,
      message: `must differ from open (${range.open}): a whole day is 00:00-24:00`,
    });
  }
  return problems;
}

/**
 * What is wrong with a schedule that its JSON schema cannot say: an unknown time zone, times out of range, equal
 * open and close, impossible dates, a date with two exceptions. Empty when the schedule is usable.
 */
export function scheduleProblems(hours: ScheduleHours): ScheduleProblem[] {
  const problems: ScheduleProblem[] = [];
  if (!isKnownTimezone(hours.timezone)) {
    problems.push({
      field: 'timezone',
      message: `must be an IANA time zone such as Europe/Paris, got ${JSON.stringify(hours.timezone)}`,
    });
  }
  hours.weeklyHours.forEach((range, index) => problems.push(...rangeProblems(range, `weeklyHours[${index}]`)));
  const firstIndex = new Map<string, number>();
  hours.exceptions.forEach((exception, index) => {
    const at = `exceptions[${index}]`;
    if (!isCalendarDate(exception.date)) {
      problems.push({
        field: `${at}.date`,
        message: `must be a calendar date YYYY-MM-DD, got ${JSON.stringify(exception.date)}`,
      });
    } else {
      const first = firstIndex.get(exception.date);
      if (first === undefined) firstIndex.set(exception.date, index);
      else {
        problems.push({
          field: `${at}.date`,
          message: `repeats exceptions[${first}].date (${exception.date}): one exception per date`,
        });
      }
    }
    exception.hours.forEach((range, rangeIndex) =>
      problems.push(...rangeProblems(range, `${at}.hours[${rangeIndex}]`)),
    );
  });
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// Wall clock

/** One formatter per time zone (bounded: names are case-insensitive, so there is no fixed number of spellings). */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timezone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timezone);
  if (formatter === undefined) {
    if (/^[+-]/.test(timezone)) throw new RangeError(`not an IANA time zone: ${timezone}`);
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      calendar: 'gregory',
      numberingSystem: 'latn',
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    if (formatters.size >= 1000) formatters.clear();
    formatters.set(timezone, formatter);
  }
  return formatter;
}

/**
 * The local wall-clock time of instant `ms` in `timezone`, written as milliseconds since 1970-01-01T00:00 of a clock
 * without offsets (so `Math.floor(wall / dayMs)` counts local dates and the remainder is the time of day).
 */
function wallClock(timezone: string, ms: number): number {
  let year = 0;
  let month = 0;
  let day = 0;
  let hour = 0;
  let minute = 0;
  let second = 0;
  for (const part of formatterFor(timezone).formatToParts(ms)) {
    const value = Number(part.value);
    if (part.type === 'year') year = value;
    else if (part.type === 'month') month = value;
    else if (part.type === 'day') day = value;
    else if (part.type === 'hour')
      hour = value === 24 ? 0 : value; // some ICU versions wrote midnight as 24
    else if (part.type === 'minute') minute = value;
    else if (part.type === 'second') second = value;
  }
  const wall = new Date(0);
  wall.setUTCFullYear(year, month - 1, day); // not Date.UTC, which reads years 0-99 as 1900-1999
  wall.setUTCHours(hour, minute, second, ((ms % 1000) + 1000) % 1000);
  return wall.getTime();
}

/** Local time minus UTC at instant `ms`. */
function offsetAt(timezone: string, ms: number): number {
  return wallClock(timezone, ms) - ms;
}

function instantMs(instant: Date): number {
  const ms = instant.getTime();
  if (Number.isNaN(ms)) throw new RangeError('instant must be a valid Date');
  return ms;
}

// ---------------------------------------------------------------------------------------------------------------
// Ranges of a local date

interface Range {
  /** Minutes since midnight, 0-1439. */
  open: number;
  /** Minutes since midnight, 0-1440; at most `open`: runs into the next day. */
  close: number;
}

interface DateRanges {
  ranges: Range[];
  /** The date has an exception: its ranges are the exception's, and the previous date's do not run into it. */
  exception: boolean;
}

/** getUTCDay() order. */
const weekdayByUtcDay: readonly Weekday[] = [
  'sunday',
  'monday',
  'tuesday',
  'wednesday',
  'thursday',
  'friday',
  'saturday',
];

function parseRange(range: { open: string; close: string }): Range {
  const open = minutesOf(range.open);
  const close = minutesOf(range.close);
  if (open === undefined || open === dayMinutes) throw new RangeError(`not an opening time: ${range.open}`);
  if (close === undefined) throw new RangeError(`not a closing time: ${range.close}`);
  return { open, close };
}

/** The ranges of local dates (days since 1970-01-01), computed once per date. */
function dateRangesOf(hours: ScheduleHours): (date: number) => DateRanges {
  const computed = new Map<number, DateRanges>();
  return (date) => {
    let found = computed.get(date);
    if (found === undefined) {
      const text = new Date(date * dayMs).toISOString().slice(0, 10);
      const exception = hours.exceptions.find((candidate) => candidate.date === text);
      if (exception !== undefined) found = { ranges: exception.hours.map(parseRange), exception: true };
      else {
        const weekday = weekdayByUtcDay[new Date(date * dayMs).getUTCDay()];
        const ranges = hours.weeklyHours.filter((range) => range.day === weekday).map(parseRange);
        found = { ranges, exception: false };
      }
      computed.set(date, found);
    }
    return found;
  };
}

function openAtWall(rangesOf: (date: number) => DateRanges, wall: number): boolean {
  const date = Math.floor(wall / dayMs);
  const time = wall - date * dayMs;
  const today = rangesOf(date);
  for (const range of today.ranges) {
    if (time >= range.open * minuteMs && (range.close <= range.open || time < range.close * minuteMs)) return true;
  }
  // The previous date's overnight ranges run into this date until their close, unless this date has an exception.
  if (today.exception) return false;
  for (const range of rangesOf(date - 1).ranges) {
    if (range.close <= range.open && time < range.close * minuteMs) return true;
  }
  return false;
}

/** Whether the schedule is open at `instant`, read on the wall clock of its time zone (see the rules above). */
export function isOpenAt(hours: ScheduleHours, instant: Date): boolean {
  return openAtWall(dateRangesOf(hours), wallClock(hours.timezone, instantMs(instant)));
}

// ---------------------------------------------------------------------------------------------------------------
// Next change

/** The first instant in (`from`, `to`] where the offset differs from the offset at `from` (given: it does at `to`). */
function transitionBetween(timezone: string, from: number, to: number): number {
  const before = offsetAt(timezone, from);
  let low = from;
  let high = to;
  while (high - low > 1) {
    const middle = low + Math.floor((high - low) / 2);
    if (offsetAt(timezone, middle) === before) low = middle;
    else high = middle;
  }
  return high;
}

/**
 * The offset changes (daylight saving, or a zone's change of standard time) in (`from`, `to`]: sampled every 6 hours,
 * then found to the millisecond. Two changes within 6 hours that cancel each other would be missed; no zone does that
 * (daylight saving lasts months), and several changes of different offsets within one sample are all found.
 */
function transitions(timezone: string, from: number, to: number): number[] {
  const found: number[] = [];
  let previous = from;
  let previousOffset = offsetAt(timezone, from);
  while (previous < to) {
    const next = Math.min(previous + sampleMs, to);
    const nextOffset = offsetAt(timezone, next);
    let start = previous;
    let startOffset = previousOffset;
    while (startOffset !== nextOffset) {
      const at = transitionBetween(timezone, start, next);
      found.push(at);
      start = at;
      startOffset = offsetAt(timezone, at);
    }
    previous = next;
    previousOffset = nextOffset;
  }
  return found;
}

/**
 * The next instant after `instant` (strictly), less than 8 days later, at which the schedule opens or closes: the first
 * instant whose `isOpenAt` differs from `isOpenAt(instant)`. Null when the state does not change within 8 days.
 *
 * Between two changes of the zone's offset, wall time runs with real time, so the state can change only where the
 * wall clock reaches a range boundary of its date (or of the previous date, or midnight); at an offset change it can
 * jump. Those candidates are evaluated in order. A wall time skipped by spring forward is reached by no instant, a
 * wall time repeated by fall back by two: each is a candidate once per time it happens.
 */
export function nextChangeAfter(hours: ScheduleHours, instant: Date): Date | null {
  const start = instantMs(instant);
  const end = start + windowMs;
  const timezone = hours.timezone;
  const rangesOf = dateRangesOf(hours);
  const initially = openAtWall(rangesOf, wallClock(timezone, start));

  const candidates: { at: number; wall: number }[] = [];
  const edges = [start, ...transitions(timezone, start, end).filter((at) => at < end), end];
  for (let index = 0; index + 1 < edges.length; index += 1) {
    const from = edges[index] as number;
    const to = edges[index + 1] as number;
    const offset = offsetAt(timezone, from);
    if (index > 0) candidates.push({ at: from, wall: from + offset });
    const lastDate = Math.floor((to + offset) / dayMs);
    for (let date = Math.floor((from + offset) / dayMs); date <= lastDate; date += 1) {
      const minutes = new Set<number>([0]);
      for (const range of rangesOf(date).ranges) minutes.add(range.open).add(range.close);
      for (const range of rangesOf(date - 1).ranges) minutes.add(range.close);
      for (const minute of minutes) {
        const wall = date * dayMs + minute * minuteMs;
        const at = wall - offset;
        // `from` is the start or an offset change (a candidate already), `to` an offset change or the window's end.
        if (at > from && at < to) candidates.push({ at, wall });
      }
    }
  }
  candidates.sort((a, b) => a.at - b.at);
  for (const candidate of candidates) {
    if (openAtWall(rangesOf, candidate.wall) !== initially) return new Date(candidate.at);
  }
  return null;
}
