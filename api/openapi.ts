/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of the 81 operations, generated from the registry and from the same
 * TypeBox schemas that validate requests. Operations not built yet are marked `x-implemented: false`.
 */
import type { TSchema } from 'typebox';
import { operations } from './operations.ts';
import type { OperationSchemas } from './route.ts';

const securityOf: Record<string, Record<string, string[]>[]> = {
  K: [{ applicationKey: [] }, { applicationSecret: [], applicationHeader: [] }],
  U: [{ userToken: [] }],
  M: [{ memberToken: [] }],
  W: [{ workspaceKey: [] }],
  S: [{ memberLogin: [] }],
};

const ErrorEnvelope = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: { code: { type: 'string' }, message: { type: 'string' } },
    },
  },
};

function plain(schema: TSchema): unknown {
  return JSON.parse(JSON.stringify(schema));
}

function parameters(schema: TSchema | undefined, where: 'query' | 'path') {
  const properties = (schema as { properties?: Record<string, TSchema> } | undefined)?.properties ?? {};
  const required = new Set((schema as { required?: string[] } | undefined)?.required ?? []);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    schema: plain(property),
  }));
}

export function openApiDocument(implemented: ReadonlyMap<string, OperationSchemas>) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of operations) {
    const schemas = implemented.get(operation.id);
    const path = operation.path.replace(/:(\w+)/g, '{$1}');
    const pathParameters = schemas?.params
      ? parameters(schemas.params, 'path')
      : [...operation.path.matchAll(/:(\w+)/g)].map((match) => ({
          name: match[1],
          in: 'path',
          required: true,
          schema: { type: 'string' },
        }));
    const responses: Record<string, unknown> = {};
    for (const [status, schema] of Object.entries(schemas?.response ?? {})) {
      responses[status] = { description: 'Success', content: { 'application/json': { schema: plain(schema) } } };
    }
    if (schemas === undefined) {
      responses['501'] = {
        description: 'Not implemented yet',
        content: { 'application/json': { schema: ErrorEnvelope } },
      };
    }
    responses.default = { description: 'Error', content: { 'application/json': { schema: ErrorEnvelope } } };
    const headerParameters =
      operation.method === 'GET'
        ? []
        : [
            {
              name: 'idempotency-key',
              in: 'header',
              required: true,
              schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
            },
          ];
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[operation.method.toLowerCase()] = {
      operationId: operation.id,
      summary: operation.summary,
      'x-operation-number': operation.number,
      'x-implemented': schemas !== undefined,
      'x-scope': operation.scope,
      security: operation.credentials.flatMap((credential) => securityOf[credential]),
      parameters: [...pathParameters, ...parameters(schemas?.querystring, 'query'), ...headerParameters],
      ...(schemas?.body
        ? {
            requestBody: {
              required: schemas.optionalBody !== true,
              content: { 'application/json': { schema: plain(schemas.body) } },
            },
          }
        : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Switchboard API', version: '1.0.0' },
    servers: [{ url: '/' }],
    paths,
    components: {
      securitySchemes: {
        applicationKey: { type: 'http', scheme: 'bearer', description: 'Application key (sbk_…)' },
        applicationSecret: { type: 'http', scheme: 'bearer', description: 'Legacy application secret (sbs_…)' },
        applicationHeader: { type: 'apiKey', in: 'header', name: 'x-service-application' },
        userToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'User token (15 minutes)' },
        memberToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Member token (15 minutes)' },
        workspaceKey: { type: 'http', scheme: 'bearer', description: 'Workspace key (sbw_…), verify:send only' },
        memberLogin: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'OIDC access token' },
      },
    },
  };
}
