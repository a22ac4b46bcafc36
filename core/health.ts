/**
 * `GET /healthz` (the process answers), `GET /readyz` (the database answers and every migration is applied) and
 * `GET /metrics` (Prometheus text). Every role serves them on its HTTP port, except `/metrics` where METRICS_PORT
 * gives it a listener of its own (`metricsServer`): the API's port is public, and the metrics (operations, queues,
 * calls of every tenant) are the operator's to read.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { migrationsApplied } from './database.ts';
import { ApiError } from './errors.ts';

/** `metrics: false` leaves `/metrics` out (it is served by `metricsServer`). */
export function registerHealthRoutes(
  app: FastifyInstance,
  pool: pg.Pool,
  registry: Registry,
  options: { metrics: boolean } = { metrics: true },
): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await migrationsApplied(pool).catch(() => false);
    if (ready) return { status: 'ready' };
    return reply
      .code(503)
      .send({ error: { code: 'unavailable', message: 'the database is unreachable or not migrated' } });
  });
  if (options.metrics) registerMetricsRoute(app, registry);
}

function registerMetricsRoute(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}

/** The listener of METRICS_PORT: `GET /metrics` and nothing else, every other answer in the error envelope. */
export function metricsServer(registry: Registry): FastifyInstance {
  const app = Fastify({ logger: false, forceCloseConnections: 'idle' });
  app.setErrorHandler(async (_error, _request, reply) => {
    const error = new ApiError('internal_error', 'the metrics could not be read');
    return reply.code(error.status).send(error.body());
  });
  app.setNotFoundHandler(async (request, reply) => {
    const error = new ApiError('not_found', `no such path: ${request.method} ${request.url.split('?')[0]}`);
    return reply.code(error.status).send(error.body());
  });
  registerMetricsRoute(app, registry);
  return app;
}
