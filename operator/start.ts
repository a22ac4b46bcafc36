/**
 * The operator role's start (`switchboard operator`, and under `all`; docs/kubernetes.md). Without a cluster it
 * reconciles the custom resources kept in PostgreSQL, leading by an advisory lock, and purges their tombstones; in a
 * cluster it leads by a Lease and runs the engine pools' children. The admission webhook gets a listener of its own,
 * over HTTPS, when the operator has a certificate.
 */
import { readFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../core/config.ts';
import type { Cluster } from '../core/resources/cluster.ts';
import { PostgresResourceStore } from '../core/resources/postgres-store.ts';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { admissionServer } from './admission.ts';
import { KubernetesEngineChildren } from './engine-children.ts';
import { type EnginePoolSettings, enginePoolSettings } from './engine-pod-settings.ts';
import { KubernetesEvents } from './events.ts';
import { LeaseLeadership } from './lease.ts';
import { DatabaseLeadership, type RunningOperator, startOperator } from './operator.ts';
import { KubernetesSecrets } from './secrets.ts';

/** How long a deleted resource kept in PostgreSQL stays as a tombstone that watchers can still see. */
const tombstoneAgeMs = 60 * 60_000;

/** What the operator needs decided before anything starts. */
export interface OperatorSettings {
  /** What an operator in a cluster gives its engine pods; none without a cluster. */
  enginePods: EnginePoolSettings | undefined;
}

/** Checks the operator's settings (a ConfigError stops start-up before the database opens). */
export function operatorSettings(config: Config, cluster: Cluster | undefined): OperatorSettings {
  return { enginePods: cluster === undefined ? undefined : enginePoolSettings(config) };
}

export interface RunningOperatorRole extends RunningRole {
  operator: RunningOperator;
  /** The admission webhook's HTTPS address, when ADMISSION_TLS_DIR is set. */
  admissionUrl: string | undefined;
}

export async function startOperatorRole(
  context: RoleContext,
  settings: OperatorSettings,
): Promise<RunningOperatorRole> {
  const { config, pool, cluster } = context;
  const operatorLog = context.log.child({ component: 'operator' });
  const secrets = cluster === undefined ? undefined : new KubernetesSecrets(cluster.config);
  const store =
    cluster?.store ??
    new PostgresResourceStore(pool, {
      pool,
      url: context.databaseUrl,
      log: (message) => operatorLog.warn(message),
    });
  let purgeTimer: NodeJS.Timeout | undefined;
  if (store instanceof PostgresResourceStore) {
    // Deleted resources stay as tombstones for watchers for an hour, then go (a watch from before then lists again).
    const purge = () =>
      store
        .purgeTombstones(tombstoneAgeMs)
        .catch((error: unknown) => operatorLog.warn({ err: error }, 'tombstone purge failed'));
    purgeTimer = setInterval(purge, 10 * 60_000).unref();
  }
  const operator = startOperator({
    pool,
    store,
    namespace: config.resourceNamespace,
    registry: context.registry,
    log: operatorLog,
    leadership:
      cluster === undefined
        ? new DatabaseLeadership(context.databaseUrl)
        : new LeaseLeadership(cluster.config, { namespace: cluster.leaseNamespace, log: operatorLog }),
    ...(cluster === undefined ? {} : { events: new KubernetesEvents(cluster.config) }),
    webhooks: {
      secretsKey: context.keys.webhookSecrets,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
      ...(secrets === undefined ? {} : { secrets }),
    },
    engines: {
      carrierSecretsKey: context.keys.carrierSecrets,
      ...(secrets === undefined ? {} : { secrets }),
      ...(cluster === undefined || settings.enginePods === undefined
        ? {}
        : { cluster: { children: new KubernetesEngineChildren(cluster.config), pool: settings.enginePods } }),
    },
  });
  const stop = async () => clearInterval(purgeTimer);
  let admission: FastifyInstance | undefined;
  const close = async () => {
    await Promise.all([operator.close(), admission?.close()]);
  };
  // The admission webhook on a listener of its own, over HTTPS (Kubernetes calls webhooks over TLS only), when the
  // operator has a certificate; never on the API's port, where it would answer anyone about any workspace's queues.
  if (config.admission.tlsDir !== undefined) {
    try {
      const [cert, key] = await Promise.all([
        readFile(path.join(config.admission.tlsDir, 'tls.crt')),
        readFile(path.join(config.admission.tlsDir, 'tls.key')),
      ]);
      admission = admissionServer(pool, { cert, key }, config.bodyLimit);
      await admission.listen({ port: config.admission.port, host: config.host });
    } catch (error) {
      await stop();
      await close();
      throw error;
    }
  }
  return {
    operator,
    admissionUrl:
      admission === undefined ? undefined : `https://localhost:${(admission.server.address() as AddressInfo).port}`,
    stop,
    close,
  };
}
