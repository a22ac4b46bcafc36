/**
 * The transactional outbox: `appendEvent` records an event inside the transaction of the change it reports
 * (docs/events.md). In one statement it takes the stream's next sequence (row-locking the stream until commit, so a
 * stream's events commit in sequence order), writes the event with its log position, queues it for every enabled
 * webhook endpoint of the application that takes its type, and notifies the dispatchers (delivered at commit) when
 * a lane went from idle to due and no dispatcher is awake (docs/events.md): NOTIFY serialises committing
 * transactions, so under load the appends leave the waking to a dispatcher that is claiming anyway.
 */
import { randomUUID } from 'node:crypto';
import type { ValidateFunction } from 'ajv';
import { eventsChannel } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import { compileStrict } from '../validation.ts';
import { type Event, type EventType, eventSchemas, streamOf } from './types.ts';

/**
 * An append skips its NOTIFY when a dispatcher promises to stay awake (claiming every 25 ms) at least this much
 * longer: time for the appending transaction to commit. One that commits later than that after its append may wait
 * for the dispatchers' 1 s poll.
 */
const commitMarginMs = 250;

/** The fields of an event that are not common to all events (section 6), by type. */
type ExtraFields<T extends EventType> = Omit<
  Event<T>,
  'id' | 'type' | 'occurredAt' | 'applicationId' | 'workspaceId' | 'externalWorkspaceId' | 'sequence'
>;

export interface NewEvent<T extends EventType> {
  type: T;
  /** The stream's subject: the call id, number id or member id (the kind follows from the type). */
  streamId: string;
  applicationId: string;
  workspaceId: string;
  externalWorkspaceId: string | null;
  fields: ExtraFields<T>;
}

export interface AppendedEvent {
  id: string;
  sequence: number;
  streamKey: string;
  payload: string;
}

const validators = new Map<EventType, ValidateFunction>();

function validate(type: EventType, event: unknown): void {
  let check = validators.get(type);
  if (check === undefined) {
    check = compileStrict(eventSchemas[type]);
    validators.set(type, check);
  }
  if (!check(event)) {
    throw new Error(`invalid ${type} event: ${JSON.stringify(check.errors?.slice(0, 3))}`);
  }
}

export function streamKey(type: EventType, streamId: string): string {
  return `${streamOf[type]}:${streamId}`;
}

/** The event as delivered, but for its sequence (added by the statement that appends it), checked. */
function eventOf<T extends EventType>(input: NewEvent<T>) {
  const id = randomUUID();
  const occurredAt = new Date().toISOString();
  const event = {
    id,
    type: input.type,
    occurredAt,
    applicationId: input.applicationId,
    workspaceId: input.workspaceId,
    externalWorkspaceId: input.externalWorkspaceId,
    ...input.fields,
  };
  validate(input.type, { ...event, sequence: 1 });
  return { id, occurredAt, event, stream: streamKey(input.type, input.streamId) };
}

export async function appendEvent<T extends EventType>(db: Queryable, input: NewEvent<T>): Promise<AppendedEvent> {
  const { id, occurredAt, event, stream } = eventOf(input);
  const result = await db.query<{ sequence: string; payload: string }>({
    name: 'switchboard-append-event',
    text: `WITH stream AS (
         INSERT INTO event_streams (stream_key, last_sequence) VALUES ($1, 1)
         ON CONFLICT (stream_key) DO UPDATE SET last_sequence = event_streams.last_sequence + 1
         RETURNING last_sequence),
       event AS (
         INSERT INTO events (id, application_id, workspace_id, type, stream_key, sequence, occurred_at, payload)
         SELECT $2, $3, $4, $5, $1, stream.last_sequence, $6,
                left($7, -1) || ',"sequence":' || stream.last_sequence || '}'
           FROM stream
         RETURNING sequence, payload),
       targets AS (
         SELECT id FROM webhook_endpoints
          WHERE application_id = $3 AND enabled AND (event_types IS NULL OR $5 = ANY (event_types))),
       queued AS (
         INSERT INTO webhook_deliveries (endpoint_id, event_id, stream_key, sequence)
         SELECT targets.id, $2, $1, event.sequence FROM targets, event),
       lanes AS (
         INSERT INTO webhook_lanes (endpoint_id, stream_key, next_attempt_at)
         SELECT targets.id, $1, now() FROM targets
         ON CONFLICT (endpoint_id, stream_key)
         DO UPDATE SET next_attempt_at = coalesce(webhook_lanes.next_attempt_at, excluded.next_attempt_at)
         RETURNING next_attempt_at = now() AS woke)
     SELECT event.sequence, event.payload,
            CASE WHEN EXISTS (SELECT 1 FROM lanes WHERE woke)
                  AND NOT EXISTS (SELECT 1 FROM webhook_dispatchers
                                   WHERE awake_until > clock_timestamp() + interval '${commitMarginMs} milliseconds')
                 THEN pg_notify('${eventsChannel}', $3) END
       FROM event`,
    values: [stream, id, input.applicationId, input.workspaceId, input.type, occurredAt, JSON.stringify(event)],
  });
  const row = result.rows[0] as { sequence: string; payload: string };
  return { id, sequence: Number(row.sequence), streamKey: stream, payload: row.payload };
}

/**
 * Appends a group of events in one statement, as `appendEvent` appends each (a group of messages settled at once):
 * a stream's events take its next sequences in the order given, the streams' rows are locked in key order (so two
 * groups touching the same streams never wait on each other in a circle), every event is queued for the webhook
 * endpoints of its application that take its type, and the dispatchers are notified as for one event.
 */
export async function appendEvents(db: Queryable, inputs: ReadonlyArray<NewEvent<EventType>>) {
  if (inputs.length <= 1) return Promise.all(inputs.map((input) => appendEvent(db, input)));
  const events = inputs.map((input) => ({ ...eventOf(input), input }));
  const result = await db.query<{ id: string; sequence: string; payload: string }>({
    name: 'switchboard-append-events',
    text: `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::timestamptz[], $7::text[])
                  WITH ORDINALITY AS e (stream_key, id, application_id, workspace_id, type, occurred_at, payload, n)),
       counts AS (SELECT stream_key, count(*) AS k FROM input GROUP BY stream_key),
       stream AS (
         INSERT INTO event_streams (stream_key, last_sequence)
         SELECT stream_key, k FROM counts ORDER BY stream_key
         ON CONFLICT (stream_key) DO UPDATE SET last_sequence = event_streams.last_sequence + excluded.last_sequence
         RETURNING stream_key, last_sequence),
       numbered AS (
         SELECT input.*, stream.last_sequence - counts.k
                         + row_number() OVER (PARTITION BY input.stream_key ORDER BY input.n) AS sequence
           FROM input JOIN counts USING (stream_key) JOIN stream USING (stream_key)),
       event AS (
         INSERT INTO events (id, application_id, workspace_id, type, stream_key, sequence, occurred_at, payload)
         SELECT id, application_id, workspace_id, type, stream_key, sequence, occurred_at,
                left(payload, -1) || ',"sequence":' || sequence || '}'
           FROM numbered ORDER BY n
         RETURNING id, sequence, payload),
       targets AS (
         SELECT endpoint.id AS endpoint_id, numbered.id AS event_id, numbered.stream_key, numbered.sequence,
                numbered.application_id
           FROM numbered JOIN webhook_endpoints endpoint
             ON endpoint.application_id = numbered.application_id AND endpoint.enabled
            AND (endpoint.event_types IS NULL OR numbered.type = ANY (endpoint.event_types))),
       queued AS (
         INSERT INTO webhook_deliveries (endpoint_id, event_id, stream_key, sequence)
         SELECT endpoint_id, event_id, stream_key, sequence FROM targets),
       lanes AS (
         INSERT INTO webhook_lanes (endpoint_id, stream_key, next_attempt_at)
         SELECT DISTINCT endpoint_id, stream_key, now() FROM targets ORDER BY endpoint_id, stream_key
         ON CONFLICT (endpoint_id, stream_key)
         DO UPDATE SET next_attempt_at = coalesce(webhook_lanes.next_attempt_at, excluded.next_attempt_at)
         RETURNING endpoint_id, next_attempt_at = now() AS woke),
       woken AS (
         SELECT pg_notify('${eventsChannel}', application_id)
           FROM (SELECT DISTINCT targets.application_id FROM lanes JOIN targets USING (endpoint_id) WHERE lanes.woke) apps
          WHERE NOT EXISTS (SELECT 1 FROM webhook_dispatchers
                             WHERE awake_until > clock_timestamp() + interval '${commitMarginMs} milliseconds'))
     SELECT event.id, event.sequence, event.payload, (SELECT count(*) FROM woken) AS notices FROM event`,
    values: [
      events.map((event) => event.stream),
      events.map((event) => event.id),
      events.map((event) => event.input.applicationId),
      events.map((event) => event.input.workspaceId),
      events.map((event) => event.input.type),
      events.map((event) => event.occurredAt),
      events.map((event) => JSON.stringify(event.event)),
    ],
  });
  const rows = new Map(result.rows.map((row) => [row.id, row]));
  return events.map(({ id, stream }): AppendedEvent => {
    const row = rows.get(id) as { sequence: string; payload: string };
    return { id, sequence: Number(row.sequence), streamKey: stream, payload: row.payload };
  });
}
