/**
 * Runs the roles of one process: `api`, `engine`, `operator`, or all three (`switchboard all`, what `npm start`
 * runs). Each process opens the database (applying migrations), serves health and metrics, and on SIGTERM or SIGINT
 * stops taking requests, lets in-flight ones finish, closes the pool and, when it started it, the embedded server.
 *
 * The process's shared pieces (core/role-context.ts) are made here once; each role starts through its own function
 * (api/start.ts, engine/start.ts, operator/start.ts), in that order, and stops in the reverse order.
 */
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startApi } from '../api/start.ts';
import type { Clock } from '../core/clock.ts';
import type { Config } from '../core/config.ts';
import { openDatabase } from '../core/database.ts';
import { metricsServer, registerHealthRoutes } from '../core/health.ts';
import { createHttpServer } from '../core/http.ts';
import { errorForLog } from '../core/log-errors.ts';
import { createMetricsRegistry } from '../core/metrics.ts';
import { clusterOf } from '../core/resources/cluster.ts';
import { KubernetesResourceStore } from '../core/resources/kubernetes-store.ts';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { loadSigningKeys } from '../core/service-secret.ts';
import { type RunningEngine, startEngine } from '../engine/start.ts';
import type { RunningOperator } from '../operator/operator.ts';
import { operatorSettings, type RunningOperatorRole, startOperatorRole } from '../operator/start.ts';

export type Role = 'api' | 'engine' | 'operator';

export interface RunningService {
  url: string;
  /** The engine's SIP port (UDP and TCP), under `all` and `engine`. */
  sipPort: number | undefined;
  /** The operator, under `all` and `operator`. */
  operator: RunningOperator | undefined;
  /** The admission webhook's HTTPS address, when ADMISSION_TLS_DIR is set. */
  admissionUrl: string | undefined;
  close(): Promise<void>;
}

export async function startRoles(
  config: Config,
  roles: ReadonlySet<Role>,
  options: {
    logStream?: NodeJS.WritableStream;
    /** The call engine's clock for plan steps (`hours`); default the system clock. Tests fix it. */
    clock?: Clock;
    /** How long a hangup through the API waits for the engine (default 5 s). Tests lengthen it. */
    hangupWaitMs?: number;
  } = {},
): Promise<RunningService> {
  const log = pino({ level: config.logLevel, serializers: { err: errorForLog } }, options.logStream ?? process.stdout);
  // In a cluster the custom resources are the cluster's; without one, a PostgreSQL table (docs/kubernetes.md).
  const cluster = roles.has('api') || roles.has('operator') ? clusterOf(config) : undefined;
  // What the operator needs (in a cluster, what it gives its engine pods), checked before anything starts.
  const operatorNeeds = roles.has('operator') ? operatorSettings(config, cluster) : undefined;
  const database = await openDatabase(config, (message) => log.debug({ component: 'database' }, message));
  const registry = createMetricsRegistry();
  const app = createHttpServer({
    logLevel: config.logLevel,
    bodyLimit: config.bodyLimit,
    registry,
    ...(options.logStream ? { logStream: options.logStream } : {}),
  });
  // METRICS_PORT moves /metrics off the API's public port to a listener of its own.
  const metrics = roles.has('api') && config.metricsPort !== undefined ? metricsServer(registry) : undefined;
  registerHealthRoutes(app, database.pool, registry, { metrics: metrics === undefined });

  const context: RoleContext = {
    config,
    pool: database.pool,
    databaseUrl: database.url,
    http: app,
    registry,
    keys: await loadSigningKeys(database.pool, config.secret),
    log,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(cluster === undefined ? {} : { cluster: { ...cluster, store: new KubernetesResourceStore(cluster.config) } }),
  };
  const started: RunningRole[] = [];
  // The API's routes go on the server before it listens.
  if (roles.has('api')) {
    started.push(startApi(context, options.hangupWaitMs === undefined ? {} : { hangupWaitMs: options.hangupWaitMs }));
  }

  const port = roles.has('api') ? config.port : roles.has('engine') ? config.engineHttpPort : config.operatorHttpPort;
  try {
    await app.listen({ port, host: config.host });
    await metrics?.listen({ port: config.metricsPort, host: config.host });
  } catch (error) {
    await Promise.all([app.close(), metrics?.close()]);
    await database.close();
    throw error;
  }
  /**
   * Stops what has started: first each role's `stop`, latest started first (the engine's calls end with a BYE), then
   * the HTTP server drains while the roles close (deliveries in flight finish), then the pool.
   */
  const stopAll = async () => {
    const latestFirst = [...started].reverse();
    for (const role of latestFirst) await role.stop?.();
    await Promise.all([app.close(), metrics?.close(), ...latestFirst.map((role) => role.close())]);
    await database.close();
  };
  let engine: RunningEngine | undefined;
  let operator: RunningOperatorRole | undefined;
  try {
    // The engine (webhook deliveries and calls): under `all` and `engine`.
    if (roles.has('engine')) {
      engine = await startEngine(context);
      started.push(engine);
    }
    // The operator (docs/kubernetes.md): under `all` and `operator`.
    if (operatorNeeds !== undefined) {
      operator = await startOperatorRole(context, operatorNeeds);
      started.push(operator);
    }
  } catch (error) {
    await stopAll();
    throw error;
  }
  if (config.secret === undefined) {
    // One line at start: the embedded default suits a laptop, not production (README, "Production").
    log.warn(
      { setting: 'SWITCHBOARD_SECRET' },
      'SWITCHBOARD_SECRET is unset: the master secret is kept in the database it protects, so a copy of the database alone opens the SIP passwords and forges tokens; set it in production (README.md, "Production build and container image")',
    );
  }
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  const metricsAddress = metrics?.server.address() as AddressInfo | undefined;
  log.info(
    {
      roles: [...roles],
      url,
      database: config.databaseUrl ? 'DATABASE_URL' : 'embedded',
      ...(metricsAddress === undefined ? {} : { metricsUrl: `http://${host}:${metricsAddress.port}/metrics` }),
    },
    'switchboard started',
  );

  let closing: Promise<void> | undefined;
  return {
    url,
    sipPort: engine?.sipPort,
    operator: operator?.operator,
    admissionUrl: operator?.admissionUrl,
    close() {
      closing ??= (async () => {
        await stopAll();
        log.info('switchboard stopped');
      })();
      return closing;
    },
  };
}
