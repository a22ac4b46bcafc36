/**
 * Configuration from the environment. Every variable is listed here once, with its default and its meaning; the
 * README's configuration table is written from this list (a test keeps the two in step).
 */
import path from 'node:path';

export interface Setting {
  name: string;
  default: string;
  meaning: string;
}

export const settings: readonly Setting[] = [
  { name: 'PORT', default: '8080', meaning: 'TCP port of the HTTP API (and of health and metrics under `all`).' },
  { name: 'HOST', default: '127.0.0.1', meaning: 'Address the HTTP API listens on (`0.0.0.0` in a container).' },
  {
    name: 'DATABASE_URL',
    default: '(unset)',
    meaning: 'PostgreSQL 15+ connection string. Unset: an embedded PostgreSQL under `SWITCHBOARD_DATA_DIR`.',
  },
  { name: 'DATABASE_POOL_SIZE', default: '10', meaning: 'Connections in the pool of each process.' },
  {
    name: 'SWITCHBOARD_DATA_DIR',
    default: './.switchboard',
    meaning: 'Folder for the embedded PostgreSQL data; kept across restarts.',
  },
  {
    name: 'EMBEDDED_POSTGRES_PORT',
    default: '54329',
    meaning: 'Port of the embedded PostgreSQL (loopback only).',
  },
  {
    name: 'SWITCHBOARD_SECRET',
    default: '(generated)',
    meaning:
      'Secret (32+ characters) that signs end-user tokens and list cursors. Unset: generated once and kept in the database.',
  },
  {
    name: 'OIDC_ISSUER',
    default: '(unset)',
    meaning: 'Issuer of member logins (`user_session`). Unset: member logins are refused.',
  },
  { name: 'OIDC_AUDIENCE', default: '(unset)', meaning: 'Required `aud` of member login tokens, when set.' },
  {
    name: 'OIDC_JWKS_URI',
    default: '(discovered)',
    meaning: "The issuer's JSON Web Key Set. Unset: read from the issuer's `/.well-known/openid-configuration`.",
  },
  { name: 'OIDC_EMAIL_CLAIM', default: 'email', meaning: 'Claim of the login token that names the member by email.' },
  { name: 'BODY_LIMIT', default: '1048576', meaning: 'Largest request body in bytes; larger bodies get 413.' },
  { name: 'LOG_LEVEL', default: 'info', meaning: 'fatal, error, warn, info, debug or trace. JSON lines on stdout.' },
  {
    name: 'SHUTDOWN_TIMEOUT_MS',
    default: '30000',
    meaning: 'On SIGTERM, how long in-flight requests may run before the process exits anyway.',
  },
  {
    name: 'ENGINE_HTTP_PORT',
    default: '8081',
    meaning: 'Health and metrics port of `switchboard engine` (under `all`, `PORT` serves them).',
  },
  {
    name: 'OPERATOR_HTTP_PORT',
    default: '8082',
    meaning: 'Health and metrics port of `switchboard operator` (under `all`, `PORT` serves them).',
  },
  {
    name: 'ADMISSION_TLS_DIR',
    default: '(unset)',
    meaning:
      'A folder with `tls.crt` and `tls.key`: the operator then serves its admission webhook (`POST /validate`) over HTTPS on `ADMISSION_PORT`, as Kubernetes requires.',
  },
  {
    name: 'ADMISSION_PORT',
    default: '9443',
    meaning: 'HTTPS port of the admission webhook when `ADMISSION_TLS_DIR` is set.',
  },
  {
    name: 'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
    default: 'false',
    meaning:
      '`true` lets webhook URLs reach private, loopback and link-local hosts (self-hosted receivers, tests). Keep `false` otherwise.',
  },
  {
    name: 'SIP_HOST',
    default: '127.0.0.1',
    meaning: 'Address the engine takes SIP on (UDP and TCP) and names in its URIs.',
  },
  { name: 'SIP_PORT', default: '5060', meaning: 'SIP port of the engine, UDP and TCP (0: one the system picks).' },
  {
    name: 'ADVERTISED_HOST',
    default: '(SIP_HOST)',
    meaning:
      'Address carriers reach the engine at, put in its SIP URIs and SDP (the node or load balancer address). Required when SIP_HOST is 0.0.0.0 or ::.',
  },
  { name: 'RTP_HOST', default: '(SIP_HOST)', meaning: 'Address the engine receives RTP on (bind address).' },
  { name: 'RTP_PORT_MIN', default: '20000', meaning: 'Lowest RTP port (one per call leg).' },
  { name: 'RTP_PORT_MAX', default: '20999', meaning: 'Highest RTP port.' },
  {
    name: 'TTS_COMMAND',
    default: 'espeak-ng',
    meaning: 'Text-to-speech command for `{tts}` prompts: run as `<command> --stdout <text>`, WAV on stdout.',
  },
  {
    name: 'ENGINE_ID',
    default: '(host name and SIP port)',
    meaning:
      'Names this engine as the owner of its calls; a restarted engine ends the calls it owned. Keep it stable per pod.',
  },
  {
    name: 'RESOURCE_NAMESPACE',
    default: 'switchboard',
    meaning:
      'Namespace of the custom resources (routing plans, queues) the API writes: the Kubernetes namespace in a cluster, a name in PostgreSQL without one.',
  },
  {
    name: 'RESOURCE_STORE',
    default: 'auto',
    meaning:
      'Where the custom resources live: `kubernetes` (the cluster of the pod, or of `KUBECONFIG`), `postgres` (a table, without a cluster), or `auto`: `kubernetes` inside a pod, `postgres` elsewhere.',
  },
  {
    name: 'KUBECONFIG',
    default: '~/.kube/config',
    meaning:
      'With `RESOURCE_STORE=kubernetes` outside a pod: the kubeconfig whose current context is the cluster (of a list, the first file).',
  },
  {
    name: 'LEASE_NAMESPACE',
    default: '(the pod’s namespace, else RESOURCE_NAMESPACE)',
    meaning: 'Namespace of the operator’s leader-election Lease, in a cluster.',
  },
  {
    name: 'ENGINE_DATABASE_SECRET',
    default: 'switchboard-database/url',
    meaning:
      'The Secret and key (`name/key`, in the Engine’s namespace) holding DATABASE_URL for the engine pods the operator runs.',
  },
  {
    name: 'WEBHOOK_CONCURRENCY',
    default: '64',
    meaning: 'Webhook attempts one engine process makes at once (each stream has at most one in flight).',
  },
];

export class ConfigError extends Error {}

export interface OidcConfig {
  issuer: string;
  audience: string | undefined;
  jwksUri: string | undefined;
  emailClaim: string;
}

export interface Config {
  port: number;
  host: string;
  databaseUrl: string | undefined;
  poolSize: number;
  dataDir: string;
  embeddedPostgresPort: number;
  secret: string | undefined;
  oidc: OidcConfig | undefined;
  bodyLimit: number;
  logLevel: string;
  shutdownTimeoutMs: number;
  engineHttpPort: number;
  operatorHttpPort: number;
  /** ADMISSION_TLS_DIR and ADMISSION_PORT: the admission webhook over HTTPS, when a folder is given. */
  admission: { tlsDir: string | undefined; port: number };
  /** Webhook URLs may name private, loopback and link-local hosts (WEBHOOK_ALLOW_PRIVATE_NETWORKS). */
  webhookAllowPrivateNetworks: boolean;
  /** Webhook attempts in flight at once in one engine process (WEBHOOK_CONCURRENCY). */
  webhookConcurrency: number;
  /** Namespace of the custom resources the API writes (RESOURCE_NAMESPACE). */
  resourceNamespace: string;
  /** RESOURCE_STORE, LEASE_NAMESPACE and ENGINE_DATABASE_SECRET: the cluster, when the resources live in one. */
  kubernetes: {
    store: 'auto' | 'postgres' | 'kubernetes';
    /** KUBECONFIG's first file, when set. */
    kubeconfig: string | undefined;
    leaseNamespace: string | undefined;
    engineDatabaseSecret: { name: string; key: string };
  };
  /** `host` is bound; `advertisedHost` goes in URIs, Via and SDP. */
  sip: { host: string; port: number; advertisedHost: string };
  rtp: { host: string; portMin: number; portMax: number };
  ttsCommand: string;
  /** ENGINE_ID, when set. */
  engineId: string | undefined;
}

type Env = Record<string, string | undefined>;

function text(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  return value;
}

const wildcard = (host: string) => host === '0.0.0.0' || host === '::' || host === '[::]';

function sipSettings(env: Env): Config['sip'] {
  const host = text(env, 'SIP_HOST') ?? '127.0.0.1';
  const advertisedHost = text(env, 'ADVERTISED_HOST') ?? host;
  if (wildcard(advertisedHost)) {
    throw new ConfigError(
      `ADVERTISED_HOST must name the address carriers reach the engine at when SIP_HOST is ${host} (a wildcard)`,
    );
  }
  return { host, port: integer(env, 'SIP_PORT', 5060, 0, 65535), advertisedHost };
}

function rtpSettings(env: Env): Config['rtp'] {
  const portMin = integer(env, 'RTP_PORT_MIN', 20000, 1024, 65534);
  const portMax = integer(env, 'RTP_PORT_MAX', 20999, 1025, 65535);
  if (portMax <= portMin) throw new ConfigError('RTP_PORT_MAX must be above RTP_PORT_MIN');
  return { host: text(env, 'RTP_HOST') ?? text(env, 'SIP_HOST') ?? '127.0.0.1', portMin, portMax };
}

/** A Kubernetes namespace name (RFC 1123 label). */
function namespace(env: Env, name: string): string {
  const raw = text(env, name) ?? 'switchboard';
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(raw)) {
    throw new ConfigError(`${name} must be a Kubernetes namespace name (lowercase letters, digits, '-'), got "${raw}"`);
  }
  return raw;
}

function url(env: Env, name: string): string | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  try {
    return new URL(raw).toString();
  } catch {
    throw new ConfigError(`${name} must be a URL, got "${raw}"`);
  }
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

function kubernetesSettings(env: Env): Config['kubernetes'] {
  const store = text(env, 'RESOURCE_STORE') ?? 'auto';
  if (store !== 'auto' && store !== 'postgres' && store !== 'kubernetes') {
    throw new ConfigError(`RESOURCE_STORE must be auto, postgres or kubernetes, got "${store}"`);
  }
  const secret = text(env, 'ENGINE_DATABASE_SECRET') ?? 'switchboard-database/url';
  const match = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)\/([-._a-zA-Z0-9]{1,253})$/.exec(secret);
  if (match === null) {
    throw new ConfigError(`ENGINE_DATABASE_SECRET must be <secret name>/<key>, got "${secret}"`);
  }
  return {
    store,
    kubeconfig: (text(env, 'KUBECONFIG') ?? '').split(path.delimiter).find((entry) => entry !== ''),
    leaseNamespace: text(env, 'LEASE_NAMESPACE') === undefined ? undefined : namespace(env, 'LEASE_NAMESPACE'),
    engineDatabaseSecret: { name: match[1] as string, key: match[3] as string },
  };
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const secret = text(env, 'SWITCHBOARD_SECRET');
  if (secret !== undefined && secret.length < 32)
    throw new ConfigError('SWITCHBOARD_SECRET must be 32 characters or more');
  const logLevel = text(env, 'LOG_LEVEL') ?? 'info';
  if (!logLevels.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${logLevels.join(', ')}`);
  const issuer = text(env, 'OIDC_ISSUER');
  const databaseUrl = text(env, 'DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
  }
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host: text(env, 'HOST') ?? '127.0.0.1',
    databaseUrl,
    poolSize: integer(env, 'DATABASE_POOL_SIZE', 10, 1, 1000),
    dataDir: path.resolve(text(env, 'SWITCHBOARD_DATA_DIR') ?? '.switchboard'),
    embeddedPostgresPort: integer(env, 'EMBEDDED_POSTGRES_PORT', 54329, 1, 65535),
    secret,
    oidc:
      issuer === undefined
        ? undefined
        : {
            issuer,
            audience: text(env, 'OIDC_AUDIENCE'),
            jwksUri: url(env, 'OIDC_JWKS_URI'),
            emailClaim: text(env, 'OIDC_EMAIL_CLAIM') ?? 'email',
          },
    bodyLimit: integer(env, 'BODY_LIMIT', 1048576, 1024, 104857600),
    logLevel,
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 30000, 0, 3600000),
    engineHttpPort: integer(env, 'ENGINE_HTTP_PORT', 8081, 0, 65535),
    operatorHttpPort: integer(env, 'OPERATOR_HTTP_PORT', 8082, 0, 65535),
    admission: { tlsDir: text(env, 'ADMISSION_TLS_DIR'), port: integer(env, 'ADMISSION_PORT', 9443, 0, 65535) },
    webhookAllowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    webhookConcurrency: integer(env, 'WEBHOOK_CONCURRENCY', 64, 1, 10000),
    resourceNamespace: namespace(env, 'RESOURCE_NAMESPACE'),
    kubernetes: kubernetesSettings(env),
    sip: sipSettings(env),
    rtp: rtpSettings(env),
    ttsCommand: text(env, 'TTS_COMMAND') ?? 'espeak-ng',
    engineId: text(env, 'ENGINE_ID'),
  };
}
