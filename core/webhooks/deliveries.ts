/**
 * The `webhook_deliveries` and `webhook_lanes` tables, the delivery state in PostgreSQL (core/migrations/0002_events.sql;
 * appendEvent in core/events/outbox.ts queues new events): claiming due lanes under a lease and writing the outcome
 * of an attempt back (the dispatcher, engine/delivery/), and queueing events again (a replay, the REST API). Every time is a parameter (the dispatcher's clock), never the database's now().
 *
 * While a dispatcher holds a lane, the lane's next_attempt_at is its lease's end: a dispatcher that dies leaves the
 * lane to come due again when the lease runs out, and appendEvent (which only fills in a null next_attempt_at) leaves
 * a held lane alone.
 *
 * Longer than 400 lines because the two tables have this one module, and the claim (with its fair shares), the
 * releases and the failure record are one protocol over the same columns (the lease, next_attempt_at) whose
 * statements are only safe together; the claim's query alone is about 80 lines.
 */
import type { Queryable } from '../database.ts';

export interface HeadEvent {
  eventId: string;
  sequence: number;
  type: string;
  payload: string;
  occurredAt: Date;
  /** When this delivery was queued: the event's transaction, or the replay that queued it again. */
  queuedAt: Date;
}

export interface ClaimedLane {
  /** The lease token this lane is held under (lease_owner): the outcome is written only while it still holds. */
  lease: string;
  endpointId: string;
  streamKey: string;
  /** Failed attempts of `headEventId` so far, and when its first attempt was (the parking clock). */
  attempts: number;
  headEventId: string | null;
  headFirstAttemptAt: Date | null;
  url: string;
  /** Sealed signing secrets (core/sealing.ts). */
  secret: string;
  previousSecret: string | null;
  previousSecretExpiresAt: Date | null;
  /** When the lease ends: no attempt starts that could outlast it. */
  leaseUntil: Date;
  /**
   * The undelivered events of lowest sequence, in sequence order, at most `headsPerClaim`: the first is the head,
   * the rest follow it one at a time under the same claim. Empty when the lane has nothing left.
   */
  heads: HeadEvent[];
}

interface ClaimRow {
  endpoint_id: string;
  stream_key: string;
  attempts: number;
  head_event_id: string | null;
  head_first_attempt_at: Date | null;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  event_id: string | null;
  sequence: string | null;
  type: string | null;
  payload: string | null;
  occurred_at: Date | null;
  queued_at: Date | null;
}

export interface ClaimRequest {
  /** The lease token the lanes are held under. */
  lease: string;
  now: Date;
  leaseUntil: Date;
  /** Lanes to take at most (the room left under the dispatcher's own cap). */
  limit: number;
  /** Undelivered events returned per lane at most. */
  headsPerClaim: number;
  /** Lanes of one endpoint held at once at most, by all dispatchers together (WEBHOOK_ENDPOINT_CONCURRENCY). */
  perEndpoint: number;
  /** Lanes of one application's endpoints held at once at most, by all dispatchers (WEBHOOK_APPLICATION_CONCURRENCY). */
  perApplication: number;
}

/**
 * Takes up to `limit` due lanes of enabled endpoints that nobody holds, shared fairly (docs/events.md, "Sharing the
 * attempts"): an endpoint is given lanes only while it holds fewer than `perEndpoint`, an application only while its
 * endpoints hold fewer than `perApplication` (held: under a lease that has not run out, whichever dispatcher's), and
 * when there are more candidates than `limit`, the application holding fewest goes first, then within it the
 * endpoint holding fewest, then the lane due longest. Lanes another dispatcher (or an appending transaction) has
 * locked are skipped. Holds the lanes under the token `lease` until `leaseUntil`, and returns each with up to
 * `headsPerClaim` of its undelivered events, lowest sequence first.
 *
 * Endpoints with pending lanes are found by a loose scan of webhook_lanes_pending (one probe per endpoint), and
 * each one's due lanes by a range scan of it that stops at the endpoint's room, so a backlog of one endpoint costs
 * nothing once it is at its share. Two dispatchers that claim at the same instant each see the other's lanes as not
 * yet held: an endpoint may then briefly hold more than its share over all dispatchers, but never more than its share
 * in any one of them (a dispatcher's own earlier claims are always visible to its next).
 */
export async function claimLanes(db: Queryable, request: ClaimRequest): Promise<ClaimedLane[]> {
  const { lease, now, leaseUntil, limit, headsPerClaim, perEndpoint, perApplication } = request;
  const result = await db.query<ClaimRow>({
    name: 'switchboard-claim-lanes',
    text: `WITH RECURSIVE pending (endpoint_id, first_due) AS (
               (SELECT endpoint_id, next_attempt_at FROM webhook_lanes
                 WHERE next_attempt_at IS NOT NULL AND parked_at IS NULL
                 ORDER BY endpoint_id, next_attempt_at LIMIT 1)
             UNION ALL
               SELECT next.endpoint_id, next.next_attempt_at
                 FROM pending p
                 CROSS JOIN LATERAL (
                   SELECT l.endpoint_id, l.next_attempt_at FROM webhook_lanes l
                    WHERE l.next_attempt_at IS NOT NULL AND l.parked_at IS NULL AND l.endpoint_id > p.endpoint_id
                    ORDER BY l.endpoint_id, l.next_attempt_at LIMIT 1) next),
           held AS (
             SELECT endpoint_id, count(*)::int AS lanes FROM webhook_lanes
              WHERE lease_owner IS NOT NULL AND lease_until >= $2
              GROUP BY endpoint_id),
           endpoints AS (
             SELECT e.id, e.application_id, e.enabled, p.first_due, coalesce(h.lanes, 0) AS held,
                    sum(coalesce(h.lanes, 0)) OVER (PARTITION BY e.application_id)::int AS application_held
               FROM pending p
               JOIN webhook_endpoints e ON e.id = p.endpoint_id
               LEFT JOIN held h ON h.endpoint_id = p.endpoint_id),
           candidates AS (
             SELECT e.application_id, e.application_held, c.endpoint_id, c.stream_key, c.next_attempt_at,
                    e.held + row_number() OVER (PARTITION BY c.endpoint_id ORDER BY c.next_attempt_at, c.stream_key)
                      AS endpoint_turn
               FROM endpoints e
               CROSS JOIN LATERAL (
                 SELECT l.endpoint_id, l.stream_key, l.next_attempt_at FROM webhook_lanes l
                  WHERE l.endpoint_id = e.id AND l.next_attempt_at <= $2 AND l.parked_at IS NULL
                    AND (l.lease_until IS NULL OR l.lease_until < $2)
                  ORDER BY l.next_attempt_at
                  LIMIT greatest(0, least($6::int - e.held, $7::int - e.application_held, $4::int))) c
              WHERE e.enabled AND e.first_due <= $2 AND e.held < $6::int AND e.application_held < $7::int),
           turns AS (
             SELECT endpoint_id, stream_key, next_attempt_at,
                    application_held + row_number() OVER (
                      PARTITION BY application_id ORDER BY endpoint_turn, next_attempt_at, endpoint_id, stream_key)
                      AS application_turn
               FROM candidates),
           chosen AS (
             SELECT endpoint_id, stream_key FROM turns
              WHERE application_turn <= $7::int
              ORDER BY application_turn, next_attempt_at
              LIMIT $4),
           claimed AS (
             UPDATE webhook_lanes lane
                SET lease_owner = $1, lease_until = $3, next_attempt_at = $3
              WHERE (lane.endpoint_id, lane.stream_key) IN (
                      SELECT l.endpoint_id, l.stream_key
                        FROM webhook_lanes l
                        JOIN chosen c ON c.endpoint_id = l.endpoint_id AND c.stream_key = l.stream_key
                       WHERE l.next_attempt_at <= $2 AND l.parked_at IS NULL
                         AND (l.lease_until IS NULL OR l.lease_until < $2)
                         FOR UPDATE OF l SKIP LOCKED)
             RETURNING lane.endpoint_id, lane.stream_key, lane.attempts, lane.head_event_id,
                       lane.head_first_attempt_at)
           SELECT c.endpoint_id, c.stream_key, c.attempts, c.head_event_id, c.head_first_attempt_at,
                  e.url, e.secret, e.previous_secret, e.previous_secret_expires_at,
                  h.event_id, h.sequence, h.created_at AS queued_at, ev.type, ev.payload, ev.occurred_at
             FROM claimed c
             JOIN webhook_endpoints e ON e.id = c.endpoint_id
             LEFT JOIN LATERAL (
               SELECT d.event_id, d.sequence, d.created_at FROM webhook_deliveries d
                WHERE d.endpoint_id = c.endpoint_id AND d.stream_key = c.stream_key
                ORDER BY d.sequence LIMIT $5) h ON true
             LEFT JOIN events ev ON ev.id = h.event_id
            ORDER BY c.endpoint_id, c.stream_key, h.sequence`,
    values: [lease, now, leaseUntil, limit, headsPerClaim, perEndpoint, perApplication],
  });
  const lanes = new Map<string, ClaimedLane>();
  for (const row of result.rows) {
    const key = `${row.endpoint_id} ${row.stream_key}`;
    let lane = lanes.get(key);
    if (lane === undefined) {
      lane = {
        lease,
        endpointId: row.endpoint_id,
        streamKey: row.stream_key,
        attempts: row.attempts,
        headEventId: row.head_event_id,
        headFirstAttemptAt: row.head_first_attempt_at,
        url: row.url,
        secret: row.secret,
        previousSecret: row.previous_secret,
        previousSecretExpiresAt: row.previous_secret_expires_at,
        leaseUntil,
        heads: [],
      };
      lanes.set(key, lane);
    }
    if (row.event_id !== null) {
      lane.heads.push({
        eventId: row.event_id,
        sequence: Number(row.sequence),
        type: row.type as string,
        payload: row.payload as string,
        occurredAt: row.occurred_at as Date,
        queuedAt: row.queued_at as Date,
      });
    }
  }
  return [...lanes.values()];
}

/**
 * The lane's first events were acknowledged (`delivered`: their sequences, possibly none when the lane turned out
 * empty): their delivery rows go, and the lane is released (when its lease is still this claim's), due at `now` when
 * more events wait and idle (next_attempt_at null) otherwise.
 *
 * One statement, safe against an append committing meanwhile. The check for more events reads the statement's
 * snapshot; an appending transaction that had already upserted the lane (and so holds its row lock) commits while
 * this statement waits for that lock, and its event is not in the snapshot. That case shows as a lane row newer than
 * the one the snapshot saw (`seen`: a join keeps its snapshot row when PostgreSQL re-checks the locked row), and the
 * lane is then kept due rather than idled. An append that comes after this statement finds next_attempt_at null and
 * sets it due itself.
 */
export async function releaseLane(
  db: Queryable,
  lane: ClaimedLane,
  delivered: readonly number[],
  now: Date,
): Promise<void> {
  await db.query({
    name: 'switchboard-release-lane',
    text: `WITH delivered AS (
             DELETE FROM webhook_deliveries WHERE endpoint_id = $1 AND stream_key = $2 AND sequence = ANY ($3))
           UPDATE webhook_lanes lane
              SET attempts = 0, head_event_id = NULL, head_first_attempt_at = NULL,
                  lease_owner = NULL, lease_until = $4,
                  next_attempt_at = CASE
                    WHEN NOT (lane.xmin = seen.xmin) OR EXISTS (
                      SELECT 1 FROM webhook_deliveries d
                       WHERE d.endpoint_id = $1 AND d.stream_key = $2 AND d.sequence <> ALL ($3))
                    THEN $4::timestamptz END
             FROM (SELECT xmin FROM webhook_lanes WHERE endpoint_id = $1 AND stream_key = $2) seen
            WHERE lane.endpoint_id = $1 AND lane.stream_key = $2 AND lane.lease_owner = $5`,
    values: [lane.endpointId, lane.streamKey, delivered, now, lane.lease],
  });
}

export interface Release {
  lane: ClaimedLane;
  /** The sequences acknowledged under this claim (none when the lane turned out empty). */
  delivered: readonly number[];
}

/**
 * Releases many lanes in one statement, as releaseLane does one, without ever waiting for a lock: lanes that an
 * appending transaction holds right now are skipped (SKIP LOCKED) and left to releaseLane. Returns the keys
 * (`<endpointId> <streamKey>`) of the lanes released. An append that committed between this statement's snapshot and
 * its lock shows as a locked row version newer than the snapshot's, and keeps the lane due.
 */
export async function releaseLanes(db: Queryable, releases: readonly Release[], now: Date): Promise<Set<string>> {
  const result = await db.query<{ endpoint_id: string; stream_key: string }>({
    name: 'switchboard-release-lanes',
    text: `WITH input AS (
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[]) AS r (endpoint_id, stream_key, lease)),
           acknowledged AS (
             SELECT * FROM unnest($4::uuid[], $5::text[], $6::bigint[]) AS a (endpoint_id, stream_key, sequence)),
           held AS (
             SELECT l.endpoint_id, l.stream_key, l.xmin AS held_xmin
               FROM webhook_lanes l
               JOIN input i ON i.endpoint_id = l.endpoint_id AND i.stream_key = l.stream_key
              WHERE l.lease_owner = i.lease
                FOR UPDATE OF l SKIP LOCKED),
           delivered AS (
             DELETE FROM webhook_deliveries d USING acknowledged a, held h
              WHERE d.endpoint_id = a.endpoint_id AND d.stream_key = a.stream_key AND d.sequence = a.sequence
                AND h.endpoint_id = a.endpoint_id AND h.stream_key = a.stream_key)
           UPDATE webhook_lanes lane
              SET attempts = 0, head_event_id = NULL, head_first_attempt_at = NULL,
                  lease_owner = NULL, lease_until = $7,
                  next_attempt_at = CASE
                    WHEN NOT (h.held_xmin = seen.xmin) OR EXISTS (
                      SELECT 1 FROM webhook_deliveries d
                       WHERE d.endpoint_id = i.endpoint_id AND d.stream_key = i.stream_key
                         AND NOT EXISTS (
                           SELECT 1 FROM acknowledged a
                            WHERE a.endpoint_id = d.endpoint_id AND a.stream_key = d.stream_key
                              AND a.sequence = d.sequence))
                    THEN $7::timestamptz END
             FROM held h
             JOIN input i ON i.endpoint_id = h.endpoint_id AND i.stream_key = h.stream_key
             JOIN webhook_lanes seen ON seen.endpoint_id = h.endpoint_id AND seen.stream_key = h.stream_key
            WHERE lane.endpoint_id = h.endpoint_id AND lane.stream_key = h.stream_key
           RETURNING lane.endpoint_id, lane.stream_key`,
    values: [
      releases.map((release) => release.lane.endpointId),
      releases.map((release) => release.lane.streamKey),
      releases.map((release) => release.lane.lease),
      releases.flatMap((release) => release.delivered.map(() => release.lane.endpointId)),
      releases.flatMap((release) => release.delivered.map(() => release.lane.streamKey)),
      releases.flatMap((release) => release.delivered),
      now,
    ],
  });
  return new Set(result.rows.map((row) => `${row.endpoint_id} ${row.stream_key}`));
}

export interface Failure {
  /** Failed attempts of the head in a row, this one included. */
  attempts: number;
  headEventId: string;
  headFirstAttemptAt: Date;
  attemptedAt: Date;
  error: string;
  nextAttemptAt: Date;
  /** Set when the lane parks. */
  parkedAt: Date | null;
}

/**
 * A failed attempt: the events acknowledged before it under the same claim (`delivered`) go, and the lane waits until
 * `nextAttemptAt` (or parks) and is released.
 */
export async function recordFailure(
  db: Queryable,
  lane: ClaimedLane,
  failure: Failure,
  delivered: readonly number[] = [],
): Promise<void> {
  await db.query({
    name: 'switchboard-lane-failed',
    text: `WITH failed AS (
             UPDATE webhook_lanes
                SET attempts = $3, head_event_id = $4, head_first_attempt_at = $5, last_attempt_at = $6,
                    last_error = $7, next_attempt_at = $8, parked_at = $9, lease_owner = NULL, lease_until = NULL
              WHERE endpoint_id = $1 AND stream_key = $2 AND lease_owner = $10
             RETURNING endpoint_id)
           DELETE FROM webhook_deliveries
            WHERE endpoint_id IN (SELECT endpoint_id FROM failed) AND stream_key = $2 AND sequence = ANY ($11)`,
    values: [
      lane.endpointId,
      lane.streamKey,
      failure.attempts,
      failure.headEventId,
      failure.headFirstAttemptAt,
      failure.attemptedAt,
      failure.error,
      failure.nextAttemptAt,
      failure.parkedAt,
      lane.lease,
      delivered,
    ],
  });
}

/** Lanes with events waiting (not parked), and parked lanes, over every endpoint. */
export async function laneCounts(db: Queryable): Promise<{ pending: number; parked: number }> {
  const result = await db.query<{ pending: string; parked: string }>({
    name: 'switchboard-lane-counts',
    text: `SELECT (SELECT count(*) FROM webhook_lanes WHERE next_attempt_at IS NOT NULL AND parked_at IS NULL) AS pending,
                  (SELECT count(*) FROM webhook_lanes WHERE parked_at IS NOT NULL) AS parked`,
  });
  const row = result.rows[0] as { pending: string; parked: string };
  return { pending: Number(row.pending), parked: Number(row.parked) };
}

/**
 * Deletes lanes idle since before `idleBefore` (nothing pending, not parked, not held; a release leaves `lease_until`
 * at the time it let the lane go, so it tells since when), a
 * batch at a time, so that finished streams (one per call) do not pile up. Safe against appends: a lane an append
 * holds is skipped (SKIP LOCKED), one an append made due is no longer idle, and an append after the delete inserts
 * the lane again. Returns how many went.
 */
export async function sweepIdleLanes(db: Queryable, idleBefore: Date, limit = 1000): Promise<number> {
  const result = await db.query({
    name: 'switchboard-sweep-lanes',
    text: `DELETE FROM webhook_lanes WHERE ctid IN (
             SELECT l.ctid FROM webhook_lanes l
              WHERE l.next_attempt_at IS NULL AND l.parked_at IS NULL AND l.lease_owner IS NULL
                AND coalesce(l.lease_until, l.last_attempt_at, '-infinity') < $1
                AND NOT EXISTS (
                  SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = l.endpoint_id AND d.stream_key = l.stream_key)
              LIMIT $2
                FOR UPDATE SKIP LOCKED)`,
    values: [idleBefore, limit],
  });
  return result.rowCount ?? 0;
}

/**
 * A parked-lanes replay: the endpoint's parked lanes (of `streamKey` only, when given) are resumed, due now, with
 * their failure count and parking clock reset. Counts the lanes resumed and the deliveries waiting in them.
 */
export async function resumeParkedLanes(
  db: Queryable,
  endpointId: string,
  streamKey: string | null,
): Promise<{ queued: string; lanes: string }> {
  const result = await db.query<{ queued: string; lanes: string }>(
    `WITH resumed AS (
             UPDATE webhook_lanes SET parked_at = NULL, attempts = 0, head_first_attempt_at = NULL,
                                      next_attempt_at = now()
              WHERE endpoint_id = $1 AND parked_at IS NOT NULL AND ($2::text IS NULL OR stream_key = $2)
             RETURNING stream_key)
           SELECT (SELECT count(*) FROM resumed) AS lanes,
                  (SELECT count(*) FROM webhook_deliveries
                    WHERE endpoint_id = $1 AND stream_key IN (SELECT stream_key FROM resumed)) AS queued`,
    [endpointId, streamKey],
  );
  return result.rows[0] as { queued: string; lanes: string };
}

/**
 * Lane upsert of a replay: the lane of each stream becomes due. A lane waiting out a backoff keeps its time; a
 * parked lane is un-parked, due now, with its failure count and parking clock reset.
 */
const laneUpsert = `
  INSERT INTO webhook_lanes (endpoint_id, stream_key, next_attempt_at)
  SELECT DISTINCT $1::uuid, stream_key, now() FROM selected
  ON CONFLICT (endpoint_id, stream_key) DO UPDATE SET
    next_attempt_at = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN now()
                           ELSE coalesce(webhook_lanes.next_attempt_at, now()) END,
    attempts = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN 0 ELSE webhook_lanes.attempts END,
    head_first_attempt_at = CASE WHEN webhook_lanes.parked_at IS NOT NULL THEN NULL
                                 ELSE webhook_lanes.head_first_attempt_at END,
    parked_at = NULL
  RETURNING 1`;

/** The events a replay queues again: of a time range (and stream, and types), or by id. */
export type ReplaySelection =
  { since: Date; until: Date; streamKey: string | null; eventTypes: string[] | null } | { eventIds: string[] };

/**
 * Queues the application's selected events for the endpoint again and makes their lanes due. Each event keeps its
 * stream and sequence: the lane delivers its lowest sequence first. Counts the events selected and the lanes.
 */
export async function queueReplay(
  db: Queryable,
  endpointId: string,
  applicationId: string,
  selected: ReplaySelection,
): Promise<{ queued: string; lanes: string }> {
  let selection: string;
  let values: unknown[];
  if ('eventIds' in selected) {
    selection = 'SELECT id, stream_key, sequence FROM events WHERE application_id = $2 AND id = ANY ($3::uuid[])';
    values = [endpointId, applicationId, selected.eventIds];
  } else {
    selection = `SELECT id, stream_key, sequence FROM events
                      WHERE application_id = $2 AND occurred_at >= $3::timestamptz AND occurred_at < $4::timestamptz
                        AND ($5::text IS NULL OR stream_key = $5)
                        AND ($6::text[] IS NULL OR type = ANY ($6))`;
    const { since, until, streamKey, eventTypes } = selected;
    values = [endpointId, applicationId, since.toISOString(), until.toISOString(), streamKey, eventTypes];
  }
  const result = await db.query<{ queued: string; lanes: string }>(
    `WITH selected AS (${selection}),
         queued AS (
           INSERT INTO webhook_deliveries (endpoint_id, event_id, stream_key, sequence)
           SELECT $1, id, stream_key, sequence FROM selected
           ON CONFLICT (endpoint_id, stream_key, sequence) DO NOTHING),
         lanes AS (${laneUpsert})
         SELECT (SELECT count(*) FROM selected) AS queued, (SELECT count(*) FROM lanes) AS lanes`,
    values,
  );
  return result.rows[0] as { queued: string; lanes: string };
}
