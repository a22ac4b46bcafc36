/**
 * A corpus of malformed requests generated from the service's own OpenAPI document: for every implemented operation,
 * broken JSON and odd content types, each field of the body replaced in turn by values of the wrong type, control
 * characters, lone surrogates, very long strings and deep nesting, unknown and malformed ids in each path parameter,
 * bad values, cursors and duplicates in each query parameter, and bad workspace and idempotency headers. Operations
 * and fields come from the document, so an operation or field added later is covered without editing this file.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON Schema as the document serves it
export type Schema = Record<string, any>;

export interface DocumentParameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  schema: Schema;
}

export interface DocumentOperation {
  method: string;
  /** The path as the document writes it: `/api/v1/users/{id}`. */
  path: string;
  operationId: string;
  implemented: boolean;
  security: Record<string, string[]>[];
  parameters: DocumentParameter[];
  body: { required: boolean; schema: Schema } | undefined;
}

/** The operations of an OpenAPI document as served by `GET /openapi.json`. */
export function documentOperations(document: Schema): DocumentOperation[] {
  const found: DocumentOperation[] = [];
  for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, Schema>>)) {
    for (const [method, operation] of Object.entries(methods)) {
      const requestBody = operation.requestBody as Schema | undefined;
      found.push({
        method: method.toUpperCase(),
        path,
        operationId: operation.operationId,
        implemented: operation['x-implemented'] !== false,
        security: operation.security ?? [],
        parameters: operation.parameters ?? [],
        body: requestBody
          ? { required: requestBody.required === true, schema: requestBody.content['application/json'].schema }
          : undefined,
      });
    }
  }
  return found;
}

/** One request to send. Headers of null remove the default one (credential, workspace, idempotency key). */
export interface Probe {
  operationId: string;
  /** What is wrong with this request, for the report of failures. */
  what: string;
  method: string;
  /** Path and query, sent exactly as written (no normalisation). */
  target: string;
  headers: Record<string, string | null>;
  body?: string | Buffer;
  /** The request holds what no field may hold (a control character, a lone surrogate, deep nesting): 400. */
  refused?: boolean;
}

export interface CorpusContext {
  /** Ids of existing resources by the path of their collection (`/api/v1/users`). */
  existing: ReadonlyMap<string, string>;
  /** Values that satisfy a field beyond its schema (a real time zone, a valid plan), by property name. */
  realistic: Readonly<Record<string, unknown>>;
  /** A cursor a list handed out, to tamper with. */
  cursor: string;
}

const mutation = (method: string) => method !== 'GET' && method !== 'HEAD';

// ---------------------------------------------------------------------------------------------------------------
// Valid values from a schema

/** A value the schema accepts (plausibly, the handler too): required properties only. */
export function exampleOf(schema: Schema, context: CorpusContext, name = ''): unknown {
  if (name in context.realistic) return context.realistic[name];
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (Array.isArray(schema.anyOf)) {
    const branch = (schema.anyOf as Schema[]).find((option) => option.type !== 'null') ?? schema.anyOf[0];
    return exampleOf(branch as Schema, context, name);
  }
  if ('default' in schema) return schema.default;
  switch (schema.type) {
    case 'object': {
      const value: Record<string, unknown> = {};
      for (const property of (schema.required ?? []) as string[]) {
        value[property] = exampleOf(schema.properties?.[property] ?? {}, context, property);
      }
      return value;
    }
    case 'array':
      return (schema.minItems ?? 0) > 0 ? [exampleOf(schema.items ?? {}, context, name)] : [];
    case 'string':
      return exampleString(schema);
    case 'integer':
    case 'number':
      return Math.min(schema.minimum ?? 1, schema.maximum ?? Number.MAX_SAFE_INTEGER);
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return {};
  }
}

function exampleString(schema: Schema): string {
  switch (schema.format) {
    case 'uuid':
      return randomUUID();
    case 'date-time':
      return new Date().toISOString();
    case 'email':
      return 'someone@example.com';
    case 'uri':
      return 'https://example.com/';
  }
  const min = schema.minLength ?? 1;
  const max = schema.maxLength ?? 200;
  if (typeof schema.pattern === 'string') {
    const pattern = new RegExp(schema.pattern);
    const [sample] = fc.sample(
      fc.stringMatching(pattern).filter((text) => text.length >= min && text.length <= max),
      { numRuns: 1, seed: 42 },
    );
    if (sample !== undefined) return sample;
  }
  return 'Example'.padEnd(min, 'x').slice(0, Math.max(min, Math.min(max, 7)));
}

// ---------------------------------------------------------------------------------------------------------------
// The fields of a body

interface Field {
  /** Property names and array indexes from the body's root. */
  at: (string | number)[];
  schema: Schema;
}

/** Every property of the body, nested ones and array items included (each object branch of an anyOf too). */
function fieldsOf(schema: Schema, at: (string | number)[] = [], depth = 0): Field[] {
  if (depth > 6) return [];
  const fields: Field[] = [];
  const branches = Array.isArray(schema.anyOf) ? (schema.anyOf as Schema[]) : [schema];
  for (const branch of branches) {
    if (branch.type === 'object') {
      for (const [property, child] of Object.entries((branch.properties ?? {}) as Record<string, Schema>)) {
        fields.push({ at: [...at, property], schema: child }, ...fieldsOf(child, [...at, property], depth + 1));
      }
    } else if (branch.type === 'array' && branch.items) {
      fields.push({ at: [...at, 0], schema: branch.items }, ...fieldsOf(branch.items, [...at, 0], depth + 1));
    }
  }
  return fields;
}

/** The example body with the value at `at` replaced (parents built from their examples). */
function withValue(base: unknown, at: (string | number)[], value: unknown, body: Schema, context: CorpusContext) {
  const root = structuredClone(base) as Record<string | number, unknown>;
  let node = root;
  let schema = body;
  for (const [index, key] of at.entries()) {
    const last = index === at.length - 1;
    schema = childSchema(schema, key);
    if (last) {
      node[key] = value;
      break;
    }
    let next = node[key];
    if (next === null || typeof next !== 'object') {
      next = typeof at[index + 1] === 'number' ? [] : (objectExample(schema, context, String(key)) ?? {});
      node[key] = next;
    }
    node = next as Record<string | number, unknown>;
  }
  return root;
}

function childSchema(schema: Schema, key: string | number): Schema {
  const branches = Array.isArray(schema.anyOf) ? (schema.anyOf as Schema[]) : [schema];
  for (const branch of branches) {
    if (typeof key === 'number' && branch.type === 'array') return branch.items ?? {};
    if (typeof key === 'string' && branch.properties?.[key]) return branch.properties[key];
  }
  return {};
}

function objectExample(schema: Schema, context: CorpusContext, name: string): unknown {
  const branches = Array.isArray(schema.anyOf) ? (schema.anyOf as Schema[]) : [schema];
  const object = branches.find((branch) => branch.type === 'object');
  return object ? exampleOf(object, context, name) : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Bad values

/** JSON text placed as is where a value goes: deeper than JSON.stringify can go. */
class RawJson {
  constructor(readonly text: string) {}
}
const nested = (depth: number) => new RawJson('['.repeat(depth) + '1' + ']'.repeat(depth));
const nestedObject = (depth: number) => new RawJson('{"a":'.repeat(depth) + '"x"' + '}'.repeat(depth));

/** Characters that have no place in a field (C0 controls, lone surrogates), and some that are merely unusual. */
const oddCharacters = [
  '\u0000',
  '\u0001',
  '\u000b',
  '\u001f',
  '\t',
  '\n',
  '\r',
  '\u007f',
  '\u0085',
  '\u2028',
  '\ufeff',
  '\ud800',
  '\udfff',
  '\u{10ffff}',
];

const instants = [
  '0000-01-01T00:00:00Z',
  '0001-01-01T00:00:00+01:00',
  '9999-12-31T23:59:59-23:59',
  '2016-12-31T23:59:60Z',
  '2020-02-30T00:00:00Z',
  '2020-01-01T00:00:00+05',
  '2020-01-01 00:00:00Z',
  '2020-01-01T00:00:00.123456789123Z',
  '+275760-09-13T00:00:00Z',
];

const ids = (existing: string | undefined) => [
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '12345678-1234-0234-8234-123456789012',
  randomUUID(),
  ...(existing ? [existing.toUpperCase(), `${existing}0`, existing.slice(1), `{${existing}}`] : []),
  'not-a-uuid',
  '123',
];

/** Values of every JSON type and of awkward content, for any field; more strings where a string is wanted. */
function badValues(schema: Schema): unknown[] {
  const formats = [schema.format, ...((schema.anyOf ?? []) as Schema[]).map((branch) => branch.format)];
  const strings = [
    ...oddCharacters,
    'a\u0000b',
    'a\u001bb',
    'a\ud800b',
    'a\ud83d',
    '\\u0000',
    '%00',
    ' ',
    "' OR 1=1; --",
    '../../etc/passwd',
    'x'.repeat(10_000),
    'é'.repeat(30_000),
    ...(formats.includes('date-time') ? instants : instants.slice(0, 2)),
    ...(formats.includes('uuid') ? ids(undefined) : ids(undefined).slice(0, 1)),
  ];
  const numbers = [0, -1, 1.5, 2 ** 31, -(2 ** 31) - 1, 2 ** 53 + 2, 1e308, -1e308, 5e-324];
  const shapes = [null, true, false, [], [null], {}, { a: 1 }, { '\u0000': 1 }, { 'a\u0000': 'x' }, { '\ud800': 1 }];
  const deep = [nested(100), nested(5_000), nestedObject(200)];
  // Where the schema wants one type, values of other types are refused alike: a few of each suffice.
  const others = [...strings.slice(0, 4), 0, 1.5, null, true, [], {}, deep[0]];
  if (Array.isArray(schema.enum)) return [...strings, 0, null, [], {}];
  switch (schema.type) {
    case 'string':
      return [...strings, 0, 1.5, 2 ** 31, 1e308, null, true, [], {}, { '\u0000': 1 }, ...deep];
    case 'integer':
    case 'number':
      return [...numbers, ...others.slice(0, 4), null, true, [], {}];
    case 'boolean':
      return others;
    default:
      return [...strings, ...numbers, ...shapes, ...deep];
  }
}

/**
 * The rule as the service documents it (docs/foundation.md), restated here: C0 control characters but tab, line feed
 * and carriage return, lone surrogates, in values and field names, and nesting deeper than 64 levels.
 */
// eslint-disable-next-line no-control-regex -- control characters are what this looks for
const refusedText = /[\0-\x08\x0B\x0C\x0E-\x1F]|\p{Cs}/u;
const maxNesting = 64;

function holdsRefused(value: unknown, depth = 0): boolean {
  if (value instanceof RawJson) return true; // only ever deeper than the limit
  if (typeof value === 'string') return refusedText.test(value);
  if (value === null || typeof value !== 'object') return false;
  if (depth >= maxNesting) return true;
  return Object.entries(value).some(([key, item]) => refusedText.test(key) || holdsRefused(item, depth + 1));
}

/** A percent-encoded query or path value that decodes to a refused character. */
function encodesRefused(text: string): boolean {
  try {
    return refusedText.test(decodeURIComponent(text));
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Path, query and header values

/** Percent-encodings of what no field may hold (NUL, other controls, a lone surrogate) and broken encodings. */
const badEncodings = ['%00', 'a%00b', '%01', '%1b', '%7f', '%ff', '%ED%A0%80', '%E0%A4%A', '%'];

const pathValues = (existing: string | undefined) => [
  ...ids(existing).map(encodeURIComponent),
  ...badEncodings,
  '%zz',
  '%2e%2e',
  '..',
  '.',
  '%2F',
  '%0d%0a',
  '%F0%9F%98%80',
  'x'.repeat(199),
  'x'.repeat(201),
  ...(existing ? [`${existing}%00`, `${existing}%20`, `${existing}.json`, `${existing};x=1`] : []),
];

/** Query values for any parameter: encodings of what no field may hold, and nonsense. */
const queryTexts = ['', ...badEncodings, '+', 'x'.repeat(20_000)];

/** Query values by what the parameter wants. */
function queryValues(schema: Schema): string[] {
  if (schema.type === 'integer' || schema.type === 'number') {
    return ['abc', '-1', '0', '1.5', '1e3', '201', '501', '99999999999999999999', 'NaN', 'Infinity', 'true', '[]'];
  }
  if (schema.format === 'date-time') return instants.map(encodeURIComponent);
  if (schema.format === 'uuid') return ids(undefined);
  return [
    'abc',
    'null',
    '{}',
    'x'.repeat(3_000),
    encodeURIComponent(instants[0] as string),
    ...ids(undefined).slice(0, 1),
  ];
}

function cursorValues(cursor: string): string[] {
  const [payload = '', signature = ''] = cursor.split('.');
  const flipped = signature.startsWith('A') ? `B${signature.slice(1)}` : `A${signature.slice(1)}`;
  const forged = Buffer.from(JSON.stringify(['users', 'x', '0000-01-01', 'not-a-uuid'])).toString('base64url');
  return [
    `${payload}.${flipped}`,
    `${payload}x.${signature}`,
    `${forged}.${signature}`,
    `${payload}.${signature}.${signature}`,
    '.',
    '..',
    'a.b',
    payload,
    'x'.repeat(600),
    encodeURIComponent(`${payload}\u0000.${signature}`),
  ];
}

// ---------------------------------------------------------------------------------------------------------------
// The corpus

function target(operation: DocumentOperation, context: CorpusContext, overrides: Record<string, string> = {}) {
  return operation.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    if (name in overrides) return overrides[name] as string;
    return context.existing.get(collectionOf(operation.path)) ?? randomUUID();
  });
}

/** `/api/v1/routing-plans/{id}/publish` belongs to `/api/v1/routing-plans`. */
export function collectionOf(path: string): string {
  const index = path.indexOf('/{');
  return index === -1 ? path : path.slice(0, index);
}

const rawMarker = `raw-json-${randomUUID()}`;

function jsonBody(value: unknown): string {
  const raws: string[] = [];
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (!(item instanceof RawJson)) return item;
    raws.push(item.text);
    return `${rawMarker}${raws.length - 1}`;
  });
  return text.replace(new RegExp(`"${rawMarker}(\\d+)"`, 'g'), (_, index: string) => raws[Number(index)] as string);
}

/** Every malformed request of the corpus for one operation. */
export function probesFor(operation: DocumentOperation, context: CorpusContext): Probe[] {
  const probes: Probe[] = [];
  const { method, operationId } = operation;
  const path = target(operation, context);
  const base = operation.body ? exampleOf(operation.body.schema, context) : {};
  const add = (what: string, fields: Partial<Probe>) =>
    probes.push({ operationId, what, method, target: path, headers: {}, ...fields });

  // Bodies that are not JSON, or JSON of the wrong shape, and content types that are not JSON.
  if (mutation(method)) {
    const rawBodies: [string, string | Buffer][] = [
      ['truncated JSON', '{"name": '],
      ['an unclosed array', '['],
      ['a trailing comma', '{"a":1,}'],
      ['single quotes', "{'a':1}"],
      ['two documents', '{}{}'],
      ['a bare word', 'nul'],
      ['NUL bytes', '\u0000\u0000'],
      ['a raw control character in a string', '{"name":"a\u0001b"}'],
      ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
      ['a UTF-8 byte order mark', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(jsonBody(base))])],
      ['whitespace only', '  \n'],
      ['null', 'null'],
      ['an array', '[]'],
      ['a string', '"text"'],
      ['a number', '42'],
      ['a huge number', '1e999'],
      ['true', 'true'],
      ['__proto__', '{"__proto__":{"admin":true}}'],
      ['constructor.prototype', '{"constructor":{"prototype":{"admin":true}}}'],
      ['a duplicated field', jsonBody(base).replace(/^\{/, '{"name":"a","name":"b",').replace(',}', '}')],
      ['a field named NUL', jsonBody({ ...(base as object), '\u0000': 1 })],
      ['a lone surrogate field name', jsonBody({ ...(base as object), '\ud800': 1 })],
      ['arrays nested 100,000 deep', '['.repeat(100_000) + ']'.repeat(100_000)],
      ['objects nested 10,000 deep', '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000)],
      ['10,000 fields', jsonBody(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [`f${i}`, i])))],
      ['a body over the size limit', jsonBody({ name: 'x'.repeat(1_100_000) })],
    ];
    for (const [what, body] of rawBodies) add(`body: ${what}`, { body });
    for (const contentType of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=utf-16',
      'application/merge-patch+json',
      'multipart/form-data; boundary=x',
      'application/json, text/plain',
      '',
    ]) {
      add(`content-type "${contentType}"`, { body: jsonBody(base), headers: { 'content-type': contentType } });
    }
    add('a JSON body without a content type', { body: jsonBody(base), headers: { 'content-type': null } });
    add('content-type JSON and no body', { headers: { 'content-type': 'application/json' } });
  } else {
    add('a GET with a malformed JSON body', { body: '{"a":' });
  }

  // Each field of the body in turn.
  if (operation.body) {
    const schema = operation.body.schema;
    for (const field of fieldsOf(schema)) {
      const name = field.at.map(String).join('.');
      for (const value of badValues(field.schema)) {
        const body = jsonBody(withValue(base, field.at, value, schema, context));
        add(`body.${name} = ${describe(value)}`, { body, refused: holdsRefused(value) });
      }
    }
  }

  // Each path parameter.
  for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
    const existing = context.existing.get(collectionOf(operation.path));
    for (const value of pathValues(existing)) {
      const body = operation.body && mutation(method) ? jsonBody(base) : undefined;
      probes.push({
        operationId,
        what: `path ${parameter.name} = ${describe(value)}`,
        refused: encodesRefused(value),
        method,
        target: target(operation, context, { [parameter.name]: value }),
        headers: {},
        ...(body !== undefined ? { body } : {}),
      });
    }
  }

  // Each query parameter, the query string as a whole.
  const body = operation.body && mutation(method) ? { body: jsonBody(base) } : {};
  for (const parameter of operation.parameters.filter((p) => p.in === 'query')) {
    const values = [
      ...queryTexts,
      ...queryValues(parameter.schema),
      ...(parameter.name === 'cursor' || parameter.name === 'after' ? cursorValues(context.cursor) : []),
    ];
    for (const value of values) {
      add(`query ${parameter.name} = ${describe(value)}`, {
        target: `${path}?${parameter.name}=${value}`,
        refused: encodesRefused(value),
        ...body,
      });
    }
    for (const [what, query] of [
      ['twice', `${parameter.name}=1&${parameter.name}=2`],
      ['twice, the same', `${parameter.name}=1&${parameter.name}=1`],
      ['as an array', `${parameter.name}[]=1`],
      ['as an object', `${parameter.name}[a]=1`],
      ['without a value', parameter.name],
    ] as const) {
      add(`query ${parameter.name} ${what}`, { target: `${path}?${query}`, ...body });
    }
  }
  for (const query of ['unknown=1', '&&&', '=x', '__proto__=x', 'constructor[prototype]=x', '%00=1', 'a%00=1', '?']) {
    add(`query "${query}"`, { target: `${path}?${query}`, ...body });
  }

  // The workspace and idempotency headers.
  const workspaceHeaders: [string, Record<string, string | null>][] = [
    ['no workspace', { 'x-service-workspace-id': null }],
    ['an empty workspace id', { 'x-service-workspace-id': '' }],
    ['a malformed workspace id', { 'x-service-workspace-id': 'not-a-uuid' }],
    ['an unknown workspace id', { 'x-service-workspace-id': randomUUID() }],
    ['the nil workspace id', { 'x-service-workspace-id': '00000000-0000-0000-0000-000000000000' }],
    ['a latin-1 workspace id', { 'x-service-workspace-id': 'caf\u00e9' }],
    ['both workspace headers', { 'x-service-external-workspace-id': 'ws-unknown' }],
    ['an unknown external workspace id', { 'x-service-workspace-id': null, 'x-service-external-workspace-id': 'nope' }],
    [
      'an overlong external workspace id',
      { 'x-service-workspace-id': null, 'x-service-external-workspace-id': 'x'.repeat(201) },
    ],
    [
      'a latin-1 external workspace id',
      { 'x-service-workspace-id': null, 'x-service-external-workspace-id': '\u00ff\u0080' },
    ],
  ];
  for (const [what, headers] of workspaceHeaders) add(what, { headers, ...body });
  if (mutation(method)) {
    for (const key of ['', ' ', 'x'.repeat(256), 'caf\u00e9', 'a b']) {
      add(`idempotency-key ${describe(key)}`, { headers: { 'idempotency-key': key }, ...body });
    }
  }
  return probes;
}

function describe(value: unknown): string {
  if (value instanceof RawJson) return describe(value.text);
  const text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 60 ? `${text.slice(0, 40)}… (${text.length} characters)` : text;
}
