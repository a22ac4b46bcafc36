/**
 * Shared setup of the identity tests (test/api/identity/): the service start (with member logins against a local
 * OIDC issuer when a file needs them) and the requests those tests make over and over (workspaces, keys, user and
 * member sessions, lists walked page by page).
 *
 * The helpers read the file's service (and issuer) when called, so a file takes them at load time, beside the service
 * it starts before its tests:
 *
 *     const { service } = identityServiceForFile(test);
 *     const { createKey, mintSession } = identityHelpers(() => service);
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionContext, TestFn } from 'ava';
import { issueKey } from '../../core/identity/applications.ts';
import { createMember } from '../../core/identity/members.ts';
import type { Scope } from '../../core/scopes.ts';
import { type LoginOptions, type OidcIssuer, startOidcIssuer } from './oidc-issuer.ts';
import { type Answer, startService, type TestService } from './service.ts';

export const fifteenMinutes = 15 * 60_000;

/** A service with every role; with member logins configured against `issuer` when given. */
export function startIdentityService(issuer?: OidcIssuer): Promise<TestService> {
  return startService(issuer ? { OIDC_ISSUER: issuer.issuer, OIDC_AUDIENCE: issuer.audience } : {});
}

/**
 * The service of an identity test file (every role, as startIdentityService starts it), started before the file's
 * tests and closed after them; with `logins`, member logins are configured against a local OIDC issuer, `oidc`,
 * started first and closed last (without, `oidc` stays empty). Called at load time:
 * `const { service, oidc } = identityServiceForFile(test, { logins: true });`.
 */
export function identityServiceForFile(
  test: TestFn,
  options: { logins?: boolean } = {},
): { service: TestService; oidc: OidcIssuer } {
  const service = {} as TestService;
  const oidc = {} as OidcIssuer;
  let started: TestService | undefined;
  let issuer: OidcIssuer | undefined;
  test.before(async () => {
    if (options.logins) {
      issuer = await startOidcIssuer();
      Object.defineProperties(oidc, Object.getOwnPropertyDescriptors(issuer));
    }
    started = await startIdentityService(issuer);
    Object.defineProperties(service, Object.getOwnPropertyDescriptors(started));
  });
  test.after.always(async () => {
    await started?.close();
    await issuer?.close();
  });
  return { service, oidc };
}

export function flipSignature(token: string): string {
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const first = signature[0] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${first}${signature.slice(1)}`;
}

/** The answer of a credential that got past authentication and authorization: the (empty) list of numbers. */
export function isNumberList(t: ExecutionContext, answer: Answer) {
  t.is(answer.status, 200, answer.text);
  t.deepEqual(answer.body, { data: [], nextCursor: null });
}

export function newEmail(name = 'member') {
  return `${name}-${randomUUID()}@example.com`;
}

/** The helpers bound to a file's service and, for member logins, its OIDC issuer (both read at each call). */
export function identityHelpers(service: () => TestService, oidc?: () => OidcIssuer) {
  async function createWorkspace(apiKey: string, externalWorkspaceId = `ws-${randomUUID()}`, timezone = 'UTC') {
    const answer = await service().request('POST', '/api/v1/workspaces', {
      auth: apiKey,
      body: { externalWorkspaceId, name: `Workspace ${externalWorkspaceId}`, timezone },
    });
    if (answer.status !== 201) throw new Error(`workspace: ${answer.status} ${answer.text}`);
    return answer.body as { id: string; externalWorkspaceId: string; name: string; timezone: string };
  }

  async function createKey(apiKey: string, body: { name?: string; scopes?: string[] } = {}) {
    const answer = await service().request('POST', '/api/v1/application/keys', { auth: apiKey, body });
    if (answer.status !== 201) throw new Error(`key: ${answer.status} ${answer.text}`);
    return answer.body as { key: { id: string; prefix: string; scopes: string[] }; apiKey: string };
  }

  /** A key holding `scopes`, issued the way `switchboard applications keys create --scopes` issues it. */
  async function keyOf(applicationId: string, scopes: readonly Scope[]) {
    return (await issueKey(service().pool, { applicationId, name: 'created by switchboard applications keys', scopes }))
      .secret;
  }

  function createKeyAnswer(auth: string, body: Record<string, unknown> = {}) {
    return service().request('POST', '/api/v1/application/keys', { auth, body });
  }

  async function listKeys(apiKey: string) {
    const answer = await service().request('GET', '/api/v1/application/keys', { auth: apiKey });
    if (answer.status !== 200) throw new Error(`keys: ${answer.status} ${answer.text}`);
    return answer.body.data as { id: string; scopes: string[]; revokedAt: string | null; workspaceId: string | null }[];
  }

  function mintSession(apiKey: string, externalWorkspaceId: string, externalUserId: string, scopes: string[]) {
    return service().request('POST', '/api/v1/sessions', {
      auth: apiKey,
      body: { externalWorkspaceId, externalUserId, scopes },
    });
  }

  async function userToken(apiKey: string, externalWorkspaceId: string, scopes: string[], externalUserId = 'alice') {
    const answer = await mintSession(apiKey, externalWorkspaceId, externalUserId, scopes);
    if (answer.status !== 201) throw new Error(`session: ${answer.status} ${answer.text}`);
    return answer.body.token as string;
  }

  /** A request that only an authenticated credential holding `numbers:*` gets past (the workspace's numbers). */
  function listNumbers(auth: string) {
    return service().request('GET', '/api/v1/numbers', { auth });
  }

  function addMember(workspaceId: string, email: string, scopes: Scope[] = ['calls:*', 'routing:*'], name?: string) {
    return createMember(service().pool, { workspaceId, email, scopes, ...(name ? { name } : {}) });
  }

  /** A login (OIDC access token) as the configured issuer would sign it, with a verified email unless claims say. */
  function login(email: string, options: LoginOptions = {}): Promise<string> {
    if (oidc === undefined) throw new Error('member logins need the OIDC issuer: pass it to identityHelpers');
    return oidc().sign(email, options);
  }

  function memberSession(loginToken: string, body?: { scopes?: string[] }, workspaceId?: string) {
    return service().request('POST', '/api/v1/member-sessions', {
      auth: loginToken,
      ...(body ? { body } : {}),
      ...(workspaceId ? { workspaceId } : {}),
    });
  }

  async function memberToken(workspaceId: string, scopes?: Scope[]) {
    const email = newEmail();
    const member = await addMember(workspaceId, email, scopes);
    const answer = await memberSession(await login(email), undefined, workspaceId);
    if (answer.status !== 201) throw new Error(`member session: ${answer.status} ${answer.text}`);
    return { member, token: answer.body.token as string };
  }

  /** Every item of a list, following `nextCursor` with the given page size. */
  async function walk(path: string, auth: string, limit: number, workspaceId?: string) {
    const items: { id: string }[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const page: Answer = await service().request('GET', `${path}?${query}`, {
        auth,
        ...(workspaceId ? { workspaceId } : {}),
      });
      if (page.status !== 200) throw new Error(`${path}: ${page.status} ${page.text}`);
      if (page.body.data.length > limit) throw new Error(`${path}: page larger than ${limit}`);
      items.push(...page.body.data);
      cursor = page.body.nextCursor;
      pages += 1;
      if (pages > 1000) throw new Error(`${path}: the cursor never ends`);
    } while (cursor !== null);
    return { items, pages };
  }

  return {
    createWorkspace,
    createKey,
    keyOf,
    createKeyAnswer,
    listKeys,
    mintSession,
    userToken,
    listNumbers,
    addMember,
    login,
    memberSession,
    memberToken,
    walk,
  };
}
