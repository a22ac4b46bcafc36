/**
 * What the kubelet gives a container as its environment, for tests without a cluster: a pod made from a
 * Deployment's template, and its container's variables resolved the way the kubelet resolves them.
 *
 * - Service links first: the API server's `kubernetes` Service always; the namespace's other Services unless the pod
 *   turns them off (`enableServiceLinks: false`), which these tests require rather than invent Services.
 * - Then `envFrom` in order (ConfigMaps and Secrets, with their `prefix`), then `env` in order; a later variable
 *   replaces an earlier one of the same name.
 * - `$(NAME)` in a `value` is the value of a variable defined before it (`$$` is a `$`); an unknown one stays as is.
 * - A `secretKeyRef` or `configMapKeyRef` (or an `envFrom` source) whose object or key is missing, and not
 *   `optional`, keeps the container from starting (CreateContainerConfigError): here, an exception.
 * - A `fieldRef` reads the fields of the pod that the downward API offers to variables.
 */
import type { V1ConfigMap, V1Container, V1Deployment, V1Pod, V1Secret } from '@kubernetes/client-node';

export interface PodObjects {
  pod: V1Pod;
  configMaps: readonly V1ConfigMap[];
  secrets: readonly V1Secret[];
}

/** The cluster address of the `kubernetes` Service in these tests (any ClusterIP would do). */
const kubernetesService = { host: '10.96.0.1', port: '443' };

/** A pod of the Deployment as its ReplicaSet would make it, scheduled and running with these addresses. */
export function podOf(
  deployment: V1Deployment,
  pod: { name: string; uid: string; nodeName: string; hostIP: string; podIP: string },
): V1Pod {
  const template = deployment.spec?.template;
  if (template?.spec === undefined) throw new Error('the Deployment has no pod template');
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...template.metadata,
      name: pod.name,
      uid: pod.uid,
      ...(deployment.metadata?.namespace !== undefined ? { namespace: deployment.metadata.namespace } : {}),
    },
    spec: { ...template.spec, nodeName: pod.nodeName },
    status: {
      phase: 'Running',
      hostIP: pod.hostIP,
      hostIPs: [{ ip: pod.hostIP }],
      podIP: pod.podIP,
      podIPs: [{ ip: pod.podIP }],
    },
  };
}

function serviceLinks(pod: V1Pod): Record<string, string> {
  if (pod.spec?.enableServiceLinks !== false) {
    throw new Error('service links are not emulated: set enableServiceLinks: false, or the Services must be given');
  }
  const { host, port } = kubernetesService;
  return {
    KUBERNETES_SERVICE_HOST: host,
    KUBERNETES_SERVICE_PORT: port,
    KUBERNETES_SERVICE_PORT_HTTPS: port,
    KUBERNETES_PORT: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP`]: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP_PROTO`]: 'tcp',
    [`KUBERNETES_PORT_${port}_TCP_PORT`]: port,
    [`KUBERNETES_PORT_${port}_TCP_ADDR`]: host,
  };
}

/** `$(NAME)` of a variable defined so far; `$$` escapes a `$`. */
function expand(value: string, defined: Record<string, string>): string {
  return value.replace(/\$\$|\$\(([^)]*)\)/g, (match, name: string | undefined) => {
    if (match === '$$') return '$';
    return name !== undefined && name in defined ? (defined[name] as string) : match;
  });
}

function fieldOf(pod: V1Pod, fieldPath: string): string {
  const metadata = pod.metadata ?? {};
  const labelOrAnnotation = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (labelOrAnnotation !== null) {
    const map = labelOrAnnotation[1] === 'labels' ? metadata.labels : metadata.annotations;
    return map?.[labelOrAnnotation[2] as string] ?? '';
  }
  const fields: Record<string, string | undefined> = {
    'metadata.name': metadata.name,
    'metadata.namespace': metadata.namespace,
    'metadata.uid': metadata.uid,
    'spec.nodeName': pod.spec?.nodeName,
    'spec.serviceAccountName': pod.spec?.serviceAccountName ?? 'default',
    'status.hostIP': pod.status?.hostIP,
    'status.hostIPs': pod.status?.hostIPs?.map((address) => address.ip).join(','),
    'status.podIP': pod.status?.podIP,
    'status.podIPs': pod.status?.podIPs?.map((address) => address.ip).join(','),
  };
  if (!(fieldPath in fields)) throw new Error(`fieldRef ${fieldPath} is not a field the downward API gives a variable`);
  return fields[fieldPath] ?? '';
}

function secretData(secret: V1Secret): Record<string, string> {
  return Object.fromEntries(
    Object.entries(secret.data ?? {}).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]),
  );
}

/** The environment of the pod's container `name`, as the kubelet would start it. */
export function containerEnvironment(objects: PodObjects, name: string): Record<string, string> {
  const { pod } = objects;
  const container: V1Container | undefined = pod.spec?.containers.find((candidate) => candidate.name === name);
  if (container === undefined) throw new Error(`the pod has no container ${name}`);
  const namespace = pod.metadata?.namespace ?? 'default';
  const inNamespace = <T extends V1ConfigMap | V1Secret>(list: readonly T[], objectName: string | undefined) =>
    list.find(
      (object) => object.metadata?.name === objectName && (object.metadata?.namespace ?? 'default') === namespace,
    );
  const configMap = (objectName: string | undefined) => inNamespace(objects.configMaps, objectName);
  const secret = (objectName: string | undefined) => inNamespace(objects.secrets, objectName);
  const missing = (what: string) => new Error(`CreateContainerConfigError: ${what} not found in ${namespace}`);

  const services = serviceLinks(pod);
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? '';
    let data: Record<string, string> | undefined;
    if (source.configMapRef !== undefined) {
      const found = configMap(source.configMapRef.name);
      if (found === undefined && source.configMapRef.optional !== true) {
        throw missing(`configmap ${source.configMapRef.name}`);
      }
      data = found?.data;
    } else if (source.secretRef !== undefined) {
      const found = secret(source.secretRef.name);
      if (found === undefined && source.secretRef.optional !== true) throw missing(`secret ${source.secretRef.name}`);
      data = found === undefined ? undefined : secretData(found);
    }
    for (const [key, value] of Object.entries(data ?? {})) env[`${prefix}${key}`] = value;
  }
  for (const variable of container.env ?? []) {
    const from = variable.valueFrom;
    if (from === undefined) {
      env[variable.name] = expand(variable.value ?? '', { ...services, ...env });
    } else if (from.secretKeyRef !== undefined) {
      const { name: secretName, key, optional } = from.secretKeyRef;
      const value = (() => {
        const found = secret(secretName);
        return found === undefined ? undefined : secretData(found)[key];
      })();
      if (value === undefined && optional !== true) throw missing(`secret ${secretName} key ${key}`);
      if (value !== undefined) env[variable.name] = value;
    } else if (from.configMapKeyRef !== undefined) {
      const { name: mapName, key, optional } = from.configMapKeyRef;
      const value = configMap(mapName)?.data?.[key];
      if (value === undefined && optional !== true) throw missing(`configmap ${mapName} key ${key}`);
      if (value !== undefined) env[variable.name] = value;
    } else if (from.fieldRef !== undefined) {
      env[variable.name] = fieldOf(pod, from.fieldRef.fieldPath);
    } else {
      throw new Error(`${variable.name}: a valueFrom this emulation does not know`);
    }
  }
  return { ...services, ...env };
}
