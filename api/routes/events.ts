/**
 * Operation 80: the event log in commit-safe order (docs/events.md). A page serves only events of transactions
 * older than every transaction still running, so a position handed out is never overtaken by a late commit.
 */
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { ApiError } from '../../core/errors.ts';
import { readLog, resumeTxOf } from '../../core/events/log.ts';
import { isEventType } from '../../core/events/types.ts';
import { isUuid } from '../../core/ids.ts';
import { openCursor, sealCursor } from '../pagination.ts';
import { defineOperation, type Services } from '../route.ts';

interface Position {
  tx: string;
  index: string;
}

const start: Position = { tx: '0', index: '0' };
const digits = /^\d{1,20}$/;
const invalidCursor = () => new ApiError('invalid_cursor', 'after is not a position or event id this log handed out');

export function eventRoutes(app: FastifyInstance, services: Services) {
  const seal = (applicationId: string, position: Position) =>
    sealCursor(services.keys.cursors, ['events', applicationId, position.tx, position.index]);

  defineOperation(app, services, 'listEvents', {
    schemas: {
      querystring: Type.Object(
        {
          after: Type.Optional(Type.String({ description: 'A nextCursor, or the id of an event received by webhook' })),
          limit: Type.Integer({ minimum: 1, maximum: 500, default: 50 }),
          type: Type.Optional(Type.String({ maxLength: 2000, description: 'Comma-separated event types' })),
        },
        { additionalProperties: false },
      ),
      response: {
        200: Type.Object({
          data: Type.Array(Type.Object({}, { additionalProperties: true })),
          nextCursor: Type.String(),
          hasMore: Type.Boolean(),
        }),
      },
    },
    handler: async ({ db, query, principal, workspace }) => {
      const applicationId = principal.applicationId as string;
      const types =
        query.type === undefined
          ? null
          : query.type
              .split(',')
              .map((type) => type.trim())
              .filter((type) => type !== '');
      // An empty list would serve nothing yet move the cursor past every event: refuse it rather than skip.
      if (types !== null && types.length === 0) throw new ApiError('invalid_request', 'query.type names no event type');
      for (const type of types ?? []) {
        if (!isEventType(type)) throw new ApiError('invalid_request', `query.type has an unknown event type "${type}"`);
      }

      let from = start;
      if (query.after !== undefined) {
        const after = query.after;
        if (isUuid(after)) {
          // Resume where that event committed: from the oldest transaction still running when it was written.
          const resumeTx = await resumeTxOf(db, after, applicationId);
          if (resumeTx === undefined) throw invalidCursor();
          from = { tx: resumeTx, index: '0' };
        } else {
          const [list, owner, tx, index] = openCursor(services.keys.cursors, after, 4) ?? [];
          if (list !== 'events' || owner !== applicationId || !digits.test(tx ?? '') || !digits.test(index ?? '')) {
            throw invalidCursor();
          }
          from = { tx: tx as string, index: index as string };
        }
      }

      const found = await readLog(db, {
        applicationId,
        from,
        workspaceId: workspace?.id ?? null,
        types,
        limit: query.limit + 1,
      });
      const rows = found.filter((row) => row.tx !== null);
      const hasMore = rows.length > query.limit;
      const page = rows.slice(0, query.limit);
      const last = page[page.length - 1];
      // A full page ends at its last event; otherwise everything below the horizon has been seen, and the next
      // poll starts there.
      const horizon = (found[0] as { horizon: string }).horizon;
      let next: Position;
      if (hasMore && last !== undefined) next = { tx: last.tx as string, index: last.log_index as string };
      else next = BigInt(horizon) > BigInt(from.tx) ? { tx: horizon, index: '0' } : from;
      return {
        status: 200,
        body: {
          data: page.map((row) => JSON.parse(row.payload)),
          nextCursor: seal(applicationId, next),
          hasMore,
        },
      };
    },
  });
}
