/**
 * The ResourceStore on PostgreSQL (table `resources`, core/migrations/0003_routing.sql), for a service without a
 * Kubernetes cluster. A store is bound to a connection: bound to a request's transaction, the resource commits (or
 * rolls back) with the PostgreSQL records written beside it.
 *
 * Watches read rows by their writing transaction (`tx_id`) below the horizon of transactions still running, the
 * technique of the event log: a change that commits late is still seen, in commit order of its transaction id. Every
 * write notifies `switchboard_resources` at commit to wake watchers; a poll covers a lost notice.
 */
import type pg from 'pg';
import { ChangeListener, resourcesChannel } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import {
  type Resource,
  ResourceConflict,
  type ResourceIntent,
  type ResourceKind,
  ResourceNotFound,
  type ResourceStore,
  resourceApiVersion,
  type Watch,
  type WatchEvent,
  type WriteOptions,
} from './store.ts';

interface ResourceRow {
  kind: ResourceKind;
  namespace: string;
  name: string;
  uid: string;
  resource_version: string;
  created_version: string;
  generation: string;
  labels: Record<string, string>;
  spec: Record<string, unknown>;
  status: Record<string, unknown>;
  finalizers: string[];
  deletion_timestamp: Date | null;
  deleted: boolean;
  created_at: Date;
  tx_id: string;
}

const columns = `kind, namespace, name, uid, resource_version, created_version, generation, labels, spec, status,
  finalizers, deletion_timestamp, deleted, created_at, tx_id::text`;

function resourceOf(row: ResourceRow): Resource {
  return {
    apiVersion: resourceApiVersion,
    kind: row.kind,
    metadata: {
      name: row.name,
      namespace: row.namespace,
      uid: row.uid,
      resourceVersion: row.resource_version,
      generation: Number(row.generation),
      labels: row.labels,
      finalizers: row.finalizers,
      creationTimestamp: row.created_at.toISOString(),
      ...(row.deletion_timestamp === null ? {} : { deletionTimestamp: row.deletion_timestamp.toISOString() }),
    },
    spec: row.spec,
    status: row.status,
  };
}

/** A list's resourceVersion: the watch position `<transaction>.<resourceVersion>` it continues from. */
function parseListVersion(version: string): { tx: string; rv: string } | undefined {
  const match = /^([0-9]{1,20})\.([0-9]{1,20})$/.exec(version);
  return match === null ? undefined : { tx: match[1] as string, rv: match[2] as string };
}

/** The resourceVersion of a watch that can no longer continue (Kubernetes: 410 Gone); the caller lists again. */
export class ResourceVersionExpired extends Error {
  constructor(version: string) {
    super(`resourceVersion "${version}" cannot be watched from; list again`);
    this.name = 'ResourceVersionExpired';
  }
}

export interface WatchSource {
  pool: pg.Pool;
  /** The database URL, for the listening connection of a watch. */
  url: string;
  pollMs?: number;
  log?: (message: string) => void;
}

export class PostgresResourceStore implements ResourceStore {
  constructor(
    private readonly db: Queryable,
    private readonly watchSource?: WatchSource,
  ) {}

  /** The same store bound to another connection (a request's transaction). */
  within(db: Queryable): PostgresResourceStore {
    return new PostgresResourceStore(db, this.watchSource);
  }

  async get(kind: ResourceKind, namespace: string, name: string): Promise<Resource | undefined> {
    const result = await this.db.query<ResourceRow>(
      `SELECT ${columns} FROM resources WHERE kind = $1 AND namespace = $2 AND name = $3 AND NOT deleted`,
      [kind, namespace, name],
    );
    const row = result.rows[0];
    return row === undefined ? undefined : resourceOf(row);
  }

  async list(kind: ResourceKind, namespace: string): Promise<{ items: Resource[]; resourceVersion: string }> {
    // One statement, one snapshot: the items and the horizon they were read at.
    const result = await this.db.query<ResourceRow & { horizon: string }>(
      `SELECT ${columns}, pg_snapshot_xmin(pg_current_snapshot())::text AS horizon
         FROM (SELECT 1) one
         LEFT JOIN resources ON kind = $1 AND namespace = $2 AND NOT deleted
        ORDER BY name`,
      [kind, namespace],
    );
    const horizon = result.rows[0]?.horizon ?? '0';
    return {
      items: result.rows.filter((row) => row.name !== null).map(resourceOf),
      resourceVersion: `${horizon}.0`,
    };
  }

  async apply(intent: ResourceIntent, options: WriteOptions): Promise<Resource> {
    const result = await this.db.query<ResourceRow>(
      `WITH v AS (SELECT nextval('resource_versions') AS rv)
       INSERT INTO resources AS r (kind, namespace, name, resource_version, created_version, labels, spec, finalizers,
                                   field_manager)
       SELECT $1, $2, $3, v.rv, v.rv, coalesce($4::jsonb, '{}'), $5, coalesce($6::text[], '{}'), $7 FROM v
        -- With an expected resourceVersion, only an existing row (then checked below) may be written: never create.
        WHERE $8::bigint IS NULL
           OR EXISTS (SELECT 1 FROM resources e WHERE e.kind = $1 AND e.namespace = $2 AND e.name = $3)
       ON CONFLICT (kind, namespace, name) DO UPDATE SET
         uid = CASE WHEN r.deleted THEN gen_random_uuid() ELSE r.uid END,
         generation = CASE WHEN r.deleted THEN 1 WHEN r.spec = excluded.spec THEN r.generation
                           ELSE r.generation + 1 END,
         resource_version = excluded.resource_version,
         created_version = CASE WHEN r.deleted THEN excluded.created_version ELSE r.created_version END,
         labels = CASE WHEN r.deleted OR $4::jsonb IS NOT NULL THEN excluded.labels ELSE r.labels END,
         spec = excluded.spec,
         status = CASE WHEN r.deleted THEN '{}' ELSE r.status END,
         finalizers = CASE WHEN r.deleted OR $6::text[] IS NOT NULL THEN excluded.finalizers ELSE r.finalizers END,
         deletion_timestamp = CASE WHEN r.deleted THEN NULL ELSE r.deletion_timestamp END,
         deleted = false,
         field_manager = excluded.field_manager,
         created_at = CASE WHEN r.deleted THEN clock_timestamp() ELSE r.created_at END,
         updated_at = clock_timestamp(),
         tx_id = pg_current_xact_id()
       WHERE $8::bigint IS NULL OR (r.resource_version = $8::bigint AND NOT r.deleted)
       RETURNING ${columns.replace('tx_id::text', 'r.tx_id::text')}, pg_notify('${resourcesChannel}', r.kind)`,
      [
        intent.kind,
        intent.namespace,
        intent.name,
        intent.labels === undefined ? null : JSON.stringify(intent.labels),
        JSON.stringify(intent.spec),
        intent.finalizers ?? null,
        options.fieldManager,
        options.resourceVersion ?? null,
      ],
    );
    const row = result.rows[0];
    if (row === undefined) throw new ResourceConflict(intent.kind, intent.name);
    return resourceOf(row);
  }

  async updateStatus(
    kind: ResourceKind,
    namespace: string,
    name: string,
    status: Record<string, unknown>,
    options: WriteOptions,
  ): Promise<Resource> {
    const row = await this.update(
      kind,
      namespace,
      name,
      'status = $4::jsonb',
      [JSON.stringify(status)],
      options.resourceVersion,
    );
    return resourceOf(row);
  }

  async setFinalizers(
    kind: ResourceKind,
    namespace: string,
    name: string,
    finalizers: string[],
    options: WriteOptions,
  ): Promise<Resource | undefined> {
    // The last finalizer of a resource marked for deletion lets it go.
    const row = await this.update(
      kind,
      namespace,
      name,
      `finalizers = $4::text[],
       deleted = r.deletion_timestamp IS NOT NULL AND cardinality($4::text[]) = 0`,
      [finalizers],
      options.resourceVersion,
    );
    return row.deleted ? undefined : resourceOf(row);
  }

  async delete(
    kind: ResourceKind,
    namespace: string,
    name: string,
    options: WriteOptions,
  ): Promise<Resource | undefined> {
    const current = await this.get(kind, namespace, name);
    if (current === undefined) return undefined;
    const row = await this.update(
      kind,
      namespace,
      name,
      `deletion_timestamp = coalesce(r.deletion_timestamp, clock_timestamp()),
       deleted = cardinality(r.finalizers) = 0`,
      [],
      options.resourceVersion,
    );
    return resourceOf(row);
  }

  /** Updates a live resource (a new resourceVersion), refusing a stale `expectedVersion`. */
  private async update(
    kind: ResourceKind,
    namespace: string,
    name: string,
    set: string,
    values: unknown[],
    expectedVersion: string | undefined,
  ): Promise<ResourceRow> {
    const expected = values.length + 4;
    const result = await this.db.query<ResourceRow>(
      `UPDATE resources r SET ${set}, resource_version = nextval('resource_versions'),
              updated_at = clock_timestamp(), tx_id = pg_current_xact_id()
        WHERE kind = $1 AND namespace = $2 AND name = $3 AND NOT deleted
          AND ($${expected}::bigint IS NULL OR resource_version = $${expected}::bigint)
       RETURNING ${columns}, pg_notify('${resourcesChannel}', kind)`,
      [kind, namespace, name, ...values, expectedVersion ?? null],
    );
    const row = result.rows[0];
    if (row !== undefined) return row;
    if ((await this.get(kind, namespace, name)) === undefined) throw new ResourceNotFound(kind, name);
    throw new ResourceConflict(kind, name);
  }

  /**
   * Purges tombstones last written more than `olderThanMs` ago (only ones below the horizon of running transactions,
   * so every list made later is past them) and moves each kind and namespace's compaction mark to the newest purged.
   * Returns how many went.
   */
  async purgeTombstones(olderThanMs: number): Promise<number> {
    const result = await this.db.query<{ purged: string }>(
      `WITH purged AS (
         DELETE FROM resources
          WHERE deleted AND updated_at < clock_timestamp() - make_interval(secs => $1::double precision / 1000)
            AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
         RETURNING kind, namespace, tx_id, resource_version
       ), newest AS (
         SELECT DISTINCT ON (kind, namespace) kind, namespace, tx_id, resource_version FROM purged
          ORDER BY kind, namespace, tx_id DESC, resource_version DESC
       ), marked AS (
         INSERT INTO resource_compactions AS c (kind, namespace, tx_id, resource_version)
         SELECT kind, namespace, tx_id, resource_version FROM newest
         ON CONFLICT (kind, namespace) DO UPDATE SET tx_id = excluded.tx_id, resource_version = excluded.resource_version
          WHERE (excluded.tx_id, excluded.resource_version) > (c.tx_id, c.resource_version)
       )
       SELECT count(*) AS purged FROM purged`,
      [olderThanMs],
    );
    return Number(result.rows[0]?.purged ?? 0);
  }

  async watch(
    kind: ResourceKind,
    namespace: string,
    resourceVersion: string,
    onEvent: (event: WatchEvent) => void | Promise<void>,
    onError: (error: unknown) => void,
  ): Promise<Watch> {
    const source = this.watchSource;
    if (source === undefined) throw new Error('this resource store was made without a watch source');
    const start = parseListVersion(resourceVersion);
    if (start === undefined) throw new ResourceVersionExpired(resourceVersion);
    let position = start;
    let stopped = false;
    let running: Promise<void> | undefined;
    let again = false;
    // Made below; an expiry reported early (a read started by the listener's connect) may need to end them.
    const ends: { poll?: NodeJS.Timeout; listener?: ChangeListener } = {};

    const readChanges = async () => {
      do {
        again = false;
        // One statement, one snapshot: the changes, and whether tombstones after this position were purged (a
        // purge deletes them and moves the mark in one transaction).
        const result = await source.pool.query<ResourceRow & { expired: boolean }>(
          `SELECT changed.*, mark.expired
             FROM (SELECT EXISTS (SELECT 1 FROM resource_compactions c
                                   WHERE c.kind = $1 AND c.namespace = $2
                                     AND (c.tx_id, c.resource_version) > ($3::xid8, $4::bigint)) AS expired) mark
             LEFT JOIN LATERAL (
               SELECT ${columns} FROM resources
                WHERE kind = $1 AND namespace = $2 AND (tx_id, resource_version) > ($3::xid8, $4::bigint)
                  AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY tx_id, resource_version LIMIT 500) changed ON NOT mark.expired`,
          [kind, namespace, position.tx, position.rv],
        );
        if (result.rows[0]?.expired === true) throw new ResourceVersionExpired(`${position.tx}.${position.rv}`);
        const rows = result.rows.filter((row) => row.name !== null);
        for (const row of rows) {
          if (stopped) return;
          const type = row.deleted ? 'DELETED' : row.created_version === row.resource_version ? 'ADDED' : 'MODIFIED';
          await onEvent({ type, object: resourceOf(row) });
          position = { tx: row.tx_id, rv: row.resource_version };
        }
        if (rows.length === 500) again = true;
      } while (again && !stopped);
    };
    const kick = () => {
      if (stopped) return;
      if (running !== undefined) {
        again = true;
        return;
      }
      running = readChanges()
        .catch((error: unknown) => {
          if (stopped) return;
          // An expired position never comes back: the watch ends there (as a Kubernetes watch after its 410).
          if (error instanceof ResourceVersionExpired) {
            stopped = true;
            clearInterval(ends.poll);
            void ends.listener?.close().catch(() => {});
          }
          onError(error);
        })
        .finally(() => {
          running = undefined;
          if (again) kick();
        });
    };
    const listener = new ChangeListener(
      source.url,
      resourcesChannel,
      (payload) => {
        if (payload === kind) kick();
      },
      kick,
      source.log ?? (() => {}),
    );
    ends.listener = listener;
    await listener.start();
    // Notices wake the watch at commit; the poll also covers a transaction that was still below the horizon then.
    const poll = setInterval(kick, source.pollMs ?? 1_000);
    poll.unref();
    ends.poll = poll;
    if (stopped) clearInterval(poll);
    kick();
    return {
      async stop() {
        stopped = true;
        clearInterval(poll);
        await listener.close();
        await running;
      },
    };
  }
}
