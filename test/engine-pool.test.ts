/**
 * The children of an `Engine` resource (operator/engine-pool.ts, docs/kubernetes.md): valid objects by Kubernetes'
 * own schemas (kubernetes-models) with no field Kubernetes does not know (the client's type map), owned by the Engine
 * and labelled as its pool, with config.ts's defaults where the spec is silent, the same for the same input, rolling
 * the pods when their settings change, and shaped for the host network or a load balancer.
 */
import * as k8s from '@kubernetes/client-node';
import test from 'ava';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { loadConfig, settings as configSettings } from '../core/config.ts';
import type { EngineSpec } from '../core/resources/kinds.ts';
import {
  configHashAnnotation,
  type EnginePoolSettings,
  type EngineResource,
  EnginePoolError,
  engineConfigMap,
  engineDeployment,
  enginePodDisruptionBudget,
  enginePool,
  engineService,
  engineSipService,
} from '../operator/engine-pool.ts';

type Json = Record<string, unknown>;

const uid = '6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';

function engine(spec: Partial<EngineSpec> = {}, name = 'front-desk'): EngineResource {
  return {
    apiVersion: 'switchboard.dev/v1alpha1',
    kind: 'Engine',
    metadata: {
      name,
      namespace: 'telephony',
      uid,
      resourceVersion: '41',
      generation: 3,
      labels: {},
      finalizers: [],
      creationTimestamp: '2026-11-02T10:00:00Z',
    },
    spec: { replicas: 2, image: 'ghcr.io/example/switchboard:1.4.0', ...spec },
    status: {},
  };
}

const plainSettings: EnginePoolSettings = { databaseSecret: { name: 'switchboard-db', key: 'url' } };
const fullSettings: EnginePoolSettings = {
  databaseSecret: { name: 'pg-app', key: 'uri' },
  logLevel: 'debug',
  imagePullPolicy: 'IfNotPresent',
  serviceAccountName: 'switchboard-engine',
  engineHttpPort: 9181,
  sipServiceAnnotations: { 'metallb.universe.tf/address-pool': 'sip' },
};
const fullSpec: Partial<EngineSpec> = {
  replicas: 3,
  sipPort: 5080,
  rtpPortMin: 30000,
  rtpPortMax: 30999,
  resources: { requests: { cpu: '500m', memory: '256Mi' }, limits: { memory: '1Gi' } },
  carriers: [{ name: 'acme-trunk', address: '198.51.100.0/24', port: 5061, transport: 'tcp' }],
};

/** Host network and load balancer pools, with and without the optional fields. */
const pools: Array<{ label: string; engine: EngineResource; settings: EnginePoolSettings }> = [
  { label: 'host network, spec minimal', engine: engine(), settings: plainSettings },
  { label: 'host network, spec full', engine: engine({ ...fullSpec, hostNetwork: true }), settings: fullSettings },
  { label: 'load balancer, spec minimal', engine: engine({ hostNetwork: false }), settings: plainSettings },
  {
    label: 'load balancer, spec full',
    engine: engine({ ...fullSpec, hostNetwork: false, resources: { limits: { cpu: '2' } } }),
    settings: fullSettings,
  },
];

/** kubernetes-models' class for each kind: `validate()` throws on an object its schema refuses. */
function validate(object: Json): void {
  const data = object as never;
  switch (object.kind) {
    case 'ConfigMap':
      return new ConfigMap(data).validate();
    case 'Deployment':
      return new Deployment(data).validate();
    case 'Service':
      return new Service(data).validate();
    case 'PodDisruptionBudget':
      return new PodDisruptionBudget(data).validate();
    default:
      throw new Error(`no model for ${String(object.kind)}`);
  }
}

interface Model {
  getAttributeTypeMap(): Array<{ baseName: string; type: string }>;
}

/**
 * The paths of fields Kubernetes does not know, by @kubernetes/client-node's type map of the API (kubernetes-models'
 * schemas let unknown fields through, and the API server drops them).
 */
function unknownFields(value: unknown, type: string, path: string): string[] {
  if (value === null || typeof value !== 'object') return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array) return (value as unknown[]).flatMap((item, index) => unknownFields(item, array[1]!, `${path}[${index}]`));
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return Object.entries(value).flatMap(([key, item]) => unknownFields(item, map[1]!, `${path}.${key}`));
  const model = (k8s as unknown as Record<string, Model | undefined>)[type];
  if (model?.getAttributeTypeMap === undefined) return [`${path} (${type} is not a model)`];
  const attributes = model.getAttributeTypeMap();
  return Object.entries(value).flatMap(([key, item]) => {
    const attribute = attributes.find((candidate) => candidate.baseName === key);
    return attribute === undefined ? [`${path}.${key}`] : unknownFields(item, attribute.type, `${path}.${key}`);
  });
}

function configDefault(name: string): string {
  const setting = configSettings.find((candidate) => candidate.name === name);
  if (setting === undefined) throw new Error(`${name} is not a setting of core/config.ts`);
  return setting.default;
}

function podSpec(deployment: k8s.V1Deployment): k8s.V1PodSpec {
  const spec = deployment.spec?.template.spec;
  if (spec === undefined) throw new Error('the Deployment has no pod spec');
  return spec;
}

function container(deployment: k8s.V1Deployment): k8s.V1Container {
  const [only, ...others] = podSpec(deployment).containers;
  if (only === undefined || others.length > 0) throw new Error('the pod should have one container');
  return only;
}

function envVar(deployment: k8s.V1Deployment, name: string): k8s.V1EnvVar | undefined {
  return container(deployment).env?.find((entry) => entry.name === name);
}

function configHash(deployment: k8s.V1Deployment): string | undefined {
  return deployment.spec?.template.metadata?.annotations?.[configHashAnnotation];
}

const expectedLabels = {
  'app.kubernetes.io/name': 'switchboard',
  'app.kubernetes.io/component': 'engine',
  'app.kubernetes.io/instance': 'front-desk',
  'app.kubernetes.io/managed-by': 'switchboard-operator',
};

test('every child of host network and load balancer pools is valid by kubernetes-models and has only known fields', (t) => {
  for (const pool of pools) {
    const children = enginePool(pool.engine, pool.settings);
    const hostNetwork = pool.engine.spec.hostNetwork ?? true;
    t.deepEqual(
      children.map((child) => child.kind),
      hostNetwork
        ? ['ConfigMap', 'Deployment', 'Service', 'PodDisruptionBudget']
        : ['ConfigMap', 'Deployment', 'Service', 'Service', 'PodDisruptionBudget'],
      pool.label,
    );
    for (const child of children) {
      t.notThrows(() => validate(child as Json), `${pool.label}: ${child.kind} ${child.metadata?.name}`);
      t.deepEqual(unknownFields(child, `V1${child.kind}`, child.kind ?? ''), [], `${pool.label}: ${child.kind}`);
    }
  }
});

test('the checks refuse a child with a field of the wrong type or a field Kubernetes does not know', (t) => {
  const [configMap, deployment, service, budget] = enginePool(engine(), plainSettings).map((child) =>
    structuredClone(child as Json),
  ) as [Json, Json, Json, Json];

  const replicasAsText = structuredClone(deployment) as { spec: { replicas: unknown } };
  replicasAsText.spec.replicas = '2';
  t.throws(() => validate(replicasAsText as Json), { message: /replicas must be integer/ });

  const portAsText = structuredClone(service) as { spec: { ports: Array<{ port: unknown }> } };
  portAsText.spec.ports[0]!.port = '8081';
  t.throws(() => validate(portAsText as Json), { message: /port must be integer/ });

  const numberInData = structuredClone(configMap) as { data: Record<string, unknown> };
  numberInData.data.SIP_PORT = 5060;
  t.throws(() => validate(numberInData as Json), { message: /SIP_PORT must be string/ });

  const budgetAsList = structuredClone(budget) as { spec: { selector: unknown } };
  budgetAsList.spec.selector = ['app.kubernetes.io/component=engine'];
  t.throws(() => validate(budgetAsList as Json), { message: /selector must be object/ });

  const misspelled = structuredClone(deployment) as { spec: { template: { spec: Json } } };
  misspelled.spec.template.spec.hostnetwork = true;
  t.notThrows(() => validate(misspelled as Json), 'kubernetes-models lets an unknown field through');
  t.deepEqual(unknownFields(misspelled, 'V1Deployment', 'Deployment'), ['Deployment.spec.template.spec.hostnetwork']);
});

test('every child is owned by the Engine, in its namespace, with the pool labels; the selectors pick the pool’s pods', (t) => {
  for (const pool of pools) {
    const children = enginePool(pool.engine, pool.settings);
    const deployment = children.find((child) => child.kind === 'Deployment') as k8s.V1Deployment;
    const podLabels = deployment.spec?.template.metadata?.labels;
    t.deepEqual(podLabels, expectedLabels, pool.label);
    t.deepEqual(deployment.spec?.selector.matchLabels, podLabels, `${pool.label}: the Deployment selects its pods`);
    for (const child of children) {
      const label = `${pool.label}: ${child.kind} ${child.metadata?.name}`;
      t.regex(child.metadata?.name ?? '', /^front-desk-engine(-sip)?$/, label);
      t.is(child.metadata?.namespace, 'telephony', label);
      t.deepEqual(child.metadata?.labels, expectedLabels, label);
      t.deepEqual(
        child.metadata?.ownerReferences,
        [
          {
            apiVersion: 'switchboard.dev/v1alpha1',
            kind: 'Engine',
            name: 'front-desk',
            uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
        label,
      );
      if (child.kind === 'Service') t.deepEqual((child as k8s.V1Service).spec?.selector, podLabels, label);
      if (child.kind === 'PodDisruptionBudget') {
        t.deepEqual((child as k8s.V1PodDisruptionBudget).spec?.selector?.matchLabels, podLabels, label);
      }
    }
  }
});

test('a pool of another name is labelled and named after it', (t) => {
  for (const child of enginePool(engine({}, 'night-shift'), plainSettings)) {
    t.is(child.metadata?.labels?.['app.kubernetes.io/instance'], 'night-shift');
    t.is(child.metadata?.ownerReferences?.[0]?.name, 'night-shift');
    t.true(child.metadata?.name?.startsWith('night-shift-engine'));
  }
});

test('the ConfigMap takes core/config.ts defaults where the spec is silent, and the engine accepts it', (t) => {
  const configMap = engineConfigMap(engine(), plainSettings);
  t.is(configMap.metadata?.name, 'front-desk-engine');
  t.deepEqual(configMap.data, {
    HOST: '0.0.0.0',
    SIP_HOST: '0.0.0.0',
    SIP_PORT: configDefault('SIP_PORT'),
    RTP_HOST: '0.0.0.0',
    RTP_PORT_MIN: configDefault('RTP_PORT_MIN'),
    RTP_PORT_MAX: configDefault('RTP_PORT_MAX'),
    LOG_LEVEL: configDefault('LOG_LEVEL'),
    ENGINE_HTTP_PORT: configDefault('ENGINE_HTTP_PORT'),
  });
  const deployment = engineDeployment(engine(), plainSettings);
  t.deepEqual(
    container(deployment).ports?.map((port) => [port.name, port.containerPort, port.protocol]),
    [
      ['sip-udp', Number(configDefault('SIP_PORT')), 'UDP'],
      ['sip-tcp', Number(configDefault('SIP_PORT')), 'TCP'],
      ['http', Number(configDefault('ENGINE_HTTP_PORT')), 'TCP'],
    ],
  );
  t.is(engineService(engine(), plainSettings).spec?.ports?.[0]?.port, Number(configDefault('ENGINE_HTTP_PORT')));

  // What the pod's environment gives the engine: its ConfigMap, plus what the pod spec sets from elsewhere.
  const config = loadConfig({
    ...configMap.data,
    ADVERTISED_HOST: '203.0.113.7',
    ENGINE_ID: 'front-desk-engine-7d9f8-abcde',
    DATABASE_URL: 'postgres://switchboard@db/switchboard',
  });
  t.deepEqual(config.sip, { host: '0.0.0.0', port: 5060, advertisedHost: '203.0.113.7' });
  t.deepEqual(config.rtp, { host: '0.0.0.0', portMin: 20000, portMax: 20999 });
  t.is(config.host, '0.0.0.0');
  t.is(config.engineHttpPort, 8081);
});

test('the spec’s and the operator settings’ values win over the defaults', (t) => {
  const pool = engine(fullSpec);
  const configMap = engineConfigMap(pool, fullSettings);
  t.like(configMap.data, {
    SIP_PORT: '5080',
    RTP_PORT_MIN: '30000',
    RTP_PORT_MAX: '30999',
    LOG_LEVEL: 'debug',
    ENGINE_HTTP_PORT: '9181',
  });
  const deployment = engineDeployment(pool, fullSettings);
  t.is(deployment.spec?.replicas, 3);
  t.deepEqual(
    container(deployment).ports?.map((port) => [port.name, port.containerPort]),
    [
      ['sip-udp', 5080],
      ['sip-tcp', 5080],
      ['http', 9181],
    ],
  );
  t.deepEqual(container(deployment).resources, {
    requests: { cpu: '500m', memory: '256Mi' },
    limits: { memory: '1Gi' },
  });
  t.is(container(deployment).image, 'ghcr.io/example/switchboard:1.4.0');
  t.is(container(deployment).imagePullPolicy, 'IfNotPresent');
  t.is(podSpec(deployment).serviceAccountName, 'switchboard-engine');
  t.deepEqual(envVar(deployment, 'DATABASE_URL')?.valueFrom, { secretKeyRef: { name: 'pg-app', key: 'uri' } });
  t.is(engineService(pool, fullSettings).spec?.ports?.[0]?.port, 9181);

  const minimal = engineDeployment(engine(), plainSettings);
  t.false('resources' in container(minimal), 'no resources when the spec gives none');
  t.false('imagePullPolicy' in container(minimal));
  t.false('serviceAccountName' in podSpec(minimal));
});

test('the engine container runs `switchboard engine` on its ConfigMap, the database Secret and its pod’s name', (t) => {
  const deployment = engineDeployment(engine(), plainSettings);
  const engineContainer = container(deployment);
  t.is(engineContainer.name, 'engine');
  t.deepEqual(engineContainer.command, ['node', 'bin/switchboard.js', 'engine']);
  t.deepEqual(engineContainer.envFrom, [
    { configMapRef: { name: engineConfigMap(engine(), plainSettings).metadata?.name } },
  ]);
  t.deepEqual(envVar(deployment, 'DATABASE_URL')?.valueFrom, { secretKeyRef: { name: 'switchboard-db', key: 'url' } });
  t.deepEqual(envVar(deployment, 'ENGINE_ID')?.valueFrom, { fieldRef: { fieldPath: 'metadata.name' } });
  // Probes go to the HTTP port the ConfigMap gives the engine, by the container port's name.
  t.deepEqual(engineContainer.readinessProbe?.httpGet, { path: '/readyz', port: 'http' });
  t.deepEqual(engineContainer.livenessProbe?.httpGet, { path: '/healthz', port: 'http' });
  t.is(engineContainer.ports?.find((port) => port.name === 'http')?.containerPort, 8081);
  // The RTP range is bound on demand, never listed as container ports.
  t.false(engineContainer.ports?.some((port) => (port.containerPort ?? 0) >= 20000) ?? true);
  // Calls get longer to end than the engine's own shutdown limit.
  t.true((podSpec(deployment).terminationGracePeriodSeconds ?? 0) >= 60);
  t.true(
    (podSpec(deployment).terminationGracePeriodSeconds ?? 0) * 1000 > Number(configDefault('SHUTDOWN_TIMEOUT_MS')),
  );
  // Carriers go to PostgreSQL, not into any child.
  const withCarriers = JSON.stringify(enginePool(engine(fullSpec), fullSettings));
  t.false(withCarriers.includes('acme-trunk'));
  t.false(withCarriers.includes('198.51.100.0'));
});

test('the PodDisruptionBudget lets one pod of the pool go at a time', (t) => {
  const budget = enginePodDisruptionBudget(engine());
  t.is(budget.apiVersion, 'policy/v1');
  t.is(budget.metadata?.name, 'front-desk-engine');
  t.is(budget.spec?.maxUnavailable, 1);
  t.false('minAvailable' in (budget.spec ?? {}));
});

test('the same Engine gives the same children; only its name, namespace, uid and spec count', (t) => {
  for (const pool of pools) {
    t.deepEqual(enginePool(pool.engine, pool.settings), enginePool(structuredClone(pool.engine), pool.settings));
    const rewritten = structuredClone(pool.engine);
    rewritten.metadata.resourceVersion = '97';
    rewritten.metadata.generation = 8;
    rewritten.metadata.creationTimestamp = '2026-11-03T08:30:00Z';
    rewritten.status = { readyReplicas: 1, observedGeneration: 7 };
    t.deepEqual(enginePool(rewritten, pool.settings), enginePool(pool.engine, pool.settings), pool.label);
  }
});

test('a change of the ConfigMap changes the pod template’s config hash; replicas and image do not', (t) => {
  const hashOf = (spec: Partial<EngineSpec>, settings = plainSettings) =>
    configHash(engineDeployment(engine(spec), settings));
  const base = hashOf({});
  t.regex(base ?? '', /^[0-9a-f]{64}$/);
  t.is(hashOf({}), base);
  t.not(hashOf({ rtpPortMax: 21999 }), base);
  t.not(hashOf({ sipPort: 5070 }), base);
  t.not(hashOf({}, { ...plainSettings, logLevel: 'warn' }), base);
  t.not(hashOf({ rtpPortMax: 21999 }), hashOf({ rtpPortMax: 22999 }));
  t.is(hashOf({ replicas: 7 }), base);
  t.is(hashOf({ image: 'ghcr.io/example/switchboard:1.5.0' }), base);
  // A spec value equal to the default is the same configuration.
  t.is(hashOf({ rtpPortMax: Number(configDefault('RTP_PORT_MAX')) }), base);
});

test('on the host network: the node’s address, one pod per node, no surge, no SIP Service', (t) => {
  for (const pool of [engine(), engine({ hostNetwork: true })]) {
    const deployment = engineDeployment(pool, plainSettings);
    const spec = podSpec(deployment);
    t.true(spec.hostNetwork);
    t.is(spec.dnsPolicy, 'ClusterFirstWithHostNet');
    t.deepEqual(envVar(deployment, 'ADVERTISED_HOST')?.valueFrom, { fieldRef: { fieldPath: 'status.hostIP' } });
    t.deepEqual(deployment.spec?.strategy, {
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 0, maxUnavailable: 1 },
    });
    t.deepEqual(spec.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution, [
      { labelSelector: { matchLabels: expectedLabels }, topologyKey: 'kubernetes.io/hostname' },
    ]);
    for (const port of container(deployment).ports ?? []) t.is(port.hostPort, port.containerPort, port.name);
    t.is(engineSipService(pool, plainSettings), undefined);
    t.false(enginePool(pool, plainSettings).some((child) => child.metadata?.name === 'front-desk-engine-sip'));
    // The cluster Service carries only the HTTP port.
    t.deepEqual(
      engineService(pool, plainSettings).spec?.ports?.map((port) => [port.name, port.port, port.protocol]),
      [['http', 8081, 'TCP']],
    );
  }
});

test('off the host network: the pod’s address, surge allowed, SIP on UDP and TCP through a LoadBalancer', (t) => {
  const pool = engine({ hostNetwork: false, sipPort: 5070 });
  const deployment = engineDeployment(pool, fullSettings);
  const spec = podSpec(deployment);
  t.false(spec.hostNetwork);
  t.not(spec.dnsPolicy, 'ClusterFirstWithHostNet');
  t.is(spec.affinity, undefined);
  t.deepEqual(envVar(deployment, 'ADVERTISED_HOST')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } });
  t.is(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable, 0);
  t.is(deployment.spec?.strategy?.rollingUpdate?.maxSurge, 1);
  for (const port of container(deployment).ports ?? []) t.is(port.hostPort, undefined, port.name);

  const sip = engineSipService(pool, fullSettings);
  t.is(sip?.metadata?.name, 'front-desk-engine-sip');
  t.is(sip?.spec?.type, 'LoadBalancer');
  t.is(sip?.spec?.externalTrafficPolicy, 'Local');
  t.deepEqual(sip?.metadata?.annotations, { 'metallb.universe.tf/address-pool': 'sip' });
  t.deepEqual(
    sip?.spec?.ports?.map((port) => [port.protocol, port.port, port.targetPort]),
    [
      ['UDP', 5070, 'sip-udp'],
      ['TCP', 5070, 'sip-tcp'],
    ],
  );
  // Each target port is a container port of the same protocol.
  for (const port of sip?.spec?.ports ?? []) {
    const target = container(deployment).ports?.find((candidate) => candidate.name === port.targetPort);
    t.is(target?.protocol, port.protocol);
    t.is(target?.containerPort, 5070);
  }
  t.is(engineSipService(engine({ hostNetwork: false }), plainSettings)?.metadata?.annotations, undefined);
  t.deepEqual(
    enginePool(pool, fullSettings).find((child) => child.metadata?.name === 'front-desk-engine-sip'),
    sip,
  );
});

test('an Engine whose children could not be made is refused with the reason', (t) => {
  const refused = (pool: EngineResource, message: RegExp) => {
    t.throws(() => enginePool(pool, plainSettings), { instanceOf: EnginePoolError, message });
  };
  refused(engine({}, 'a'.repeat(53)), /at most 52 characters/);
  refused(engine({}, '1st-floor'), /start with a letter/);
  refused(engine({}, 'front.desk'), /lowercase letters, digits and '-'/);
  t.notThrows(() => enginePool(engine({}, 'a'.repeat(52)), plainSettings));
  // A bound given alone that passes the CRD's rule but leaves config.ts's other default on the wrong side.
  refused(engine({ rtpPortMin: 21000 }), /RTP range 21000-20999 is empty/);
  refused(engine({ rtpPortMin: 30000, rtpPortMax: 30000 }), /RTP range 30000-30000 is empty/);
  refused(engine({ sipPort: 20500 }), /inside the RTP range/);
  refused(engine({ sipPort: 8081 }), /also the HTTP port/);
  t.throws(() => enginePodDisruptionBudget(engine({}, '1st-floor')), { instanceOf: EnginePoolError });
});
