/**
 * How a route plugin implements an operation: it names the operation, gives the TypeBox schemas of its request and
 * answer, and a handler that returns `{ status, body }` or throws an ApiError. Authentication, authorization,
 * workspace reach and idempotency are applied here, the same way for every operation.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import type { Static, TSchema } from 'typebox';
import type { Config } from '../core/config.ts';
import type { Queryable } from '../core/database.ts';
import { ApiError } from '../core/errors.ts';
import { describeUnacceptableInput } from '../core/validation.ts';
import type { ResourceStore } from '../core/resources/store.ts';
import type { SigningKeys } from '../core/service-secret.ts';
import type { AnswerTally } from './answer-tally.ts';
import { type Principal, type WorkspaceRef, workspaceFromHeaders, workspaceFromPath } from './auth.ts';
import { type Answer, fingerprint, keyInUse, runIdempotent } from './idempotency.ts';
import { senderOf } from './idempotency-scopes.ts';
import type { LoginVerifier } from './oidc.ts';
import type { ResourceWrites } from './resource-writes.ts';
import { isMutation, type Operation, operationById } from './operations.ts';

export interface Services {
  config: Config;
  pool: pg.Pool;
  /** The pool's database, for connections of their own (change notices). */
  databaseUrl: string;
  keys: SigningKeys;
  logins: LoginVerifier | undefined;
  /** Drops a revoked key from this process's credential cache (other processes hear a change notice). */
  keyRevoked?: (keyId: string) => void;
  /** The resource store (custom resources) bound to a connection: a mutation's transaction, or the pool. */
  resources: (db: Queryable) => ResourceStore;
  /** In a cluster: the resource writes carried to the Kubernetes API after their request committed (api/resources.ts). */
  resourceWrites?: ResourceWrites;
  /** Schemas of the operations implemented so far, by operation id (for OpenAPI). */
  implemented: Map<string, OperationSchemas>;
  /** How long a hangup waits for the engine (default 5 s); tests lengthen it to hold hangups waiting. */
  hangupWaitMs?: number;
  /** The process's Prometheus registry, for the API's own gauges (the long-polls waiting). */
  registry?: Registry;
  /** Counts the idempotent answers this process stores (api/answer-tally.ts); set by registerApi. */
  answerTally?: AnswerTally;
}

export interface OperationSchemas {
  body?: TSchema;
  querystring?: TSchema;
  params?: TSchema;
  /** The answer of success, by status code. */
  response?: Record<number, TSchema>;
  /** Set from the definition: the body may be left out (OpenAPI `requestBody.required: false`). */
  optionalBody?: boolean;
}

/** What the handler's `body` is: the body schema's type, `unknown` for an operation without one. */
export type BodyOf<S extends OperationSchemas> = S extends { body: infer B extends TSchema } ? Static<B> : unknown;
/** What the handler's `query` is: the querystring schema's type, `unknown` for an operation without one. */
export type QueryOf<S extends OperationSchemas> = S extends { querystring: infer Q extends TSchema }
  ? Static<Q>
  : unknown;
/** What the handler's `params` are: the params schema's type, else the path's parameters as fastify gives them. */
export type ParamsOf<S extends OperationSchemas> = S extends { params: infer P extends TSchema }
  ? Static<P>
  : Record<string, string>;

/**
 * What a handler is given. `body`, `query` and `params` have the types of the operation's schemas `S`: fastify checks
 * them against the schemas before the handler runs. `Prepared` is what the operation's `prepare` returns.
 */
export interface HandlerContext<S extends OperationSchemas = OperationSchemas, Prepared = unknown> {
  request: FastifyRequest;
  principal: Principal;
  /** The workspace the request reaches; set for operations whose workspace comes from headers or the path. */
  workspace: WorkspaceRef | undefined;
  /** Inside the idempotent transaction for mutations, the pool for reads. */
  db: Queryable;
  body: BodyOf<S>;
  query: QueryOf<S>;
  params: ParamsOf<S>;
  services: Services;
  /**
   * Runs an effect once the change is committed, with no connection held (at once for reads); the request answers
   * after the effects settle.
   */
  afterCommit: (effect: () => void | Promise<void>) => void;
  /** What the operation's `prepare` made of the request; undefined without one. */
  prepared?: Prepared;
}

/** What an operation's `prepare` is given: the request, with no database connection of its own. */
export type PreparingContext<S extends OperationSchemas = OperationSchemas> = Omit<
  HandlerContext<S>,
  'db' | 'afterCommit' | 'prepared'
>;

export interface OperationDefinition<S extends OperationSchemas = OperationSchemas, Prepared = unknown> {
  schemas: S;
  /** The body may be left out entirely (it is then `{}`). Always so for a DELETE. */
  optionalBody?: boolean;
  /**
   * A mutation's work that waits on the network (an MMS' media fetched and checked), run before the handler's
   * transaction with no database connection held (core/held-connections.ts); its result is the handler's `prepared`.
   * Not run for a retry whose key was used (its answer is stored, or its request runs). A refusal it throws (4xx) is
   * stored under the key as the handler's would be.
   */
  prepare?: (context: PreparingContext<S>) => Promise<Prepared>;
  handler: (context: HandlerContext<S, Prepared>) => Promise<Answer>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    operation?: Operation;
  }
  interface FastifyRequest {
    principal?: Principal;
    idempotencyKey?: string;
  }
}

export function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function workspaceOf(
  operation: Operation,
  context: Pick<HandlerContext, 'principal' | 'request' | 'services' | 'params'>,
) {
  const { principal, request, services } = context;
  switch (operation.workspace) {
    case 'header':
      return workspaceFromHeaders(services.pool, principal, request.headers, true);
    case 'optional':
      return workspaceFromHeaders(services.pool, principal, request.headers, false);
    case 'path':
      return workspaceFromPath(services.pool, principal, context.params.id as string);
    case 'none':
      return undefined;
  }
}

/**
 * Refuses, for every operation alike, what no field may hold (core/validation.ts): in the body, the query, the path
 * and the workspace headers. Before the schemas, so that the answer names the character whatever the field's schema.
 */
function refuseUnacceptableInput(request: FastifyRequest): void {
  const workspaceHeaders = {
    'x-service-workspace-id': request.headers['x-service-workspace-id'],
    'x-service-external-workspace-id': request.headers['x-service-external-workspace-id'],
  };
  const parts: [string, unknown][] = [
    ['body', request.body],
    ['querystring', request.query],
    ['params', request.params],
    ['headers', workspaceHeaders],
  ];
  for (const [part, value] of parts) {
    const problem = describeUnacceptableInput(part, value);
    if (problem !== undefined) throw new ApiError('invalid_request', problem);
  }
}

export function defineOperation<S extends OperationSchemas, Prepared = unknown>(
  app: FastifyInstance,
  services: Services,
  id: string,
  definition: OperationDefinition<S, Prepared>,
) {
  const operation = operationById.get(id);
  if (operation === undefined) throw new Error(`unknown operation ${id}`);
  // No body (an empty one included, whatever its content-type) means `{}` where the body may be left out.
  const optionalBody = definition.optionalBody === true || operation.method === 'DELETE';
  const bodyRequired = definition.schemas.body !== undefined && !optionalBody;
  services.implemented.set(id, { ...definition.schemas, optionalBody });
  const answers = {
    pool: services.pool,
    key: services.keys.idempotentAnswers,
    limits: {
      answers: services.config.idempotency.answersPerScope,
      bytes: services.config.idempotency.bytesPerScope,
      // An answer may echo its request's body (a routing plan's definition) and add to it.
      answerBytes: 2 * services.config.bodyLimit,
    },
    ...(services.answerTally === undefined ? {} : { tally: services.answerTally }),
  };
  app.route({
    method: operation.method,
    url: operation.path,
    config: { operation },
    schema: {
      ...(definition.schemas.body ? { body: definition.schemas.body } : {}),
      ...(definition.schemas.querystring ? { querystring: definition.schemas.querystring } : {}),
      ...(definition.schemas.params ? { params: definition.schemas.params } : {}),
    },
    preValidation: async (request: FastifyRequest) => {
      refuseUnacceptableInput(request);
      if (optionalBody) request.body ??= {};
      else if (bodyRequired && request.body === undefined) {
        throw new ApiError('invalid_request', 'the body is required: send a JSON object');
      }
    },
    handler: async (request, reply) => {
      const principal = request.principal as Principal;
      const params = (request.params ?? {}) as Record<string, string>;
      const workspace = await workspaceOf(operation, { request, principal, params, services });
      // The schemas' types: fastify checked the body, query and params against them before this runs.
      const base = {
        request,
        principal,
        params: params as ParamsOf<S>,
        query: request.query as QueryOf<S>,
        services,
      };
      const body = request.body as BodyOf<S>;
      if (!isMutation(operation.method)) {
        const answer = await definition.handler({
          ...base,
          workspace,
          db: services.pool,
          body,
          afterCommit: (effect) => void effect(),
        });
        return reply.code(answer.status).send(answer.body);
      }
      // What makes two requests the same, but for who sent them.
      const sent = {
        method: request.method,
        url: request.url,
        workspaceHeaders: [
          header(request, 'x-service-workspace-id'),
          header(request, 'x-service-external-workspace-id'),
        ],
        body: request.body,
      };
      const sender = senderOf(principal);
      const key = request.idempotencyKey as string;
      const prepared =
        definition.prepare === undefined || (await keyInUse(answers, sender.scope, key))
          ? undefined
          : await definition.prepare({ ...base, workspace, body }).then(
              (value) => ({ value }),
              (error: unknown) => {
                if (!(error instanceof ApiError) || error.status >= 500) throw error;
                return { refusal: error };
              },
            );
      const stored = await runIdempotent(
        answers,
        sender.scope,
        key,
        fingerprint({ ...sent, credential: sender.credential }),
        (db, afterCommit) => {
          if (prepared !== undefined && 'refusal' in prepared) throw prepared.refusal;
          return definition.handler({
            ...base,
            workspace,
            db,
            body,
            afterCommit,
            prepared: prepared?.value,
          });
        },
        sender.earlier && {
          scope: sender.earlier.scope,
          print: fingerprint({ ...sent, credential: sender.earlier.credential }),
        },
      );
      if (stored.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(stored.status).type('application/json; charset=utf-8').send(stored.body);
    },
  });
}

export function requireWorkspace(context: Pick<HandlerContext, 'workspace'>): WorkspaceRef {
  if (context.workspace === undefined) throw new ApiError('invalid_request', 'this operation needs a workspace');
  return context.workspace;
}
