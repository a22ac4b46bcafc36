/**
 * The `EnginePool` reconciler (docs/kubernetes.md, Engine pools): an engine pool's carriers go to PostgreSQL (the
 * engines read them from there), and in a cluster its children (engine-pool.ts's builders) are applied with
 * server-side apply and pruned. The status has `readyReplicas` and a `Ready` condition: true once the Deployment has
 * rolled out the newest spec with every replica ready. Without a cluster the engine runs in the service's own
 * process: only the carriers apply, and `Ready` says so.
 *
 * A finalizer removes the pool's carriers when the EnginePool goes; its children go with it by their owner references.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import type pg from 'pg';
import {
  addCarrier,
  CarrierInputError,
  removeAllEngineCarriers,
  removeEngineCarriers,
} from '../core/carriers/carriers.ts';
import { inTransaction } from '../core/database.ts';
import { EnginePoolSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import type { ReconcileResult } from './controller.ts';
import type { EngineChildren } from './engine-children.ts';
import type { EnginePoolSettings } from './engine-pod-settings.ts';
import { enginePool, EnginePoolError, type EngineResource } from './engine-pool.ts';
import { specCheck } from './resources.ts';
import { type ConditionInput, conditions, keepFinalizer, ready, writeStatus } from './status.ts';
import type { SecretSource } from './webhook-endpoints.ts';

export const engineFinalizer = 'switchboard.dev/engine-carriers';

const checkSpec = specCheck(EnginePoolSpec);

/** How soon a pool still rolling out is looked at again even if its Deployment's watch says nothing. */
const rolloutRecheckMs = 30_000;

export interface EngineSettings {
  /** Seals carrier passwords (SigningKeys.carrierSecrets). */
  carrierSecretsKey: Uint8Array;
  /** The cluster's children and the pods' settings; none without a cluster. */
  cluster?: { children: EngineChildren; pool: EnginePoolSettings };
  /** Where `credentialsSecretRef`s are read (a cluster's Secrets). */
  secrets?: SecretSource;
}

/** The carriers' owner in the `carriers` table. */
const ownerOf = (engine: { metadata: { namespace: string; name: string } }) =>
  `${engine.metadata.namespace}/${engine.metadata.name}`;

/** Writes the spec's carriers and removes the pool's others; a problem is the `Ready=False` to report. */
async function writeCarriers(
  pool: pg.Pool,
  engine: EngineResource,
  settings: EngineSettings,
): Promise<ConditionInput | undefined> {
  const carriers = engine.spec.carriers ?? [];
  const credentials = new Map<string, { username: string; password: string }>();
  for (const carrier of carriers) {
    const ref = carrier.credentialsSecretRef;
    if (ref === undefined) continue;
    if (settings.secrets === undefined) {
      return ready('False', 'SecretsUnavailable', `carrier ${carrier.name}: credentialsSecretRef needs a cluster`);
    }
    const namespace = engine.metadata.namespace;
    const [username, password] = await Promise.all([
      settings.secrets.read(namespace, ref.name, 'username'),
      settings.secrets.read(namespace, ref.name, 'password'),
    ]);
    if (username === undefined || password === undefined) {
      return ready('False', 'SecretNotFound', `Secret ${ref.name} needs the keys username and password`);
    }
    credentials.set(carrier.name, { username, password });
  }
  try {
    await inTransaction(pool, async (db) => {
      for (const carrier of carriers) {
        await addCarrier(db, settings.carrierSecretsKey, {
          name: carrier.name,
          address: carrier.address,
          ...(carrier.port === undefined ? {} : { port: carrier.port }),
          ...(carrier.transport === undefined ? {} : { transport: carrier.transport }),
          ...(carrier.mediaNetworks === undefined ? {} : { mediaNetworks: carrier.mediaNetworks }),
          ...credentials.get(carrier.name),
          engine: ownerOf(engine),
        });
      }
      await removeEngineCarriers(
        db,
        ownerOf(engine),
        carriers.map((carrier) => carrier.name),
      );
    });
  } catch (error) {
    if (error instanceof CarrierInputError) return ready('False', 'InvalidCarrier', error.message);
    throw error;
  }
  return undefined;
}

export function engineReconciler(
  pool: pg.Pool,
  store: ResourceStore,
  settings: EngineSettings,
  clock: Clock = systemClock,
) {
  return async (_name: string, resource: Resource | undefined): Promise<ReconcileResult> => {
    if (resource === undefined) return;
    if (resource.metadata.deletionTimestamp !== undefined) {
      if (!resource.metadata.finalizers.includes(engineFinalizer)) return;
      await removeAllEngineCarriers(pool, ownerOf(resource));
      await keepFinalizer(store, resource, engineFinalizer, false);
      return;
    }
    const fresh = (await keepFinalizer(store, resource, engineFinalizer, true)) ?? resource;
    const engine = fresh as unknown as EngineResource;
    const invalid = checkSpec(engine.spec);
    let condition: ConditionInput;
    let readyReplicas: number | undefined;
    let requeueAfterMs: number | undefined;
    if (invalid !== undefined) {
      condition = ready('False', 'InvalidSpec', invalid);
    } else {
      condition =
        (await writeCarriers(pool, engine, settings)) ??
        ready('True', 'Standalone', 'the engine runs in the service’s own process; carriers are recorded');
      const cluster = settings.cluster;
      if (condition.status === 'True' && cluster !== undefined) {
        try {
          const children = enginePool(engine, cluster.pool);
          for (const child of children) await cluster.children.apply(child);
          await cluster.children.prune(engine, children);
          const deployment = children.find((child) => child.kind === 'Deployment')?.metadata?.name ?? '';
          readyReplicas = await cluster.children.readyReplicas(engine, deployment);
          const wanted = engine.spec.replicas;
          condition =
            readyReplicas !== undefined && readyReplicas >= wanted
              ? ready('True', 'RolledOut', `${readyReplicas} of ${wanted} engine pods ready`)
              : ready('False', 'RollingOut', `${readyReplicas ?? 0} of ${wanted} engine pods ready`);
          if (condition.status === 'False') requeueAfterMs = rolloutRecheckMs;
        } catch (error) {
          if (!(error instanceof EnginePoolError)) throw error;
          condition = ready('False', 'InvalidPool', error.message);
        }
      } else if (condition.status === 'False') {
        requeueAfterMs = 30_000; // a Secret may come
      }
    }
    const generation = engine.metadata.generation;
    await writeStatus(store, fresh, {
      observedGeneration: generation,
      ...(readyReplicas === undefined ? {} : { readyReplicas }),
      conditions: conditions(fresh.status.conditions, [condition], generation, clock.now()),
    });
    return requeueAfterMs === undefined ? undefined : { requeueAfterMs };
  };
}
