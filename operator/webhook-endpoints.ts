/**
 * The `WebhookEndpoint` reconciler (docs/kubernetes.md): converges the endpoint's record to the resource with the
 * REST API's rules (an https URL on a public host unless private networks are allowed, at most 20 endpoints per
 * application). The signing secret comes from the Secret that `secretRef` names (in a cluster); without a cluster
 * there are no Secrets, so a resource without `secretRef` gets a generated secret (rotate it through the API to see
 * one) and one with `secretRef` waits, saying why. A finalizer deletes the record (and its delivery state) when the
 * resource goes.
 */
import { type Clock, systemClock } from '../core/clock.ts';
import type pg from 'pg';
import { inTransaction } from '../core/database.ts';
import { WebhookEndpointSpec } from '../core/resources/kinds.ts';
import type { Resource, ResourceStore } from '../core/resources/store.ts';
import { sealSecret } from '../core/sealing.ts';
import { newSigningSecret } from '../core/webhooks/secrets.ts';
import { checkWebhookUrl } from '../core/webhooks/url.ts';
import {
  deleteEndpointRecord,
  lockEndpointOwner,
  maxEndpointsPerApplication,
  recordEndpoint,
  roomForEndpoint,
} from '../core/webhooks/endpoints.ts';
import type { ReconcileResult } from './controller.ts';
import { changedSince, recordIdOf, specCheck, staleRequeueMs } from './resources.ts';
import { type ConditionInput, keepFinalizer, ready, writeReady } from './status.ts';

export const endpointFinalizer = 'switchboard.dev/webhook-endpoint-record';

const checkSpec = specCheck(WebhookEndpointSpec);

/** Where `secretRef`s are read: Kubernetes Secrets in a cluster; none without one. */
export interface SecretSource {
  read(namespace: string, name: string, key: string): Promise<string | undefined>;
}

export interface WebhookEndpointSettings {
  /** Seals signing secrets (SigningKeys.webhookSecrets). */
  secretsKey: Uint8Array;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS. */
  allowPrivateNetworks: boolean;
  secrets?: SecretSource;
}

async function converge(
  pool: pg.Pool,
  store: ResourceStore,
  resource: Resource,
  settings: WebhookEndpointSettings,
): Promise<ConditionInput | 'stale'> {
  const spec = resource.spec as WebhookEndpointSpec;
  const endpointId = recordIdOf(resource);
  const url = checkWebhookUrl(spec.url, { allowPrivateNetworks: settings.allowPrivateNetworks });
  if (!url.ok) return ready('False', 'InvalidUrl', `spec.url ${url.problem}`);
  let secret: string | undefined;
  if (spec.secretRef !== undefined) {
    const { name, key } = spec.secretRef;
    if (settings.secrets === undefined) {
      return ready('False', 'SecretsUnavailable', 'secretRef needs a cluster; without one, leave it out');
    }
    secret = await settings.secrets.read(resource.metadata.namespace, name, key);
    if (secret === undefined || !secret.startsWith('whsec_')) {
      return ready('False', 'SecretNotFound', `Secret ${name} has no key ${key} holding a whsec_ signing secret`);
    }
  }
  return inTransaction(pool, async (db) => {
    const owner = await lockEndpointOwner(db, endpointId);
    if (await changedSince(store, resource, db)) return 'stale';
    if (owner !== undefined && owner !== spec.applicationId) {
      return ready('False', 'IdTaken', `endpoint ${endpointId} belongs to another application`);
    }
    const room = owner === undefined ? await roomForEndpoint(db, spec.applicationId) : 'room';
    if (room === 'no_application') return ready('False', 'ApplicationNotFound', `no application ${spec.applicationId}`);
    if (room === 'full') {
      return ready('False', 'LimitExceeded', `the application has ${maxEndpointsPerApplication} endpoints already`);
    }
    const sealed = sealSecret(settings.secretsKey, secret ?? newSigningSecret());
    await recordEndpoint(
      db,
      endpointId,
      spec.applicationId,
      {
        url: url.url,
        eventTypes: spec.eventTypes ?? null,
        enabled: spec.enabled ?? true,
        description: spec.description ?? null,
        secret: sealed,
      },
      // A secret from a Secret replaces the stored one (a rotation done in the Secret); a generated one never does.
      secret !== undefined,
    );
    return ready('True', 'Reconciled', 'the record matches the resource');
  });
}

export function webhookEndpointReconciler(
  pool: pg.Pool,
  store: ResourceStore,
  settings: WebhookEndpointSettings,
  clock: Clock = systemClock,
) {
  return async (_name: string, resource: Resource | undefined): Promise<ReconcileResult> => {
    if (resource === undefined) return;
    if (resource.metadata.deletionTimestamp !== undefined) {
      if (!resource.metadata.finalizers.includes(endpointFinalizer)) return;
      await deleteEndpointRecord(pool, recordIdOf(resource), (resource.spec as WebhookEndpointSpec).applicationId);
      await keepFinalizer(store, resource, endpointFinalizer, false);
      return;
    }
    const fresh = (await keepFinalizer(store, resource, endpointFinalizer, true)) ?? resource;
    const invalid = checkSpec(fresh.spec);
    const outcome =
      invalid === undefined ? await converge(pool, store, fresh, settings) : ready('False', 'InvalidSpec', invalid);
    if (outcome === 'stale') return { requeueAfterMs: staleRequeueMs };
    await writeReady(store, fresh, outcome, clock.now());
    // Retried: a Secret, an application or room for the endpoint may come; a spec the schema refuses never will.
    return outcome.status === 'True' || invalid !== undefined ? undefined : { requeueAfterMs: 30_000 };
  };
}
