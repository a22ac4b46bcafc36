/**
 * An OIDC issuer served over HTTP on a free port: the discovery document and a key set of one ES256 key, and logins
 * (access tokens) signed the way a real issuer signs them, for the member-login operations.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, type GenerateKeyPairResult, generateKeyPair, SignJWT } from 'jose';

/** What a login may have other than the issuer's own: another key, key id, audience, issuer, expiry or claims. */
export interface LoginOptions {
  key?: GenerateKeyPairResult['privateKey'];
  kid?: string;
  audience?: string;
  issuer?: string;
  /** Expiry in seconds since the epoch. */
  exp?: number;
  claims?: Record<string, unknown>;
}

export interface OidcIssuer {
  issuer: string;
  audience: string;
  /** How many times the discovery document was read. */
  readonly discoveryRequests: number;
  /** A login for this email, valid for `seconds` (default 5 minutes), with `email_verified: true`. */
  login(email: string, seconds?: number): Promise<string>;
  /** A login signed as the issuer would, with a verified email and a 5-minute life unless `options` say otherwise. */
  sign(email: string, options?: LoginOptions): Promise<string>;
  close(): Promise<void>;
}

export async function startOidcIssuer(audience = 'switchboard-test-audience'): Promise<OidcIssuer> {
  const keys = await generateKeyPair('ES256');
  const kid = 'login-key-1';
  const publicJwk = { ...(await exportJWK(keys.publicKey)), kid, alg: 'ES256', use: 'sig' };
  let issuer = '';
  let discoveryRequests = 0;
  const server = createServer((request, response) => {
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.url === '/.well-known/openid-configuration') {
      discoveryRequests += 1;
      send(200, { issuer, jwks_uri: `${issuer}/jwks` });
    } else if (request.url === '/jwks') send(200, { keys: [publicJwk] });
    else send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  async function sign(email: string, options: LoginOptions = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ email, email_verified: true, ...options.claims })
      .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? kid })
      .setSubject(`subject-${email}`)
      .setIssuer(options.issuer ?? issuer)
      .setAudience(options.audience ?? audience)
      .setIssuedAt(now)
      .setExpirationTime(options.exp ?? now + 300)
      .sign(options.key ?? keys.privateKey);
  }
  return {
    issuer,
    audience,
    get discoveryRequests() {
      return discoveryRequests;
    },
    login: (email, seconds = 300) => sign(email, { exp: Math.floor(Date.now() / 1000) + seconds }),
    sign,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
