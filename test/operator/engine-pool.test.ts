/**
 * The children of an `EnginePool` resource (operator/engine-pool.ts, docs/kubernetes.md): valid objects by Kubernetes'
 * own schemas (kubernetes-models) with no field Kubernetes does not know (the client's type map), owned by the EnginePool
 * and labelled as its pool, with config.ts's defaults where the spec is silent, the same for the same input, rolling
 * the pods when their settings change, and shaped for the host network or a load balancer.
 *
 * The pods' settings are checked through the environment the kubelet would give the container
 * (test/helpers/kubelet.ts), never against the builder's own literals: every setting config.ts marks as read by the
 * engine is there or deliberately left to its default, and an engine started with exactly that environment signs a
 * webhook delivery with a secret the API sealed.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import * as k8s from '@kubernetes/client-node';
import test from 'ava';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { ConfigError, loadConfig, settings as configSettings } from '../../core/config.ts';
import { importNumbers } from '../../core/numbers/numbers.ts';
import { startRoles } from '../../app/roles.ts';
import type { EnginePoolSpec } from '../../core/resources/kinds.ts';
import { engineDataDir, type EnginePoolSettings, enginePoolSettings } from '../../operator/engine-pod-settings.ts';
import {
  configHashAnnotation,
  type EngineResource,
  EnginePoolError,
  engineConfigMap,
  engineDeployment,
  enginePodDisruptionBudget,
  enginePool,
  engineService,
  engineSipService,
} from '../../operator/engine-pool.ts';
import { freePort, freeUdpPort } from '../helpers/free-port.ts';
import { containerEnvironment, podOf } from '../helpers/kubelet.ts';
import { startService, workspaceWithUser } from '../helpers/service.ts';
import { type Received, Receiver } from '../helpers/webhook-receiver.ts';

type Json = Record<string, unknown>;

const uid = '6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b';

function engine(spec: Partial<EnginePoolSpec> = {}, name = 'front-desk'): EngineResource {
  return {
    apiVersion: 'switchboard.dev/v1alpha1',
    kind: 'EnginePool',
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
  passedOn: { LOG_LEVEL: 'debug' },
  imagePullPolicy: 'IfNotPresent',
  serviceAccountName: 'switchboard-engine',
  engineHttpPort: 9181,
  sipServiceAnnotations: { 'metallb.universe.tf/address-pool': 'sip' },
};
const fullSpec: Partial<EnginePoolSpec> = {
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

test('every child is owned by the EnginePool, in its namespace, with the pool labels; the selectors pick the pool’s pods', (t) => {
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
            kind: 'EnginePool',
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

// ---------------------------------------------------------------------------------------------------------------
// The pods' settings: config.ts's list of what the engine reads, and the environment the kubelet makes of the pool

/** A Secret as the API server stores it (values base64). */
function secretObject(name: string, data: Record<string, string>): k8s.V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'telephony' },
    type: 'Opaque',
    data: Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString('base64')])),
  };
}

const serviceSecret = 'a service secret of 32 characters or more, for the tests';
const databaseSecret = secretObject('switchboard-database', { url: 'postgres://switchboard@db.telephony/switchboard' });
const switchboardSecret = secretObject('switchboard-secret', { secret: serviceSecret });
const turnCredential = 'a TURN credential, for the tests';
const iceServers = [{ urls: 'turn:turn.telephony:3478', username: 'engine', credential: turnCredential }];
const iceServersSecret = secretObject('switchboard-ice', { iceServers: JSON.stringify(iceServers) });

/** An operator in a cluster, configured as the chart configures it, given every setting it passes on. */
const operatorEnv = {
  DATABASE_URL: 'postgres://operator@db.switchboard/switchboard',
  RESOURCE_STORE: 'kubernetes',
  SWITCHBOARD_SECRET: serviceSecret,
  ENGINE_DATABASE_SECRET: 'switchboard-database/url',
  ENGINE_SWITCHBOARD_SECRET: 'switchboard-secret/secret',
  ENGINE_ICE_SERVERS_SECRET: 'switchboard-ice/iceServers',
  LOG_LEVEL: 'warn',
  DATABASE_POOL_SIZE: '6',
  SHUTDOWN_TIMEOUT_MS: '45000',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  TTS_COMMAND: '/opt/voices/bin/say-wav',
  WEBRTC_MEDIA: 'libwebrtc',
  WEBHOOK_CONCURRENCY: '16',
  WEBHOOK_APPLICATION_CONCURRENCY: '6',
  WEBHOOK_ENDPOINT_CONCURRENCY: '3',
};

const engineRead = configSettings.filter((setting) => setting.readBy.includes('engine'));
const sourced = (from: string) =>
  engineRead
    .filter((setting) => setting.enginePod?.from === from)
    .map((setting) => setting.name)
    .sort();

/** The engine container's environment in a pod of the pool, as the kubelet resolves it. */
function podEnvironment(
  pool: EngineResource,
  settings: EnginePoolSettings,
  secrets: k8s.V1Secret[] = [databaseSecret, switchboardSecret, iceServersSecret],
  hostIP = '203.0.113.7',
) {
  const deployment = engineDeployment(pool, settings);
  const pod = podOf(deployment, {
    name: 'front-desk-engine-5d8c7f9b6-x2kqp',
    uid: randomUUID(),
    nodeName: 'node-1',
    hostIP,
    podIP: '10.244.1.7',
  });
  const env = containerEnvironment({ pod, configMaps: [engineConfigMap(pool, settings)], secrets }, 'engine');
  return { deployment, pod, env };
}

test('config.ts says which roles read each setting, and for each the engine reads how its pods get it', (t) => {
  for (const setting of configSettings) {
    t.true(setting.readBy.length > 0, setting.name);
    t.is(
      setting.enginePod !== undefined,
      setting.readBy.includes('engine'),
      `${setting.name}: enginePod iff the engine reads it`,
    );
    if (setting.enginePod?.from === 'default') t.regex(setting.enginePod.reason, /\w+ \w+ \w+/, setting.name);
  }
  // The list holds what this builder relies on.
  t.deepEqual(sourced('secret'), ['DATABASE_URL', 'ICE_SERVERS', 'SWITCHBOARD_SECRET']);
  t.deepEqual(sourced('pod'), ['ADVERTISED_HOST', 'ENGINE_ID']);
  t.true(sourced('operator').includes('WEBHOOK_ALLOW_PRIVATE_NETWORKS'));
});

test('every setting the engine reads reaches its pods as config.ts says, or is left to its default for the reason given', (t) => {
  const operator = loadConfig(operatorEnv);
  t.deepEqual(
    Object.keys(operator.forEnginePods).sort(),
    sourced('operator'),
    'this operator has each one it passes on',
  );
  const settings = enginePoolSettings(operator);
  const defaults = loadConfig({});
  for (const hostNetwork of [true, false]) {
    const label = hostNetwork ? 'host network' : 'load balancer';
    const pool = engine({ hostNetwork, sipPort: 5070, rtpPortMin: 30000, rtpPortMax: 30999 });
    const { deployment, pod, env } = podEnvironment(pool, settings);
    // Exactly the engine's settings (and what the kubelet gives every container), none left to a default.
    t.deepEqual(
      Object.keys(env)
        .filter((name) => !name.startsWith('KUBERNETES_'))
        .sort(),
      engineRead
        .filter((setting) => setting.enginePod?.from !== 'default')
        .map((setting) => setting.name)
        .sort(),
      label,
    );
    for (const name of sourced('operator')) t.is(env[name], operatorEnv[name as keyof typeof operatorEnv], name);

    // What the engine makes of it.
    const config = loadConfig(env);
    t.is(config.secret, operator.secret, `${label}: the operator’s SWITCHBOARD_SECRET, from its Secret`);
    t.is(config.databaseUrl, 'postgres://switchboard@db.telephony/switchboard', 'DATABASE_URL from its Secret');
    t.deepEqual(config.iceServers, iceServers, 'ICE_SERVERS from its Secret');
    t.is(config.webhookAllowPrivateNetworks, true);
    t.is(config.logLevel, 'warn');
    t.is(config.poolSize, 6);
    t.is(config.shutdownTimeoutMs, 45000);
    t.is(config.ttsCommand, '/opt/voices/bin/say-wav');
    t.is(config.webhookConcurrency, 16);
    t.deepEqual(config.webhookShares, { application: 6, endpoint: 3 });
    t.deepEqual(config.sip, {
      host: '0.0.0.0',
      port: 5070,
      advertisedHost: hostNetwork ? '203.0.113.7' : '10.244.1.7',
    });
    t.deepEqual(config.rtp, { host: '0.0.0.0', portMin: 30000, portMax: 30999 });
    t.is(config.host, '0.0.0.0');
    t.is(config.engineHttpPort, defaults.engineHttpPort);
    t.is(config.engineId, pod.metadata?.name);
    // The data folder (prompt cache, voicemail) is a volume of the pod, writable whatever the image's user.
    t.is(config.dataDir, engineDataDir);
    t.deepEqual(container(deployment).volumeMounts, [{ name: 'data', mountPath: engineDataDir }]);
    t.deepEqual(podSpec(deployment).volumes, [{ name: 'data', emptyDir: {} }]);
    // Left to the default: the engine's own.
    t.is(config.bodyLimit, defaults.bodyLimit);
    t.is(config.embeddedPostgresPort, defaults.embeddedPostgresPort);
    // The kubelet stops at a Secret that is not there, as it would keep the pod from starting.
    t.throws(() => podEnvironment(pool, settings, [databaseSecret]), {
      message: /secret switchboard-secret key secret/,
    });
  }
  // Credentials are references, never values in a child.
  const children = JSON.stringify(enginePool(engine(), settings));
  t.false(children.includes(serviceSecret));
  t.false(children.includes('postgres://'));
  t.false(children.includes(turnCredential));
  // The operator's shutdown limit, passed on, sets how long the kubelet waits for a stopping pod.
  t.is(podSpec(engineDeployment(engine(), settings)).terminationGracePeriodSeconds, 45 + 30);
});

test('an operator without SWITCHBOARD_SECRET gives its pods none (all share the generated one); a half-configured one is refused', (t) => {
  const { SWITCHBOARD_SECRET: _secret, ENGINE_SWITCHBOARD_SECRET: _reference, ...generated } = operatorEnv;
  const settings = enginePoolSettings(loadConfig(generated));
  t.is(settings.switchboardSecret, undefined);
  const { env } = podEnvironment(engine(), settings, [databaseSecret, iceServersSecret]);
  t.false('SWITCHBOARD_SECRET' in env);
  t.is(loadConfig(env).secret, undefined);

  t.throws(() => enginePoolSettings(loadConfig({ ...generated, SWITCHBOARD_SECRET: serviceSecret })), {
    instanceOf: ConfigError,
    message: /ENGINE_SWITCHBOARD_SECRET must name the Secret/,
  });
  t.throws(
    () => enginePoolSettings(loadConfig({ ...generated, ENGINE_SWITCHBOARD_SECRET: 'switchboard-secret/secret' })),
    {
      instanceOf: ConfigError,
      message: /SWITCHBOARD_SECRET is not/,
    },
  );
  t.throws(() => loadConfig({ ENGINE_SWITCHBOARD_SECRET: 'no key' }), {
    instanceOf: ConfigError,
    message: /ENGINE_SWITCHBOARD_SECRET must be <secret name>\/<key>/,
  });
});

test('an operator without ENGINE_ICE_SERVERS_SECRET gives its pods no ICE servers: host candidates only', (t) => {
  const { ENGINE_ICE_SERVERS_SECRET: _reference, ...without } = operatorEnv;
  const settings = enginePoolSettings(loadConfig(without));
  t.is(settings.iceServersSecret, undefined);
  const { env } = podEnvironment(engine(), settings, [databaseSecret, switchboardSecret]);
  t.false('ICE_SERVERS' in env);
  t.deepEqual(loadConfig(env).iceServers, []);
  t.throws(() => loadConfig({ ENGINE_ICE_SERVERS_SECRET: 'no key' }), {
    instanceOf: ConfigError,
    message: /ENGINE_ICE_SERVERS_SECRET must be <secret name>\/<key>/,
  });
});

test('docs/kubernetes.md lists the engine pod’s settings as config.ts does', async (t) => {
  const docs = await readFile(new URL('../../docs/kubernetes.md', import.meta.url), 'utf8');
  const rows = new Map(
    docs
      .split('\n')
      .map((line) => /^\| `([A-Z][A-Z0-9_]*)` +\| (\w+) +\|(.*)\|$/.exec(line))
      .filter((match) => match !== null)
      .map((match) => [match[1] as string, { from: match[2], how: match[3] as string }]),
  );
  t.deepEqual([...rows.keys()].sort(), engineRead.map((setting) => setting.name).sort());
  for (const setting of engineRead) {
    const row = rows.get(setting.name);
    t.is(row?.from, setting.enginePod?.from, setting.name);
    if (setting.enginePod?.from === 'secret') t.true(row?.how.includes(setting.enginePod.reference), setting.name);
  }
});

test('an engine started with exactly its pod’s environment signs a delivery with the secret the API sealed', async (t) => {
  // The API, with SWITCHBOARD_SECRET, on a fresh database; a real HTTPS receiver on loopback.
  const secret = randomBytes(32).toString('base64url');
  const api = await startService(
    { SWITCHBOARD_SECRET: secret, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', LOG_LEVEL: 'warn' },
    ['api'],
  );
  t.teardown(() => api.close());
  const receiver = await Receiver.start();
  t.teardown(() => receiver.close());
  const delivered = new Promise<Received>((resolve) => {
    receiver.handler = (request) => {
      resolve(request);
      return 200;
    };
  });
  const setup = await workspaceWithUser(api);
  const created = await api.request('POST', '/api/v1/webhooks', {
    auth: setup.apiKey,
    body: { url: receiver.url(), eventTypes: ['number.updated'] },
  });
  t.is(created.status, 201, created.text);
  const signingSecret = created.body.signingSecret as string;

  // The operator of the cluster as the chart configures it, and a pod of the pool it runs, in the EnginePool's namespace.
  const operator = loadConfig({
    DATABASE_URL: api.databaseUrl,
    RESOURCE_STORE: 'kubernetes',
    SWITCHBOARD_SECRET: secret,
    ENGINE_DATABASE_SECRET: 'switchboard-database/url',
    ENGINE_SWITCHBOARD_SECRET: 'switchboard-secret/secret',
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    LOG_LEVEL: 'warn',
    DATABASE_POOL_SIZE: '4',
  });
  const pool = engine({ sipPort: await freeUdpPort() });
  const settings = { ...enginePoolSettings(operator), engineHttpPort: await freePort() };
  // On the host network the engine advertises the node's address: loopback here, where the test's peers are.
  const { env } = podEnvironment(
    pool,
    settings,
    [secretObject('switchboard-database', { url: api.databaseUrl }), secretObject('switchboard-secret', { secret })],
    '127.0.0.1',
  );
  // The pod's data folder is an emptyDir mounted there. This process has no mount namespace: the volume is a
  // folder of the test's, the one value that differs from the pod's environment (a path, no setting's source).
  t.is(env.SWITCHBOARD_DATA_DIR, engineDataDir);
  const volume = await mkdtemp(path.join(os.tmpdir(), 'engine-pod-data-'));
  t.teardown(() => rm(volume, { recursive: true, force: true }));
  const logs: string[] = [];
  const engineRole = await startRoles(loadConfig({ ...env, SWITCHBOARD_DATA_DIR: volume }), new Set(['engine']), {
    logStream: new Writable({
      write(chunk, _encoding, done) {
        logs.push(String(chunk));
        done();
      },
    }),
  });
  t.teardown(() => engineRole.close());

  // An event: a number claimed through the API.
  await importNumbers(api.pool, 'acme', ['+14155550142'], ['voice']);
  const claim = await api.request('POST', '/api/v1/numbers', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { e164: '+14155550142', name: 'Front desk' },
  });
  t.is(claim.status, 201, claim.text);

  // The delivery, or the lane's error when the engine could not make it.
  const outcome = await Promise.race([
    delivered,
    (async () => {
      for (const deadline = Date.now() + 30_000; Date.now() < deadline; await delay(25)) {
        const lane = await api.pool.query<{ last_error: string | null }>(
          'SELECT last_error FROM webhook_lanes WHERE last_error IS NOT NULL',
        );
        if (lane.rows[0] !== undefined) return `the engine failed: ${lane.rows[0].last_error}`;
      }
      return 'nothing was delivered within 30 s';
    })(),
  ]);
  if (typeof outcome === 'string') return t.fail(`${outcome}\n${logs.join('')}`);
  t.is(outcome.event.type, 'number.updated');
  t.is(outcome.event.number.e164, '+14155550142');
  const timestamp = String(outcome.headers['x-service-timestamp']);
  const expected = createHmac('sha256', signingSecret).update(`${timestamp}.${outcome.body}`).digest('hex');
  t.is(outcome.headers['x-service-signature'], expected, 'signed with the secret the API showed');
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
  t.deepEqual(engineContainer.args, ['engine']);
  t.false('command' in engineContainer);
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

test('the same EnginePool gives the same children; only its name, namespace, uid and spec count', (t) => {
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
  const hashOf = (spec: Partial<EnginePoolSpec>, settings = plainSettings) =>
    configHash(engineDeployment(engine(spec), settings));
  const base = hashOf({});
  t.regex(base ?? '', /^[0-9a-f]{64}$/);
  t.is(hashOf({}), base);
  t.not(hashOf({ rtpPortMax: 21999 }), base);
  t.not(hashOf({ sipPort: 5070 }), base);
  t.not(hashOf({}, { ...plainSettings, passedOn: { LOG_LEVEL: 'warn' } }), base);
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

test('an EnginePool whose children could not be made is refused with the reason', (t) => {
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
