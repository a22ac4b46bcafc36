/**
 * Digest authentication for the registrar (RFC 3261 section 22, RFC 8760; docs/phones.md, "SIP devices and the
 * registrar"): the challenges, the stateless nonces, the parsing of an Authorization header and the check of its
 * response. No package fits (the npm digest packages are HTTP clients, or servers tied to a framework); the hashes are
 * Node's.
 *
 * A nonce is `<issued, base 36 ms>.<random>.<mac>`, the mac an HMAC-SHA-256 of the rest and the address the
 * challenge went to, under a key every engine derives from the service secret: any engine pod checks a nonce another
 * issued without shared state, and a nonce answered from another address is refused (a REGISTER replayed from
 * elsewhere cannot move a binding there).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export type DigestAlgorithm = 'SHA-256' | 'MD5';
export const digestAlgorithms: readonly DigestAlgorithm[] = ['SHA-256', 'MD5'];

/** RFC 8760: the challenges in order of preference, one per algorithm, each with the same nonce and qop=auth. */
export function challengeHeaders(
  realm: string,
  nonce: string,
  algorithms: readonly DigestAlgorithm[],
  stale = false,
): string[] {
  return algorithms.map(
    (algorithm) =>
      `WWW-Authenticate: Digest realm="${realm}", nonce="${nonce}", algorithm=${algorithm}, qop="auth"` +
      (stale ? ', stale=true' : ''),
  );
}

const macOf = (key: Uint8Array, body: string, address: string) =>
  createHmac('sha256', key).update(`${body}|${address}`).digest('base64url').slice(0, 22);

/** A nonce for a challenge sent to `address` at `now`. */
export function makeNonce(key: Uint8Array, now: Date, address: string): string {
  const body = `${now.getTime().toString(36)}.${randomBytes(9).toString('base64url')}`;
  return `${body}.${macOf(key, body, address)}`;
}

/** How far another engine's clock may be ahead of ours. */
const clockSkewMs = 30_000;

/**
 * `valid`: issued by an engine of this service to `address`, at most `lifetimeMs` ago; `stale`: the same but older
 * (the client answers a fresh challenge without asking its user, RFC 2617 `stale`); else `invalid`.
 */
export function checkNonce(
  key: Uint8Array,
  nonce: string,
  now: Date,
  address: string,
  lifetimeMs: number,
): 'valid' | 'stale' | 'invalid' {
  const match = /^([0-9a-z]{1,11})\.([A-Za-z0-9_-]{12})\.([A-Za-z0-9_-]{22})$/.exec(nonce);
  if (match === null) return 'invalid';
  const expected = Buffer.from(macOf(key, `${match[1]}.${match[2]}`, address));
  if (!timingSafeEqual(expected, Buffer.from(match[3] as string))) return 'invalid';
  const age = now.getTime() - parseInt(match[1] as string, 36);
  if (age < -clockSkewMs) return 'invalid';
  return age > lifetimeMs ? 'stale' : 'valid';
}

export interface DigestCredentials {
  username: string;
  realm: string;
  nonce: string;
  uri: string;
  response: string;
  algorithm: DigestAlgorithm;
  qop: 'auth';
  /** The nonce count, as a number. */
  nc: number;
  /** As written (8 hex digits), for the hash. */
  ncText: string;
  cnonce: string;
}

/**
 * The parameters of a `Digest` Authorization value (RFC 3261 section 25.1 `credentials`), or undefined when it is
 * not one this registrar takes: any scheme but Digest, a syntax error, a parameter given twice, a missing username,
 * realm, nonce, uri, response, qop (we challenge with qop=auth, so it must come back), nc or cnonce, an algorithm
 * other than SHA-256 or MD5, or a response that is not the hash's length in hex.
 *
 * Read here rather than by sip.js's grammar: it has no rule for credentials (its `challenge` rule checks the same
 * syntax but keeps only realm, nonce and algorithm), and it costs far more than this one pattern.
 */
export function parseDigestCredentials(value: string): DigestCredentials | undefined {
  if (value.length > 4096 || !/^digest[ \t]/i.test(value)) return undefined;
  const params = authParams(value.replace(/^digest[ \t]+/i, ''));
  if (params === undefined) return undefined;
  const get = (name: string) => params.get(name);
  const algorithmText = get('algorithm') ?? 'MD5';
  const algorithm = digestAlgorithms.find((known) => known.toLowerCase() === algorithmText.toLowerCase());
  const [username, realm, nonce, uri, response, qop, nc, cnonce] = [
    'username',
    'realm',
    'nonce',
    'uri',
    'response',
    'qop',
    'nc',
    'cnonce',
  ].map(get);
  if (algorithm === undefined || qop?.toLowerCase() !== 'auth') return undefined;
  if (!username || realm === undefined || !nonce || !uri || !cnonce || nc === undefined) return undefined;
  if (!/^[0-9a-f]{8}$/i.test(nc)) return undefined;
  const hexLength = algorithm === 'MD5' ? 32 : 64;
  if (response === undefined || !new RegExp(`^[0-9a-f]{${hexLength}}$`, 'i').test(response)) return undefined;
  return {
    username,
    realm,
    nonce,
    uri,
    response: response.toLowerCase(),
    algorithm,
    qop: 'auth',
    nc: parseInt(nc, 16),
    ncText: nc,
    cnonce,
  };
}

/**
 * RFC 3261 section 25.1 `auth-param`s, `name=value` with a token or a quoted string as the value, separated by
 * commas: names lower-cased, quoted strings unescaped; undefined on a syntax error or a repeated name. A control
 * character, even escaped, is a syntax error (RFC 3261 `qdtext`): none belongs in credentials, and a NUL would
 * fail the database's look-up of the username.
 */
function authParams(text: string): Map<string, string> | undefined {
  const params = new Map<string, string>();
  // name = (quoted string | token), then a comma with more to come, or the end.
  const pattern =
    // eslint-disable-next-line no-control-regex -- control characters are what the quoted string refuses
    /\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*(?:"((?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[^\x00-\x08\x0a-\x1f\x7f])*)"|([!#$%&'*+\-.^_`|~0-9A-Za-z]+))\s*(?:,(?=\s*\S)|$)/y;
  let index = 0;
  while (index < text.length) {
    pattern.lastIndex = index;
    const match = pattern.exec(text);
    if (match === null) return undefined;
    const name = (match[1] as string).toLowerCase();
    if (params.has(name)) return undefined;
    params.set(name, match[2] !== undefined ? match[2].replace(/\\(.)/g, '$1') : (match[3] as string));
    index = pattern.lastIndex;
  }
  return params;
}

const hash = (algorithm: DigestAlgorithm, text: string) =>
  createHash(algorithm === 'MD5' ? 'md5' : 'sha256')
    .update(text, 'utf8')
    .digest('hex');

/** The response a client knowing `password` sends for `method` (RFC 2617 section 3.2.2.1, qop=auth). */
export function digestResponse(
  credentials: Pick<DigestCredentials, 'username' | 'realm' | 'nonce' | 'uri' | 'algorithm' | 'ncText' | 'cnonce'>,
  method: string,
  password: string,
): string {
  const { algorithm } = credentials;
  const ha1 = hash(algorithm, `${credentials.username}:${credentials.realm}:${password}`);
  const ha2 = hash(algorithm, `${method}:${credentials.uri}`);
  return hash(algorithm, `${ha1}:${credentials.nonce}:${credentials.ncText}:${credentials.cnonce}:auth:${ha2}`);
}

/** Whether the credentials' response is the one `password` gives, compared in constant time. */
export function digestMatches(credentials: DigestCredentials, method: string, password: string): boolean {
  const expected = Buffer.from(digestResponse(credentials, method, password));
  const given = Buffer.from(credentials.response);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
