/**
 * Request validation with Ajv over the TypeBox schemas of each route. Bodies are checked strictly (no coercion, no
 * silently dropped fields: an unknown field is an error), while query strings, path parameters and headers, which
 * arrive as text, are coerced to the schema's types. Failures become 400 `invalid_request` naming the field.
 *
 * Before the schemas, every request is checked for what no field may hold, whatever its schema says
 * (`describeUnacceptableInput`): control characters other than tab, line feed and carriage return (U+0000 above
 * all, which PostgreSQL refuses in text and jsonb), lone surrogates (not Unicode: they cannot be stored as UTF-8),
 * numbers JSON cannot carry back, and nesting deeper than `maxNesting`.
 */
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { uuidPattern } from './ids.ts';

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

const rfc3339 = addFormats.get('date-time') as { validate: (text: string) => boolean };

/**
 * An RFC 3339 date-time that is also an instant Date and PostgreSQL can hold: RFC 3339 allows a leap second
 * (23:59:60), an hour-only offset (+05) and years from 0000, which Date cannot read or PostgreSQL refuses.
 */
function isInstant(text: string): boolean {
  if (!rfc3339.validate(text)) return false;
  const time = Date.parse(text);
  if (Number.isNaN(time)) return false;
  const year = new Date(time).getUTCFullYear();
  return year >= 1 && year <= 9999;
}

function build(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ coerceTypes, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  addFormats(ajv, ['email', 'uri']);
  ajv.addFormat('date-time', isInstant);
  // Section 2: versions 1 to 8 with the RFC variant, plus the all-zero and all-f forms.
  ajv.addFormat('uuid', new RegExp(uuidPattern));
  return ajv;
}

const bodies = build(false);
const texts = build(true);

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodies : texts).compile(schema as object);

const partNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** A field's name as messages say it: `body.steps.menu.options[0]` (numbers are array positions). */
function fieldName(context: string, keys: readonly (string | number)[]): string {
  return keys.reduce<string>(
    (path, key) => (typeof key === 'number' ? `${path}[${key}]` : `${path}.${key}`),
    partNames[context] ?? context,
  );
}

function fieldPath(context: string, error: ErrorObject): string {
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
  return fieldName(
    context,
    segments.map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment)),
  );
}

/** One sentence that names the offending field, e.g. `body.name must be a string`. */
export function describeValidationError(context: string, errors: ErrorObject[]): string {
  const error = errors[0];
  if (error === undefined) return `${partNames[context] ?? context} is invalid`;
  const at = fieldPath(context, error);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${at}.${String(params.missingProperty)} is required`;
    case 'additionalProperties':
      return `${at}.${String(params.additionalProperty)} is not a known field`;
    case 'type':
      return `${at} must be ${String(params.type).replace(/,/g, ' or ')}`;
    case 'format':
      return `${at} must be a valid ${String(params.format)}`;
    case 'enum':
      return `${at} must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'const':
      return `${at} must be ${JSON.stringify(params.allowedValue)}`;
    default:
      return `${at} ${error.message ?? 'is invalid'}`;
  }
}

/** A strict validator (no coercion) for data the service itself produces, such as events. */
export function compileStrict(schema: object) {
  return bodies.compile(schema);
}

/** How deeply arrays and objects may nest in a request body (routing plan definitions need far less). */
export const maxNesting = 64;

// C0 control characters but tab, line feed and carriage return; and lone surrogates (`\p{Cs}` under the u flag
// matches only a surrogate that is not part of a pair).
// eslint-disable-next-line no-control-regex -- control characters are what this looks for
const unacceptableCharacter = /[\0-\x08\x0B\x0C\x0E-\x1F]|\p{Cs}/u;

function textProblem(text: string): string | undefined {
  const found = unacceptableCharacter.exec(text);
  if (found === null) return undefined;
  const character = found[0];
  const code = `U+${(character.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
  if (character >= '\ud800') return `is not valid Unicode: it has a lone surrogate (${code})`;
  return `must not contain the control character ${code} (of the control characters only tab, line feed and carriage return are allowed)`;
}

/**
 * The first thing in one part of a request (`body`, `querystring`, `params`, `headers`) that no field may hold, as a
 * sentence naming where it is, or undefined. The recursion stops at `maxNesting`, so a body nested as deep as the
 * body limit allows cannot exhaust the stack.
 */
export function describeUnacceptableInput(part: string, value: unknown): string | undefined {
  const keys: (string | number)[] = [];
  const where = () => fieldName(part, keys);
  const visit = (current: unknown, depth: number): string | undefined => {
    if (typeof current === 'string') {
      const problem = textProblem(current);
      return problem === undefined ? undefined : `${where()} ${problem}`;
    }
    if (typeof current === 'number') {
      return Number.isFinite(current) ? undefined : `${where()} is a number out of range`;
    }
    if (current === null || typeof current !== 'object') return undefined;
    if (depth >= maxNesting) return `${where()} is nested more than ${maxNesting} levels deep`;
    if (Array.isArray(current)) {
      for (let index = 0; index < current.length; index += 1) {
        keys.push(index);
        const problem = visit(current[index], depth + 1);
        if (problem !== undefined) return problem;
        keys.pop();
      }
      return undefined;
    }
    for (const key of Object.keys(current)) {
      const keyProblem = textProblem(key);
      if (keyProblem !== undefined) return `a field name in ${where()} ${keyProblem}`;
      keys.push(key);
      const problem = visit((current as Record<string, unknown>)[key], depth + 1);
      if (problem !== undefined) return problem;
      keys.pop();
    }
    return undefined;
  };
  return visit(value, 0);
}
