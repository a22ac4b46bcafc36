/**
 * End-user tokens (user and member tokens): JWTs signed HS256 with the service's token key (jose). They are
 * stateless on purpose: the specification has issued tokens live to their expiry even after the user is removed or
 * the key revoked, and checking one costs no database round trip. Clients treat them as opaque.
 */
import { errors, jwtVerify, SignJWT } from 'jose';
import type { Scope } from '../core/scopes.ts';

export const tokenLifetimeSeconds = 15 * 60;
const issuer = 'switchboard';
const audience = 'switchboard-api';

export interface TokenClaims {
  kind: 'user' | 'member';
  applicationId: string;
  workspaceId: string;
  externalWorkspaceId: string;
  /** The application user's or member's service id. */
  subjectId: string;
  externalUserId: string | null;
  scopes: Scope[];
}

export async function mintToken(
  key: Uint8Array,
  claims: TokenClaims,
  now = new Date(),
): Promise<{ token: string; expiresAt: Date }> {
  const issuedAt = Math.floor(now.getTime() / 1000);
  const expiresAt = new Date((issuedAt + tokenLifetimeSeconds) * 1000);
  const token = await new SignJWT({
    knd: claims.kind,
    app: claims.applicationId,
    ws: claims.workspaceId,
    ews: claims.externalWorkspaceId,
    eu: claims.externalUserId,
    scp: claims.scopes,
  })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(issuer)
    .setAudience(audience)
    .setSubject(claims.subjectId)
    .setIssuedAt(issuedAt)
    .setExpirationTime(Math.floor(expiresAt.getTime() / 1000))
    .sign(key);
  return { token, expiresAt };
}

export function isServiceToken(payload: { iss?: unknown }): boolean {
  return payload.iss === issuer;
}

/** The claims of a valid token, or undefined for a forged, malformed or expired one. */
export async function verifyToken(key: Uint8Array, token: string): Promise<TokenClaims | undefined> {
  try {
    const { payload } = await jwtVerify(token, key, { issuer, audience, algorithms: ['HS256'], clockTolerance: 0 });
    const { knd, app, ws, ews, eu, scp, sub } = payload as Record<string, unknown>;
    if (
      (knd !== 'user' && knd !== 'member') ||
      typeof app !== 'string' ||
      typeof ws !== 'string' ||
      typeof ews !== 'string' ||
      typeof sub !== 'string' ||
      !(eu === null || typeof eu === 'string') ||
      !Array.isArray(scp)
    ) {
      return undefined;
    }
    return {
      kind: knd,
      applicationId: app,
      workspaceId: ws,
      externalWorkspaceId: ews,
      subjectId: sub,
      externalUserId: eu,
      scopes: scp as Scope[],
    };
  } catch (error) {
    if (error instanceof errors.JOSEError) return undefined;
    throw error;
  }
}
