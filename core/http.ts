/**
 * The HTTP shell every role serves: JSON logs carrying the request id (never a credential), `X-Request-Id` and
 * `cache-control: no-store` on every answer, CORS as section 5, the error envelope of section 7 for every failure
 * (404 unknown path, 405 wrong method, 413, 415, malformed JSON, schema failures, and what the HTTP parser and the
 * router refuse before any route: broken framing, oversized headers, malformed percent-encoding), and a request
 * duration histogram.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
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

/**
 * What the HTTP parser refuses before there is a request (a control character in a header, headers over the size
 * limit, broken framing, a client too slow): an answer in the envelope written straight to the socket, which is
 * then closed, as Node does by default. Nothing is written once an answer on this connection has begun.
 */
function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) {
    const apiError =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? new ApiError('headers_too_large', 'the request line and headers are too large')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? new ApiError('request_timeout', 'the request took too long to arrive')
          : new ApiError('invalid_request', 'the request is not valid HTTP/1.1');
    const body = JSON.stringify(apiError.body());
    const headers = {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(body)),
      'x-request-id': randomUUID(),
      'cache-control': 'no-store',
      ...corsHeaders,
      connection: 'close',
    };
    const head = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
    socket.write(`HTTP/1.1 ${apiError.status} ${STATUS_CODES[apiError.status]}\r\n${head.join('')}\r\n${body}`);
  }
  socket.destroy(error);
}

/**
 * What the router refuses before routing (a malformed percent-encoding, a path segment over `maxParamLength`): the
 * onRequest hook has not run, so the shell's headers are set here.
 */
function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const apiError =
    error.code === 'FST_ERR_BAD_URL'
      ? new ApiError('invalid_request', 'the path has a malformed percent-encoding')
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? new ApiError('invalid_request', 'a segment of the path is longer than 200 characters')
        : toApiError(error);
  if (apiError.status >= 500) request.log.error({ err: error }, 'request failed');
  reply
    .header('x-request-id', request.id)
    .header('cache-control', 'no-store')
    .headers(corsHeaders)
    .code(apiError.status)
    .send(apiError.body());
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
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
  });
  app.setValidatorCompiler(validatorCompiler);
  // Bodies are JSON only: without this, Fastify's built-in text/plain parser would take a text body past the 415.
  app.removeContentTypeParser('text/plain');
  // An empty body is no body, even with `content-type: application/json`: fetch wrappers and many clients send that
  // header on every request, DELETEs included. Whether the operation may go without a body is the route's to say
  // (api/route.ts). Anything else goes to Fastify's own parser, with its prototype-poisoning checks.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body.toString();
    if (text === '') done(null, undefined);
    else parseJson(request, text, done);
  });

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
