/**
 * The HTTP shell every role serves: JSON logs carrying the request id (never a credential), `X-Request-Id` and
 * `cache-control: no-store` on every answer, CORS as section 5, the error envelope of section 7 for every failure
 * (404 unknown path, 405 wrong method, 413, 415, malformed JSON, schema failures), and a request duration histogram.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyRequest, LogController } from 'fastify';
import { Histogram, type Registry } from 'prom-client';
import { ApiError } from './errors.ts';
import { errorForLog } from './log-errors.ts';
import { describeValidationError, validatorCompiler } from './validation.ts';

export interface HttpOptions {
  logLevel: string;
  bodyLimit: number;
  registry: Registry;
  /** Where JSON log lines go (stdout by default). */
  logStream?: NodeJS.WritableStream;
}

const requestIdPattern = /^[\x21-\x7e]{1,200}$/;

const corsHeaders = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'Retry-After, idempotent-replayed, X-Request-Id',
};
const preflightHeaders = {
  'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE, OPTIONS',
  'access-control-allow-headers':
    'Authorization, Content-Type, Idempotency-Key, x-service-workspace-id, x-service-external-workspace-id, x-service-application',
  'access-control-max-age': '600',
};

function pattern(url: string): RegExp {
  const escaped = url
    .split('/')
    .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}/?$`);
}

/** Maps anything thrown on the way to an answer to the envelope. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  const fastifyError = error as FastifyError & { validation?: unknown; validationContext?: string };
  if (Array.isArray(fastifyError.validation)) {
    return new ApiError(
      'invalid_request',
      describeValidationError(fastifyError.validationContext ?? 'body', fastifyError.validation),
    );
  }
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', 'the request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'the body is empty but its content-type is application/json');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ApiError('invalid_request', 'the body is not valid JSON');
  }
  if (error instanceof SyntaxError || fastifyError.code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') {
    return new ApiError('invalid_request', 'the body is not valid JSON');
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new ApiError('invalid_request', fastifyError.message);
  }
  return new ApiError('internal_error', 'something went wrong on our side; retry with the same idempotency-key');
}

export function createHttpServer(options: HttpOptions): FastifyInstance {
  const app = Fastify({
    logger: {
      level: options.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers["x-service-application"]'], remove: true },
      serializers: { err: errorForLog },
      ...(options.logStream ? { stream: options.logStream } : {}),
    },
    bodyLimit: options.bodyLimit,
    logController: new LogController({ requestIdLogLabel: 'requestId' }),
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && requestIdPattern.test(given) ? given : randomUUID();
    },
    // Requests arriving while the server closes get our own 503 envelope (onRequest below).
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 200 },
  });
  app.setValidatorCompiler(validatorCompiler);
  // Bodies are JSON only: without this, Fastify's built-in text/plain parser would take a text body past the 415.
  app.removeContentTypeParser('text/plain');

  const duration = new Histogram({
    name: 'switchboard_http_request_duration_seconds',
    help: 'HTTP request duration by operation and status',
    labelNames: ['operation', 'method', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [options.registry],
  });

  const routes: { method: string; pattern: RegExp }[] = [];
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) routes.push({ method, pattern: pattern(route.url) });
  });

  // While the server closes, an answer to a request already in flight ends its keep-alive connection: server.close()
  // reaps only connections idle at that moment, and one that goes idle later would hold the shutdown open until
  // keepAliveTimeout (72 s), past SHUTDOWN_TIMEOUT_MS. New requests are refused with 503 `unavailable`.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    reply.header('cache-control', 'no-store');
    reply.headers(corsHeaders);
    if (closing) {
      throw new ApiError('unavailable', 'the service is shutting down; retry', { headers: { 'retry-after': '1' } });
    }
    if (request.method === 'OPTIONS') {
      reply.headers(preflightHeaders);
      return reply.code(204).send();
    }
  });

  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });

  app.addHook('onResponse', async (request, reply) => {
    const operation =
      request.routeOptions.config.operation?.id ?? (request.is404 ? 'unknown' : request.routeOptions.url);
    duration.observe(
      { operation: operation ?? 'unknown', method: request.method, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });

  app.setErrorHandler(async (error, request, reply) => {
    const apiError = toApiError(error);
    if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
    if (apiError.headers) reply.headers(apiError.headers);
    return reply.code(apiError.status).send(apiError.body());
  });

  app.setNotFoundHandler(async (request: FastifyRequest, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const allowed = [
      ...new Set(routes.filter((route) => route.pattern.test(path)).map((route) => route.method)),
    ].filter((method) => method !== 'HEAD');
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      const error = new ApiError(
        'method_not_allowed',
        `${request.method} is not allowed here; use ${allowed.join(', ')}`,
      );
      return reply.code(error.status).send(error.body());
    }
    const error = new ApiError('not_found', `no such path: ${request.method} ${path}`);
    return reply.code(error.status).send(error.body());
  });

  return app;
}
