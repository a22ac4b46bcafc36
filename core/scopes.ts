/** The scopes of section 5. Each operation needs one; `calls:*` never implies `calls:supervise`. */
export const allScopes = [
  'numbers:*',
  'routing:*',
  'calls:*',
  'calls:supervise',
  'devices:*',
  'messages:*',
  'media:read',
  'webhooks:*',
  'metrics:read',
  'verify:send',
] as const;

export type Scope = (typeof allScopes)[number];

export function isScope(value: string): value is Scope {
  return (allScopes as readonly string[]).includes(value);
}

/** Scopes an application key gets when none are named: every scope but the workspace keys' `verify:send`. */
export const defaultKeyScopes: readonly Scope[] = allScopes.filter((scope) => scope !== 'verify:send');

export const workspaceKeyScopes: readonly Scope[] = ['verify:send'];

/** Parses a comma list as given to the admin commands; throws on an unknown scope. */
export function parseScopeList(list: string): Scope[] {
  const scopes = list
    .split(',')
    .map((scope) => scope.trim())
    .filter((scope) => scope !== '');
  for (const scope of scopes) {
    if (!isScope(scope)) throw new Error(`unknown scope "${scope}"; known scopes: ${allScopes.join(', ')}`);
  }
  return [...new Set(scopes)] as Scope[];
}
