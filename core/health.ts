/**
 * `GET /healthz` (the process answers), `GET /readyz` (the database answers and every migration is applied) and
 * `GET /metrics` (Prometheus text). Every role serves them.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { migrationsApplied } from './database.ts';

export function registerHealthRoutes(app: FastifyInstance, pool: pg.Pool, registry: Registry): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ready = await migrationsApplied(pool).catch(() => false);
    if (ready) return { status: 'ready' };
    return reply
      .code(503)
      .send({ error: { code: 'unavailable', message: 'the database is unreachable or not migrated' } });
  });
  app.get('/metrics', async (_request, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
