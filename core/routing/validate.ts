/**
 * The one validator of routing plan definitions, used by the validate operation, save, publish and the Kubernetes
 * admission webhook (docs/routing-plans.md, "Definitions and validation"). It reports every problem at once, each
 * with a stable code: the structure (the schemas of `core/routing/definition.ts`, applied step by step through Ajv
 * so that each issue names its step), the graph (unknown steps, loops, unreachable steps), and, given the facts of a
 * workspace, the ids and destinations the plan refers to. The structure is checked in validate-schema.ts, the graph
 * read in validate-graph.ts, the workspace references in validate-references.ts; this file puts them together.
 */
import { maxSteps, stepNamePattern, stepTypes } from './definition.ts';
import { definitionSizeProblem } from './limits.ts';
import { components, edgesOf, loopThrough } from './validate-graph.ts';
import { referencesOf, workspaceProblems } from './validate-references.ts';
import { compare, isObject, type Json, knownType, stepProblems, validators } from './validate-schema.ts';

export { referencesOf };

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
  'definition_too_large',
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

const stepNameRegex = new RegExp(stepNamePattern);
const topLevelFields = new Set(['entry', 'steps', 'recording']);

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

  // Nothing else is looked at in a definition too large to store (core/routing/limits.ts).
  const tooLarge = definitionSizeProblem(definition);
  if (tooLarge !== undefined) {
    add(null, 'definition_too_large', tooLarge);
    return finish();
  }
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
