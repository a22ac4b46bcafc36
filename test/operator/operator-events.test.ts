/**
 * The operator's Kubernetes Events (operator/events.ts): one per condition whose status or reason changed, a Warning
 * when it turned False; nothing when only the message or the time moved. And where the resources live
 * (RESOURCE_STORE): PostgreSQL outside a pod unless told, a clear error for an unknown value.
 */
import test from 'ava';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { clusterOf } from '../../core/resources/cluster.ts';
import type { Resource } from '../../core/resources/store.ts';
import { conditionEvents } from '../../operator/events.ts';

function plan(conditions: Array<{ type: string; status: string; reason: string; message: string }>): Resource {
  return {
    apiVersion: 'switchboard.dev/v1alpha1',
    kind: 'RoutingPlan',
    metadata: {
      name: 'front-desk',
      namespace: 'switchboard',
      uid: 'u1',
      resourceVersion: '1',
      generation: 1,
      labels: {},
      finalizers: [],
      creationTimestamp: '2026-11-23T00:00:00Z',
    },
    spec: {},
    status: { conditions: conditions.map((c) => ({ ...c, observedGeneration: 1, lastTransitionTime: 'x' })) },
  };
}

test('a condition that appears or changes status or reason is an event; a Warning when False', (t) => {
  const before = plan([
    { type: 'Valid', status: 'True', reason: 'Validated', message: 'valid' },
    { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'ok' },
  ]);
  const after = plan([
    { type: 'Valid', status: 'False', reason: 'InvalidDefinition', message: 'the definition has 1 problem' },
    { type: 'Ready', status: 'True', reason: 'Reconciled', message: 'ok, said differently' },
    { type: 'Published', status: 'True', reason: 'Published', message: 'version 2 is published' },
  ]);
  t.deepEqual(conditionEvents(before, after), [
    { type: 'Warning', reason: 'InvalidDefinition', message: 'Valid=False: the definition has 1 problem' },
    { type: 'Normal', reason: 'Published', message: 'Published=True: version 2 is published' },
  ]);
  t.deepEqual(conditionEvents(after, after), [], 'no change, no event');
  t.is(conditionEvents(undefined, after).length, 3, 'a resource seen for the first time: each condition');
  t.deepEqual(conditionEvents(before, plan([])), [], 'conditions that go say nothing');
});

test('RESOURCE_STORE: PostgreSQL outside a pod unless told; unknown values refused', (t) => {
  t.is(clusterOf(loadConfig({}), {}), undefined);
  t.is(clusterOf(loadConfig({ RESOURCE_STORE: 'postgres' }), { KUBERNETES_SERVICE_HOST: '10.0.0.1' }), undefined);
  t.throws(() => loadConfig({ RESOURCE_STORE: 'etcd' }), { instanceOf: ConfigError, message: /RESOURCE_STORE/ });
  t.throws(() => loadConfig({ ENGINE_DATABASE_SECRET: 'no-key' }), {
    instanceOf: ConfigError,
    message: /ENGINE_DATABASE_SECRET must be <secret name>\/<key>/,
  });
  t.deepEqual(loadConfig({ ENGINE_DATABASE_SECRET: 'db/url' }).kubernetes.engineDatabaseSecret, {
    name: 'db',
    key: 'url',
  });
  // Told to use a cluster where none is configured: a clear error, not a silent PostgreSQL.
  t.throws(() => clusterOf(loadConfig({ RESOURCE_STORE: 'kubernetes', KUBECONFIG: '/nonexistent/config' }), {}), {
    instanceOf: ConfigError,
    message: /no kubeconfig at \/nonexistent\/config/,
  });
});
