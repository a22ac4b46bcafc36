/**
 * What each role's start function (api/start.ts, engine/start.ts, operator/start.ts) is given: the pieces of one
 * process that app/roles.ts makes once and the roles share, and what a started role gives back to be stopped.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Clock } from './clock.ts';
import type { Config } from './config.ts';
import type { Cluster } from './resources/cluster.ts';
import type { KubernetesResourceStore } from './resources/kubernetes-store.ts';
import type { SigningKeys } from './service-secret.ts';

export interface RoleContext {
  config: Config;
  /** The process's pool (migrations applied). */
  pool: pg.Pool;
  /** The pool's database, for connections of a role's own (change notices, leadership, the delivery pool). */
  databaseUrl: string;
  /** The process's HTTP server (health and metrics; the API's routes under `api`). */
  http: FastifyInstance;
  registry: Registry;
  keys: SigningKeys;
  /** The process's log; each role logs through a child of it with its `component`. */
  log: Logger;
  /** The call engine's clock for plan steps (`hours`); none means the system clock. Tests fix it. */
  clock?: Clock;
  /**
   * The Kubernetes cluster (docs/kubernetes.md) under `api` and `operator`, with the one store of its custom
   * resources both use; none without a cluster, when they live in PostgreSQL.
   */
  cluster?: Cluster & { store: KubernetesResourceStore };
}

/** A started role. Stopping runs `stop` of each role (latest started first), then every `close` at once. */
export interface RunningRole {
  /** What must end before the HTTP server drains (the engine's calls, with a BYE). */
  stop?(): Promise<void>;
  /** Runs while the HTTP server drains; resolves once the role's own work has finished. */
  close(): Promise<void>;
}
