/**
 * Lists (section 4): newest first, `limit` 1-200 (default 50), an opaque `cursor`. Pages are keyset pages over
 * `(created_at, id)`, so rows inserted between requests never shift a page (no duplicates, no skips). A cursor is the
 * last row's position, bound to its list and owner and signed with the service's cursor key: a malformed,
 * tampered or foreign cursor is 400 `invalid_cursor`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type Static, Type } from 'typebox';
import { ApiError } from '../core/errors.ts';
import { isUuid } from '../core/ids.ts';
import type { PageWindow } from '../core/rows.ts';

export const ListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Page size, 1 to 200' }),
    // No length bounds here: a cursor of any malformed shape, too long or empty included, is 400 invalid_cursor.
    cursor: Type.Optional(Type.String({ description: 'nextCursor of the previous page' })),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

export function pageOf<T extends ReturnType<typeof Type.Object>>(item: T) {
  return Type.Object({ data: Type.Array(item), nextCursor: Type.Union([Type.String(), Type.Null()]) });
}

const maxCursorLength = 512;

interface Position {
  ts: string;
  id: string;
}

function sign(key: Uint8Array, payload: string): Buffer {
  return createHmac('sha256', key).update(payload).digest().subarray(0, 16);
}

/** An opaque, signed cursor carrying string parts. */
export function sealCursor(key: Uint8Array, parts: readonly string[]): string {
  const payload = Buffer.from(JSON.stringify(parts)).toString('base64url');
  return `${payload}.${sign(key, payload).toString('base64url')}`;
}

/** The parts of a cursor this service sealed, or undefined for anything malformed, altered or made up. */
export function openCursor(key: Uint8Array, cursor: string, length: number): string[] | undefined {
  if (cursor.length === 0 || cursor.length > maxCursorLength) return undefined;
  const [payload, signature, extra] = cursor.split('.');
  if (payload === undefined || signature === undefined || extra !== undefined) return undefined;
  const expected = sign(key, payload);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(parsed) || parsed.length !== length || !parsed.every((part) => typeof part === 'string')) {
    return undefined;
  }
  return parsed as string[];
}

export function encodeCursor(key: Uint8Array, list: string, owner: string, position: Position): string {
  return sealCursor(key, [list, owner, position.ts, position.id]);
}

export function decodeCursor(key: Uint8Array, list: string, owner: string, cursor: string): Position {
  const parts = openCursor(key, cursor, 4);
  const [cursorList, cursorOwner, ts, id] = parts ?? [];
  if (cursorList !== list || cursorOwner !== owner || ts === undefined || id === undefined || !isUuid(id)) {
    throw new ApiError('invalid_cursor', 'cursor is not one this list handed out');
  }
  return { ts, id };
}

/** A list page: the rows `read` finds in the window the cursor names (up to `limit + 1`), and the next cursor. */
export interface PageRequest<Row> {
  key: Uint8Array;
  /** Names the list, so that one list's cursor is refused by another. */
  list: string;
  /** The application or workspace the list belongs to. */
  owner: string;
  query: ListQuery;
  /** The table module's list function (core/<domain>/), reading the window through `keysetPage`. */
  read: (window: PageWindow) => Promise<Row[]>;
}

export async function listPage<Row extends { id: string; cursor_ts: string }>(
  request: PageRequest<Row>,
): Promise<{ rows: Row[]; nextCursor: string | null }> {
  const window: PageWindow = { limit: request.query.limit };
  if (request.query.cursor !== undefined) {
    window.after = decodeCursor(request.key, request.list, request.owner, request.query.cursor);
  }
  const fetched = await request.read(window);
  const rows = fetched.slice(0, request.query.limit);
  const last = rows[rows.length - 1];
  const nextCursor =
    fetched.length > request.query.limit && last !== undefined
      ? encodeCursor(request.key, request.list, request.owner, { ts: last.cursor_ts, id: last.id })
      : null;
  return { rows, nextCursor };
}
