/**
 * Operations 39-43: schedules (business hours: an IANA time zone, weekly open ranges, dated exceptions; the rules
 * are in core/routing/opening-hours.ts). `GET` shows whether the schedule is open now and when that next changes, or at
 * the instant `at` names. Deleting a schedule that a routing plan uses is refused (409 `in_use`).
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../../core/errors.ts';
import {
  isOpenAt,
  nextChangeAfter,
  ScheduleException,
  type ScheduleHours,
  scheduleProblems,
  ScheduleTimezone,
  WeeklyRange,
} from '../../core/routing/opening-hours.ts';
import {
  createSchedule,
  deleteSchedule,
  listSchedules,
  scheduleById,
  type ScheduleRow,
  updateSchedule,
} from '../../core/routing/schedules.ts';
import { refuseWhenUsed } from '../../core/routing/usage.ts';
import { ListQuery, listPage } from '../pagination.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { DateTime, IdParams, NoFields, Uuid } from '../schemas.ts';

const Name = Type.String({ minLength: 1, maxLength: 200 });
const WeeklyHours = Type.Array(WeeklyRange, { maxItems: 100 });
const Exceptions = Type.Array(ScheduleException, { maxItems: 500 });

export const Schedule = Type.Object({
  id: Uuid,
  workspaceId: Uuid,
  name: Type.String(),
  timezone: Type.String(),
  weeklyHours: WeeklyHours,
  exceptions: Exceptions,
  openNow: Type.Boolean({ description: 'Open at `evaluatedAt` (now, unless `at` was given)' }),
  nextChangeAt: Type.Union([DateTime, Type.Null()], {
    description: 'When it next opens or closes (within 8 days; null when it does not)',
  }),
  evaluatedAt: DateTime,
  createdAt: DateTime,
  updatedAt: DateTime,
});

function scheduleJson(row: ScheduleRow, at = new Date()) {
  const hours = { timezone: row.timezone, weeklyHours: row.weekly_hours, exceptions: row.exceptions };
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    name: row.name,
    timezone: row.timezone,
    weeklyHours: row.weekly_hours,
    exceptions: row.exceptions,
    openNow: isOpenAt(hours, at),
    nextChangeAt: nextChangeAfter(hours, at)?.toISOString() ?? null,
    evaluatedAt: at.toISOString(),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** What the JSON schema cannot check (a real time zone, real dates, 24:00 only as a close...): 400 naming each. */
function checkHours(hours: ScheduleHours): void {
  const problems = scheduleProblems(hours);
  if (problems.length === 0) return;
  throw new ApiError('invalid_request', problems.map((problem) => `${problem.field}: ${problem.message}`).join('; '), {
    extra: { problems },
  });
}

export function scheduleRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createSchedule', {
    schemas: {
      body: Type.Object(
        {
          name: Name,
          timezone: ScheduleTimezone,
          weeklyHours: WeeklyHours,
          exceptions: Type.Optional(Exceptions),
        },
        { additionalProperties: false },
      ),
      response: { 201: Schedule },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body } = context;
      const hours: ScheduleHours = {
        timezone: body.timezone,
        weeklyHours: body.weeklyHours,
        exceptions: body.exceptions ?? [],
      };
      checkHours(hours);
      const row = await createSchedule(context.db, workspace.id, body.name, hours);
      return { status: 201, body: scheduleJson(row) };
    },
  });

  defineOperation(app, services, 'listSchedules', {
    schemas: { querystring: ListQuery, response: { 200: Type.Object({ data: Type.Array(Schedule) }) } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const page = await listPage<ScheduleRow>({
        key: services.keys.cursors,
        list: 'schedules',
        owner: workspace.id,
        query: context.query,
        read: (window) => listSchedules(context.db, workspace.id, window),
      });
      const now = new Date();
      return {
        status: 200,
        body: { data: page.rows.map((row) => scheduleJson(row, now)), nextCursor: page.nextCursor },
      };
    },
  });

  defineOperation(app, services, 'getSchedule', {
    schemas: {
      params: IdParams,
      querystring: Type.Object(
        { at: Type.Optional(Type.String({ format: 'date-time', description: 'Evaluate at this instant, not now' })) },
        { additionalProperties: false },
      ),
      response: { 200: Schedule },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const row = await scheduleById(context.db, workspace.id, context.params.id);
      const at = context.query.at === undefined ? new Date() : new Date(context.query.at);
      // The date-time format lets through a leap second (23:59:60) or an hour-only offset (+05) that Date cannot read.
      if (Number.isNaN(at.getTime())) {
        throw new ApiError('invalid_request', 'query.at must be an instant such as 2026-03-08T09:30:00Z');
      }
      return { status: 200, body: scheduleJson(row, at) };
    },
  });

  defineOperation(app, services, 'updateSchedule', {
    schemas: {
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Name),
          timezone: Type.Optional(ScheduleTimezone),
          weeklyHours: Type.Optional(WeeklyHours),
          exceptions: Type.Optional(Exceptions),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: { 200: Schedule },
    },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { body, db } = context;
      const current = await scheduleById(db, workspace.id, context.params.id, true);
      const hours: ScheduleHours = {
        timezone: body.timezone ?? current.timezone,
        weeklyHours: body.weeklyHours ?? current.weekly_hours,
        exceptions: body.exceptions ?? current.exceptions,
      };
      checkHours(hours);
      const row = await updateSchedule(db, current.id, body.name ?? current.name, hours);
      return { status: 200, body: scheduleJson(row) };
    },
  });

  defineOperation(app, services, 'deleteSchedule', {
    schemas: { params: IdParams, body: NoFields, response: { 200: Schedule } },
    handler: async (context) => {
      const workspace = requireWorkspace(context);
      const { db } = context;
      const row = await scheduleById(db, workspace.id, context.params.id, true);
      await refuseWhenUsed(db, 'schedule', row.id);
      await deleteSchedule(db, row.id);
      return { status: 200, body: scheduleJson(row) };
    },
  });
}
