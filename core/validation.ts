/**
 * Request validation with Ajv over the TypeBox schemas of each route. Bodies are checked strictly (no coercion, no
 * silently dropped fields: an unknown field is an error), while query strings, path parameters and headers, which
 * arrive as text, are coerced to the schema's types. Failures become 400 `invalid_request` naming the field.
 */
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchemaCompiler } from 'fastify';
import { uuidPattern } from './ids.ts';

// ajv-formats is CommonJS; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as typeof addFormatsModule.default;

function build(coerceTypes: boolean): Ajv {
  const ajv = new Ajv({ coerceTypes, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  addFormats(ajv, ['date-time', 'email', 'uri']);
  // Section 2: versions 1 to 8 with the RFC variant, plus the all-zero and all-f forms.
  ajv.addFormat('uuid', new RegExp(uuidPattern));
  return ajv;
}

const bodies = build(false);
const texts = build(true);

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? bodies : texts).compile(schema as object);

const partNames: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

function fieldPath(context: string, error: ErrorObject): string {
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'));
  const base = partNames[context] ?? context;
  const joined = segments.reduce(
    (path, segment) => (/^\d+$/.test(segment) ? `${path}[${segment}]` : `${path}.${segment}`),
    base,
  );
  return joined;
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
