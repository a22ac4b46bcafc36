/**
 * Runs the roles of one process: `api`, `engine`, `operator`, or all three (`switchboard all`, what `npm start`
 * runs). Each process opens the database (applying migrations), serves health and metrics, and on SIGTERM or SIGINT
 * stops taking requests, lets in-flight ones finish, closes the pool and, when it started it, the embedded server.
 */
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { LoginVerifier } from '../api/oidc.ts';
import { registerApi } from '../api/server.ts';
import { type CallEngine, startCallEngine } from '../engine/call-engine.ts';
import { PostgresResourceStore } from '../core/resources/postgres-store.ts';
import { clusterOf } from '../core/resources/cluster.ts';
import { KubernetesResourceStore } from '../core/resources/kubernetes-store.ts';
import { KubernetesEngineChildren } from '../operator/engine-children.ts';
import { enginePoolSettings } from '../operator/engine-pool.ts';
import { KubernetesEvents } from '../operator/events.ts';
import { LeaseLeadership } from '../operator/lease.ts';
import { KubernetesSecrets } from '../operator/secrets.ts';
import { DatabaseLeadership, type RunningOperator, startOperator } from '../operator/operator.ts';
import { admissionServer } from '../operator/admission.ts';
import { Dispatcher } from '../engine/delivery/dispatcher.ts';
import type { Config } from '../core/config.ts';
import { openDatabase } from '../core/database.ts';
import { registerHealthRoutes } from '../core/health.ts';
import { createHttpServer } from '../core/http.ts';
import { createMetricsRegistry } from '../core/metrics.ts';
import { errorForLog } from '../core/log-errors.ts';
import { loadSigningKeys, type SigningKeys } from '../core/service-secret.ts';

export type Role = 'api' | 'engine' | 'operator';

/** How long a deleted resource kept in PostgreSQL stays as a tombstone that watchers can still see. */
const tombstoneAgeMs = 60 * 60_000;

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
    clock?: { now(): Date };
    /** How long a hangup through the API waits for the engine (default 5 s). Tests lengthen it. */
    hangupWaitMs?: number;
  } = {},
): Promise<RunningService> {
  const log = pino({ level: config.logLevel, serializers: { err: errorForLog } }, options.logStream ?? process.stdout);
  // In a cluster the custom resources are the cluster's; without one, a PostgreSQL table (docs/kubernetes.md).
  const cluster = roles.has('api') || roles.has('operator') ? clusterOf(config) : undefined;
  const clusterStore = cluster === undefined ? undefined : new KubernetesResourceStore(cluster.config);
  // What an operator in a cluster gives its engine pods, checked before anything starts.
  const enginePods = roles.has('operator') && cluster !== undefined ? enginePoolSettings(config) : undefined;
  const database = await openDatabase(config, (message) => log.debug({ component: 'database' }, message));
  const registry = createMetricsRegistry();
  const app = createHttpServer({
    logLevel: config.logLevel,
    bodyLimit: config.bodyLimit,
    registry,
    ...(options.logStream ? { logStream: options.logStream } : {}),
  });
  registerHealthRoutes(app, database.pool, registry);

  const timers: NodeJS.Timeout[] = [];
  const keys = roles.size > 0 ? await loadSigningKeys(database.pool, config.secret) : undefined;
  if (roles.has('api') && keys !== undefined) {
    registerApi(app, {
      config,
      pool: database.pool,
      databaseUrl: database.url,
      keys,
      logins: config.oidc ? new LoginVerifier(config.oidc) : undefined,
      implemented: new Map(),
      // Without a cluster the custom resources live in PostgreSQL, written in the request's own transaction.
      resources: (db) => clusterStore ?? new PostgresResourceStore(db),
      ...(options.hangupWaitMs === undefined ? {} : { hangupWaitMs: options.hangupWaitMs }),
    });
  }

  const port = roles.has('api') ? config.port : roles.has('engine') ? config.engineHttpPort : config.operatorHttpPort;
  try {
    await app.listen({ port, host: config.host });
  } catch (error) {
    await database.close();
    throw error;
  }
  // The engine's webhook deliveries (docs/events.md): under `all` and `engine`.
  let delivery: Dispatcher | undefined;
  let deliveryPool: pg.Pool | undefined;
  if (roles.has('engine') && keys !== undefined) {
    // The dispatcher's own writes (leases, acknowledgements) commit without waiting for the disk: a server crash can
    // only lose acknowledgements, and a lost one means the event is delivered again, which at-least-once allows.
    deliveryPool = new pg.Pool({
      connectionString: database.url,
      max: config.poolSize,
      application_name: 'switchboard-delivery',
      options: '-c synchronous_commit=off',
    });
    deliveryPool.on('error', (error) => log.warn({ err: error }, 'delivery database connection lost'));
    delivery = new Dispatcher({
      pool: deliveryPool,
      databaseUrl: database.url,
      secretsKey: keys.webhookSecrets,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      concurrency: config.webhookConcurrency,
      registry,
      log: log.child({ component: 'webhooks' }),
    });
    await delivery.start();
  }
  let calls: CallEngine | undefined;
  let operator: RunningOperator | undefined;
  let admission: FastifyInstance | undefined;
  /** Stops what has started, in order: calls end with a BYE; deliveries in flight finish while HTTP drains. */
  const stopAll = async () => {
    for (const timer of timers) clearInterval(timer);
    await calls?.close();
    await Promise.all([app.close(), delivery?.close(), operator?.close(), admission?.close()]);
    await deliveryPool?.end();
    await database.close();
  };
  // The call engine (docs/calls.md): under `all` and `engine`.
  if (roles.has('engine')) {
    try {
      calls = await startCallEngine({
        config,
        pool: database.pool,
        databaseUrl: database.url,
        registry,
        log: log.child({ component: 'calls' }),
        carrierSecrets: (keys as SigningKeys).carrierSecrets,
        ...(options.clock ? { clock: options.clock } : {}),
      });
    } catch (error) {
      await stopAll();
      throw error;
    }
  }
  // The operator (docs/kubernetes.md): under `all` and `operator`. Without a cluster it reconciles the custom
  // resources kept in PostgreSQL, leading by an advisory lock.
  if (roles.has('operator')) {
    const operatorLog = log.child({ component: 'operator' });
    const secrets = cluster === undefined ? undefined : new KubernetesSecrets(cluster.config);
    const store =
      clusterStore ??
      new PostgresResourceStore(database.pool, {
        pool: database.pool,
        url: database.url,
        log: (message) => operatorLog.warn(message),
      });
    if (store instanceof PostgresResourceStore) {
      // Deleted resources stay as tombstones for watchers for an hour, then go (a watch from before then lists again).
      const purge = () =>
        store
          .purgeTombstones(tombstoneAgeMs)
          .catch((error: unknown) => operatorLog.warn({ err: error }, 'tombstone purge failed'));
      timers.push(setInterval(purge, 10 * 60_000).unref());
    }
    operator = startOperator({
      pool: database.pool,
      store,
      namespace: config.resourceNamespace,
      registry,
      log: operatorLog,
      leadership:
        cluster === undefined
          ? new DatabaseLeadership(database.url)
          : new LeaseLeadership(cluster.config, { namespace: cluster.leaseNamespace, log: operatorLog }),
      ...(cluster === undefined ? {} : { events: new KubernetesEvents(cluster.config) }),
      webhooks: {
        secretsKey: (keys as SigningKeys).webhookSecrets,
        allowPrivateNetworks: config.webhookAllowPrivateNetworks,
        ...(secrets === undefined ? {} : { secrets }),
      },
      engines: {
        carrierSecretsKey: (keys as SigningKeys).carrierSecrets,
        ...(secrets === undefined ? {} : { secrets }),
        ...(cluster === undefined || enginePods === undefined
          ? {}
          : { cluster: { children: new KubernetesEngineChildren(cluster.config), pool: enginePods } }),
      },
    });
  }
  // The admission webhook on a listener of its own, over HTTPS (Kubernetes calls webhooks over TLS only), when the
  // operator has a certificate; never on the API's port, where it would answer anyone about any workspace's queues.
  if (roles.has('operator') && config.admission.tlsDir !== undefined) {
    try {
      const [cert, key] = await Promise.all([
        readFile(path.join(config.admission.tlsDir, 'tls.crt')),
        readFile(path.join(config.admission.tlsDir, 'tls.key')),
      ]);
      admission = admissionServer(database.pool, { cert, key }, config.bodyLimit);
      await admission.listen({ port: config.admission.port, host: config.host });
    } catch (error) {
      await stopAll();
      throw error;
    }
  }
  const address = app.server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  log.info(
    { roles: [...roles], url, database: config.databaseUrl ? 'DATABASE_URL' : 'embedded' },
    'switchboard started',
  );

  let closing: Promise<void> | undefined;
  return {
    url,
    sipPort: calls?.sipPort,
    operator,
    admissionUrl:
      admission === undefined ? undefined : `https://localhost:${(admission.server.address() as AddressInfo).port}`,
    close() {
      closing ??= (async () => {
        await stopAll();
        log.info('switchboard stopped');
      })();
      return closing;
    },
  };
}
