/**
 * How the pods of an engine pool get each setting the engine reads (core/config.ts's list, each setting's
 * `enginePod`): the operator's settings for its pools' pods (`enginePoolSettings`, checked when the operator starts),
 * and the pods' environment made from a pool's values: the ConfigMap's data (`engineEnvironment`) and the entries the
 * kubelet resolves, Secrets and the pod's own fields (`engineReferences`). engine-pool.ts builds the children with them.
 */
import type { V1EnvVar } from '@kubernetes/client-node';
import {
  type Config,
  ConfigError,
  type EnginePodSource,
  type EngineSettingFrom,
  type SecretKeyReference,
  settings as configSettings,
} from '../core/config.ts';

export interface EnginePoolSettings {
  /** The Secret (in the EnginePool's namespace) and key holding the pods' DATABASE_URL (ENGINE_DATABASE_SECRET). */
  databaseSecret: SecretKeyReference;
  /**
   * The Secret and key holding the pods' SWITCHBOARD_SECRET (ENGINE_SWITCHBOARD_SECRET), when the operator has one:
   * the pods then derive the keys the API and the operator seal webhook secrets and carrier passwords with. Without
   * one, every process shares the secret generated in the database.
   */
  switchboardSecret?: SecretKeyReference;
  /** The Secret and key holding the pods' ICE_SERVERS (ENGINE_ICE_SERVERS_SECRET), when they have any. */
  iceServersSecret?: SecretKeyReference;
  /** The operator's own values of the settings it passes on (`from: 'operator'`, Config.forEnginePods). */
  passedOn?: Readonly<Record<string, string>>;
  /** The engine container's pull policy; left to Kubernetes when unset. */
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** The pods' service account; the namespace's `default` when unset. */
  serviceAccountName?: string;
  /**
   * ENGINE_HTTP_PORT of the pods (health and metrics); default core/config.ts's. On the host network it binds on the
   * node, so it may have to move off a port something else on the node holds.
   */
  engineHttpPort?: number;
  /** Annotations of the SIP LoadBalancer Service (a pool off the host network), e.g. the cloud's load balancer type. */
  sipServiceAnnotations?: Record<string, string>;
}

/** Where the pods' data folder (SWITCHBOARD_DATA_DIR: prompt cache, voicemail) is mounted, an emptyDir. */
export const engineDataDir = '/data';

/**
 * The operator's settings for the pods of its engine pools, from its own configuration. An operator with
 * SWITCHBOARD_SECRET must say which Secret gives the pods the same one (ENGINE_SWITCHBOARD_SECRET), and one without
 * must not name one: either way its engines would derive other keys than it and the API.
 */
export function enginePoolSettings(config: Config): EnginePoolSettings {
  const { engineDatabaseSecret, engineSwitchboardSecret, engineIceServersSecret } = config.kubernetes;
  if (config.secret !== undefined && engineSwitchboardSecret === undefined) {
    throw new ConfigError(
      'ENGINE_SWITCHBOARD_SECRET must name the Secret (<name>/<key>, in the Engines’ namespace) holding SWITCHBOARD_SECRET: the engine pods need the same secret as the operator and the API',
    );
  }
  if (config.secret === undefined && engineSwitchboardSecret !== undefined) {
    throw new ConfigError(
      'ENGINE_SWITCHBOARD_SECRET is set but SWITCHBOARD_SECRET is not: the engine pods would derive other keys than the operator and the API',
    );
  }
  return {
    databaseSecret: engineDatabaseSecret,
    ...(engineSwitchboardSecret !== undefined ? { switchboardSecret: engineSwitchboardSecret } : {}),
    ...(engineIceServersSecret !== undefined ? { iceServersSecret: engineIceServersSecret } : {}),
    passedOn: config.forEnginePods,
  };
}

/** A pool's values with the defaults filled in (engine-pool.ts's `poolValues`). */
export interface PoolValues {
  name: string;
  hostNetwork: boolean;
  sipPort: number;
  rtpPortMin: number;
  rtpPortMax: number;
  httpPort: number;
  /** What the passed-on settings make of the pods' SHUTDOWN_TIMEOUT_MS. */
  shutdownTimeoutMs: number;
  /** The operator's settings passed on, as given. */
  passedOn: Readonly<Record<string, string>>;
}

/** Every address of the container: carriers and the kubelet reach it at the node's or the pod's. */
const anyAddress = '0.0.0.0';

/** The settings config.ts says come from the spec or the pool's shape: values in the pool's ConfigMap. */
const poolSettings: Record<EngineSettingFrom<'spec' | 'pool'>, (values: PoolValues) => string> = {
  // The health port must answer the kubelet's probes and Prometheus, not only loopback.
  HOST: () => anyAddress,
  SWITCHBOARD_DATA_DIR: () => engineDataDir,
  ENGINE_HTTP_PORT: (values) => String(values.httpPort),
  SIP_HOST: () => anyAddress,
  SIP_PORT: (values) => String(values.sipPort),
  RTP_HOST: () => anyAddress,
  RTP_PORT_MIN: (values) => String(values.rtpPortMin),
  RTP_PORT_MAX: (values) => String(values.rtpPortMax),
};

/** The settings config.ts says are fields of the pod: the kubelet fills them in. */
const podFields: Record<EngineSettingFrom<'pod'>, (values: PoolValues) => string> = {
  // The node's address on the host network, the pod's off it.
  ADVERTISED_HOST: (values) => (values.hostNetwork ? 'status.hostIP' : 'status.podIP'),
  // Each pod owns its calls under its own name.
  ENGINE_ID: () => 'metadata.name',
};

/** The operator's settings that config.ts says name the Secret of a setting (`reference`), as the operator read them. */
const secretReferences: Record<
  Extract<EnginePodSource, { from: 'secret' }>['reference'],
  (settings: EnginePoolSettings) => SecretKeyReference | undefined
> = {
  ENGINE_DATABASE_SECRET: (settings) => settings.databaseSecret,
  ENGINE_SWITCHBOARD_SECRET: (settings) => settings.switchboardSecret,
  ENGINE_ICE_SERVERS_SECRET: (settings) => settings.iceServersSecret,
};

/** The settings the engine reads, with how its pods get each (core/config.ts). */
const engineSettings = configSettings.flatMap((setting) =>
  setting.enginePod === undefined ? [] : [{ name: setting.name, source: setting.enginePod }],
);

/** The engine settings of the pool's pods given as values: their ConfigMap (`envFrom`), hashed to roll the pods. */
export function engineEnvironment(values: PoolValues): Record<string, string> {
  const data: Record<string, string> = {};
  for (const { name, source } of engineSettings) {
    if (source.from === 'spec' || source.from === 'pool') {
      data[name] = poolSettings[name as EngineSettingFrom<'spec' | 'pool'>](values);
    } else if (source.from === 'operator') {
      const value = values.passedOn[name];
      if (value !== undefined) data[name] = value;
    }
  }
  return data;
}

/** The engine settings of the pool's pods that the kubelet resolves: Secrets and the pod's own fields (`env`). */
export function engineReferences(values: PoolValues, settings: EnginePoolSettings): V1EnvVar[] {
  const env: V1EnvVar[] = [];
  for (const { name, source } of engineSettings) {
    if (source.from === 'secret') {
      const reference = secretReferences[source.reference](settings);
      if (reference !== undefined) {
        env.push({ name, valueFrom: { secretKeyRef: { name: reference.name, key: reference.key } } });
      }
    } else if (source.from === 'pod') {
      env.push({ name, valueFrom: { fieldRef: { fieldPath: podFields[name as EngineSettingFrom<'pod'>](values) } } });
    }
  }
  return env;
}
