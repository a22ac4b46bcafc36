/**
 * The structure of a routing plan definition (validate.ts): the schemas of `core/routing/definition.ts`, compiled
 * once and applied step by step through Ajv, and their errors turned into issues that name the field and the rule.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { e164Pattern } from '../ids.ts';
import { Recording, stepNamePattern, stepSchemas, type StepType, stepTypes } from './definition.ts';
import type { PlanIssueCode } from './validate.ts';

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

export type Json = Record<string, unknown>;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function own(object: Json, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export const e164Regex = new RegExp(e164Pattern);

const stepTypeSet: ReadonlySet<string> = new Set(stepTypes);

export function knownType(step: unknown): StepType | null {
  if (!isObject(step)) return null;
  const type = own(step, 'type');
  return typeof type === 'string' && stepTypeSet.has(type) ? (type as StepType) : null;
}

// ---------------------------------------------------------------------------------------------------------------
// Schemas, compiled once (on first use)

export interface Compiled {
  steps: Record<StepType, ValidateFunction>;
  recording: ValidateFunction;
}
let compiled: Compiled | undefined;

export function validators(): Compiled {
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
export function fieldPath(base: string, data: unknown, instancePath: string): string {
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

export interface Problem {
  code: PlanIssueCode;
  message: string;
}

/** One issue per Ajv error of a step (after unions are resolved), at most one per code and field. */
export function stepProblems(base: string, step: unknown, errors: ErrorObject[]): Problem[] {
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
