/**
 * Shared setup of the tests of queues, schedules and AI agents through HTTP (test/api/queues.test.ts,
 * schedules.test.ts, ai-agents.test.ts): tenants (an application with a workspace), requests in a workspace, the 400
 * and 409 `in_use` checks, routing plans that name what a test made, and the schedule and AI agent bodies more than
 * one file creates.
 *
 * The helpers read the file's service when called, so a file takes them at load time and starts the service in its
 * `test.before`:
 *
 *     let service: TestService;
 *     const { tenant, call } = routingConfigHelpers(() => service);
 *     test.before(async () => (service = await startService({}, ['api'])));
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext } from 'ava';
import { type Answer, type RequestOptions, type TestService, workspaceWithUser, isError } from './service.ts';

export interface Tenant {
  apiKey: string;
  applicationId: string;
  workspaceId: string;
  externalWorkspaceId: string;
}

/** 400 `invalid_request` whose message names the field (`pattern`). */
export function isInvalid(t: ExecutionContext, answer: Answer, pattern: RegExp, label = '') {
  isError(t, answer, 400, 'invalid_request', label);
  t.regex(String(answer.body?.error?.message), pattern, `${label} ${answer.text}`);
}

export const uuidRegex = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const isoRegex = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export async function created(what: string, answer: Answer) {
  if (answer.status !== 201) throw new Error(`${what}: ${answer.status} ${answer.text}`);
  return answer.body;
}

export const hangup = { type: 'hangup', message: null };

/** 409 `in_use` naming the plan (its name and id). */
export function isInUse(t: ExecutionContext, answer: Answer, planId: string, planName: string, label = '') {
  isError(t, answer, 409, 'in_use', label);
  const message = String(answer.body?.error?.message);
  t.true(message.includes(planName), `${label} names the plan: ${message}`);
  t.true(message.includes(planId), `${label} gives the plan id: ${message}`);
  t.deepEqual(answer.body?.error?.routingPlanIds, [planId], label);
}

// ---------------------------------------------------------------------------------------------------------------
// Schedules

export const workdays = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday'];

/** New York office hours, a Sunday night range 01:00-03:00 across both daylight-saving changes, two exceptions. */
export const newYork = {
  name: 'New York office',
  timezone: 'America/New_York',
  weeklyHours: [
    ...workdays.map((day) => ({ day, open: '09:00', close: '17:00' })),
    { day: 'sunday', open: '01:00', close: '03:00' },
  ],
  exceptions: [
    { date: '2026-12-24', name: 'Christmas Eve', hours: [{ open: '09:00', close: '12:00' }] },
    { date: '2026-12-25', name: 'Christmas Day', hours: [] },
  ],
};

// ---------------------------------------------------------------------------------------------------------------
// AI agents

export const connection = { url: 'wss://realtime.example.com/v1/voice', model: 'voice-large-2' };

export function agentBody(apiKey = `sk-live-${randomUUID()}`) {
  return { name: 'Receptionist', provider: 'provider_a', connection, apiKey, minuteCap: 600 };
}

// ---------------------------------------------------------------------------------------------------------------
// Requests

/** The helpers bound to a file's service (read at each call). */
export function routingConfigHelpers(service: () => TestService) {
  /** A new application with one workspace (and its user `alice`). */
  async function tenant(): Promise<Tenant> {
    const made = await workspaceWithUser(service());
    return {
      apiKey: made.apiKey,
      applicationId: made.applicationId,
      workspaceId: made.workspace.id as string,
      externalWorkspaceId: made.workspace.externalWorkspaceId as string,
    };
  }

  /** Another workspace of the same application. */
  async function secondWorkspace(owner: Tenant): Promise<Tenant> {
    const externalWorkspaceId = `ws-${randomUUID()}`;
    const answer = await service().request('POST', '/api/v1/workspaces', {
      auth: owner.apiKey,
      body: { externalWorkspaceId, name: 'Other Support', timezone: 'UTC' },
    });
    if (answer.status !== 201) throw new Error(`workspace: ${answer.status} ${answer.text}`);
    return { ...owner, workspaceId: answer.body.id, externalWorkspaceId };
  }

  /** A request of the tenant's application key in its workspace. */
  function call(who: Tenant, method: string, path: string, body?: unknown, options: RequestOptions = {}) {
    return service().request(method, `/api/v1${path}`, {
      auth: who.apiKey,
      workspaceId: who.workspaceId,
      ...(body === undefined ? {} : { body }),
      ...options,
    });
  }

  async function createPlan(t: ExecutionContext, who: Tenant, name: string, definition: unknown, publish = false) {
    const answer = await call(who, 'POST', '/routing-plans', { name, definition, ...(publish ? { publish } : {}) });
    t.is(answer.status, 201, answer.text);
    t.deepEqual(answer.body.definition, definition);
    return answer.body.id as string;
  }

  async function archivePlan(t: ExecutionContext, who: Tenant, planId: string) {
    const answer = await call(who, 'DELETE', `/routing-plans/${planId}`);
    t.is(answer.status, 200, answer.text);
  }

  async function createSchedule(who: Tenant, body: Record<string, unknown> = newYork) {
    return created('schedule', await call(who, 'POST', '/schedules', body));
  }

  return { tenant, secondWorkspace, call, createPlan, archivePlan, createSchedule };
}
