/**
 * Routing plan definitions (docs/routing-plans.md, "Definitions and validation"): the validator of
 * `core/routing/validate.ts` over a table of invalid definitions, each pinned to the exact errors it must produce
 * (step and code, in order), valid definitions that use every step type and every documented bound, a property test
 * against an independent brute-force search of the step graph, and the destination check and reference listing.
 *
 * Every valid example and every table row is also checked against the `RoutingPlanDefinition` JSON Schema itself
 * (the one the CRDs will be generated from), so the schema and the validator cannot drift apart.
 */
import test from 'ava';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import fc from 'fast-check';
import libphonenumber from 'google-libphonenumber';
import { checkDestination, emergencyDigitsBound } from '../../core/routing/destinations.ts';
import { menuOptionKeys, RoutingPlanDefinition, stepTypes } from '../../core/routing/definition.ts';
import {
  type PlanIssue,
  planIssueCodes,
  referencesOf,
  validateDefinition,
  type WorkspaceFacts,
} from '../../core/routing/validate.ts';

const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;
const schemaAjv = new Ajv({ allErrors: true, strict: true });
addFormats(schemaAjv, ['uri']);
const schemaAccepts = schemaAjv.compile(RoutingPlanDefinition);

type Fields = Record<string, unknown>;
interface Plan {
  entry?: unknown;
  steps: Record<string, Fields>;
  [field: string]: unknown;
}

const facts: WorkspaceFacts = {
  schedules: new Set(['sch-1']),
  queues: new Set(['q-1']),
  aiAgents: new Map([['agent-1', 'provider_a']]),
  members: new Set(['mem-1']),
  users: new Set(['usr-1']),
  destinationPolicy: { allowedPrefixes: [], blockedPrefixes: [] },
};

function withPolicy(allowedPrefixes: string[], blockedPrefixes: string[]): WorkspaceFacts {
  return { ...facts, destinationPolicy: { allowedPrefixes, blockedPrefixes } };
}

/** A valid plan using every step type, every step reachable, every path ending in voicemail or hangup. */
function basePlan(): Plan {
  return {
    entry: 'start',
    recording: { enabled: true, disclosure: true },
    steps: {
      start: { type: 'hours', scheduleId: 'sch-1', open: 'menu', closed: 'closed' },
      menu: {
        type: 'menu',
        prompt: { tts: 'Press 1 for sales, 2 for support, 3 for our assistant, 4 for the office, 5 for anyone.' },
        options: { '1': 'sales', '2': 'support', '3': 'ai', '4': 'outside', '5': 'ab', '#': 'bye' },
        noInput: 'bye',
        timeoutSecs: 5,
        maxRetries: 2,
      },
      sales: {
        type: 'ring',
        targets: [{ memberId: 'mem-1' }, { userId: 'usr-1', mode: 'silent' }, { cell: '+15550100000', mode: 'muted' }],
        strategy: 'sequential',
        timeoutSecs: 20,
        next: 'voicemail',
      },
      support: { type: 'queue', queueId: 'q-1', maxWaitSecs: 600, overflow: 'voicemail', offerCallback: true },
      ai: { type: 'ai_answer', provider: 'provider_a', agentId: 'agent-1', onCap: 'support', next: 'bye' },
      outside: { type: 'forward', to: '+15550100001', timeoutSecs: 30, next: 'voicemail' },
      ab: { type: 'split', percentToA: 50, a: 'sales', b: 'support' },
      voicemail: { type: 'voicemail', greeting: { audioUrl: 'https://example.com/greeting.mp3' } },
      closed: { type: 'voicemail', greeting: null },
      bye: { type: 'hangup', message: 'Goodbye' },
    },
  };
}

function plan(change: (plan: Plan) => void): Plan {
  const changed = basePlan();
  change(changed);
  return changed;
}

function step(plan: Plan, name: string): Fields {
  const found = plan.steps[name];
  if (found === undefined) throw new Error(`no step ${name} in the test plan`);
  return found;
}

const structureCodes = new Set([
  'invalid_definition',
  'too_many_steps',
  'invalid_step_name',
  'unknown_step_type',
  'missing_field',
  'invalid_field',
  'unknown_field',
  'invalid_option_key',
  'empty_targets',
  'empty_options',
]);
const workspaceCodes = new Set([
  'unknown_schedule',
  'unknown_queue',
  'unknown_agent',
  'provider_mismatch',
  'unknown_member',
  'unknown_user',
  'invalid_number',
  'emergency_number',
  'destination_blocked',
]);

/** Definition-level issues first, then by step name (code unit order), then by code. */
function inOrder(issues: PlanIssue[]): boolean {
  const key = (issue: PlanIssue) => [issue.stepId === null ? 0 : 1, issue.stepId ?? '', issue.code] as const;
  return issues.every((issue, index) => {
    if (index === 0) return true;
    const [a1, a2, a3] = key(issues[index - 1] as PlanIssue);
    const [b1, b2, b3] = key(issue);
    return a1 < b1 || (a1 === b1 && (a2 < b2 || (a2 === b2 && a3 <= b3)));
  });
}

function pairs(issues: PlanIssue[], severity: 'error' | 'warning'): [string | null, string][] {
  return issues.filter((issue) => issue.severity === severity).map((issue) => [issue.stepId, issue.code]);
}

// ---------------------------------------------------------------------------------------------------------------
// Invalid definitions

interface Row {
  title: string;
  definition: unknown;
  /** Every error, exactly, in the order reported. */
  errors: [string | null, string][];
  warnings?: [string | null, string][];
  /** A fragment the message of the first error must contain (the field path). */
  message?: string;
  facts?: WorkspaceFacts;
  /** Whether the RoutingPlanDefinition schema alone accepts it; by default, when no error is structural. */
  schema?: boolean;
}

const tooMany = {
  entry: 's0',
  steps: Object.fromEntries(
    Array.from({ length: 2001 }, (_, index) => [`s${index}`, { type: 'hangup', message: null }]),
  ),
};

/** A plan otherwise valid whose hangup messages take it past 256 KiB as JSON (70 of 4000 characters). */
const tooLarge = plan((p) => {
  for (let index = 0; index < 70; index += 1) p.steps[`long${index}`] = { type: 'hangup', message: 'x'.repeat(4000) };
});

const rows: Row[] = [
  // invalid_definition
  { title: 'null', definition: null, errors: [[null, 'invalid_definition']] },
  { title: 'an array', definition: [basePlan()], errors: [[null, 'invalid_definition']] },
  { title: 'a string', definition: 'start', errors: [[null, 'invalid_definition']] },
  {
    title: 'no entry',
    definition: plan((p) => delete p.entry),
    errors: [[null, 'invalid_definition']],
    message: 'entry is required',
    // Without an entry nothing is reachable or unreachable: no warnings.
  },
  { title: 'entry not a string', definition: plan((p) => (p.entry = 1)), errors: [[null, 'invalid_definition']] },
  {
    title: 'no steps',
    definition: { entry: 'start' },
    errors: [[null, 'invalid_definition']],
    message: 'steps is required',
  },
  {
    title: 'steps an array',
    definition: { entry: 'start', steps: [{ type: 'hangup', message: null }] },
    errors: [[null, 'invalid_definition']],
  },
  {
    title: 'unknown top-level field',
    definition: plan((p) => (p.version = 2)),
    errors: [[null, 'invalid_definition']],
    message: 'version',
  },
  {
    title: 'recording without disclosure',
    definition: plan((p) => (p.recording = { enabled: true })),
    errors: [[null, 'invalid_definition']],
    message: 'recording.disclosure',
  },
  {
    title: 'recording with a string and an unknown field',
    definition: plan((p) => (p.recording = { enabled: 'yes', disclosure: false, store: 'forever' })),
    errors: [
      [null, 'invalid_definition'],
      [null, 'invalid_definition'],
    ],
  },
  {
    title: 'recording not an object',
    definition: plan((p) => (p.recording = true)),
    errors: [[null, 'invalid_definition']],
  },
  {
    title: 'several definition-level problems at once',
    definition: { entry: 7, steps: 'none', extra: true },
    errors: [
      [null, 'invalid_definition'],
      [null, 'invalid_definition'],
      [null, 'invalid_definition'],
    ],
  },
  // too_many_steps (everything else is fine; all but s0 are unreachable)
  {
    title: '2001 steps',
    definition: tooMany,
    errors: [[null, 'too_many_steps']],
    warnings: Object.keys(tooMany.steps)
      .filter((name) => name !== 's0')
      .sort()
      .map((name) => [name, 'unreachable_step']),
  },
  // definition_too_large: nothing else is looked at (the unreachable steps are not reported)
  {
    title: 'a definition over 256 KiB as JSON',
    definition: tooLarge,
    errors: [[null, 'definition_too_large']],
    message: 'bytes as JSON, over the 262144 bytes (256 KiB)',
    // The schema has no word for a size: it accepts it (the CRD cannot refuse it either; the webhook does).
    schema: true,
  },
  // invalid_step_name
  {
    title: 'a step name with a space',
    definition: plan((p) => {
      p.steps['say bye'] = step(p, 'bye');
      delete p.steps.bye;
      step(p, 'menu').noInput = 'say bye';
      step(p, 'menu').options = { '1': 'sales', '2': 'support', '3': 'ai', '4': 'outside', '5': 'ab' };
      step(p, 'ai').next = 'voicemail';
    }),
    // The reference to it is a bad step name too, but it does lead to the step: no unknown_step.
    errors: [
      ['menu', 'invalid_field'],
      ['say bye', 'invalid_step_name'],
    ],
    message: 'steps.menu.noInput',
  },
  {
    title: 'a 65-character step name',
    definition: plan((p) => (p.steps['x'.repeat(65)] = { type: 'hangup', message: null })),
    errors: [['x'.repeat(65), 'invalid_step_name']],
    warnings: [['x'.repeat(65), 'unreachable_step']],
  },
  {
    title: 'an empty step name',
    definition: plan((p) => (p.steps[''] = { type: 'hangup', message: null })),
    errors: [['', 'invalid_step_name']],
    warnings: [['', 'unreachable_step']],
  },
  // unknown_step_type
  {
    title: 'type dial',
    definition: plan((p) => (step(p, 'outside').type = 'dial')),
    errors: [['outside', 'unknown_step_type']],
    // An unknown type has no readable edges: what only it led to is unreachable.
  },
  {
    title: 'type a number',
    definition: plan((p) => (step(p, 'bye').type = 5)),
    errors: [['bye', 'unknown_step_type']],
  },
  // missing_field
  {
    title: 'hours without closed',
    definition: plan((p) => delete step(p, 'start').closed),
    errors: [['start', 'missing_field']],
    warnings: [['closed', 'unreachable_step']],
    message: 'steps.start.closed',
  },
  {
    title: 'a step without type',
    definition: plan((p) => delete step(p, 'bye').type),
    errors: [['bye', 'missing_field']],
    message: 'steps.bye.type',
  },
  {
    title: 'menu without prompt and timeoutSecs',
    definition: plan((p) => {
      delete step(p, 'menu').prompt;
      delete step(p, 'menu').timeoutSecs;
    }),
    errors: [
      ['menu', 'missing_field'],
      ['menu', 'missing_field'],
    ],
  },
  {
    title: 'voicemail without greeting',
    definition: plan((p) => delete step(p, 'closed').greeting),
    errors: [['closed', 'missing_field']],
    message: 'steps.closed.greeting',
  },
  {
    title: 'queue without offerCallback',
    definition: plan((p) => delete step(p, 'support').offerCallback),
    errors: [['support', 'missing_field']],
  },
  // invalid_field: out of range
  ...(
    [
      ['menu', 'timeoutSecs', 0],
      ['menu', 'timeoutSecs', 61],
      ['menu', 'maxRetries', -1],
      ['menu', 'maxRetries', 11],
      ['menu', 'maxRetries', 1.5],
      ['sales', 'timeoutSecs', 4],
      ['sales', 'timeoutSecs', 301],
      ['support', 'maxWaitSecs', 9],
      ['support', 'maxWaitSecs', 14401],
      ['support', 'priority', -101],
      ['support', 'priority', 101],
      ['support', 'priority', 1.5],
      ['outside', 'timeoutSecs', 4],
      ['outside', 'timeoutSecs', 301],
      ['ab', 'percentToA', -1],
      ['ab', 'percentToA', 101],
      ['ab', 'percentToA', '50'],
    ] as const
  ).map(([name, field, value]): Row => ({
    title: `${name}.${field} = ${JSON.stringify(value)}`,
    definition: plan((p) => (step(p, name)[field] = value)),
    errors: [[name, 'invalid_field']],
    message: `steps.${name}.${field}`,
  })),
  // invalid_field: format, length, type, enumerations
  {
    title: 'an empty tts prompt',
    definition: plan((p) => (step(p, 'menu').prompt = { tts: '' })),
    errors: [['menu', 'invalid_field']],
    message: 'steps.menu.prompt.tts',
  },
  {
    title: 'a tts prompt of 4001 characters',
    definition: plan((p) => (step(p, 'menu').prompt = { tts: 'a'.repeat(4001) })),
    errors: [['menu', 'invalid_field']],
    message: 'steps.menu.prompt.tts',
  },
  {
    title: 'an http audioUrl',
    definition: plan((p) => (step(p, 'voicemail').greeting = { audioUrl: 'http://example.com/a.mp3' })),
    errors: [['voicemail', 'invalid_field']],
    message: 'steps.voicemail.greeting.audioUrl',
  },
  {
    title: 'an audioUrl that is no URL',
    definition: plan((p) => (step(p, 'menu').prompt = { audioUrl: 'greeting.mp3' })),
    errors: [['menu', 'invalid_field']],
    message: 'steps.menu.prompt.audioUrl',
  },
  {
    title: 'an audioUrl of 2001 characters',
    definition: plan((p) => (step(p, 'menu').prompt = { audioUrl: `https://example.com/${'a'.repeat(1981)}` })),
    errors: [['menu', 'invalid_field']],
    message: 'steps.menu.prompt.audioUrl',
  },
  {
    title: 'a prompt with both tts and audioUrl',
    definition: plan((p) => (step(p, 'menu').prompt = { tts: 'Hello', audioUrl: 'https://example.com/a.mp3' })),
    errors: [['menu', 'invalid_field']],
    message: 'steps.menu.prompt must be one of: {tts}, {audioUrl}',
  },
  {
    title: 'a greeting that is a string',
    definition: plan((p) => (step(p, 'closed').greeting = 'Leave a message')),
    errors: [['closed', 'invalid_field']],
    message: 'steps.closed.greeting',
  },
  {
    title: 'an empty hangup message',
    definition: plan((p) => (step(p, 'bye').message = '')),
    errors: [['bye', 'invalid_field']],
    message: 'steps.bye.message',
  },
  {
    title: 'a hangup message that is a number',
    definition: plan((p) => (step(p, 'bye').message = 42)),
    errors: [['bye', 'invalid_field']],
  },
  {
    title: 'an empty scheduleId',
    definition: plan((p) => (step(p, 'start').scheduleId = '')),
    errors: [['start', 'invalid_field']],
    message: 'steps.start.scheduleId',
    facts: { ...facts, schedules: new Set(['']) },
  },
  {
    title: 'a queueId of 101 characters',
    definition: plan((p) => (step(p, 'support').queueId = 'q'.repeat(101))),
    errors: [['support', 'invalid_field']],
    facts: { ...facts, queues: new Set(['q'.repeat(101)]) },
  },
  {
    title: 'a step reference that is no step name',
    definition: plan((p) => (step(p, 'ab').b = 'not a name')),
    errors: [
      ['ab', 'invalid_field'],
      ['ab', 'unknown_step'],
    ],
    message: 'steps.ab.b',
  },
  {
    title: 'a step reference that is a number',
    definition: plan((p) => (step(p, 'outside').next = 3)),
    errors: [['outside', 'invalid_field']],
    message: 'steps.outside.next',
  },
  {
    title: 'a ring mode that does not exist',
    definition: plan((p) => (step(p, 'sales').targets = [{ memberId: 'mem-1', mode: 'loud' }])),
    errors: [['sales', 'invalid_field']],
    message: 'steps.sales.targets[0].mode',
  },
  {
    title: 'a ring target with nothing to ring',
    definition: plan((p) => (step(p, 'sales').targets = [{ memberId: 'mem-1' }, { mode: 'ring' }])),
    errors: [['sales', 'invalid_field']],
    message: 'steps.sales.targets[1] must be one of: {memberId}, {userId}, {cell}',
  },
  {
    title: '51 ring targets',
    definition: plan((p) => (step(p, 'sales').targets = Array.from({ length: 51 }, () => ({ memberId: 'mem-1' })))),
    errors: [['sales', 'invalid_field']],
    message: 'steps.sales.targets',
  },
  {
    title: 'targets not an array',
    definition: plan((p) => (step(p, 'sales').targets = { memberId: 'mem-1' })),
    errors: [['sales', 'invalid_field']],
  },
  {
    title: 'a strategy that does not exist',
    definition: plan((p) => (step(p, 'sales').strategy = 'random')),
    errors: [['sales', 'invalid_field']],
    message: 'steps.sales.strategy',
  },
  {
    title: 'a provider that does not exist',
    definition: plan((p) => (step(p, 'ai').provider = 'provider_d')),
    errors: [['ai', 'invalid_field']],
    message: 'steps.ai.provider',
  },
  {
    title: 'offerCallback a string',
    definition: plan((p) => (step(p, 'support').offerCallback = 'yes')),
    errors: [['support', 'invalid_field']],
  },
  {
    title: 'a step that is not an object',
    definition: plan((p) => ((p.steps as Record<string, unknown>).bye = 'hangup')),
    errors: [['bye', 'invalid_field']],
    message: 'steps.bye',
  },
  // unknown_field
  {
    title: 'an unknown field on a step',
    definition: plan((p) => (step(p, 'start').timezone = 'Europe/Paris')),
    errors: [['start', 'unknown_field']],
    message: 'steps.start.timezone',
  },
  {
    title: 'an unknown field on a ring target',
    definition: plan((p) => (step(p, 'sales').targets = [{ memberId: 'mem-1', priority: 1 }])),
    errors: [['sales', 'unknown_field']],
    message: 'steps.sales.targets[0].priority',
  },
  {
    title: 'a field of another step type',
    definition: plan((p) => (step(p, 'bye').next = 'voicemail')),
    errors: [['bye', 'unknown_field']],
  },
  // invalid_option_key (the edge is still read: it leads to an existing step here)
  ...['a', '10', '+', ''].map((key): Row => ({
    title: `menu option key ${JSON.stringify(key)}`,
    definition: plan((p) => ((step(p, 'menu').options as Fields)[key] = 'bye')),
    errors: [['menu', 'invalid_option_key']],
  })),
  // empty_targets, empty_options
  {
    title: 'a ring step with no targets',
    definition: plan((p) => (step(p, 'sales').targets = [])),
    errors: [['sales', 'empty_targets']],
  },
  {
    title: 'a menu with no options',
    definition: plan((p) => (step(p, 'menu').options = {})),
    errors: [['menu', 'empty_options']],
    warnings: [
      ['ab', 'unreachable_step'],
      ['ai', 'unreachable_step'],
      ['outside', 'unreachable_step'],
      ['sales', 'unreachable_step'],
      ['support', 'unreachable_step'],
      ['voicemail', 'unreachable_step'],
    ],
  },
  // unknown_entry
  {
    title: 'an entry that names no step',
    definition: plan((p) => (p.entry = 'begin')),
    errors: [[null, 'unknown_entry']],
  },
  {
    title: 'an entry named after an Object.prototype member',
    definition: plan((p) => (p.entry = 'constructor')),
    errors: [[null, 'unknown_entry']],
  },
  {
    title: 'no steps at all',
    definition: { entry: 'start', steps: {} },
    errors: [[null, 'unknown_entry']],
  },
  // unknown_step
  {
    title: 'a next step that does not exist',
    definition: plan((p) => (step(p, 'outside').next = 'voicemail2')),
    errors: [['outside', 'unknown_step']],
    message: 'steps.outside.next',
  },
  {
    title: 'a step named after an Object.prototype member',
    definition: plan((p) => {
      step(p, 'ab').a = 'toString';
      step(p, 'ab').b = '__proto__';
    }),
    errors: [
      ['ab', 'unknown_step'],
      ['ab', 'unknown_step'],
    ],
  },
  {
    title: 'an unknown step from an unreachable step, along with a structure error',
    definition: plan((p) => (p.steps.orphan = { type: 'forward', to: '+15550100002', timeoutSecs: 1, next: 'gone' })),
    errors: [
      ['orphan', 'invalid_field'],
      ['orphan', 'unknown_step'],
    ],
    warnings: [['orphan', 'unreachable_step']],
  },
  // cycle
  {
    title: 'a menu option back to itself',
    definition: plan((p) => ((step(p, 'menu').options as Fields)['*'] = 'menu')),
    errors: [['menu', 'cycle']],
  },
  {
    title: 'a loop through two steps',
    definition: plan((p) => (step(p, 'ai').next = 'start')),
    errors: [['ai', 'cycle']],
  },
  {
    title: 'a loop nobody reaches',
    definition: plan((p) => {
      p.steps.x1 = { type: 'split', percentToA: 10, a: 'x2', b: 'bye' };
      p.steps.x2 = { type: 'queue', queueId: 'q-1', maxWaitSecs: 60, overflow: 'x1', offerCallback: false };
    }),
    errors: [['x1', 'cycle']],
    warnings: [
      ['x1', 'unreachable_step'],
      ['x2', 'unreachable_step'],
    ],
  },
  {
    title: 'two separate loops, each reported',
    definition: plan((p) => {
      step(p, 'outside').next = 'outside';
      step(p, 'support').overflow = 'ab';
    }),
    errors: [
      ['ab', 'cycle'],
      ['outside', 'cycle'],
    ],
  },
  {
    title: 'a loop behind an invalid step still counts',
    definition: plan((p) => {
      step(p, 'sales').next = 'ab';
      step(p, 'sales').strategy = 'all';
    }),
    errors: [
      ['ab', 'cycle'],
      ['sales', 'invalid_field'],
    ],
  },
  // unreachable_step: a warning only
  {
    title: 'an unreachable step',
    definition: plan((p) => (p.steps.spare = { type: 'hangup', message: null })),
    errors: [],
    warnings: [['spare', 'unreachable_step']],
  },
  // workspace facts
  {
    title: 'a schedule the workspace lacks',
    definition: plan((p) => (step(p, 'start').scheduleId = 'sch-2')),
    errors: [['start', 'unknown_schedule']],
  },
  {
    title: 'a queue the workspace lacks',
    definition: plan((p) => (step(p, 'support').queueId = 'q-2')),
    errors: [['support', 'unknown_queue']],
  },
  {
    title: 'an AI agent the workspace lacks',
    definition: plan((p) => (step(p, 'ai').agentId = 'agent-2')),
    errors: [['ai', 'unknown_agent']],
  },
  {
    title: "a provider other than the agent's",
    definition: plan((p) => (step(p, 'ai').provider = 'provider_b')),
    errors: [['ai', 'provider_mismatch']],
  },
  {
    title: 'a member the workspace lacks',
    definition: plan((p) => (step(p, 'sales').targets = [{ memberId: 'mem-2' }])),
    errors: [['sales', 'unknown_member']],
    message: 'steps.sales.targets[0].memberId',
  },
  {
    title: 'a user the workspace lacks',
    definition: plan((p) => (step(p, 'sales').targets = [{ userId: 'usr-1' }, { userId: 'usr-2' }])),
    errors: [['sales', 'unknown_user']],
    message: 'steps.sales.targets[1].userId',
  },
  {
    title: 'a forward to a number that is not E.164',
    definition: plan((p) => (step(p, 'outside').to = '0155501000')),
    errors: [['outside', 'invalid_number']],
    message: 'steps.outside.to',
    schema: false,
  },
  {
    title: 'a cell target that is not E.164',
    definition: plan((p) => (step(p, 'sales').targets = [{ cell: '+1 555 0100' }])),
    errors: [['sales', 'invalid_number']],
    message: 'steps.sales.targets[0].cell',
    schema: false,
  },
  {
    title: 'a forward to a country code nobody has',
    definition: plan((p) => (step(p, 'outside').to = '+99912345')),
    errors: [['outside', 'invalid_number']],
  },
  {
    title: 'a forward to 911',
    definition: plan((p) => (step(p, 'outside').to = '+1911')),
    errors: [['outside', 'emergency_number']],
  },
  {
    title: 'a cell target that is 999',
    definition: plan((p) => (step(p, 'sales').targets = [{ cell: '+44999', mode: 'ring' }])),
    errors: [['sales', 'emergency_number']],
  },
  {
    title: 'an emergency number even when its prefix is allowed',
    definition: plan((p) => (step(p, 'outside').to = '+61000')),
    errors: [['outside', 'emergency_number']],
    facts: withPolicy(['+1', '+61'], []),
  },
  {
    title: 'a destination outside the allowed prefixes',
    definition: plan((p) => (step(p, 'outside').to = '+33612345678')),
    errors: [['outside', 'destination_blocked']],
    facts: withPolicy(['+1'], []),
  },
  {
    title: 'a blocked destination within the allowed prefixes',
    definition: plan((p) => (step(p, 'sales').targets = [{ cell: '+15550100000' }, { cell: '+19005550100' }])),
    errors: [['sales', 'destination_blocked']],
    message: 'steps.sales.targets[1].cell',
    facts: withPolicy(['+1'], ['+1900']),
  },
  // many problems at once, in order
  {
    title: 'every kind of problem at once',
    definition: plan((p) => {
      p.entry = 'begin';
      p.extra = 1;
      step(p, 'start').scheduleId = 'sch-9';
      step(p, 'sales').targets = [];
      step(p, 'outside').to = '+1911';
      step(p, 'outside').next = 'outside';
      step(p, 'ab').a = 'gone';
      step(p, 'menu').timeoutSecs = 100;
      (step(p, 'menu').options as Fields).x = 'bye';
    }),
    errors: [
      [null, 'invalid_definition'],
      [null, 'unknown_entry'],
      ['ab', 'unknown_step'],
      ['menu', 'invalid_field'],
      ['menu', 'invalid_option_key'],
      ['outside', 'cycle'],
      ['outside', 'emergency_number'],
      ['sales', 'empty_targets'],
      ['start', 'unknown_schedule'],
    ],
  },
];

test('the table has a row for every issue code', (t) => {
  const covered = new Set(rows.flatMap((row) => [...row.errors, ...(row.warnings ?? [])].map(([, code]) => code)));
  t.deepEqual(
    [...planIssueCodes].filter((code) => !covered.has(code)),
    [],
  );
});

for (const row of rows) {
  test(`refuses: ${row.title}`, (t) => {
    const result = validateDefinition(row.definition, row.facts ?? facts);
    t.deepEqual(pairs(result.issues, 'error'), row.errors);
    t.deepEqual(pairs(result.issues, 'warning'), row.warnings ?? []);
    t.is(result.valid, row.errors.length === 0);
    t.true(inOrder(result.issues), 'issues in order');
    for (const issue of result.issues) {
      t.true(issue.message.length > 0);
      t.is(issue.severity, issue.code === 'unreachable_step' ? 'warning' : 'error');
    }
    if (row.message !== undefined) {
      const first = result.issues.find((issue) => issue.severity === 'error');
      t.true(first?.message.includes(row.message), `${first?.message} names ${row.message}`);
    }

    // Without facts: the same issues, less those about the workspace (a malformed number is the schema's).
    const alone = validateDefinition(row.definition);
    const expectedAlone = result.issues.filter(
      (issue) =>
        !workspaceCodes.has(issue.code) || (issue.code === 'invalid_number' && issue.message.includes('E.164')),
    );
    t.deepEqual(alone.issues, expectedAlone);

    const schemaValid = row.schema ?? !row.errors.some(([, code]) => structureCodes.has(code));
    t.is(schemaAccepts(row.definition), schemaValid, 'the RoutingPlanDefinition schema agrees');
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Valid definitions

const longName = 'Az09_-'.repeat(10) + 'abcd';
const valid: { title: string; definition: Plan }[] = [
  { title: 'every step type, recording on', definition: basePlan() },
  {
    title: 'no recording',
    definition: plan((p) => delete p.recording),
  },
  {
    title: 'recording off without disclosure',
    definition: plan((p) => (p.recording = { enabled: false, disclosure: false })),
  },
  {
    title: 'the other variants: audio prompt, tts greeting, null message, simultaneous ring, other providers',
    definition: plan((p) => {
      step(p, 'menu').prompt = { audioUrl: 'https://cdn.example.com/menu.wav?v=2' };
      step(p, 'voicemail').greeting = { tts: 'Please leave a message.' };
      step(p, 'bye').message = null;
      step(p, 'sales').strategy = 'simultaneous';
      step(p, 'sales').targets = [{ memberId: 'mem-1', mode: 'ring' }];
      step(p, 'ai').provider = 'provider_c';
      step(p, 'ai').agentId = 'agent-3';
    }),
  },
  {
    title: 'the lower bounds',
    definition: plan((p) => {
      Object.assign(step(p, 'menu'), { timeoutSecs: 1, maxRetries: 0, prompt: { tts: 'x' } });
      step(p, 'sales').timeoutSecs = 5;
      step(p, 'support').maxWaitSecs = 10;
      step(p, 'support').priority = -100;
      step(p, 'outside').timeoutSecs = 5;
      step(p, 'ab').percentToA = 0;
      step(p, 'bye').message = 'x';
      step(p, 'start').scheduleId = 's';
    }),
  },
  {
    title: 'the upper bounds',
    definition: plan((p) => {
      Object.assign(step(p, 'menu'), { timeoutSecs: 60, maxRetries: 10, prompt: { tts: 'x'.repeat(4000) } });
      step(p, 'sales').timeoutSecs = 300;
      step(p, 'sales').targets = Array.from({ length: 50 }, () => ({ memberId: 'm'.repeat(100) }));
      step(p, 'support').maxWaitSecs = 14400;
      step(p, 'support').priority = 100;
      step(p, 'outside').timeoutSecs = 300;
      step(p, 'ab').percentToA = 100;
      step(p, 'bye').message = 'x'.repeat(4000);
      step(p, 'voicemail').greeting = { audioUrl: `https://example.com/${'a'.repeat(1980)}` };
      step(p, 'menu').options = {
        ...Object.fromEntries(menuOptionKeys.map((key) => [key, 'bye'])),
        ...(step(p, 'menu').options as Fields),
      };
    }),
  },
  {
    title: 'a one-step plan with a 64-character step name',
    definition: { entry: longName, steps: { [longName]: { type: 'hangup', message: null } } },
  },
  {
    title: 'a step reached by several paths (a diamond is no loop)',
    definition: plan((p) => (step(p, 'outside').next = 'ab')),
  },
  {
    title: '2000 steps',
    definition: {
      entry: 's0',
      steps: Object.fromEntries(
        Array.from({ length: 2000 }, (_, index) => [
          `s${index}`,
          index === 1999
            ? { type: 'hangup', message: null }
            : { type: 'split', percentToA: 50, a: `s${index + 1}`, b: 's1999' },
        ]),
      ),
    },
  },
];

test('the valid examples use every step type', (t) => {
  const used = new Set(valid.flatMap(({ definition }) => Object.values(definition.steps).map((s) => s.type)));
  t.deepEqual(
    stepTypes.filter((type) => !used.has(type)),
    [],
  );
});

for (const { title, definition } of valid) {
  test(`accepts: ${title}`, (t) => {
    const members = new Set(['mem-1', 'm'.repeat(100)]);
    const aiAgents = new Map([...facts.aiAgents, ['agent-3', 'provider_c']]);
    const schedules = new Set(['sch-1', 's']);
    const withFacts = validateDefinition(definition, { ...facts, members, schedules, aiAgents });
    t.deepEqual(withFacts, { valid: true, issues: [] });
    t.deepEqual(validateDefinition(definition), { valid: true, issues: [] });
    t.true(schemaAccepts(definition), JSON.stringify(schemaAccepts.errors));
  });
}

test('without facts, the workspace is not consulted', (t) => {
  const definition = plan((p) => {
    step(p, 'start').scheduleId = 'elsewhere';
    step(p, 'outside').to = '+1911';
    step(p, 'sales').targets = [{ memberId: 'nobody' }, { userId: 'nobody' }];
  });
  t.deepEqual(validateDefinition(definition), { valid: true, issues: [] });
  t.deepEqual(
    validateDefinition(definition, facts).issues.map((issue) => issue.code),
    ['emergency_number', 'unknown_member', 'unknown_user', 'unknown_schedule'],
  );
});

test('the same definition gives the same issues whatever the order of its keys', (t) => {
  const definition = rows.find((row) => row.title === 'every kind of problem at once')?.definition as Plan;
  const reversed = {
    ...definition,
    steps: Object.fromEntries(Object.entries(definition.steps).reverse()),
  };
  t.deepEqual(validateDefinition(reversed, facts), validateDefinition(definition, facts));
});

// ---------------------------------------------------------------------------------------------------------------
// The graph decides: a property test against a brute-force search

/** The step names a step leads to, read plainly from its type's fields. */
function successors(step: Fields): string[] {
  switch (step.type) {
    case 'hours':
      return [step.open, step.closed] as string[];
    case 'menu':
      return [...Object.values(step.options as Record<string, string>), step.noInput as string];
    case 'ring':
    case 'forward':
      return [step.next as string];
    case 'queue':
      return [step.overflow as string];
    case 'ai_answer':
      return [step.onCap, step.next] as string[];
    case 'split':
      return [step.a, step.b] as string[];
    default:
      return [];
  }
}

/**
 * Enumerates every path from the entry and from every step, depth first, with the list of steps visited on the way:
 * true when a path comes back to a step already on it, or reaches a name that is no step.
 */
function bruteForceFindsProblem(definition: { entry: string; steps: Record<string, Fields> }): boolean {
  const { steps } = definition;
  function walk(path: string[]): boolean {
    const current = path[path.length - 1] as string;
    if (!Object.hasOwn(steps, current)) return true;
    for (const next of successors(steps[current] as Fields)) {
      if (path.includes(next)) return true;
      if (walk([...path, next])) return true;
    }
    return false;
  }
  return [definition.entry, ...Object.keys(steps)].some((start) => walk([start]));
}

const edgeChoice = fc.tuple(
  fc.oneof(
    { weight: 14, arbitrary: fc.constant('later' as const) },
    { weight: 1, arbitrary: fc.constant('any' as const) },
    { weight: 1, arbitrary: fc.constant('missing' as const) },
  ),
  fc.nat(),
);

const randomGraph = fc
  .record({
    names: fc.uniqueArray(fc.stringMatching(/^[A-Za-z0-9_-]{1,10}$/), { minLength: 3, maxLength: 10 }),
    shapes: fc.array(
      fc.record({
        type: fc.constantFrom(...stepTypes),
        edges: fc.array(edgeChoice, { minLength: 6, maxLength: 6 }),
        keys: fc.subarray([...menuOptionKeys], { minLength: 1, maxLength: 4 }),
      }),
      { minLength: 10, maxLength: 10 },
    ),
    terminal: fc.constantFrom('voicemail', 'hangup'),
    entry: edgeChoice,
  })
  .map(({ names, shapes, terminal, entry }) => {
    // The last two names are never steps: references to them lead nowhere.
    const stepNames = names.slice(0, -2);
    const missing = names.slice(-2);
    const count = stepNames.length;
    // "later" leads to a step further down the list (a loop-free chain), "any" to any step, "missing" to no step.
    const target = (index: number, [kind, n]: [string, number]): string => {
      if (kind === 'missing') return missing[n % 2] as string;
      if (kind === 'later' && index < count - 1) return stepNames[index + 1 + (n % (count - 1 - index))] as string;
      return stepNames[n % count] as string;
    };
    const steps = stepNames.map((name, index) => {
      const shape = shapes[index] as (typeof shapes)[number];
      // The last step ends the plan, so a chain of "later" edges always has somewhere to end.
      const type = index === count - 1 ? terminal : shape.type;
      const to = (slot: number) => target(index, shape.edges[slot] as [string, number]);
      const fields: Record<string, Fields> = {
        hours: { scheduleId: 'sch-1', open: to(0), closed: to(1) },
        menu: {
          prompt: { tts: 'Choose' },
          options: Object.fromEntries(shape.keys.map((key, slot) => [key, to(slot)])),
          noInput: to(5),
          timeoutSecs: 5,
          maxRetries: 1,
        },
        ring: { targets: [{ memberId: 'mem-1' }], strategy: 'simultaneous', timeoutSecs: 20, next: to(0) },
        queue: { queueId: 'q-1', maxWaitSecs: 60, overflow: to(0), offerCallback: false },
        ai_answer: { provider: 'provider_a', agentId: 'agent-1', onCap: to(0), next: to(1) },
        forward: { to: '+15550100000', timeoutSecs: 20, next: to(0) },
        split: { percentToA: 30, a: to(0), b: to(1) },
        voicemail: { greeting: null },
        hangup: { message: null },
      };
      return [name, { type, ...fields[type] }] as const;
    });
    return { entry: target(-1, entry), steps: Object.fromEntries(steps) as Record<string, Fields> };
  });

test('a definition of valid steps is refused exactly when a brute-force search finds a loop or a dead end', (t) => {
  let accepted = 0;
  let refused = 0;
  fc.assert(
    fc.property(randomGraph, (definition) => {
      const problem = bruteForceFindsProblem(definition);
      const alone = validateDefinition(definition);
      const withFacts = validateDefinition(definition, facts);
      if (problem) refused += 1;
      else accepted += 1;
      const graphCodes = new Set(['unknown_entry', 'unknown_step', 'cycle']);
      return (
        alone.valid === !problem &&
        withFacts.valid === !problem &&
        alone.issues.every((issue) => graphCodes.has(issue.code) || issue.severity === 'warning') &&
        inOrder(alone.issues)
      );
    }),
    { numRuns: 500 },
  );
  // Both answers must come up often, or the property proves little.
  t.log(`${accepted} accepted, ${refused} refused`);
  t.true(accepted >= 50, `${accepted} accepted`);
  t.true(refused >= 50, `${refused} refused`);
});

test('the validator and referencesOf never throw, whatever they are given', (t) => {
  const stepLike = fc.oneof(
    fc.anything(),
    fc
      .tuple(
        fc.constantFrom(...stepTypes, 'other'),
        fc.dictionary(
          fc.constantFrom('open', 'next', 'options', 'targets', 'to', 'prompt', 'greeting', 'a', 'scheduleId'),
          fc.anything(),
        ),
      )
      .map(([type, fields]) => ({ ...fields, type })),
  );
  const definitionLike = fc.oneof(
    fc.anything(),
    fc.record(
      { entry: fc.oneof(fc.string(), fc.anything()), steps: fc.dictionary(fc.string(), stepLike) },
      { requiredKeys: [] },
    ),
  );
  fc.assert(
    fc.property(definitionLike, (definition) => {
      const result = validateDefinition(definition, facts);
      referencesOf(definition);
      return (
        inOrder(result.issues) &&
        result.valid === !result.issues.some((issue) => issue.severity === 'error') &&
        result.issues.every((issue) => (planIssueCodes as readonly string[]).includes(issue.code))
      );
    }),
    { numRuns: 1000 },
  );
  t.pass();
});

// ---------------------------------------------------------------------------------------------------------------
// Destinations

const open = { allowedPrefixes: [], blockedPrefixes: [] };

test('emergency numbers are refused in every region of their country code', (t) => {
  for (const number of [
    '+1911',
    '+44999',
    '+44112',
    '+33112',
    '+3317',
    '+3315',
    '+61000',
    '+81110',
    '+49112',
    '+7112',
  ]) {
    t.is(checkDestination(number, open), 'emergency_number', number);
    t.is(checkDestination(number, { allowedPrefixes: [number], blockedPrefixes: [] }), 'emergency_number', number);
  }
});

test('ordinary and fictional numbers are fine, emergency digits inside them too', (t) => {
  for (const number of [
    '+15550100000',
    '+14155550100',
    '+19115550100',
    '+33612345678',
    '+442079460000',
    '+8001234567',
    '+12',
  ]) {
    t.is(checkDestination(number, open), 'ok', number);
  }
});

test('numbers that are not E.164, or of no country, are invalid', (t) => {
  for (const number of [
    '',
    '911',
    '+',
    '+0112',
    '+1',
    '+1234567890123456',
    '+1 415 555 0100',
    '+33-6',
    '+999112',
    ' +15550100000',
  ]) {
    t.is(checkDestination(number, open), 'invalid_number', JSON.stringify(number));
  }
});

test('the emergency short-cut: a bound is read from the metadata, and longer numbers are indeed no emergency', (t) => {
  // If libphonenumber's private metadata lookup goes away this fails: everything would still be correct, only slow.
  t.true(emergencyDigitsBound >= 3 && emergencyDigitsBound <= 8, String(emergencyDigitsBound));
  const phoneNumbers = libphonenumber.PhoneNumberUtil.getInstance();
  const shortNumbers = libphonenumber.ShortNumberInfo.getInstance();
  const regions = phoneNumbers.getSupportedRegions();
  // Every known emergency number followed by digits up to the bound and beyond, asked of every region directly.
  for (const prefix of ['911', '112', '999', '000', '110', '119', '15', '17', '18', '100', '190', '08', '061']) {
    for (let length = emergencyDigitsBound + 1; length <= emergencyDigitsBound + 3; length += 1) {
      const national = prefix.padEnd(length, '0');
      t.false(
        regions.some((region) => shortNumbers.isEmergencyNumber(national, region)),
        national,
      );
    }
  }
  // Below the bound, checkDestination answers what a direct ask of every region of the code answers: all 1 to 4
  // digit numbers of +1, +33, +44 and +61.
  for (const code of [1, 33, 44, 61]) {
    const codeRegions = regions.filter((region) => phoneNumbers.getCountryCodeForRegion(region) === code);
    for (let length = 1; length <= 4; length += 1) {
      for (let value = 0; value < 10 ** length; value += 1) {
        const national = String(value).padStart(length, '0');
        const direct = codeRegions.some((region) => shortNumbers.isEmergencyNumber(national, region));
        const checked = checkDestination(`+${code}${national}`, open) === 'emergency_number';
        if (direct !== checked) t.fail(`+${code}${national}: direct ${direct}, checkDestination ${checked}`);
      }
    }
  }
});

test('the destination policy: allowed prefixes, then blocked ones', (t) => {
  const france = { allowedPrefixes: ['+33'], blockedPrefixes: [] };
  t.is(checkDestination('+33612345678', france), 'ok');
  t.is(checkDestination('+15550100000', france), 'destination_blocked');
  t.is(checkDestination('+3', france), 'invalid_number');
  const noMobiles = { allowedPrefixes: ['+33', '+44'], blockedPrefixes: ['+336', '+337'] };
  t.is(checkDestination('+33612345678', noMobiles), 'destination_blocked');
  t.is(checkDestination('+33198765432', noMobiles), 'ok');
  t.is(checkDestination('+442079460000', noMobiles), 'ok');
  t.is(checkDestination('+15550100000', { allowedPrefixes: [], blockedPrefixes: ['+1555'] }), 'destination_blocked');
  t.is(checkDestination('+14155550100', { allowedPrefixes: [], blockedPrefixes: ['+1555'] }), 'ok');
});

// ---------------------------------------------------------------------------------------------------------------
// References

test('referencesOf lists each workspace id once, sorted', (t) => {
  const definition = plan((p) => {
    step(p, 'sales').targets = [
      { memberId: 'mem-2' },
      { memberId: 'mem-1' },
      { memberId: 'mem-2', mode: 'silent' },
      { userId: 'usr-1' },
      { cell: '+15550100000' },
    ];
    p.steps.more = { type: 'hours', scheduleId: 'sch-0', open: 'bye', closed: 'bye' };
    p.steps.again = { type: 'hours', scheduleId: 'sch-1', open: 'bye', closed: 'bye' };
    p.steps.q2 = { type: 'queue', queueId: 'q-2', maxWaitSecs: 60, overflow: 'bye', offerCallback: false };
  });
  t.deepEqual(referencesOf(definition), {
    scheduleIds: ['sch-0', 'sch-1'],
    queueIds: ['q-1', 'q-2'],
    aiAgentIds: ['agent-1'],
    memberIds: ['mem-1', 'mem-2'],
    userIds: ['usr-1'],
  });
});

test('referencesOf tolerates anything and reads only strings of known step types', (t) => {
  const none = { scheduleIds: [], queueIds: [], aiAgentIds: [], memberIds: [], userIds: [] };
  for (const input of [null, undefined, 3, 'plan', [], { steps: null }, { steps: [1, 2] }, { steps: 'x' }]) {
    t.deepEqual(referencesOf(input), none, JSON.stringify(input));
  }
  t.deepEqual(
    referencesOf({
      steps: {
        a: { type: 'hours', scheduleId: 7 },
        b: { type: 'queue', queueId: ['q-1'] },
        c: { type: 'ring', targets: [null, 'mem-1', { memberId: 5 }, { userId: 'usr-3' }] },
        d: { type: 'ring', targets: { memberId: 'mem-1' } },
        e: { type: 'hours', queueId: 'q-9', agentId: 'agent-9' },
        f: { type: 'unknown', scheduleId: 'sch-9' },
        g: { scheduleId: 'sch-8' },
        h: null,
        i: { type: 'ai_answer', agentId: 'agent-2' },
      },
    }),
    { ...none, aiAgentIds: ['agent-2'], userIds: ['usr-3'] },
  );
});
