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
