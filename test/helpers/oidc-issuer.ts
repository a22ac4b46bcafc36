/**
 * An OIDC issuer served over HTTP on a free port: the discovery document and a key set of one ES256 key, and logins
 * (access tokens) signed the way a real issuer signs them, for the member-login operations.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';

export interface OidcIssuer {
  issuer: string;
  audience: string;
  /** A login for this email, valid for `seconds` (default 5 minutes), with `email_verified: true`. */
  login(email: string, seconds?: number): Promise<string>;
  close(): Promise<void>;
}

export async function startOidcIssuer(audience = 'switchboard-test-audience'): Promise<OidcIssuer> {
  const keys = await generateKeyPair('ES256');
  const kid = 'login-key-1';
  const publicJwk = { ...(await exportJWK(keys.publicKey)), kid, alg: 'ES256', use: 'sig' };
  let issuer = '';
  const server = createServer((request, response) => {
    const send = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.url === '/.well-known/openid-configuration') send(200, { issuer, jwks_uri: `${issuer}/jwks` });
    else if (request.url === '/jwks') send(200, { keys: [publicJwk] });
    else send(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    audience,
    async login(email, seconds = 300) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ email, email_verified: true })
        .setProtectedHeader({ alg: 'ES256', kid })
        .setSubject(`subject-${email}`)
        .setIssuer(issuer)
        .setAudience(audience)
        .setIssuedAt(now)
        .setExpirationTime(now + seconds)
        .sign(keys.privateKey);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
