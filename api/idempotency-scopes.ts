/**
 * Whose an idempotency key is (docs/foundation.md, "Idempotency"). A key lives in its sender's scope, and the sender
 * is part of a request's fingerprint, so a stored answer replays only to a credential that could have sent it:
 *
 * - the application's keys and its legacy secret: one scope per application, `application:<id>` (the string every
 *   credential used before the scopes were split, so the application's records keep replaying across the change).
 *   The sender is the application with the credential's scopes, not the key: a retry after a key rotation (a new key
 *   with the same scopes) replays; a narrower key's retry is another request (422);
 * - a workspace key: one scope per workspace, shared by its keys (a rotation replays alike);
 * - a user token: one scope per (application, workspace, user); a member token: per (application, workspace,
 *   member). A fresh token of the same person with the same scopes replays; another person's key is never seen;
 * - a member login (OIDC): its issuer and subject, as before.
 *
 * `earlier` is where the version before the split kept the same sender's answers and the fingerprint it gave them
 * (the application's scope; a key's id as the sender), read for as long as those may still be replayed (24 hours).
 */
import type { Principal } from './auth.ts';

export interface Sender {
  /** The scope the key's record lives in. */
  scope: string;
  /** Who sent it, as part of the fingerprint. */
  credential: string;
  earlier?: { scope: string; credential: string };
}

export function senderOf(principal: Principal): Sender {
  const scopes = [...principal.scopes].sort().join(',');
  const application = `application:${principal.applicationId}`;
  const { token, login, keyId } = principal;
  switch (principal.kind) {
    case 'application_key':
    case 'application_secret':
      return {
        scope: application,
        credential: `${application}:${scopes}`,
        earlier: {
          scope: application,
          credential: keyId === undefined ? `application_secret:${principal.applicationId}` : `key:${keyId}`,
        },
      };
    case 'workspace_key':
      return {
        scope: `workspace:${principal.applicationId}:${principal.boundWorkspaceId}`,
        credential: `workspace_key:${principal.boundWorkspaceId}:${scopes}`,
        earlier: { scope: application, credential: `key:${keyId}` },
      };
    case 'user_token':
    case 'member_token': {
      const person = principal.kind === 'user_token' ? 'user' : 'member';
      const credential = `${principal.kind}:${token?.subjectId}:${scopes}`;
      return {
        scope: `${person}:${principal.applicationId}:${token?.workspaceId}:${token?.subjectId}`,
        credential,
        earlier: { scope: application, credential },
      };
    }
    case 'user_session':
      return {
        scope: `login:${login?.issuer}:${login?.subject}`,
        credential: `login:${login?.issuer}:${login?.subject}`,
      };
  }
}
