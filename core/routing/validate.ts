/**
 * The one validator of routing plan definitions, used by the validate operation, save, publish and the Kubernetes
 * admission webhook (docs/routing-plans.md, "Definitions and validation"). It reports every problem at once, each
 * with a stable code: the structure (the schemas of `core/routing/definition.ts`, applied step by step through Ajv
 * so that each issue names its step), the graph (unknown steps, loops, unreachable steps), and, given the facts of a
 * workspace, the ids and destinations the plan refers to.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { e164Pattern } from '../ids.ts';
import { checkDestination } from './destinations.ts';
import {
  aiProviders,
  maxSteps,
  Recording,
  stepNamePattern,
  stepSchemas,
  type StepType,
  stepTypes,
} from './definition.ts';

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export interface PlanIssue {
  /** The step at fault, or null for the definition as a whole. */
  stepId: string | null;
  code: string;
  message: string;
  severity: 'error' | 'warning';
}

export interface WorkspaceFacts {
  schedules: ReadonlySet<string>;
  queues: ReadonlySet<string>;
  /** AI agent id to its provider. */
  aiAgents: ReadonlyMap<string, string>;
  members: ReadonlySet<string>;
  users: ReadonlySet<string>;
  destinationPolicy: { allowedPrefixes: string[]; blockedPrefixes: string[] };
}

export interface PlanReferences {
  scheduleIds: string[];
  queueIds: string[];
  aiAgentIds: string[];
  memberIds: string[];
  userIds: string[];
}

/** Every code `validateDefinition` may report (docs/routing-plans.md). Only `unreachable_step` is a warning. */
export const planIssueCodes = [
  // structure
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
  // graph
  'unknown_entry',
  'unknown_step',
  'cycle',
  'unreachable_step',
  // workspace
  'unknown_schedule',
  'unknown_queue',
  'unknown_agent',
  'provider_mismatch',
  'unknown_member',
  'unknown_user',
  'invalid_number',
  'emergency_number',
  'destination_blocked',
] as const;
export type PlanIssueCode = (typeof planIssueCodes)[number];

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function own(object: Json, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const stepNameRegex = new RegExp(stepNamePattern);
const e164Regex = new RegExp(e164Pattern);
const topLevelFields = new Set(['entry', 'steps', 'recording']);
const stepTypeSet: ReadonlySet<string> = new Set(stepTypes);

function knownType(step: unknown): StepType | null {
  if (!isObject(step)) return null;
  const type = own(step, 'type');
  return typeof type === 'string' && stepTypeSet.has(type) ? (type as StepType) : null;
}

// ---------------------------------------------------------------------------------------------------------------
// Schemas, compiled once (on first use)

interface Compiled {
  steps: Record<StepType, ValidateFunction>;
  recording: ValidateFunction;
}
let compiled: Compiled | undefined;

function validators(): Compiled {
  if (compiled === undefined) {
    // allErrors: every problem at once; verbose: errors carry their schema, for messages that state the rule.
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true });
    addFormats(ajv, ['uri']);
    compiled = {
      steps: Object.fromEntries(stepTypes.map((type) => [type, ajv.compile(stepSchemas[type])])) as Record<
        StepType,
        ValidateFunction
      >,
      recording: ajv.compile(Recording),
    };
  }
  return compiled;
}

// ---------------------------------------------------------------------------------------------------------------
// Ajv errors to issues

/** The readable path of an Ajv instance path inside `data`, e.g. `steps.main.targets[0].cell`. */
function fieldPath(base: string, data: unknown, instancePath: string): string {
  let path = base;
  let value = data;
  for (const raw of instancePath.split('/').slice(1)) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(value)) {
      path += `[${segment}]`;
      value = value[Number(segment)];
    } else {
      path += `.${segment}`;
      value = isObject(value) ? own(value, segment) : undefined;
    }
  }
  return path;
}

function isWithin(error: ErrorObject, union: ErrorObject): boolean {
  return (
    error !== union &&
    error.schemaPath.startsWith(`${union.schemaPath}/`) &&
    (error.instancePath === union.instancePath || error.instancePath.startsWith(`${union.instancePath}/`))
  );
}

/** How many fields a branch's errors are about (a bad URL fails both `format` and `pattern`: one field). */
function fieldsAtFault(errors: ErrorObject[]): number {
  const params = (error: ErrorObject) => error.params as Record<string, unknown>;
  return new Set(
    errors.map((error) =>
      error.keyword === 'required'
        ? `${error.instancePath}/${String(params(error).missingProperty)}`
        : error.keyword === 'additionalProperties'
          ? `${error.instancePath}/${String(params(error).additionalProperty)}`
          : error.instancePath,
    ),
  ).size;
}

/**
 * Replaces each failed union (`anyOf`) and the errors of its branches by the errors of the one branch the value
 * evidently meant (the only branch with the fewest fields at fault, among those that accept the value's type), or by the
 * union's own error when no branch stands out.
 */
function resolveUnions(errors: ErrorObject[]): ErrorObject[] {
  let result = errors;
  const unions = errors
    .filter((error) => error.keyword === 'anyOf')
    .sort((a, b) => b.schemaPath.length - a.schemaPath.length);
  for (const union of unions) {
    const branches = new Map<string, ErrorObject[]>();
    for (const error of result) {
      if (!isWithin(error, union)) continue;
      const branch = error.schemaPath.slice(union.schemaPath.length + 1).split('/')[0] ?? '';
      branches.set(branch, [...(branches.get(branch) ?? []), error]);
    }
    const plausible = [...branches.values()].filter(
      (branch) => !branch.some((error) => error.keyword === 'type' && error.instancePath === union.instancePath),
    );
    const fewest = Math.min(...plausible.map(fieldsAtFault));
    const best = plausible.filter((branch) => fieldsAtFault(branch) === fewest);
    const replacement = best.length === 1 && best[0] !== undefined ? best[0] : [union];
    const next: ErrorObject[] = [];
    for (const error of result) {
      if (error === union) next.push(...replacement);
      else if (!isWithin(error, union)) next.push(error);
    }
    result = next;
  }
  return result;
}

interface SchemaLike {
  type?: string;
  required?: string[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  anyOf?: SchemaLike[];
}

/** `{tts}, {audioUrl}, null`: the shapes a union accepts. */
function unionShapes(schema: SchemaLike | undefined): string {
  return (schema?.anyOf ?? [])
    .map((branch) =>
      branch.type === 'object'
        ? `{${(branch.required ?? []).join(', ')}}`
        : branch.type === 'null'
          ? 'null'
          : 'a string',
    )
    .join(', ');
}

function describeRule(at: string, error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  const parent = error.parentSchema as SchemaLike | undefined;
  switch (error.keyword) {
    case 'type':
      return `${at} must be ${String(params.type) === 'integer' ? 'an integer' : `a ${String(params.type)}`}`;
    case 'minimum':
    case 'maximum':
      return parent?.minimum !== undefined && parent.maximum !== undefined
        ? `${at} must be from ${parent.minimum} to ${parent.maximum}`
        : `${at} ${error.message ?? 'is out of range'}`;
    case 'minLength':
    case 'maxLength':
      return parent?.minLength !== undefined && parent.maxLength !== undefined
        ? `${at} must be ${parent.minLength} to ${parent.maxLength} characters long`
        : `${at} must be at most ${String(parent?.maxLength)} characters long`;
    case 'maxItems':
      return `${at} must have at most ${String(params.limit)} items`;
    case 'enum':
      return `${at} must be one of ${(params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`;
    case 'const':
      return `${at} must be ${JSON.stringify(params.allowedValue)}`;
    case 'format':
      return `${at} must be a valid ${String(params.format)}`;
    case 'pattern':
      if (params.pattern === stepNamePattern) return `${at} must be a step name (1 to 64 of A-Z a-z 0-9 _ -)`;
      if (params.pattern === '^https://') return `${at} must be an https URL`;
      return `${at} must match ${String(params.pattern)}`;
    case 'anyOf':
      return `${at} must be one of: ${unionShapes(parent)}`;
    default:
      return `${at} ${error.message ?? 'is invalid'}`;
  }
}

interface Problem {
  code: PlanIssueCode;
  message: string;
}

/** One issue per Ajv error of a step (after unions are resolved), at most one per code and field. */
function stepProblems(base: string, step: unknown, errors: ErrorObject[]): Problem[] {
  const problems: Problem[] = [];
  const seen = new Set<string>();
  for (const error of resolveUnions(errors)) {
    const at = fieldPath(base, step, error.instancePath);
    const params = error.params as Record<string, unknown>;
    let field = at;
    let problem: Problem;
    if (error.keyword === 'required') {
      field = `${at}.${String(params.missingProperty)}`;
      problem = { code: 'missing_field', message: `${field} is required` };
    } else if (error.keyword === 'additionalProperties' && error.instancePath === '/options') {
      field = `${at}.${String(params.additionalProperty)}`;
      problem = {
        code: 'invalid_option_key',
        message: `${at} binds the key ${JSON.stringify(params.additionalProperty)}: keys are 0-9, * and #`,
      };
    } else if (error.keyword === 'additionalProperties') {
      field = `${at}.${String(params.additionalProperty)}`;
      problem = { code: 'unknown_field', message: `${field} is not a known field` };
    } else if (error.keyword === 'minItems' && error.instancePath === '/targets') {
      problem = { code: 'empty_targets', message: `${at} is empty: a ring step needs at least one target` };
    } else if (error.keyword === 'minProperties' && error.instancePath === '/options') {
      problem = { code: 'empty_options', message: `${at} is empty: a menu needs at least one option` };
    } else if (error.keyword === 'pattern' && params.pattern === e164Pattern) {
      problem = { code: 'invalid_number', message: `${at} must be an E.164 number such as +14155550100` };
    } else {
      problem = { code: 'invalid_field', message: describeRule(at, error) };
    }
    const key = `${problem.code}\u0000${field}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading steps

interface Edge {
  field: string;
  target: string;
}

/** The steps a step leads to, from whichever of its fields can be read (even when others are invalid). */
function edgesOf(type: StepType, step: Json): Edge[] {
  const edges: Edge[] = [];
  const add = (field: string, target: unknown) => {
    if (typeof target === 'string') edges.push({ field, target });
  };
  switch (type) {
    case 'hours':
      add('open', own(step, 'open'));
      add('closed', own(step, 'closed'));
      break;
    case 'menu': {
      const options = own(step, 'options');
      if (isObject(options)) for (const key of Object.keys(options)) add(`options.${key}`, options[key]);
      add('noInput', own(step, 'noInput'));
      break;
    }
    case 'ring':
    case 'forward':
      add('next', own(step, 'next'));
      break;
    case 'queue':
      add('overflow', own(step, 'overflow'));
      break;
    case 'ai_answer':
      add('onCap', own(step, 'onCap'));
      add('next', own(step, 'next'));
      break;
    case 'split':
      add('a', own(step, 'a'));
      add('b', own(step, 'b'));
      break;
    case 'voicemail':
    case 'hangup':
      break;
  }
  return edges;
}

function stringField(step: Json, field: string): string | null {
  const value = own(step, field);
  return typeof value === 'string' ? value : null;
}

/** The ring targets of a step that are objects, with their index. */
function targetsOf(step: Json): { index: number; target: Json }[] {
  const targets = own(step, 'targets');
  if (!Array.isArray(targets)) return [];
  const found: { index: number; target: Json }[] = [];
  targets.forEach((target: unknown, index) => {
    if (isObject(target)) found.push({ index, target });
  });
  return found;
}

/** The ids of the workspace a definition refers to, each once (sorted); anything unreadable is skipped. */
export function referencesOf(definition: unknown): PlanReferences {
  const found = {
    scheduleIds: new Set<string>(),
    queueIds: new Set<string>(),
    aiAgentIds: new Set<string>(),
    memberIds: new Set<string>(),
    userIds: new Set<string>(),
  };
  const steps = isObject(definition) ? own(definition, 'steps') : undefined;
  if (isObject(steps)) {
    for (const name of Object.keys(steps)) {
      const step = steps[name];
      const type = knownType(step);
      if (type === null || !isObject(step)) continue;
      const add = (into: Set<string>, value: string | null) => {
        if (value !== null) into.add(value);
      };
      if (type === 'hours') add(found.scheduleIds, stringField(step, 'scheduleId'));
      if (type === 'queue') add(found.queueIds, stringField(step, 'queueId'));
      if (type === 'ai_answer') add(found.aiAgentIds, stringField(step, 'agentId'));
      if (type === 'ring') {
        for (const { target } of targetsOf(step)) {
          add(found.memberIds, stringField(target, 'memberId'));
          add(found.userIds, stringField(target, 'userId'));
        }
      }
    }
  }
  const sorted = (set: Set<string>) => [...set].sort(compare);
  return {
    scheduleIds: sorted(found.scheduleIds),
    queueIds: sorted(found.queueIds),
    aiAgentIds: sorted(found.aiAgentIds),
    memberIds: sorted(found.memberIds),
    userIds: sorted(found.userIds),
  };
}

/** Issues about what a step refers to in the workspace. */
function workspaceProblems(base: string, type: StepType, step: Json, facts: WorkspaceFacts): Problem[] {
  const problems: Problem[] = [];
  const destination = (at: string, number: string) => {
    // A number that is not E.164 at all was reported by the schema already.
    if (!e164Regex.test(number)) return;
    const result = checkDestination(number, facts.destinationPolicy);
    if (result === 'invalid_number') {
      problems.push({ code: result, message: `${at} ${number} has no assigned country calling code` });
    } else if (result === 'emergency_number') {
      problems.push({ code: result, message: `${at} ${number} is an emergency number: plans never dial them` });
    } else if (result === 'destination_blocked') {
      problems.push({ code: result, message: `${at} ${number} is outside the workspace's destination policy` });
    }
  };
  switch (type) {
    case 'hours': {
      const id = stringField(step, 'scheduleId');
      if (id !== null && !facts.schedules.has(id)) {
        problems.push({
          code: 'unknown_schedule',
          message: `${base}.scheduleId ${JSON.stringify(id)} is no schedule of the workspace`,
        });
      }
      break;
    }
    case 'queue': {
      const id = stringField(step, 'queueId');
      if (id !== null && !facts.queues.has(id)) {
        problems.push({
          code: 'unknown_queue',
          message: `${base}.queueId ${JSON.stringify(id)} is no queue of the workspace`,
        });
      }
      break;
    }
    case 'ai_answer': {
      const id = stringField(step, 'agentId');
      const provider = stringField(step, 'provider');
      const agentProvider = id === null ? undefined : facts.aiAgents.get(id);
      if (id !== null && agentProvider === undefined) {
        problems.push({
          code: 'unknown_agent',
          message: `${base}.agentId ${JSON.stringify(id)} is no AI agent of the workspace`,
        });
      } else if (
        agentProvider !== undefined &&
        provider !== null &&
        (aiProviders as readonly string[]).includes(provider) &&
        provider !== agentProvider
      ) {
        problems.push({
          code: 'provider_mismatch',
          message: `${base}.provider is ${JSON.stringify(provider)} but the agent ${JSON.stringify(id)} is of ${JSON.stringify(agentProvider)}`,
        });
      }
      break;
    }
    case 'ring':
      for (const { index, target } of targetsOf(step)) {
        const at = `${base}.targets[${index}]`;
        const memberId = stringField(target, 'memberId');
        const userId = stringField(target, 'userId');
        const cell = stringField(target, 'cell');
        if (memberId !== null && !facts.members.has(memberId)) {
          problems.push({
            code: 'unknown_member',
            message: `${at}.memberId ${JSON.stringify(memberId)} is no member of the workspace`,
          });
        }
        if (userId !== null && !facts.users.has(userId)) {
          problems.push({
            code: 'unknown_user',
            message: `${at}.userId ${JSON.stringify(userId)} is no user of the workspace`,
          });
        }
        if (cell !== null) destination(`${at}.cell`, cell);
      }
      break;
    case 'forward': {
      const to = stringField(step, 'to');
      if (to !== null) destination(`${base}.to`, to);
      break;
    }
    default:
      break;
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// The graph

/** Strongly connected components (Tarjan's algorithm, iterative so that long chains cannot exhaust the stack). */
function components(adjacency: number[][]): number[][] {
  const count = adjacency.length;
  const order = new Array<number>(count).fill(-1);
  const low = new Array<number>(count).fill(0);
  const onStack = new Array<boolean>(count).fill(false);
  const stack: number[] = [];
  const found: number[][] = [];
  let counter = 0;
  for (let root = 0; root < count; root += 1) {
    if (order[root] !== -1) continue;
    const path = [root];
    const nextEdge = [0];
    order[root] = low[root] = counter++;
    stack.push(root);
    onStack[root] = true;
    while (path.length > 0) {
      const depth = path.length - 1;
      const node = path[depth] as number;
      const edges = adjacency[node] as number[];
      const edgeIndex = nextEdge[depth] as number;
      if (edgeIndex < edges.length) {
        nextEdge[depth] = edgeIndex + 1;
        const to = edges[edgeIndex] as number;
        if (order[to] === -1) {
          order[to] = low[to] = counter++;
          stack.push(to);
          onStack[to] = true;
          path.push(to);
          nextEdge.push(0);
        } else if (onStack[to]) {
          low[node] = Math.min(low[node] as number, order[to] as number);
        }
        continue;
      }
      path.pop();
      nextEdge.pop();
      const parent = path[path.length - 1];
      if (parent !== undefined) low[parent] = Math.min(low[parent] as number, low[node] as number);
      if (low[node] === order[node]) {
        const component: number[] = [];
        for (;;) {
          const member = stack.pop() as number;
          onStack[member] = false;
          component.push(member);
          if (member === node) break;
        }
        found.push(component);
      }
    }
  }
  return found;
}

/** The shortest loop from `start` back to itself through the steps of `within`, as step indices. */
function loopThrough(start: number, within: ReadonlySet<number>, adjacency: number[][]): number[] {
  const cameFrom = new Map<number, number>();
  const queue = [start];
  for (let head = 0; head < queue.length; head += 1) {
    const node = queue[head] as number;
    for (const to of adjacency[node] as number[]) {
      if (to === start) {
        const loop = [start];
        for (let at = node; at !== start; at = cameFrom.get(at) as number) loop.splice(1, 0, at);
        return [...loop, start];
      }
      if (!within.has(to) || cameFrom.has(to)) continue;
      cameFrom.set(to, node);
      queue.push(to);
    }
  }
  return [start, start];
}

// ---------------------------------------------------------------------------------------------------------------
// The validator

/**
 * Validates a definition: `valid` is true exactly when no issue is an error. Without `facts`, only the structure
 * and the graph are checked. Issues come definition-level first, then by step name, then by code.
 */
export function validateDefinition(
  definition: unknown,
  facts?: WorkspaceFacts,
): { valid: boolean; issues: PlanIssue[] } {
  const issues: PlanIssue[] = [];
  const add = (stepId: string | null, code: PlanIssueCode, message: string) =>
    issues.push({ stepId, code, message, severity: code === 'unreachable_step' ? 'warning' : 'error' });

  const finish = () => {
    issues.sort((a, b) =>
      a.stepId === b.stepId
        ? compare(a.code, b.code)
        : a.stepId === null
          ? -1
          : b.stepId === null
            ? 1
            : compare(a.stepId, b.stepId),
    );
    return { valid: !issues.some((issue) => issue.severity === 'error'), issues };
  };

  if (!isObject(definition)) {
    add(null, 'invalid_definition', 'the definition must be an object with entry and steps');
    return finish();
  }
  for (const key of Object.keys(definition)) {
    if (!topLevelFields.has(key)) add(null, 'invalid_definition', `${key} is not a known field`);
  }
  let entry: string | null = null;
  if (!Object.hasOwn(definition, 'entry')) add(null, 'invalid_definition', 'entry is required');
  else if (typeof definition.entry !== 'string') add(null, 'invalid_definition', 'entry must be a step name');
  else entry = definition.entry;
  let steps: Json | null = null;
  if (!Object.hasOwn(definition, 'steps')) add(null, 'invalid_definition', 'steps is required');
  else if (!isObject(definition.steps)) add(null, 'invalid_definition', 'steps must be an object of steps by name');
  else steps = definition.steps;
  if (Object.hasOwn(definition, 'recording')) {
    const validate = validators().recording;
    if (!validate(definition.recording)) {
      for (const problem of stepProblems('recording', definition.recording, validate.errors ?? [])) {
        add(null, 'invalid_definition', problem.message);
      }
    }
  }
  if (steps === null) return finish();

  const names = Object.keys(steps);
  if (names.length > maxSteps) {
    add(null, 'too_many_steps', `the plan has ${names.length} steps; at most ${maxSteps} are allowed`);
  }
  const indexOf = new Map(names.map((name, index) => [name, index]));
  const adjacency: number[][] = names.map(() => []);
  const { steps: stepValidators } = validators();

  names.forEach((name, index) => {
    const step = (steps as Json)[name];
    const validName = stepNameRegex.test(name);
    const base = validName ? `steps.${name}` : `steps[${JSON.stringify(name)}]`;
    if (!validName) {
      add(name, 'invalid_step_name', `${JSON.stringify(name)} is not a step name: 1 to 64 of A-Z a-z 0-9 _ -`);
    }
    if (!isObject(step)) {
      add(name, 'invalid_field', `${base} must be an object (a step)`);
      return;
    }
    const type = knownType(step);
    if (type === null) {
      if (!Object.hasOwn(step, 'type')) add(name, 'missing_field', `${base}.type is required`);
      else {
        add(
          name,
          'unknown_step_type',
          `${base}.type ${JSON.stringify(step.type)} is not a step type: one of ${stepTypes.join(', ')}`,
        );
      }
      return;
    }
    const validate = stepValidators[type];
    if (!validate(step)) {
      for (const problem of stepProblems(base, step, validate.errors ?? [])) add(name, problem.code, problem.message);
    }
    for (const edge of edgesOf(type, step)) {
      const to = indexOf.get(edge.target);
      if (to === undefined) {
        add(name, 'unknown_step', `${base}.${edge.field} leads to ${JSON.stringify(edge.target)}, which is no step`);
      } else {
        (adjacency[index] as number[]).push(to);
      }
    }
    if (facts !== undefined) {
      for (const problem of workspaceProblems(base, type, step, facts)) add(name, problem.code, problem.message);
    }
  });

  const entryIndex = entry === null ? undefined : indexOf.get(entry);
  if (entry !== null && entryIndex === undefined) {
    add(null, 'unknown_entry', `entry ${JSON.stringify(entry)} names no step`);
  }

  // A loop: a set of steps each reachable from the others, or a step leading to itself.
  for (const component of components(adjacency)) {
    const first = component[0] as number;
    if (component.length === 1 && !(adjacency[first] as number[]).includes(first)) continue;
    const start = component.reduce((best, node) => (compare(names[node] ?? '', names[best] ?? '') < 0 ? node : best));
    const loop = loopThrough(start, new Set(component), adjacency).map((node) => names[node]);
    add(
      names[start] as string,
      'cycle',
      `the steps loop: ${loop.join(' -> ')} (only a menu repeats, through its maxRetries)`,
    );
  }

  if (entryIndex !== undefined) {
    const reached = new Array<boolean>(names.length).fill(false);
    reached[entryIndex] = true;
    const queue = [entryIndex];
    for (let head = 0; head < queue.length; head += 1) {
      for (const to of adjacency[queue[head] as number] as number[]) {
        if (reached[to]) continue;
        reached[to] = true;
        queue.push(to);
      }
    }
    names.forEach((name, index) => {
      if (!reached[index]) add(name, 'unreachable_step', `no path from entry ${JSON.stringify(entry)} reaches ${name}`);
    });
  }
  return finish();
}

/** One line for a definition's errors: how many, and the first (`the definition has 2 problems: menu: ...`). */
export function describeIssues(issues: readonly PlanIssue[]): string {
  const errors = issues.filter((issue) => issue.severity === 'error');
  const first = errors[0];
  const summary = first === undefined ? '' : `: ${first.stepId === null ? '' : `${first.stepId}: `}${first.message}`;
  return `the definition has ${errors.length} problem${errors.length === 1 ? '' : 's'}${summary}`;
}
