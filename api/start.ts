/**
 * The API role's start (`switchboard api`, and under `all`): the operations of `/api/v1` on the process's HTTP server,
 * registered before it listens. The server and the pool are the process's (app/roles.ts closes them).
 */
import { PostgresResourceStore } from '../core/resources/postgres-store.ts';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { LoginVerifier } from './oidc.ts';
import { registerApi } from './server.ts';

export function startApi(
  context: RoleContext,
  options: {
    /** How long a hangup through the API waits for the engine (default 5 s). Tests lengthen it. */
    hangupWaitMs?: number;
  } = {},
): RunningRole {
  const { config, cluster } = context;
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
    ...(options.hangupWaitMs === undefined ? {} : { hangupWaitMs: options.hangupWaitMs }),
  });
  // Its requests drain with the HTTP server; nothing of its own to stop.
  return { close: async () => {} };
}
