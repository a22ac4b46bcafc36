/** Schemas several operations share. */
import { Type } from 'typebox';
import { allScopes } from '../core/scopes.ts';

export const Uuid = Type.String({ format: 'uuid' });
export const DateTime = Type.String({ format: 'date-time' });
export const IdParams = Type.Object({ id: Uuid }, { additionalProperties: false });
export const ScopeName = Type.Enum([...allScopes]);
export const ScopeList = Type.Array(ScopeName, { uniqueItems: true, maxItems: allScopes.length });
/** The body of an operation that takes no fields: `{}` (or none, where the operation lets it be left out). */
export const NoFields = Type.Object({}, { additionalProperties: false });

/** An application or workspace key as the API shows it. */
export const ApplicationKey = Type.Object({
  id: Uuid,
  name: Type.Union([Type.String(), Type.Null()]),
  prefix: Type.String({ description: 'The first characters of the key, to tell keys apart' }),
  scopes: Type.Array(Type.String()),
  workspaceId: Type.Union([Uuid, Type.Null()], { description: 'Set for workspace keys' }),
  createdAt: DateTime,
  lastUsedAt: Type.Union([DateTime, Type.Null()]),
  revokedAt: Type.Union([DateTime, Type.Null()], { description: 'When the key stops (or stopped) working' }),
});

export const IssuedKey = Type.Object({
  key: ApplicationKey,
  apiKey: Type.String({ description: 'The secret, shown this once' }),
});
