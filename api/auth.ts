/**
 * Who is calling (section 5), what they may do (operations.md), and which workspace a request reaches (section 4).
 * A credential is `Authorization: Bearer <credential>`; the kind is told by its form: `sbk_` application keys,
 * `sbw_` workspace keys, the legacy application secret with header `x-service-application`, service-issued JWTs
 * (user and member tokens) and, when OIDC is configured, the issuer's JWTs (member logins).
 */
import { decodeJwt } from 'jose';
import type pg from 'pg';
import type { Queryable } from '../core/database.ts';
import { ApiError, notFound } from '../core/errors.ts';
import { type KeyRecord, keyByHash, legacySecretMatches, noteKeyUse } from '../core/identity/applications.ts';
import { credentialKindOf, hashCredential } from '../core/identity/secrets.ts';
import { workspaceIdByExternalId, workspaceIdentity } from '../core/identity/workspaces.ts';
import { isApplicationId, isUuid } from '../core/ids.ts';
import { defaultKeyScopes } from '../core/scopes.ts';
import type { LoginVerifier, MemberLogin } from './oidc.ts';
import type { Credential, Operation } from './operations.ts';
import { isServiceToken, type TokenClaims, verifyToken } from './tokens.ts';

export type PrincipalKind =
  'application_key' | 'application_secret' | 'workspace_key' | 'user_token' | 'member_token' | 'user_session';

export interface Principal {
  kind: PrincipalKind;
  credential: Credential;
  /** The application acting; null for a member login, whose application is its workspace's. */
  applicationId: string | null;
  scopes: ReadonlySet<string>;
  keyId?: string;
  /** Tokens and workspace keys are bound to one workspace. */
  boundWorkspaceId?: string;
  token?: TokenClaims;
  login?: MemberLogin;
}

export interface WorkspaceRef {
  id: string;
  applicationId: string;
  externalWorkspaceId: string;
}

const unauthorized = (message: string) => new ApiError('unauthorized', message);
const credentialOf: Record<PrincipalKind, Credential> = {
  application_key: 'K',
  application_secret: 'K',
  workspace_key: 'W',
  user_token: 'U',
  member_token: 'M',
  user_session: 'S',
};
const credentialNames: Record<Credential, string> = {
  K: 'an application key',
  U: 'a user token',
  M: 'a member token',
  W: 'a workspace key',
  S: 'a member login',
};

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

const keyCacheLimit = 10_000;
const keyCacheMillis = 60_000;

/**
 * Keys looked up by hash, kept in memory while change notices flow (`keysChanged` after every commit that revokes
 * one). A lookup that raced a notice is not kept: the generation counter moves on every notice and reset.
 */
class KeyCache {
  private readonly entries = new Map<string, { record: KeyRecord; loadedAt: number }>();
  private generation = 0;

  constructor(private readonly enabled: () => boolean) {}

  get(hash: string): KeyRecord | undefined {
    const entry = this.entries.get(hash);
    if (entry === undefined) return undefined;
    if (!this.enabled() || Date.now() - entry.loadedAt > keyCacheMillis) {
      this.entries.delete(hash);
      return undefined;
    }
    return entry.record;
  }

  /** The generation to hand back to `set`, taken before the lookup. */
  begin(): number {
    return this.generation;
  }

  set(hash: string, record: KeyRecord, generation: number): void {
    if (generation !== this.generation || !this.enabled()) return;
    if (this.entries.size >= keyCacheLimit) this.entries.delete(this.entries.keys().next().value as string);
    this.entries.set(hash, { record, loadedAt: Date.now() });
  }

  forget(keyId: string): void {
    this.generation += 1;
    for (const [hash, entry] of this.entries) if (entry.record.id === keyId) this.entries.delete(hash);
  }

  clear(): void {
    this.generation += 1;
    this.entries.clear();
  }
}

export class Authenticator {
  private readonly lastUseWritten = new Map<string, number>();
  private readonly keys: KeyCache;

  constructor(
    private readonly pool: pg.Pool,
    private readonly tokenKey: Uint8Array,
    private readonly logins: LoginVerifier | undefined,
    private readonly onError: (error: unknown) => void,
    /** True while change notices flow; keys are cached only then. */
    cacheEnabled: () => boolean = () => false,
  ) {
    this.keys = new KeyCache(cacheEnabled);
  }

  /** A change notice: the key with this id changed (or `*`: anything may have). */
  keysChanged(keyId: string): void {
    if (keyId === '*') this.keys.clear();
    else this.keys.forget(keyId);
  }

  async authenticate(headers: Record<string, string | string[] | undefined>): Promise<Principal> {
    const authorization = header(headers, 'authorization');
    if (authorization === undefined) throw unauthorized('send a credential as Authorization: Bearer <credential>');
    const match = /^Bearer +([\x21-\x7e]{1,4096})$/i.exec(authorization.trim());
    if (match === null) throw unauthorized('the Authorization header must be "Bearer <credential>"');
    const credential = match[1] as string;

    const legacyApplication = header(headers, 'x-service-application');
    if (legacyApplication !== undefined) return this.legacySecret(legacyApplication, credential);

    const kind = credentialKindOf(credential);
    if (kind === 'application_key' || kind === 'workspace_key') return this.key(credential);
    if (credential.split('.').length === 3) return this.jwt(credential);
    throw unauthorized('the credential is not one this service issued');
  }

  private async legacySecret(applicationId: string, secret: string): Promise<Principal> {
    if (!isApplicationId(applicationId) || credentialKindOf(secret) !== 'application_secret') {
      throw unauthorized('the application secret or x-service-application is not valid');
    }
    if (!(await legacySecretMatches(this.pool, applicationId, hashCredential(secret))))
      throw unauthorized('the application secret or x-service-application is not valid');
    return {
      kind: 'application_secret',
      credential: 'K',
      applicationId,
      scopes: new Set(defaultKeyScopes),
    };
  }

  private async lookUpKey(secret: string): Promise<KeyRecord | undefined> {
    const hash = hashCredential(secret);
    const cacheKey = hash.toString('base64');
    const cached = this.keys.get(cacheKey);
    if (cached !== undefined) return cached;
    const generation = this.keys.begin();
    const row = await keyByHash(this.pool, hash);
    if (row !== undefined) this.keys.set(cacheKey, row, generation);
    return row;
  }

  private async key(secret: string): Promise<Principal> {
    const row = await this.lookUpKey(secret);
    if (row === undefined) throw unauthorized('the key is not valid');
    if (row.revoked_at !== null && row.revoked_at.getTime() <= Date.now()) throw unauthorized('the key was revoked');
    this.noteUse(row.id);
    const isWorkspaceKey = row.workspace_id !== null;
    return {
      kind: isWorkspaceKey ? 'workspace_key' : 'application_key',
      credential: isWorkspaceKey ? 'W' : 'K',
      applicationId: row.application_id,
      scopes: new Set(row.scopes),
      keyId: row.id,
      ...(isWorkspaceKey ? { boundWorkspaceId: row.workspace_id as string } : {}),
    };
  }

  /** Records `lastUsedAt` at most once a minute per key, off the request's path. */
  private noteUse(keyId: string): void {
    const now = Date.now();
    if (now - (this.lastUseWritten.get(keyId) ?? 0) < 60_000) return;
    this.lastUseWritten.set(keyId, now);
    noteKeyUse(this.pool, keyId).catch(this.onError);
  }

  private async jwt(token: string): Promise<Principal> {
    let issuer: unknown;
    try {
      issuer = decodeJwt(token).iss;
    } catch {
      throw unauthorized('the token is malformed');
    }
    if (isServiceToken({ iss: issuer })) {
      const claims = await verifyToken(this.tokenKey, token);
      if (claims === undefined) throw unauthorized('the token is expired or not valid; mint a new one');
      return {
        kind: claims.kind === 'user' ? 'user_token' : 'member_token',
        credential: claims.kind === 'user' ? 'U' : 'M',
        applicationId: claims.applicationId,
        scopes: new Set(claims.scopes),
        boundWorkspaceId: claims.workspaceId,
        token: claims,
      };
    }
    if (this.logins !== undefined && issuer === this.logins.issuer) {
      const login = await this.logins.verify(token);
      if (login === undefined) throw unauthorized('the login is expired or not valid');
      return { kind: 'user_session', credential: 'S', applicationId: null, scopes: new Set(), login };
    }
    throw unauthorized('the token was not issued by this service or its configured login issuer');
  }
}

/** 403s for a credential the operation does not take, or a scope it lacks. */
export function authorize(operation: Operation, principal: Principal): void {
  if (!operation.credentials.includes(credentialOf[principal.kind])) {
    if (operation.credentials.length === 1 && operation.credentials[0] === 'K') {
      throw new ApiError('application_key_required', `${operation.id} needs an application key`);
    }
    const accepted = operation.credentials.map((credential) => credentialNames[credential]).join(' or ');
    throw new ApiError('forbidden', `${operation.id} takes ${accepted}`);
  }
  if (operation.scope !== null && !principal.scopes.has(operation.scope)) {
    throw new ApiError('insufficient_scope', `${operation.id} needs scope ${operation.scope}`);
  }
}

const forbidden = () => new ApiError('workspace_forbidden', 'this credential cannot reach that workspace');

/**
 * Workspace references (id, application, external id) never change once made (workspaces are neither moved nor
 * renamed by their external id), so the ones found are remembered without any invalidation.
 */
const knownWorkspaces = new Map<string, WorkspaceRef>();
const knownWorkspacesLimit = 50_000;

function remember(workspace: WorkspaceRef): WorkspaceRef {
  if (knownWorkspaces.size >= knownWorkspacesLimit) knownWorkspaces.clear();
  knownWorkspaces.set(workspace.id, workspace);
  knownWorkspaces.set(`${workspace.applicationId}\n${workspace.externalWorkspaceId}`, workspace);
  return workspace;
}

async function workspaceById(db: Queryable, id: string): Promise<WorkspaceRef | undefined> {
  const known = knownWorkspaces.get(id.toLowerCase());
  if (known !== undefined) return known;
  const row = await workspaceIdentity(db, id);
  return (
    row && remember({ id: row.id, applicationId: row.application_id, externalWorkspaceId: row.external_workspace_id })
  );
}

async function workspaceByExternalId(
  db: Queryable,
  applicationId: string,
  externalId: string,
): Promise<WorkspaceRef | undefined> {
  const known = knownWorkspaces.get(`${applicationId}\n${externalId}`);
  if (known !== undefined) return known;
  const id = await workspaceIdByExternalId(db, applicationId, externalId);
  return id === undefined ? undefined : remember({ id, applicationId, externalWorkspaceId: externalId });
}

/** The workspace a request names in its headers (section 4), checked against the credential's reach. */
export async function workspaceFromHeaders(
  db: Queryable,
  principal: Principal,
  headers: Record<string, string | string[] | undefined>,
  required: boolean,
): Promise<WorkspaceRef | undefined> {
  const id = header(headers, 'x-service-workspace-id');
  const externalId = header(headers, 'x-service-external-workspace-id');
  if (id !== undefined && externalId !== undefined) {
    throw new ApiError('invalid_request', 'send x-service-workspace-id or x-service-external-workspace-id, not both');
  }
  if (id !== undefined && !isUuid(id))
    throw new ApiError('invalid_request', 'header x-service-workspace-id must be a UUID');
  if (externalId !== undefined && (externalId.length < 1 || externalId.length > 200)) {
    throw new ApiError('invalid_request', 'header x-service-external-workspace-id must be 1 to 200 characters');
  }

  if (principal.token !== undefined) {
    const token = principal.token;
    if (id !== undefined && id.toLowerCase() !== token.workspaceId) throw forbidden();
    if (externalId !== undefined) {
      throw new ApiError('invalid_request', 'x-service-external-workspace-id may be used only with an application key');
    }
    return {
      id: token.workspaceId,
      applicationId: token.applicationId,
      externalWorkspaceId: token.externalWorkspaceId,
    };
  }
  if (principal.boundWorkspaceId !== undefined) {
    if (id !== undefined && id.toLowerCase() !== principal.boundWorkspaceId) throw forbidden();
    if (externalId !== undefined) {
      throw new ApiError('invalid_request', 'x-service-external-workspace-id may be used only with an application key');
    }
    return workspaceById(db, principal.boundWorkspaceId);
  }
  if (principal.kind === 'user_session') {
    // A login belongs to no application: it reaches a workspace only by naming it, and then only as a member of it.
    if (externalId !== undefined) {
      throw new ApiError('invalid_request', 'x-service-external-workspace-id may be used only with an application key');
    }
    if (id === undefined) {
      if (!required) return undefined;
      throw new ApiError('invalid_request', 'name the workspace of the member with header x-service-workspace-id');
    }
    const workspace = await workspaceById(db, id);
    if (workspace === undefined) throw forbidden();
    return workspace;
  }

  // An application key or secret: any workspace of its application.
  if (id === undefined && externalId === undefined) {
    if (!required) return undefined;
    throw new ApiError(
      'invalid_request',
      'name the workspace with header x-service-workspace-id or x-service-external-workspace-id',
    );
  }
  let workspace: WorkspaceRef | undefined;
  if (id !== undefined) {
    workspace = await workspaceById(db, id);
  } else {
    workspace = await workspaceByExternalId(db, principal.applicationId as string, externalId as string);
  }
  if (workspace === undefined || workspace.applicationId !== principal.applicationId) throw forbidden();
  return workspace;
}

/** The workspace named by a path (`/workspaces/{id}`): 404 when there is none, 403 when it is another's. */
export async function workspaceFromPath(db: Queryable, principal: Principal, id: string): Promise<WorkspaceRef> {
  const workspace = await workspaceById(db, id);
  if (workspace === undefined) throw notFound('workspace');
  if (workspace.applicationId !== principal.applicationId) throw forbidden();
  return workspace;
}

/**
 * Who asked, as events' `actor` says it: `application` (a key), `member:<id>` (a member token) or
 * `user:<externalUserId>` (a user token).
 */
export function actorOf(principal: Principal): string {
  const token = principal.token;
  if (token === undefined) return 'application';
  return token.kind === 'member' ? `member:${token.subjectId}` : `user:${token.externalUserId ?? token.subjectId}`;
}
