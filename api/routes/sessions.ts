/**
 * Operations 1-2: end-user tokens. The backend mints a user token with its application key (scopes at most the
 * key's; the user must exist now); a signed-in member mints their own member token from their login, in the
 * workspace the login names.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../../core/errors.ts';
import { memberByEmail } from '../../core/identity/members.ts';
import { workspaceAndUser } from '../../core/identity/workspaces.ts';
import { defineOperation, requireWorkspace, type Services } from '../route.ts';
import { grantableScopes } from '../scope-grants.ts';
import { DateTime, ScopeList, Uuid } from '../schemas.ts';
import { mintToken, type TokenClaims } from '../tokens.ts';

export const Session = Type.Object({
  token: Type.String({ description: 'Opaque; send as Authorization: Bearer' }),
  expiresAt: DateTime,
  applicationId: Type.String(),
  workspaceId: Uuid,
  externalWorkspaceId: Type.String(),
  externalUserId: Type.Union([Type.String(), Type.Null()], { description: 'null in a member token' }),
  userId: Type.Optional(Uuid),
  memberId: Type.Optional(Uuid),
  scopes: Type.Array(Type.String()),
});

/** Mints the token and answers the session record. */
async function session(key: Uint8Array, claims: TokenClaims) {
  const { token, expiresAt } = await mintToken(key, claims);
  return {
    status: 201,
    body: {
      token,
      expiresAt: expiresAt.toISOString(),
      applicationId: claims.applicationId,
      workspaceId: claims.workspaceId,
      externalWorkspaceId: claims.externalWorkspaceId,
      externalUserId: claims.externalUserId,
      ...(claims.kind === 'user' ? { userId: claims.subjectId } : { memberId: claims.subjectId }),
      scopes: claims.scopes,
    },
  };
}

export function sessionRoutes(app: FastifyInstance, services: Services) {
  defineOperation(app, services, 'createSession', {
    schemas: {
      body: Type.Object(
        {
          externalWorkspaceId: Type.String({ minLength: 1, maxLength: 200 }),
          externalUserId: Type.String({ minLength: 1, maxLength: 200 }),
          scopes: ScopeList,
        },
        { additionalProperties: false },
      ),
      response: { 201: Session },
    },
    handler: async ({ db, body, principal }) => {
      const scopes = grantableScopes(body.scopes, principal.scopes);
      const row = await workspaceAndUser(
        db,
        principal.applicationId as string,
        body.externalWorkspaceId,
        body.externalUserId,
      );
      if (row === undefined) throw new ApiError('not_found', `workspace "${body.externalWorkspaceId}" not found`);
      if (row.user_id === null) throw new ApiError('not_found', `user "${body.externalUserId}" not found`);
      return session(services.keys.tokens, {
        kind: 'user',
        applicationId: principal.applicationId as string,
        workspaceId: row.workspace_id,
        externalWorkspaceId: body.externalWorkspaceId,
        subjectId: row.user_id,
        externalUserId: body.externalUserId,
        scopes,
      });
    },
  });

  defineOperation(app, services, 'createMemberSession', {
    optionalBody: true,
    schemas: {
      body: Type.Object({ scopes: Type.Optional(ScopeList) }, { additionalProperties: false }),
      response: { 201: Session },
    },
    handler: async (context) => {
      const { db, body, principal } = context;
      const login = principal.login;
      if (login === undefined) throw new ApiError('forbidden', 'a member login is required');
      const ref = requireWorkspace(context);
      // One issuer serves every application, and the same email may be a member in several of them: the member is
      // looked up in the workspace the login names (so within its application) and nowhere else.
      const member = await memberByEmail(db, ref.id, login.email);
      if (member === undefined) throw new ApiError('forbidden', 'this login is not a member of that workspace');
      const scopes = grantableScopes(body.scopes, new Set(member.scopes));
      return session(services.keys.tokens, {
        kind: 'member',
        applicationId: ref.applicationId,
        workspaceId: ref.id,
        externalWorkspaceId: ref.externalWorkspaceId,
        subjectId: member.id,
        externalUserId: null,
        scopes,
      });
    },
  });
}
