/**
 * Member logins (`user_session`): OIDC access tokens (JWTs) from the configured issuer, verified with jose against
 * the issuer's JSON Web Key Set (fetched and cached by jose, refetched when an unknown key id appears).
 */
import { createRemoteJWKSet, errors, type JWTPayload, jwtVerify } from 'jose';
import type { OidcConfig } from '../core/config.ts';
import { ApiError } from '../core/errors.ts';
import { describeUnacceptableInput } from '../core/validation.ts';
import { assertNotHoldingConnection } from '../core/held-connections.ts';

export interface MemberLogin {
  issuer: string;
  subject: string;
  email: string;
}

export class LoginVerifier {
  private keySet: ReturnType<typeof createRemoteJWKSet> | undefined;
  private discovering: Promise<ReturnType<typeof createRemoteJWKSet>> | undefined;

  constructor(private readonly config: OidcConfig) {}

  get issuer(): string {
    return this.config.issuer;
  }

  private async keys(): Promise<ReturnType<typeof createRemoteJWKSet>> {
    if (this.keySet !== undefined) return this.keySet;
    this.discovering ??= (async () => {
      let jwksUri = this.config.jwksUri;
      if (jwksUri === undefined) {
        const base = this.config.issuer.replace(/\/$/, '');
        const response = await fetch(`${base}/.well-known/openid-configuration`, { redirect: 'error' });
        if (!response.ok) throw new Error(`OIDC discovery answered ${response.status}`);
        const document = (await response.json()) as { jwks_uri?: unknown };
        if (typeof document.jwks_uri !== 'string') throw new Error('OIDC discovery has no jwks_uri');
        jwksUri = document.jwks_uri;
      }
      this.keySet = createRemoteJWKSet(new URL(jwksUri));
      return this.keySet;
    })().finally(() => {
      this.discovering = undefined;
    });
    return this.discovering;
  }

  /** The member login a token proves, or undefined when it is not a valid login of the configured issuer. */
  async verify(token: string): Promise<MemberLogin | undefined> {
    assertNotHoldingConnection("a check of a member login with its issuer's keys");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, await this.keys(), {
        issuer: this.config.issuer,
        audience: this.config.audience,
        algorithms: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'],
      }));
    } catch (error) {
      if (error instanceof errors.JWKSTimeout || !(error instanceof errors.JOSEError)) {
        // The issuer (discovery or key set) could not be reached: not the caller's fault, and worth a retry.
        throw new ApiError('unavailable', 'the login issuer cannot be reached; retry later', {
          headers: { 'retry-after': '5' },
        });
      }
      return undefined;
    }
    const email = payload[this.config.emailClaim];
    if (typeof payload.sub !== 'string' || typeof email !== 'string' || email === '') return undefined;
    // An email no field may hold (a NUL, a lone surrogate) names no member, and PostgreSQL would refuse it.
    if (describeUnacceptableInput('claims', email) !== undefined) return undefined;
    // The member is found by this email: an address the issuer did not verify could be anyone's. Only the boolean
    // `true` counts (a missing claim is not a verification), unless the operator relaxes it for an issuer that
    // verifies every address without saying so.
    if (payload.email_verified !== true && !this.config.allowUnverifiedEmail) {
      throw new ApiError('unauthorized', "the login's email is not verified (email_verified must be true)");
    }
    return { issuer: this.config.issuer, subject: payload.sub, email };
  }
}
