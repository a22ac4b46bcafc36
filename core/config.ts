/**
 * Configuration from the environment. Every variable is listed here once, with its default and its meaning; the
 * README's configuration table is written from this list (a test keeps the two in step).
 *
 * Each setting also says which roles read it and, for the ones the engine reads, how the pods of an engine pool get
 * it (operator/engine-pod-settings.ts builds their environment from this list, docs/kubernetes.md lists it): a
 * setting the engine reads cannot be added here without deciding how an engine pod gets it.
 *
 * Longer than 400 lines because the list of settings (about 250 lines of declarations, data rather than code) and
 * `loadConfig`, which reads each of them with the same name and default, are kept side by side so that they stay in
 * step; the README table, the chart and the engine pods' environment are all checked against this one list.
 */
import path from 'node:path';
import ipaddr from 'ipaddr.js';

/** The processes that read a setting (`all` runs the three). */
export type SettingReader = 'api' | 'engine' | 'operator';

/**
 * How the pods of an engine pool get a setting the engine reads (operator/engine-pool.ts).
 * - `operator`: the operator's own value, passed on when it has one (the same logs, receivers and limits as it);
 * - `secret`: a key of a Secret in the EnginePool's namespace that the operator's setting `reference` names;
 * - `pod`: a field of the pod itself (its name, its node's or its own address);
 * - `spec`: the EnginePool resource's spec, or this default when the spec leaves it out;
 * - `pool`: a value the pool's shape decides (a container binds every address, its data folder is a volume);
 * - `default`: deliberately left to the engine's default, for the reason given.
 */
export type EnginePodSource =
  | { from: 'operator' }
  | { from: 'secret'; reference: 'ENGINE_DATABASE_SECRET' | 'ENGINE_SWITCHBOARD_SECRET' | 'ENGINE_ICE_SERVERS_SECRET' }
  | { from: 'pod' }
  | { from: 'spec' }
  | { from: 'pool' }
  | { from: 'default'; reason: string };

export interface Setting {
  name: string;
  default: string;
  meaning: string;
  readBy: readonly SettingReader[];
  /** Given exactly when `readBy` has `engine`. */
  enginePod?: EnginePodSource;
}

const declared = [
  {
    name: 'PORT',
    default: '8080',
    meaning: 'TCP port of the HTTP API (and of health and metrics under `all`).',
    readBy: ['api'],
  },
  {
    name: 'METRICS_PORT',
    default: '(unset)',
    meaning:
      'A port of its own for `/metrics` (Prometheus text), on `HOST`: when set, the API’s `PORT` no longer serves it. Unset: `/metrics` is on `PORT`, beside `/api/v1`: keep that port off the public network, or set this.',
    readBy: ['api'],
  },
  {
    name: 'HOST',
    default: '127.0.0.1',
    meaning: 'Address the HTTP API listens on (`0.0.0.0` in a container).',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'pool' },
  },
  {
    name: 'DATABASE_URL',
    default: '(unset)',
    meaning: 'PostgreSQL 15+ connection string. Unset: an embedded PostgreSQL under `SWITCHBOARD_DATA_DIR`.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'secret', reference: 'ENGINE_DATABASE_SECRET' },
  },
  {
    name: 'DATABASE_POOL_SIZE',
    default: '10',
    meaning: 'Connections in the pool of each process.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'SWITCHBOARD_DATA_DIR',
    default: './.switchboard',
    meaning: 'Folder for the embedded PostgreSQL data; kept across restarts.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'pool' },
  },
  {
    name: 'EMBEDDED_POSTGRES_PORT',
    default: '54329',
    meaning: 'Port of the embedded PostgreSQL (loopback only).',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'default', reason: 'an engine pod always has DATABASE_URL: no embedded PostgreSQL' },
  },
  {
    name: 'SWITCHBOARD_SECRET',
    default: '(generated)',
    meaning:
      'Secret (32+ characters) that signs end-user tokens and list cursors. Unset: generated once and kept in the database.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'secret', reference: 'ENGINE_SWITCHBOARD_SECRET' },
  },
  {
    name: 'OIDC_ISSUER',
    default: '(unset)',
    meaning: 'Issuer of member logins (`user_session`). Unset: member logins are refused.',
    readBy: ['api'],
  },
  {
    name: 'OIDC_AUDIENCE',
    default: '(unset)',
    meaning: 'Required `aud` of member login tokens, when set.',
    readBy: ['api'],
  },
  {
    name: 'OIDC_JWKS_URI',
    default: '(discovered)',
    meaning: "The issuer's JSON Web Key Set. Unset: read from the issuer's `/.well-known/openid-configuration`.",
    readBy: ['api'],
  },
  {
    name: 'OIDC_EMAIL_CLAIM',
    default: 'email',
    meaning: 'Claim of the login token that names the member by email.',
    readBy: ['api'],
  },
  {
    name: 'OIDC_ALLOW_UNVERIFIED_EMAIL',
    default: 'false',
    meaning:
      '`true` accepts member logins whose `email_verified` claim is missing or false. Keep `false` unless the issuer verifies every email itself.',
    readBy: ['api'],
  },
  {
    name: 'BODY_LIMIT',
    default: '1048576',
    meaning: 'Largest request body in bytes; larger bodies get 413.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: {
      from: 'default',
      reason: 'the engine’s HTTP port serves health and metrics only, which take no request body',
    },
  },
  {
    name: 'IDEMPOTENCY_ANSWERS_PER_SCOPE',
    default: '1000000',
    meaning:
      'Idempotent answers one scope (an application, a workspace key, a user, a member) keeps for 24 hours; past it mutations get 409 `limit_exceeded`.',
    readBy: ['api'],
  },
  {
    name: 'IDEMPOTENCY_BYTES_PER_SCOPE',
    default: '1073741824',
    meaning:
      'Bytes of idempotent answers one scope keeps for 24 hours (as stored, sealed); past it mutations get 409 `limit_exceeded`.',
    readBy: ['api'],
  },
  {
    name: 'PHONE_FRAME_ANCESTORS',
    default: '(none)',
    meaning:
      "Origins allowed to show the `/phone` page in a frame (the embedding application’s, e.g. `https://app.example.com`), separated by spaces or commas. Unset: no page may frame it (`frame-ancestors 'none'`, `X-Frame-Options: DENY`).",
    readBy: ['api'],
  },
  {
    name: 'LOG_LEVEL',
    default: 'info',
    meaning: 'fatal, error, warn, info, debug or trace. JSON lines on stdout.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'SHUTDOWN_TIMEOUT_MS',
    default: '30000',
    meaning: 'On SIGTERM, how long in-flight requests may run before the process exits anyway.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'ENGINE_HTTP_PORT',
    default: '8081',
    meaning: 'Health and metrics port of `switchboard engine` (under `all`, `PORT` serves them).',
    readBy: ['engine'],
    enginePod: { from: 'pool' },
  },
  {
    name: 'OPERATOR_HTTP_PORT',
    default: '8082',
    meaning: 'Health and metrics port of `switchboard operator` (under `all`, `PORT` serves them).',
    readBy: ['operator'],
  },
  {
    name: 'ADMISSION_TLS_DIR',
    default: '(unset)',
    meaning:
      'A folder with `tls.crt` and `tls.key`: the operator then serves its admission webhook (`POST /validate`) over HTTPS on `ADMISSION_PORT`, as Kubernetes requires.',
    readBy: ['operator'],
  },
  {
    name: 'ADMISSION_PORT',
    default: '9443',
    meaning: 'HTTPS port of the admission webhook when `ADMISSION_TLS_DIR` is set.',
    readBy: ['operator'],
  },
  {
    name: 'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
    default: 'false',
    meaning:
      '`true` lets webhook URLs reach private, loopback and link-local hosts (self-hosted receivers, tests). Keep `false` otherwise.',
    readBy: ['api', 'engine', 'operator'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'SIP_HOST',
    default: '127.0.0.1',
    meaning: 'Address the engine takes SIP on (UDP and TCP) and names in its URIs.',
    readBy: ['engine'],
    enginePod: { from: 'pool' },
  },
  {
    name: 'SIP_PORT',
    default: '5060',
    meaning: 'SIP port of the engine, UDP and TCP (0: one the system picks).',
    readBy: ['engine'],
    enginePod: { from: 'spec' },
  },
  {
    name: 'ADVERTISED_HOST',
    default: '(SIP_HOST)',
    meaning:
      'Address carriers reach the engine at, put in its SIP URIs and SDP (the node or load balancer address). Required when SIP_HOST is 0.0.0.0 or ::.',
    readBy: ['engine'],
    enginePod: { from: 'pod' },
  },
  {
    name: 'RTP_HOST',
    default: '(SIP_HOST)',
    meaning: 'Address the engine receives RTP on (bind address).',
    readBy: ['engine'],
    enginePod: { from: 'pool' },
  },
  {
    name: 'RTP_PORT_MIN',
    default: '20000',
    meaning: 'Lowest RTP port (one per call leg).',
    readBy: ['engine'],
    enginePod: { from: 'spec' },
  },
  {
    name: 'RTP_PORT_MAX',
    default: '20999',
    meaning: 'Highest RTP port.',
    readBy: ['engine'],
    enginePod: { from: 'spec' },
  },
  {
    name: 'TTS_COMMAND',
    default: 'espeak-ng',
    meaning: 'Text-to-speech command for `{tts}` prompts: run as `<command> --stdout <text>`, WAV on stdout.',
    readBy: ['engine'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'ENGINE_ID',
    default: '(host name and SIP port)',
    meaning:
      'Names this engine as the owner of its calls; a restarted engine ends the calls it owned. Keep it stable per pod.',
    readBy: ['engine'],
    enginePod: { from: 'pod' },
  },
  {
    name: 'RESOURCE_NAMESPACE',
    default: 'switchboard',
    meaning:
      'Namespace of the custom resources (routing plans, queues) the API writes: the Kubernetes namespace in a cluster, a name in PostgreSQL without one.',
    readBy: ['api', 'operator'],
  },
  {
    name: 'RESOURCE_STORE',
    default: 'auto',
    meaning:
      'Where the custom resources live: `kubernetes` (the cluster of the pod, or of `KUBECONFIG`), `postgres` (a table, without a cluster), or `auto`: `kubernetes` inside a pod, `postgres` elsewhere.',
    readBy: ['api', 'operator'],
  },
  {
    name: 'KUBECONFIG',
    default: '~/.kube/config',
    meaning:
      'With `RESOURCE_STORE=kubernetes` outside a pod: the kubeconfig whose current context is the cluster (of a list, the first file).',
    readBy: ['api', 'operator'],
  },
  {
    name: 'LEASE_NAMESPACE',
    default: '(the pod’s namespace, else RESOURCE_NAMESPACE)',
    meaning: 'Namespace of the operator’s leader-election Lease, in a cluster.',
    readBy: ['operator'],
  },
  {
    name: 'ENGINE_DATABASE_SECRET',
    default: 'switchboard-database/url',
    meaning:
      'The Secret and key (`name/key`, in the EnginePool’s namespace) holding DATABASE_URL for the engine pods the operator runs.',
    readBy: ['operator'],
  },
  {
    name: 'ENGINE_SWITCHBOARD_SECRET',
    default: '(unset)',
    meaning:
      'The Secret and key (`name/key`, in the EnginePool’s namespace) holding SWITCHBOARD_SECRET for the engine pods; needed with SWITCHBOARD_SECRET in a cluster.',
    readBy: ['operator'],
  },
  {
    name: 'ICE_SERVERS',
    default: '[]',
    meaning:
      'STUN and TURN servers for browser calls: a JSON array of `{ "urls": <a URL or a list>, "username", "credential" }` (`stun:`, `stuns:`, `turn:` or `turns:` URLs; a TURN server needs the other two). The engine’s WebRTC legs use them and the API hands them to devices with each offer, never storing them. Empty: host candidates only.',
    readBy: ['api', 'engine'],
    // A TURN credential is a credential: it reaches the pods through a Secret, never a value in a child.
    enginePod: { from: 'secret', reference: 'ENGINE_ICE_SERVERS_SECRET' },
  },
  {
    name: 'WEBRTC_ADDRESSES',
    default: '(the RTP address)',
    meaning:
      'The IP addresses the engine’s WebRTC offers list as host candidates, comma-separated: those browsers reach the engine at. Unset: RTP_HOST, or ADVERTISED_HOST when RTP_HOST is 0.0.0.0 or ::. No other address of the machine is offered; the servers of ICE_SERVERS add their own candidates.',
    readBy: ['engine'],
    enginePod: {
      from: 'default',
      reason: 'each pod offers its own ADVERTISED_HOST, the node’s address on the host network and the pod’s off it',
    },
  },
  {
    name: 'WEBRTC_MEDIA',
    default: 'g711',
    meaning:
      'What carries a browser leg’s audio: `g711` (werift; PCMU or PCMA end to end, no codec work: the lighter by far) or `libwebrtc` (`@roamhq/wrtc`; also speaks Opus to a browser that will not do G.711).',
    readBy: ['engine'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'ENGINE_ICE_SERVERS_SECRET',
    default: '(unset)',
    meaning:
      'The Secret and key (`name/key`, in the EnginePool’s namespace) holding ICE_SERVERS for the engine pods. Unset: the pods use host candidates only.',
    readBy: ['operator'],
  },
  {
    name: 'WEBHOOK_CONCURRENCY',
    default: '64',
    meaning: 'Webhook attempts one engine process makes at once (each stream has at most one in flight).',
    readBy: ['engine'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'WEBHOOK_APPLICATION_CONCURRENCY',
    default: '(half of WEBHOOK_CONCURRENCY)',
    meaning:
      'Webhook attempts in flight at once for all of one application’s endpoints, over all engine processes (1 to `WEBHOOK_CONCURRENCY`): the rest of each process’s attempts stay free for other applications.',
    readBy: ['engine'],
    enginePod: { from: 'operator' },
  },
  {
    name: 'WEBHOOK_ENDPOINT_CONCURRENCY',
    default: '(a quarter of WEBHOOK_CONCURRENCY)',
    meaning:
      'Webhook attempts in flight at once to one endpoint, over all engine processes (1 to `WEBHOOK_APPLICATION_CONCURRENCY`): a slow endpoint leaves room for its application’s other endpoints.',
    readBy: ['engine'],
    enginePod: { from: 'operator' },
  },
] as const satisfies readonly Setting[];

export const settings: readonly Setting[] = declared;

/** The names of the settings an engine pod gets `from` this source: the pool builder must say how it sets each. */
export type EngineSettingFrom<Source extends EnginePodSource['from']> = Extract<
  (typeof declared)[number],
  { enginePod: { from: Source } }
>['name'];

export class ConfigError extends Error {}

export interface OidcConfig {
  issuer: string;
  audience: string | undefined;
  jwksUri: string | undefined;
  emailClaim: string;
  /** OIDC_ALLOW_UNVERIFIED_EMAIL: a login need not carry `email_verified: true`. */
  allowUnverifiedEmail: boolean;
}

export interface Config {
  port: number;
  /** METRICS_PORT: `/metrics` on a listener of its own (and not on `port`), when set. */
  metricsPort: number | undefined;
  host: string;
  databaseUrl: string | undefined;
  poolSize: number;
  dataDir: string;
  embeddedPostgresPort: number;
  secret: string | undefined;
  oidc: OidcConfig | undefined;
  bodyLimit: number;
  /** IDEMPOTENCY_ANSWERS_PER_SCOPE and IDEMPOTENCY_BYTES_PER_SCOPE: what one idempotency scope keeps. */
  idempotency: { answersPerScope: number; bytesPerScope: number };
  /** PHONE_FRAME_ANCESTORS: the origins that may frame `/phone` (none: no page may). */
  phoneFrameAncestors: readonly string[];
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
  /**
   * Webhook attempts in flight at once for one application's endpoints and to one endpoint, over all engine processes
   * (WEBHOOK_APPLICATION_CONCURRENCY, WEBHOOK_ENDPOINT_CONCURRENCY).
   */
  webhookShares: WebhookShares;
  /** Namespace of the custom resources the API writes (RESOURCE_NAMESPACE). */
  resourceNamespace: string;
  /**
   * RESOURCE_STORE, LEASE_NAMESPACE, ENGINE_DATABASE_SECRET and ENGINE_SWITCHBOARD_SECRET: the cluster, when the
   * resources live in one.
   */
  kubernetes: {
    store: 'auto' | 'postgres' | 'kubernetes';
    /** KUBECONFIG's first file, when set. */
    kubeconfig: string | undefined;
    leaseNamespace: string | undefined;
    engineDatabaseSecret: SecretKeyReference;
    engineSwitchboardSecret: SecretKeyReference | undefined;
    /** ENGINE_ICE_SERVERS_SECRET: where the engine pods read ICE_SERVERS, when they have any. */
    engineIceServersSecret: SecretKeyReference | undefined;
  };
  /**
   * This process's own values of the settings an operator passes on to the engine pods it runs (`from: 'operator'`),
   * those it was given, as given (already checked here).
   */
  forEnginePods: Readonly<Record<string, string>>;
  /** `host` is bound; `advertisedHost` goes in URIs, Via and SDP. */
  sip: { host: string; port: number; advertisedHost: string };
  rtp: { host: string; portMin: number; portMax: number };
  ttsCommand: string;
  /** ENGINE_ID, when set. */
  engineId: string | undefined;
  /** ICE_SERVERS: the STUN and TURN servers of browser calls (none: host candidates only). Never logged. */
  iceServers: readonly IceServer[];
  /** WEBRTC_ADDRESSES: the addresses browser legs' offers list as host candidates, normalized. */
  webrtcAddresses: readonly string[];
  /** WEBRTC_MEDIA: the stack of browser legs' media. */
  webrtcMedia: 'g711' | 'libwebrtc';
}

/** One STUN or TURN server, as an `RTCIceServer` takes it. */
export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

/** A key of a Kubernetes Secret, `name/key` in a setting. */
export interface SecretKeyReference {
  name: string;
  key: string;
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

/**
 * PHONE_FRAME_ANCESTORS: origins (`https://app.example.com`, `http://localhost:3000`), each as the URL standard
 * serializes it, since each goes into a content-security-policy header as it is.
 */
function origins(env: Env, name: string): string[] {
  const raw = text(env, name);
  if (raw === undefined) return [];
  const list = raw.split(/[\s,]+/).filter((entry) => entry !== '');
  if (list.length > maxFrameAncestors) throw new ConfigError(`${name} lists more than ${maxFrameAncestors} origins`);
  return list.map((entry) => {
    let parsed: URL | undefined;
    try {
      parsed = new URL(entry);
    } catch {
      parsed = undefined;
    }
    // Scheme, host and port only: a path, query, fragment or credentials is no origin.
    if (
      parsed === undefined ||
      (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') ||
      !/^https?:\/\/[^/?#@]+\/?$/i.test(entry)
    ) {
      throw new ConfigError(`${name} must list origins such as https://app.example.com, got "${entry.slice(0, 200)}"`);
    }
    return parsed.origin;
  });
}

const maxFrameAncestors = 32;

/** Unicast IP addresses (WEBRTC_ADDRESSES), normalized (IPv6 compressed), without duplicates. */
function ipAddresses(name: string, list: readonly string[]): string[] {
  const addresses = list.map((entry) => {
    const address = entry.replace(/^\[(.*)\]$/, '$1');
    const valid = ipaddr.IPv4.isValidFourPartDecimal(address) || ipaddr.IPv6.isValid(address);
    const range = valid ? ipaddr.parse(address).range() : undefined;
    if (range === undefined || range === 'unspecified' || range === 'multicast' || range === 'broadcast') {
      throw new ConfigError(`${name} must list unicast IP addresses, got "${entry.slice(0, 100)}"`);
    }
    return ipaddr.parse(address).toString();
  });
  return [...new Set(addresses)];
}

/**
 * WEBRTC_ADDRESSES, or the address RTP is reached at: RTP_HOST, or ADVERTISED_HOST when RTP binds a wildcard. ICE
 * candidates name IP addresses, so that address must be one.
 */
function webrtcAddresses(env: Env, rtp: Config['rtp'], sip: Config['sip']): string[] {
  const raw = text(env, 'WEBRTC_ADDRESSES');
  if (raw !== undefined) {
    const list = raw.split(',').map((entry) => entry.trim());
    if (list.length > 16) throw new ConfigError('WEBRTC_ADDRESSES lists more than 16 addresses');
    return ipAddresses('WEBRTC_ADDRESSES', list);
  }
  const [name, given] = wildcard(rtp.host) ? ['ADVERTISED_HOST', sip.advertisedHost] : ['RTP_HOST', rtp.host];
  const address = given === 'localhost' ? '127.0.0.1' : given;
  if (!ipaddr.isValid(address.replace(/^\[(.*)\]$/, '$1'))) {
    throw new ConfigError(
      `WEBRTC_ADDRESSES must list the IP addresses browsers reach the engine at: ${name} (${address}) is not an IP address`,
    );
  }
  return ipAddresses(name, [address]);
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

function oneOf<T extends string>(env: Env, name: string, choices: readonly T[], fallback: T): T {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if ((choices as readonly string[]).includes(raw)) return raw as T;
  throw new ConfigError(`${name} must be ${choices.join(' or ')}, got "${raw}"`);
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  throw new ConfigError(`${name} must be true or false, got "${raw}"`);
}

/** `<secret name>/<key>`: a Secret's name (RFC 1123 subdomain) and one of its keys. */
function secretKeyReference(env: Env, name: string): SecretKeyReference | undefined {
  const raw = text(env, name);
  if (raw === undefined) return undefined;
  const match = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)\/([-._a-zA-Z0-9]{1,253})$/.exec(raw);
  if (match === null) throw new ConfigError(`${name} must be <secret name>/<key>, got "${raw}"`);
  return { name: match[1] as string, key: match[3] as string };
}

function kubernetesSettings(env: Env): Config['kubernetes'] {
  const store = text(env, 'RESOURCE_STORE') ?? 'auto';
  if (store !== 'auto' && store !== 'postgres' && store !== 'kubernetes') {
    throw new ConfigError(`RESOURCE_STORE must be auto, postgres or kubernetes, got "${store}"`);
  }
  return {
    store,
    kubeconfig: (text(env, 'KUBECONFIG') ?? '').split(path.delimiter).find((entry) => entry !== ''),
    leaseNamespace: text(env, 'LEASE_NAMESPACE') === undefined ? undefined : namespace(env, 'LEASE_NAMESPACE'),
    engineDatabaseSecret: secretKeyReference(env, 'ENGINE_DATABASE_SECRET') ?? {
      name: 'switchboard-database',
      key: 'url',
    },
    engineSwitchboardSecret: secretKeyReference(env, 'ENGINE_SWITCHBOARD_SECRET'),
    engineIceServersSecret: secretKeyReference(env, 'ENGINE_ICE_SERVERS_SECRET'),
  };
}

/** The most ICE servers taken (browsers warn beyond a few; each server is a round of gathering). */
const maxIceServers = 16;

/**
 * ICE_SERVERS: a JSON array of `{ urls, username?, credential? }`. The errors name the setting and what is wrong,
 * never the value: it may hold a TURN credential.
 */
function iceServers(env: Env): IceServer[] {
  const raw = text(env, 'ICE_SERVERS');
  if (raw === undefined) return [];
  const refuse = (why: string): never => {
    throw new ConfigError(`ICE_SERVERS must be a JSON array of { urls, username?, credential? }: ${why}`);
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return refuse('it is not JSON');
  }
  if (!Array.isArray(parsed)) return refuse('it is not an array');
  if (parsed.length > maxIceServers) return refuse(`more than ${maxIceServers} servers`);
  return parsed.map((entry: unknown, index): IceServer => {
    const at = `entry ${index}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return refuse(`${at} is not an object`);
    const { urls, username, credential, ...rest } = entry as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) return refuse(`${at} has an unknown field (${unknown.map((key) => key.slice(0, 40))})`);
    const list = typeof urls === 'string' ? [urls] : urls;
    if (!Array.isArray(list) || list.length === 0) return refuse(`${at}: urls must be a URL or a non-empty list`);
    for (const candidate of list) {
      if (typeof candidate !== 'string' || !/^(stuns?|turns?):[^\s]+$/.test(candidate)) {
        return refuse(`${at}: each url must be a stun:, stuns:, turn: or turns: URL`);
      }
    }
    for (const [field, value] of [
      ['username', username],
      ['credential', credential],
    ] as const) {
      if (value !== undefined && (typeof value !== 'string' || value.length > 512)) {
        return refuse(`${at}: ${field} must be a string of at most 512 characters`);
      }
    }
    const turn = (list as string[]).some((candidate) => candidate.startsWith('turn'));
    if (turn && (username === undefined || credential === undefined)) {
      return refuse(`${at}: a TURN server needs a username and a credential`);
    }
    return {
      urls: typeof urls === 'string' ? urls : [...(list as string[])],
      ...(username !== undefined ? { username: username as string } : {}),
      ...(credential !== undefined ? { credential: credential as string } : {}),
    };
  });
}

/** The shares of the webhook attempts in flight (docs/events.md, "Sharing the attempts"), over all engine processes. */
export interface WebhookShares {
  /** For all of one application's endpoints. */
  application: number;
  /** To one endpoint. */
  endpoint: number;
}

/**
 * The default shares for engine processes that each make `concurrency` attempts at once: an application half of them,
 * an endpoint a quarter, so that one slow application leaves half of every process to the others and one slow
 * endpoint half of its application's share to the application's other endpoints.
 */
export function webhookShares(concurrency: number): WebhookShares {
  return { application: Math.max(1, Math.floor(concurrency / 2)), endpoint: Math.max(1, Math.floor(concurrency / 4)) };
}

function webhookShareSettings(env: Env, concurrency: number): WebhookShares {
  const defaults = webhookShares(concurrency);
  const application = integer(env, 'WEBHOOK_APPLICATION_CONCURRENCY', defaults.application, 1, 10000);
  if (application > concurrency) {
    throw new ConfigError(
      `WEBHOOK_APPLICATION_CONCURRENCY must be at most WEBHOOK_CONCURRENCY (${concurrency}), got ${application}: one application could take every attempt of an engine process`,
    );
  }
  const endpoint = integer(env, 'WEBHOOK_ENDPOINT_CONCURRENCY', Math.min(defaults.endpoint, application), 1, 10000);
  if (endpoint > application) {
    throw new ConfigError(
      `WEBHOOK_ENDPOINT_CONCURRENCY must be at most WEBHOOK_APPLICATION_CONCURRENCY (${application}), got ${endpoint}`,
    );
  }
  return { application, endpoint };
}

/** The settings passed on to engine pods that `env` gives (loadConfig has checked each). */
function forEnginePods(env: Env): Record<string, string> {
  const given: Record<string, string> = {};
  for (const setting of settings) {
    const value = text(env, setting.name);
    if (setting.enginePod?.from === 'operator' && value !== undefined) given[setting.name] = value;
  }
  return given;
}

const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const secret = text(env, 'SWITCHBOARD_SECRET');
  if (secret !== undefined && secret.length < 32)
    throw new ConfigError('SWITCHBOARD_SECRET must be 32 characters or more');
  const logLevel = text(env, 'LOG_LEVEL') ?? 'info';
  if (!logLevels.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${logLevels.join(', ')}`);
  const issuer = text(env, 'OIDC_ISSUER');
  // Read even without an issuer, so that a misspelt value fails at start rather than when logins are configured.
  const allowUnverifiedEmail = boolean(env, 'OIDC_ALLOW_UNVERIFIED_EMAIL', false);
  const webhookConcurrency = integer(env, 'WEBHOOK_CONCURRENCY', 64, 1, 10000);
  const databaseUrl = text(env, 'DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must start with postgres:// or postgresql://');
  }
  const sip = sipSettings(env);
  const rtp = rtpSettings(env);
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const metricsPort = text(env, 'METRICS_PORT') === undefined ? undefined : integer(env, 'METRICS_PORT', 0, 0, 65535);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError('METRICS_PORT must be another port than PORT: it takes /metrics off the API’s port');
  }
  return {
    port,
    metricsPort,
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
            allowUnverifiedEmail,
          },
    bodyLimit: integer(env, 'BODY_LIMIT', 1048576, 1024, 104857600),
    idempotency: {
      answersPerScope: integer(env, 'IDEMPOTENCY_ANSWERS_PER_SCOPE', 1000000, 1, 1000000000),
      bytesPerScope: integer(env, 'IDEMPOTENCY_BYTES_PER_SCOPE', 1073741824, 1024, 1099511627776),
    },
    phoneFrameAncestors: origins(env, 'PHONE_FRAME_ANCESTORS'),
    logLevel,
    shutdownTimeoutMs: integer(env, 'SHUTDOWN_TIMEOUT_MS', 30000, 0, 3600000),
    engineHttpPort: integer(env, 'ENGINE_HTTP_PORT', 8081, 0, 65535),
    operatorHttpPort: integer(env, 'OPERATOR_HTTP_PORT', 8082, 0, 65535),
    admission: { tlsDir: text(env, 'ADMISSION_TLS_DIR'), port: integer(env, 'ADMISSION_PORT', 9443, 0, 65535) },
    webhookAllowPrivateNetworks: boolean(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
    webhookConcurrency,
    webhookShares: webhookShareSettings(env, webhookConcurrency),
    resourceNamespace: namespace(env, 'RESOURCE_NAMESPACE'),
    kubernetes: kubernetesSettings(env),
    sip,
    rtp,
    ttsCommand: text(env, 'TTS_COMMAND') ?? 'espeak-ng',
    engineId: text(env, 'ENGINE_ID'),
    iceServers: iceServers(env),
    webrtcAddresses: webrtcAddresses(env, rtp, sip),
    webrtcMedia: oneOf(env, 'WEBRTC_MEDIA', ['g711', 'libwebrtc'] as const, 'g711'),
    forEnginePods: forEnginePods(env),
  };
}
