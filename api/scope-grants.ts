/** What a credential may grant (api/routes/application-keys.ts, sessions.ts, workspaces.ts): never beyond its own. */
import { ApiError } from '../core/errors.ts';
import type { Scope } from '../core/scopes.ts';

/**
 * The rule of operations 1-3, 5 and 10 (docs/foundation.md, Identity): a credential issues, mints or revokes only
 * what holds no scope it lacks itself. Throws 403 `insufficient_scope` naming the scopes it lacks.
 */
export function requireHeldScopes(scopes: readonly string[], held: ReadonlySet<string>, action: string): void {
  const lacking = [...new Set(scopes.filter((scope) => !held.has(scope)))];
  if (lacking.length > 0) {
    throw new ApiError('insufficient_scope', `${action} needs ${lacking.join(', ')}, which this credential lacks`);
  }
}

/** A new key's or token's scopes: those asked for (by default the caller's own), never beyond the caller's. */
export function grantableScopes(requested: string[] | undefined, held: ReadonlySet<string>): Scope[] {
  const scopes = requested ?? [...held];
  requireHeldScopes(scopes, held, 'granting these scopes');
  return scopes as Scope[];
}
