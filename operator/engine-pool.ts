/**
 * The Kubernetes children of an `EnginePool` resource (an engine pool, docs/kubernetes.md): its ConfigMap, Deployment,
 * Services and PodDisruptionBudget, as pure functions of the resource and the operator's settings (no I/O, no clock,
 * no randomness: the same input gives the same objects, so the operator can apply them on every reconcile).
 *
 * The pods run `switchboard engine` with every setting core/config.ts marks as read by the engine, each set the way
 * its `enginePod` says (the operator's own value, a Secret, a field of the pod, the spec's value or config.ts's
 * default, the pool's shape) or deliberately left to its default: the list is config.ts's, so an engine setting
 * cannot be forgotten here (engine-pod-settings.ts makes the pods' environment from it). On the host network (the default) carriers reach SIP and RTP on the node directly: one pod
 * per node (anti-affinity, and a rolling update that never surges), and the pod advertises the node's address. Off
 * the host network a LoadBalancer Service carries SIP (UDP and TCP).
 *
 * The spec's carriers are not children: the operator writes them to PostgreSQL.
 */
import { createHash } from 'node:crypto';
import type {
  V1ConfigMap,
  V1Deployment,
  V1OwnerReference,
  V1PodDisruptionBudget,
  V1Service,
} from '@kubernetes/client-node';
import { loadConfig } from '../core/config.ts';
import type { EnginePoolSpec } from '../core/resources/kinds.ts';
import { type Resource, resourceApiVersion } from '../core/resources/store.ts';
import {
  engineDataDir,
  engineEnvironment,
  type EnginePoolSettings,
  engineReferences,
  type PoolValues,
} from './engine-pod-settings.ts';

/** An `EnginePool` custom resource (what the ResourceStore returns, with its spec typed). */
export type EngineResource = Resource<EnginePoolSpec, unknown>;

/** An EnginePool whose children cannot be built (a name too long for them, ports that clash). */
export class EnginePoolError extends Error {
  constructor(engine: string, message: string) {
    super(`EnginePool ${engine}: ${message}`);
    this.name = 'EnginePoolError';
  }
}

/** The annotation on the pod template holding the hash of the ConfigMap's data: a config change rolls the pods. */
export const configHashAnnotation = 'switchboard.dev/config-hash';
export const engineContainerName = 'engine';
export const engineManagedBy = 'switchboard-operator';
/**
 * How much longer than SHUTDOWN_TIMEOUT_MS the kubelet waits before it kills a pod that is stopping: the engine ends
 * its calls (a BYE each) and finishes in-flight work first. 60 s with the default 30 s.
 */
export const engineGraceBeyondShutdownSeconds = 30;

/**
 * Children are `<name>-engine` and `<name>-engine-sip`; a Service name is a DNS-1035 label (63 characters at most,
 * starting with a letter), and the name is also the `app.kubernetes.io/instance` label's value.
 */
export const maxEnginePoolNameLength = 63 - '-engine-sip'.length;
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** The standard labels of every child of the pool; the pods' selector too. */
export function enginePoolLabels(engine: EngineResource): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'switchboard',
    'app.kubernetes.io/component': 'engine',
    'app.kubernetes.io/instance': engine.metadata.name,
    'app.kubernetes.io/managed-by': engineManagedBy,
  };
}

/** Makes the EnginePool the controller of a child: Kubernetes deletes the child with it. */
export function engineOwnerReference(engine: EngineResource): V1OwnerReference {
  return {
    apiVersion: resourceApiVersion,
    kind: 'EnginePool',
    name: engine.metadata.name,
    uid: engine.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The pool's values with the defaults filled in, refused when the pods could not run with them. */
function poolValues(engine: EngineResource, settings: EnginePoolSettings): PoolValues {
  const name = checkedName(engine);
  const passedOn = settings.passedOn ?? {};
  // The engine's defaults, with what the operator passes on read the way the pods will read it.
  const defaults = loadConfig(passedOn);
  const values: PoolValues = {
    name: `${name}-engine`,
    hostNetwork: engine.spec.hostNetwork ?? true,
    sipPort: engine.spec.sipPort ?? defaults.sip.port,
    rtpPortMin: engine.spec.rtpPortMin ?? defaults.rtp.portMin,
    rtpPortMax: engine.spec.rtpPortMax ?? defaults.rtp.portMax,
    httpPort: settings.engineHttpPort ?? defaults.engineHttpPort,
    shutdownTimeoutMs: defaults.shutdownTimeoutMs,
    passedOn,
  };
  // The engine refuses the same (core/config.ts); the CRD's rule cannot see a bound left to its default.
  if (values.rtpPortMax <= values.rtpPortMin) {
    throw new EnginePoolError(name, `the RTP range ${values.rtpPortMin}-${values.rtpPortMax} is empty`);
  }
  if (values.sipPort >= values.rtpPortMin && values.sipPort <= values.rtpPortMax) {
    throw new EnginePoolError(name, `SIP port ${values.sipPort} is inside the RTP range (both UDP)`);
  }
  if (values.sipPort === values.httpPort) {
    throw new EnginePoolError(name, `SIP port ${values.sipPort} is also the HTTP port (both TCP)`);
  }
  return values;
}

function checkedName(engine: EngineResource): string {
  const { name } = engine.metadata;
  if (name.length > maxEnginePoolNameLength || !dns1035Label.test(name)) {
    throw new EnginePoolError(
      name,
      `the name must be lowercase letters, digits and '-', start with a letter and have at most ${maxEnginePoolNameLength} characters (its Services are named after it)`,
    );
  }
  return name;
}

function childMetadata(engine: EngineResource, name: string) {
  return {
    name,
    namespace: engine.metadata.namespace,
    labels: enginePoolLabels(engine),
    ownerReferences: [engineOwnerReference(engine)],
  };
}

/** `<name>-engine`: the engine settings, as environment entries of the pods. */
export function engineConfigMap(engine: EngineResource, settings: EnginePoolSettings): V1ConfigMap {
  const values = poolValues(engine, settings);
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: childMetadata(engine, values.name),
    data: engineEnvironment(values),
  };
}

/** SHA-256 of the data, keys in order: the same data always gives the same hash. */
function dataHash(data: Record<string, string>): string {
  const sorted = Object.keys(data)
    .sort()
    .map((key) => [key, data[key]]);
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex');
}

/** `<name>-engine`: the pool's pods. */
export function engineDeployment(engine: EngineResource, settings: EnginePoolSettings): V1Deployment {
  const values = poolValues(engine, settings);
  const labels = enginePoolLabels(engine);
  const { hostNetwork } = values;
  // On the host network the container ports are the node's ports (hostPort is the containerPort).
  const hostPort = (port: number) => (hostNetwork ? { hostPort: port } : {});
  const resources = engine.spec.resources;
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: childMetadata(engine, values.name),
    spec: {
      replicas: engine.spec.replicas,
      selector: { matchLabels: labels },
      // Two pods on one node would bind the same host ports: on the host network the old pod goes before the new one
      // comes. Off it, a new pod comes before an old one goes, so the pool keeps its capacity.
      strategy: {
        type: 'RollingUpdate',
        rollingUpdate: hostNetwork ? { maxSurge: 0, maxUnavailable: 1 } : { maxSurge: 1, maxUnavailable: 0 },
      },
      template: {
        metadata: {
          labels,
          annotations: { [configHashAnnotation]: dataHash(engineEnvironment(values)) },
        },
        spec: {
          ...(hostNetwork ? { hostNetwork: true, dnsPolicy: 'ClusterFirstWithHostNet' } : { hostNetwork: false }),
          ...(settings.serviceAccountName !== undefined ? { serviceAccountName: settings.serviceAccountName } : {}),
          // The engine's environment is its settings and nothing else: no variables for the namespace's Services,
          // whose names could shadow a setting left to its default (a Service `embedded-postgres`).
          enableServiceLinks: false,
          terminationGracePeriodSeconds: Math.ceil(values.shutdownTimeoutMs / 1000) + engineGraceBeyondShutdownSeconds,
          ...(hostNetwork
            ? {
                affinity: {
                  podAntiAffinity: {
                    requiredDuringSchedulingIgnoredDuringExecution: [
                      { labelSelector: { matchLabels: labels }, topologyKey: 'kubernetes.io/hostname' },
                    ],
                  },
                },
              }
            : {}),
          containers: [
            {
              name: engineContainerName,
              image: engine.spec.image,
              ...(settings.imagePullPolicy !== undefined ? { imagePullPolicy: settings.imagePullPolicy } : {}),
              // The image's entrypoint (tini, then `switchboard`) runs the role; a `command` would bypass tini.
              args: ['engine'],
              envFrom: [{ configMapRef: { name: values.name } }],
              env: engineReferences(values, settings),
              // The RTP range is not listed: it is bound on demand, one port per call leg.
              ports: [
                { name: 'sip-udp', containerPort: values.sipPort, protocol: 'UDP', ...hostPort(values.sipPort) },
                { name: 'sip-tcp', containerPort: values.sipPort, protocol: 'TCP', ...hostPort(values.sipPort) },
                { name: 'http', containerPort: values.httpPort, protocol: 'TCP', ...hostPort(values.httpPort) },
              ],
              // /readyz answers once the database answers and is migrated; /healthz whenever the process does.
              startupProbe: {
                httpGet: { path: '/healthz', port: 'http' },
                periodSeconds: 2,
                failureThreshold: 60,
              },
              readinessProbe: {
                httpGet: { path: '/readyz', port: 'http' },
                periodSeconds: 5,
                failureThreshold: 2,
              },
              livenessProbe: {
                httpGet: { path: '/healthz', port: 'http' },
                periodSeconds: 10,
                timeoutSeconds: 5,
                failureThreshold: 3,
              },
              ...(resources !== undefined ? { resources: resourceRequirements(resources) } : {}),
              securityContext: { allowPrivilegeEscalation: false },
              volumeMounts: [{ name: 'data', mountPath: engineDataDir }],
            },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    },
  };
}

function resourceRequirements(resources: NonNullable<EnginePoolSpec['resources']>) {
  const list = (quantities: { cpu?: string; memory?: string }) => ({
    ...(quantities.cpu !== undefined ? { cpu: quantities.cpu } : {}),
    ...(quantities.memory !== undefined ? { memory: quantities.memory } : {}),
  });
  return {
    ...(resources.requests !== undefined ? { requests: list(resources.requests) } : {}),
    ...(resources.limits !== undefined ? { limits: list(resources.limits) } : {}),
  };
}

/** `<name>-engine`: the pods' HTTP port (health and metrics) inside the cluster. SIP and RTP are not behind it. */
export function engineService(engine: EngineResource, settings: EnginePoolSettings): V1Service {
  const values = poolValues(engine, settings);
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: childMetadata(engine, values.name),
    spec: {
      type: 'ClusterIP',
      selector: enginePoolLabels(engine),
      ports: [{ name: 'http', port: values.httpPort, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}

/**
 * `<name>-engine-sip`: SIP over UDP and TCP through a load balancer, for a pool off the host network; undefined for a
 * pool on it (carriers reach the nodes). `externalTrafficPolicy: Local` keeps the carrier's source address.
 */
export function engineSipService(engine: EngineResource, settings: EnginePoolSettings): V1Service | undefined {
  const values = poolValues(engine, settings);
  if (values.hostNetwork) return undefined;
  const metadata = childMetadata(engine, `${values.name}-sip`);
  const annotations = settings.sipServiceAnnotations;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: annotations !== undefined ? { ...metadata, annotations: { ...annotations } } : metadata,
    spec: {
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Local',
      selector: enginePoolLabels(engine),
      ports: [
        { name: 'sip-udp', port: values.sipPort, targetPort: 'sip-udp', protocol: 'UDP' },
        { name: 'sip-tcp', port: values.sipPort, targetPort: 'sip-tcp', protocol: 'TCP' },
      ],
    },
  };
}

/** `<name>-engine`: voluntary disruptions (node drains) take one pod of the pool at a time. */
export function enginePodDisruptionBudget(engine: EngineResource): V1PodDisruptionBudget {
  const name = `${checkedName(engine)}-engine`;
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: childMetadata(engine, name),
    spec: { maxUnavailable: 1, selector: { matchLabels: enginePoolLabels(engine) } },
  };
}

export type EnginePoolChild = V1ConfigMap | V1Deployment | V1Service | V1PodDisruptionBudget;

/** Every child of the pool, in apply order: the ConfigMap before the pods that read it, the pods, then the rest. */
export function enginePool(engine: EngineResource, settings: EnginePoolSettings): EnginePoolChild[] {
  const sipService = engineSipService(engine, settings);
  return [
    engineConfigMap(engine, settings),
    engineDeployment(engine, settings),
    engineService(engine, settings),
    ...(sipService !== undefined ? [sipService] : []),
    enginePodDisruptionBudget(engine),
  ];
}
