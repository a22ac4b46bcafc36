/**
 * The API role's start (`switchboard api`, and under `all`): the operations of `/api/v1` on the process's HTTP server,
 * registered before it listens. The server and the pool are the process's (app/roles.ts closes them).
 */
import { PostgresResourceStore } from '../core/resources/postgres-store.ts';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { LoginVerifier } from './oidc.ts';
import { ResourceWrites } from './resource-writes.ts';
import { registerApi } from './server.ts';

export function startApi(
  context: RoleContext,
  options: {
    /** How long a hangup through the API waits for the engine (default 5 s). Tests lengthen it. */
    hangupWaitMs?: number;
  } = {},
): RunningRole {
  const { config, cluster } = context;
  // In a cluster the API's resource writes reach the Kubernetes API after their request committed.
  const resourceWrites =
    cluster === undefined
      ? undefined
      : new ResourceWrites(context.pool, cluster.store, context.log.child({ component: 'resource-writes' }));
  resourceWrites?.start();
  registerApi(context.http, {
    config,
    pool: context.pool,
    databaseUrl: context.databaseUrl,
    keys: context.keys,
    logins: config.oidc ? new LoginVerifier(config.oidc) : undefined,
    implemented: new Map(),
    registry: context.registry,
    // Without a cluster the custom resources live in PostgreSQL, written in the request's own transaction.
    resources: (db) => cluster?.store ?? new PostgresResourceStore(db),
    ...(resourceWrites === undefined ? {} : { resourceWrites }),
    ...(options.hangupWaitMs === undefined ? {} : { hangupWaitMs: options.hangupWaitMs }),
  });
  // Its requests drain with the HTTP server; then the sweep of the resource writes stops.
  return { close: async () => resourceWrites?.close() };
}
