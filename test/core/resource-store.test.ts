/**
 * The PostgreSQL ResourceStore (core/resources/postgres-store.ts) against a real PostgreSQL, asserting what a
 * Kubernetes client relies on: apply creates and replaces (generation counts spec changes, resourceVersion changes at
 * every write), get and list (sorted by name, with a list resourceVersion), the stale-resourceVersion conflict, the
 * status subresource, deletion with and without finalizers, re-creation after deletion, writes that roll back with
 * their transaction, and watches: ADDED / MODIFIED / DELETED in order for one kind and namespace, a late committer
 * that is never skipped, an unusable resourceVersion, and stop().
 *
 * One database for the file; every test works in a namespace of its own, so tests run concurrently. The late
 * committer holds a transaction open (which holds every watch of the cluster back) and is serial: AVA runs serial
 * tests before the concurrent ones. Events are awaited through promises the watch callback resolves, never sleeps.
 */
import { randomUUID } from 'node:crypto';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import {
  PostgresResourceStore,
  ResourceVersionExpired,
  type WatchSource,
} from '../../core/resources/postgres-store.ts';
import {
  type Resource,
  ResourceConflict,
  type ResourceKind,
  ResourceNotFound,
  resourceApiVersion,
  type Watch,
  type WatchEvent,
  type WatchEventType,
} from '../../core/resources/store.ts';
import { freshDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let pool: pg.Pool;
let store: PostgresResourceStore;
/** Pools made for single watches (see `countingSource`), ended with the file. */
const extraPools: pg.Pool[] = [];

const pollMs = 20;

test.before(async () => {
  database = await freshDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 12 });
  // A connection still closing when the database is dropped at the end gets "terminating connection": not a failure.
  pool.on('error', () => {});
  store = new PostgresResourceStore(pool, { pool, url: database.url, pollMs });
});
test.after.always(async () => {
  await Promise.all(extraPools.map((extra) => extra.end()));
  await pool?.end();
  await database?.drop();
});

// ---------------------------------------------------------------------------------------------------------------
// Helpers

const writer = { fieldManager: 'resource-store-test' };
const uuidRegex = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function namespace(): string {
  return `ns-${randomUUID().slice(0, 8)}`;
}

function names(resources: readonly Resource[]): string[] {
  return resources.map((resource) => resource.metadata.name);
}

/** Polls until `probe` holds; no fixed sleeps. */
async function waitFor(what: string, probe: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await yieldTurn();
  }
}

/** What a watch reported, with promises resolved from its callbacks. */
class Recorder {
  readonly events: WatchEvent[] = [];
  readonly errors: unknown[] = [];
  private readonly waiters = new Set<() => void>();

  readonly onEvent = (event: WatchEvent): void => {
    this.events.push(event);
    for (const wake of [...this.waiters]) wake();
  };

  readonly onError = (error: unknown): void => {
    this.errors.push(error);
    for (const wake of [...this.waiters]) wake();
  };

  /** `type name` of every event so far, e.g. `ADDED a`. */
  summary(): string[] {
    return this.events.map((event) => `${event.type} ${event.object.metadata.name}`);
  }

  /** Resolves once `count` events have been reported; rejects on a watch error or after `ms`. */
  until(count: number, ms = 15_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const finish = (error?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (error === undefined) resolve();
        else reject(error);
      };
      const check = () => {
        if (this.errors.length > 0) finish(new Error(`the watch broke: ${String(this.errors[0])}`));
        else if (this.events.length >= count) finish();
      };
      const timer = setTimeout(
        () => finish(new Error(`timed out waiting for ${count} events; saw ${JSON.stringify(this.summary())}`)),
        ms,
      );
      this.waiters.add(check);
      check();
    });
  }
}

/**
 * A watch source on a pool of its own that counts the watch's reads (every read of a watch takes a connection from
 * its source's pool): waiting for two more reads after a commit proves the watch has read, and reported, everything
 * it was going to report from a snapshot taken after that commit.
 */
function countingSource(): { source: WatchSource; reads: () => number } {
  const own = new pg.Pool({ connectionString: database.url, max: 2 });
  own.on('error', () => {});
  extraPools.push(own);
  let reads = 0;
  own.on('acquire', () => {
    reads += 1;
  });
  return { source: { pool: own, url: database.url, pollMs }, reads: () => reads };
}

async function watchFrom(
  t: ExecutionContext,
  kind: ResourceKind,
  ns: string,
  resourceVersion: string,
  from: PostgresResourceStore = store,
): Promise<{ recorder: Recorder; watch: Watch }> {
  const recorder = new Recorder();
  const watch = await from.watch(kind, ns, resourceVersion, recorder.onEvent, recorder.onError);
  t.teardown(() => watch.stop());
  return { recorder, watch };
}

function assertEvent(
  t: ExecutionContext,
  event: WatchEvent | undefined,
  type: WatchEventType,
  expected: Resource,
  label: string,
): void {
  t.is(event?.type, type, `${label}: type`);
  t.is(event?.object.metadata.name, expected.metadata.name, `${label}: name`);
  t.is(event?.object.metadata.uid, expected.metadata.uid, `${label}: uid`);
  t.is(event?.object.metadata.resourceVersion, expected.metadata.resourceVersion, `${label}: resourceVersion`);
}

// ---------------------------------------------------------------------------------------------------------------
// apply, get, list

test('apply creates a resource that get and list return, sorted by name with a list resourceVersion', async (t) => {
  const ns = namespace();
  const spec = { strategy: 'ring-all', members: ['u-1', 'u-2'], wrapUp: { seconds: 30 } };
  const before = Date.now();
  const created = await store.apply(
    {
      kind: 'Queue',
      namespace: ns,
      name: 'support',
      spec,
      labels: { team: 'care' },
      finalizers: ['switchboard.dev/queue'],
    },
    writer,
  );
  t.is(created.apiVersion, resourceApiVersion);
  t.is(created.kind, 'Queue');
  t.is(created.metadata.name, 'support');
  t.is(created.metadata.namespace, ns);
  t.regex(created.metadata.uid, uuidRegex);
  t.is(created.metadata.generation, 1);
  t.is(typeof created.metadata.resourceVersion, 'string');
  t.not(created.metadata.resourceVersion, '');
  t.deepEqual(created.metadata.labels, { team: 'care' });
  t.deepEqual(created.metadata.finalizers, ['switchboard.dev/queue']);
  const createdAt = Date.parse(created.metadata.creationTimestamp);
  t.is(new Date(createdAt).toISOString(), created.metadata.creationTimestamp, 'an ISO 8601 timestamp');
  t.true(Math.abs(createdAt - before) < 60_000, 'created now');
  t.false('deletionTimestamp' in created.metadata);
  t.deepEqual(created.spec, spec);
  t.deepEqual(created.status, {});

  t.deepEqual(await store.get('Queue', ns, 'support'), created);
  t.is(await store.get('Queue', ns, 'sales'), undefined);
  t.is(await store.get('RoutingPlan', ns, 'support'), undefined, 'another kind');
  t.is(await store.get('Queue', namespace(), 'support'), undefined, 'another namespace');

  // Without labels and finalizers: empty ones.
  const billing = await store.apply({ kind: 'Queue', namespace: ns, name: 'billing', spec: { n: 1 } }, writer);
  t.deepEqual(billing.metadata.labels, {});
  t.deepEqual(billing.metadata.finalizers, []);
  const zeta = await store.apply({ kind: 'Queue', namespace: ns, name: 'zeta', spec: { n: 2 } }, writer);
  await store.apply({ kind: 'RoutingPlan', namespace: ns, name: 'alpha', spec: { n: 3 } }, writer);
  await store.apply({ kind: 'Queue', namespace: namespace(), name: 'alpha', spec: { n: 4 } }, writer);

  const listed = await store.list('Queue', ns);
  t.deepEqual(names(listed.items), ['billing', 'support', 'zeta']);
  t.deepEqual(listed.items, [billing, created, zeta]);
  t.is(typeof listed.resourceVersion, 'string');
  t.not(listed.resourceVersion, '');

  const empty = await store.list('EnginePool', ns);
  t.deepEqual(empty.items, []);
  t.is(typeof empty.resourceVersion, 'string');
  t.not(empty.resourceVersion, '', 'an empty list has a resourceVersion to watch from too');
});

test('generation counts spec changes only; resourceVersion changes at every write', async (t) => {
  const ns = namespace();
  const intent = { kind: 'Queue' as const, namespace: ns, name: 'q', labels: { a: '1' }, finalizers: ['x/f'] };
  const v1 = await store.apply({ ...intent, spec: { strategy: 'ring-all', members: ['u-1'] } }, writer);
  // The same spec (keys in another order): no new generation, but a write all the same.
  const v2 = await store.apply({ ...intent, spec: { members: ['u-1'], strategy: 'ring-all' } }, writer);
  t.is(v2.metadata.generation, 1);
  t.is(v2.metadata.uid, v1.metadata.uid);
  t.is(v2.metadata.creationTimestamp, v1.metadata.creationTimestamp);
  t.not(v2.metadata.resourceVersion, v1.metadata.resourceVersion);

  const v3 = await store.apply({ ...intent, spec: { strategy: 'round-robin', members: ['u-1'] } }, writer);
  t.is(v3.metadata.generation, 2);
  t.deepEqual(v3.spec, { strategy: 'round-robin', members: ['u-1'] });
  t.is(v3.metadata.uid, v1.metadata.uid);

  // Labels alone are metadata: no new generation. Labels and finalizers not given are kept.
  const v4 = await store.apply({ ...intent, labels: { a: '2' }, spec: v3.spec }, writer);
  t.is(v4.metadata.generation, 2);
  t.deepEqual(v4.metadata.labels, { a: '2' });
  const v5 = await store.apply({ kind: 'Queue', namespace: ns, name: 'q', spec: { strategy: 'longest-idle' } }, writer);
  t.is(v5.metadata.generation, 3);
  t.deepEqual(v5.metadata.labels, { a: '2' });
  t.deepEqual(v5.metadata.finalizers, ['x/f']);

  const v6 = await store.updateStatus('Queue', ns, 'q', { observedGeneration: 3 }, writer);
  t.is(v6.metadata.generation, 3);
  const v7 = await store.setFinalizers('Queue', ns, 'q', ['x/f', 'x/g'], writer);
  t.is(v7?.metadata.generation, 3);
  t.deepEqual(v7?.metadata.finalizers, ['x/f', 'x/g']);

  const versions = [v1, v2, v3, v4, v5, v6, v7].map((resource) => resource?.metadata.resourceVersion);
  t.is(new Set(versions).size, versions.length, `every write has a new resourceVersion: ${versions.join(', ')}`);
  t.deepEqual(await store.get('Queue', ns, 'q'), v7);
});

// ---------------------------------------------------------------------------------------------------------------
// Conflicts, status

test('every write with a stale resourceVersion is refused with ResourceConflict and changes nothing', async (t) => {
  const ns = namespace();
  const created = await store.apply(
    { kind: 'RoutingPlan', namespace: ns, name: 'main', spec: { steps: 1 }, finalizers: ['x/f'] },
    writer,
  );
  const stale = { ...writer, resourceVersion: created.metadata.resourceVersion };
  const updated = await store.apply({ kind: 'RoutingPlan', namespace: ns, name: 'main', spec: { steps: 2 } }, stale);
  t.is(updated.metadata.generation, 2, 'the current resourceVersion is accepted');

  await t.throwsAsync(store.apply({ kind: 'RoutingPlan', namespace: ns, name: 'main', spec: { steps: 3 } }, stale), {
    instanceOf: ResourceConflict,
  });
  await t.throwsAsync(store.updateStatus('RoutingPlan', ns, 'main', { phase: 'Ready' }, stale), {
    instanceOf: ResourceConflict,
  });
  await t.throwsAsync(store.setFinalizers('RoutingPlan', ns, 'main', [], stale), { instanceOf: ResourceConflict });
  await t.throwsAsync(store.delete('RoutingPlan', ns, 'main', stale), { instanceOf: ResourceConflict });
  t.deepEqual(await store.get('RoutingPlan', ns, 'main'), updated, 'nothing changed');

  const current = { ...writer, resourceVersion: updated.metadata.resourceVersion };
  const ready = await store.updateStatus('RoutingPlan', ns, 'main', { phase: 'Ready' }, current);
  t.deepEqual(ready.status, { phase: 'Ready' });
  await t.throwsAsync(store.updateStatus('RoutingPlan', ns, 'main', { phase: 'Failed' }, current), {
    instanceOf: ResourceConflict,
  });
  t.deepEqual(await store.get('RoutingPlan', ns, 'main'), ready);

  // No stored resource has the expected resourceVersion when there is none: apply must not create one (a client
  // replacing what it read must not bring back a resource deleted meanwhile, tombstone purged or not).
  const versioned = { ...writer, resourceVersion: ready.metadata.resourceVersion };
  await t.throwsAsync(store.apply({ kind: 'RoutingPlan', namespace: ns, name: 'other', spec: {} }, versioned), {
    instanceOf: ResourceConflict,
  });
  t.is(await store.get('RoutingPlan', ns, 'other'), undefined, 'nothing created');
  await store.delete('RoutingPlan', ns, 'main', writer);
  await store.setFinalizers('RoutingPlan', ns, 'main', [], writer);
  await t.throwsAsync(store.apply({ kind: 'RoutingPlan', namespace: ns, name: 'main', spec: {} }, versioned), {
    instanceOf: ResourceConflict,
  });
  t.is(await store.get('RoutingPlan', ns, 'main'), undefined, 'not brought back');
});

test('updateStatus replaces the status only, and a missing resource is ResourceNotFound', async (t) => {
  const ns = namespace();
  await t.throwsAsync(store.updateStatus('Queue', ns, 'nowhere', { phase: 'Ready' }, writer), {
    instanceOf: ResourceNotFound,
  });
  t.is(await store.get('Queue', ns, 'nowhere'), undefined, 'updateStatus does not create');

  const spec = { strategy: 'ring-all' };
  await store.apply({ kind: 'Queue', namespace: ns, name: 'q', spec: { strategy: 'old' } }, writer);
  const created = await store.apply({ kind: 'Queue', namespace: ns, name: 'q', spec, labels: { l: 'v' } }, writer);
  t.is(created.metadata.generation, 2);

  const first = await store.updateStatus(
    'Queue',
    ns,
    'q',
    { phase: 'Ready', conditions: [{ type: 'Ready', status: 'True' }] },
    writer,
  );
  t.deepEqual(first.status, { phase: 'Ready', conditions: [{ type: 'Ready', status: 'True' }] });
  t.deepEqual(first.spec, spec);
  t.is(first.metadata.generation, 2);
  t.deepEqual(first.metadata.labels, { l: 'v' });
  t.is(first.metadata.uid, created.metadata.uid);
  t.not(first.metadata.resourceVersion, created.metadata.resourceVersion);

  // The whole status is replaced, not merged.
  const second = await store.updateStatus('Queue', ns, 'q', { observedGeneration: 2 }, writer);
  t.deepEqual(second.status, { observedGeneration: 2 });
  t.deepEqual(second.spec, spec);
  t.is(second.metadata.generation, 2);
  t.deepEqual(await store.get('Queue', ns, 'q'), second);

  // And apply leaves the status alone.
  const reapplied = await store.apply({ kind: 'Queue', namespace: ns, name: 'q', spec: { strategy: 'new' } }, writer);
  t.is(reapplied.metadata.generation, 3);
  t.deepEqual(reapplied.status, { observedGeneration: 2 });
});

// ---------------------------------------------------------------------------------------------------------------
// Deletion, finalizers, re-creation

test('delete without finalizers removes the resource', async (t) => {
  const ns = namespace();
  await store.apply({ kind: 'Queue', namespace: ns, name: 'a', spec: { n: 1 } }, writer);
  const b = await store.apply({ kind: 'Queue', namespace: ns, name: 'b', spec: { n: 2 } }, writer);

  await store.delete('Queue', ns, 'a', writer);
  t.is(await store.get('Queue', ns, 'a'), undefined);
  t.deepEqual((await store.list('Queue', ns)).items, [b]);

  t.is(await store.delete('Queue', ns, 'a', writer), undefined, 'nothing left to delete');
  t.is(await store.delete('Queue', ns, 'never', writer), undefined);
  await t.throwsAsync(store.updateStatus('Queue', ns, 'a', { phase: 'Ready' }, writer), {
    instanceOf: ResourceNotFound,
  });
  await t.throwsAsync(store.setFinalizers('Queue', ns, 'a', ['x/f'], writer), { instanceOf: ResourceNotFound });
  t.is(await store.get('Queue', ns, 'a'), undefined, 'still gone');
});

test('finalizers hold a deletion (deletionTimestamp) until setFinalizers removes the last one', async (t) => {
  const ns = namespace();
  const created = await store.apply(
    { kind: 'WebhookEndpoint', namespace: ns, name: 'hook', spec: { url: 'https://example.com' } },
    { ...writer },
  );
  const held = await store.setFinalizers('WebhookEndpoint', ns, 'hook', ['x/one', 'x/two'], writer);
  t.deepEqual(held?.metadata.finalizers, ['x/one', 'x/two']);
  t.false(held !== undefined && 'deletionTimestamp' in held.metadata, 'finalizers alone do not delete');

  const marked = await store.delete('WebhookEndpoint', ns, 'hook', writer);
  t.truthy(marked?.metadata.deletionTimestamp, 'delete marks it');
  t.false(Number.isNaN(Date.parse(marked?.metadata.deletionTimestamp ?? '')));
  t.deepEqual(marked?.metadata.finalizers, ['x/one', 'x/two']);
  t.is(marked?.metadata.uid, created.metadata.uid);

  const read = await store.get('WebhookEndpoint', ns, 'hook');
  t.is(read?.metadata.deletionTimestamp, marked?.metadata.deletionTimestamp, 'still readable, marked');
  t.deepEqual(names((await store.list('WebhookEndpoint', ns)).items), ['hook'], 'still listed');

  const again = await store.delete('WebhookEndpoint', ns, 'hook', writer);
  t.is(again?.metadata.deletionTimestamp, marked?.metadata.deletionTimestamp, 'a second delete keeps the mark');

  const one = await store.setFinalizers('WebhookEndpoint', ns, 'hook', ['x/two'], writer);
  t.deepEqual(one?.metadata.finalizers, ['x/two']);
  t.is(one?.metadata.deletionTimestamp, marked?.metadata.deletionTimestamp);
  t.truthy(await store.get('WebhookEndpoint', ns, 'hook'), 'a finalizer remains');

  t.is(await store.setFinalizers('WebhookEndpoint', ns, 'hook', [], writer), undefined, 'the last one lets it go');
  t.is(await store.get('WebhookEndpoint', ns, 'hook'), undefined);
  t.deepEqual((await store.list('WebhookEndpoint', ns)).items, []);

  // Emptying the finalizers of a resource not marked for deletion keeps it.
  await store.apply({ kind: 'WebhookEndpoint', namespace: ns, name: 'kept', spec: {}, finalizers: ['x/f'] }, writer);
  const kept = await store.setFinalizers('WebhookEndpoint', ns, 'kept', [], writer);
  t.deepEqual(kept?.metadata.finalizers, []);
  t.truthy(await store.get('WebhookEndpoint', ns, 'kept'));
});

test('applying a deleted name again creates a fresh resource', async (t) => {
  const ns = namespace();
  for (const finalizer of [undefined, 'x/f']) {
    const name = finalizer === undefined ? 'plain' : 'finalized';
    const old = await store.apply(
      {
        kind: 'EnginePool',
        namespace: ns,
        name,
        spec: { v: 1 },
        labels: { old: 'yes' },
        ...(finalizer === undefined ? {} : { finalizers: [finalizer] }),
      },
      writer,
    );
    await store.apply({ kind: 'EnginePool', namespace: ns, name, spec: { v: 2 } }, writer);
    await store.updateStatus('EnginePool', ns, name, { phase: 'Running' }, writer);
    await store.delete('EnginePool', ns, name, writer);
    if (finalizer !== undefined) await store.setFinalizers('EnginePool', ns, name, [], writer);
    t.is(await store.get('EnginePool', ns, name), undefined, `${name}: deleted`);

    const fresh = await store.apply({ kind: 'EnginePool', namespace: ns, name, spec: { v: 2 } }, writer);
    t.regex(fresh.metadata.uid, uuidRegex);
    t.not(fresh.metadata.uid, old.metadata.uid, `${name}: a new uid`);
    t.is(fresh.metadata.generation, 1, `${name}: generation 1`);
    t.deepEqual(fresh.status, {}, `${name}: no status of the old one`);
    t.deepEqual(fresh.metadata.labels, {}, `${name}: no labels of the old one`);
    t.deepEqual(fresh.metadata.finalizers, [], `${name}: no finalizers of the old one`);
    t.false('deletionTimestamp' in fresh.metadata, `${name}: not marked`);
    t.true(
      Date.parse(fresh.metadata.creationTimestamp) >= Date.parse(old.metadata.creationTimestamp),
      `${name}: created again`,
    );
    t.deepEqual(await store.get('EnginePool', ns, name), fresh);
  }
  t.deepEqual(names((await store.list('EnginePool', ns)).items), ['finalized', 'plain']);
});

// ---------------------------------------------------------------------------------------------------------------
// Transactions

test('writes inside a transaction that rolls back leave nothing; a commit keeps them', async (t) => {
  const ns = namespace();
  const kept = await store.apply({ kind: 'Queue', namespace: ns, name: 'kept', spec: { v: 1 } }, writer);
  const doomed = await store.apply(
    { kind: 'Queue', namespace: ns, name: 'doomed', spec: { v: 1 }, finalizers: ['x/f'] },
    writer,
  );
  const before = await store.list('Queue', ns);

  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const inside = store.within(client);
    await inside.apply({ kind: 'Queue', namespace: ns, name: 'added', spec: { v: 1 } }, writer);
    await inside.apply({ kind: 'Queue', namespace: ns, name: 'kept', spec: { v: 2 } }, writer);
    await inside.updateStatus('Queue', ns, 'kept', { phase: 'Changed' }, writer);
    await inside.delete('Queue', ns, 'doomed', writer);
    await inside.setFinalizers('Queue', ns, 'doomed', [], writer);
    t.truthy(await inside.get('Queue', ns, 'added'), 'the transaction sees its own writes');
    t.is(await inside.get('Queue', ns, 'doomed'), undefined);
    t.is(await store.get('Queue', ns, 'added'), undefined, 'nobody else sees them before commit');
    await client.query('ROLLBACK');

    t.is(await store.get('Queue', ns, 'added'), undefined);
    t.deepEqual(await store.get('Queue', ns, 'kept'), kept);
    t.deepEqual(await store.get('Queue', ns, 'doomed'), doomed);
    t.deepEqual((await store.list('Queue', ns)).items, before.items);

    await client.query('BEGIN');
    const committed = await store.within(client).apply({ kind: 'Queue', namespace: ns, name: 'c', spec: {} }, writer);
    await client.query('COMMIT');
    t.deepEqual(await store.get('Queue', ns, 'c'), committed);
  } finally {
    client.release();
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Watches

test('a watch from a list resourceVersion reports ADDED, MODIFIED and DELETED in order, for its kind and namespace only', async (t) => {
  const ns = namespace();
  const otherNs = namespace();
  const { resourceVersion } = await store.list('Queue', ns);
  const { recorder } = await watchFrom(t, 'Queue', ns, resourceVersion);
  const expected: { type: WatchEventType; resource: Resource }[] = [];
  /** Writes, and waits until the watch has reported the write. */
  const step = async (type: WatchEventType, write: () => Promise<Resource | undefined>, resource?: Resource) => {
    const written = (await write()) ?? resource;
    if (written === undefined) throw new Error('nothing to expect');
    expected.push({ type, resource: written });
    await recorder.until(expected.length);
  };
  const foreign = async (name: string) => {
    await store.apply({ kind: 'Queue', namespace: otherNs, name, spec: {} }, writer);
    await store.apply({ kind: 'RoutingPlan', namespace: ns, name, spec: {} }, writer);
  };

  await foreign('x');
  await step('ADDED', () => store.apply({ kind: 'Queue', namespace: ns, name: 'x', spec: { v: 1 } }, writer));
  await step('MODIFIED', () => store.updateStatus('Queue', ns, 'x', { phase: 'Ready' }, writer));
  await foreign('y');
  await step('ADDED', () =>
    store.apply({ kind: 'Queue', namespace: ns, name: 'y', spec: { v: 1 }, finalizers: ['x/f'] }, writer),
  );
  await step('MODIFIED', () => store.apply({ kind: 'Queue', namespace: ns, name: 'x', spec: { v: 2 } }, writer));
  const x = await store.get('Queue', ns, 'x');
  await step('DELETED', async () => {
    await store.delete('Queue', ns, 'x', writer);
    return x;
  });
  await step('MODIFIED', () => store.delete('Queue', ns, 'y', writer)); // finalizers hold it: marked only
  const y = await store.get('Queue', ns, 'y');
  await foreign('z');
  await step('DELETED', async () => {
    await store.setFinalizers('Queue', ns, 'y', [], writer);
    return y;
  });
  // A last write of the watched kind and namespace, after every foreign one: had any been reported, it came first.
  await foreign('w');
  await step('ADDED', () => store.apply({ kind: 'Queue', namespace: ns, name: 'z', spec: {} }, writer));

  t.deepEqual(recorder.errors, []);
  t.deepEqual(
    recorder.summary(),
    ['ADDED x', 'MODIFIED x', 'ADDED y', 'MODIFIED x', 'DELETED x', 'MODIFIED y', 'DELETED y', 'ADDED z'],
    'each change once, in order, nothing of another kind or namespace',
  );
  expected.forEach(({ type, resource }, index) => {
    const event = recorder.events[index];
    const label = `event ${index} (${type} ${resource.metadata.name})`;
    if (type === 'DELETED') {
      t.is(event?.type, 'DELETED', `${label}: type`);
      t.is(event?.object.metadata.uid, resource.metadata.uid, `${label}: uid`);
      t.not(event?.object.metadata.resourceVersion, resource.metadata.resourceVersion, `${label}: a new version`);
    } else {
      assertEvent(t, event, type, resource, label);
      t.deepEqual(event?.object, resource, `${label}: the object as written`);
    }
    t.is(event?.object.kind, 'Queue');
    t.is(event?.object.metadata.namespace, ns);
  });
  t.deepEqual(recorder.events[1]?.object.status, { phase: 'Ready' });
  t.is(recorder.events[3]?.object.metadata.generation, 2);
  t.truthy(recorder.events[5]?.object.metadata.deletionTimestamp, 'the marked resource carries deletionTimestamp');
});

test.serial(
  'a late committer is not skipped: it is reported before a later transaction that committed first',
  async (t) => {
    const ns = namespace();
    const { source, reads } = countingSource();
    const watcher = new PostgresResourceStore(pool, source);
    const { resourceVersion } = await watcher.list('Queue', ns);
    const { recorder } = await watchFrom(t, 'Queue', ns, resourceVersion, watcher);

    const clientA = await pool.connect();
    const clientB = await pool.connect();
    try {
      await clientA.query('BEGIN');
      const a = await store.within(clientA).apply({ kind: 'Queue', namespace: ns, name: 'a', spec: {} }, writer);
      await clientB.query('BEGIN');
      const b = await store.within(clientB).apply({ kind: 'Queue', namespace: ns, name: 'b', spec: {} }, writer);
      await clientB.query('COMMIT');
      t.truthy(await store.get('Queue', ns, 'b'), 'b is committed');

      // Let the watch read twice from snapshots taken after b committed, A still open: reporting b now would put it
      // before a, which began (took its transaction id) first.
      const committedAt = reads();
      await waitFor('two more watch reads', () => reads() >= committedAt + 3);
      t.deepEqual(recorder.summary(), [], 'nothing is reported while the earlier transaction is still open');

      await clientA.query('COMMIT');
      await recorder.until(2);
      t.deepEqual(recorder.errors, []);
      t.deepEqual(recorder.summary(), ['ADDED a', 'ADDED b'], 'the late committer a first, then b');
      assertEvent(t, recorder.events[0], 'ADDED', a, 'a');
      assertEvent(t, recorder.events[1], 'ADDED', b, 'b');

      // Nothing more comes (no duplicate of either): a later write is the next event.
      const c = await store.apply({ kind: 'Queue', namespace: ns, name: 'c', spec: {} }, writer);
      await recorder.until(3);
      t.deepEqual(recorder.summary(), ['ADDED a', 'ADDED b', 'ADDED c']);
      assertEvent(t, recorder.events[2], 'ADDED', c, 'c');
    } finally {
      await clientA.query('ROLLBACK').catch(() => {});
      await clientB.query('ROLLBACK').catch(() => {});
      clientA.release();
      clientB.release();
    }
  },
);

// Serial: a purge takes every old enough tombstone of the database, and concurrent tests watch for their deletions.
test.serial('purged tombstones expire the watches from before them; later watches and lists go on', async (t) => {
  const ns = namespace();
  const before = await store.list('Queue', ns);
  const early = await watchFrom(t, 'Queue', ns, before.resourceVersion);
  await store.apply({ kind: 'Queue', namespace: ns, name: 'gone', spec: { v: 1 } }, writer);
  // The store keeps one row per resource: a watch that first reads after the delete sees only the tombstone, so the
  // delete waits until the watch has seen the resource added (under load that first read can come late).
  await early.recorder.until(1);
  await store.delete('Queue', ns, 'gone', writer);
  await early.recorder.until(2);
  t.deepEqual(early.recorder.summary(), ['ADDED gone', 'DELETED gone']);
  const after = await store.list('Queue', ns);

  t.true((await store.purgeTombstones(0)) >= 1);
  const left = await pool.query('SELECT 1 FROM resources WHERE kind = $1 AND namespace = $2', ['Queue', ns]);
  t.is(left.rowCount, 0, 'the tombstone is gone');

  // A watch from before the purged deletion could miss it: it is told to list again.
  const stale = await watchFrom(t, 'Queue', ns, before.resourceVersion);
  await waitFor('the stale watch to expire', () => stale.recorder.errors.length > 0);
  t.true(stale.recorder.errors[0] instanceof ResourceVersionExpired);
  t.deepEqual(stale.recorder.events, []);

  // The watch that saw the deletion, and one from a list made after it, go on; the name can be used again.
  const late = await watchFrom(t, 'Queue', ns, after.resourceVersion);
  const again = await store.apply({ kind: 'Queue', namespace: ns, name: 'gone', spec: { v: 2 } }, writer);
  t.is(again.metadata.generation, 1);
  await early.recorder.until(3);
  await late.recorder.until(1);
  t.deepEqual(early.recorder.summary(), ['ADDED gone', 'DELETED gone', 'ADDED gone']);
  t.deepEqual(late.recorder.summary(), ['ADDED gone']);
  t.deepEqual(early.recorder.errors, []);
  // Nothing younger than the age given is purged.
  await store.delete('Queue', ns, 'gone', writer);
  t.is(await store.purgeTombstones(60 * 60_000), 0);
});

test('a watch from an unusable resourceVersion throws ResourceVersionExpired', async (t) => {
  const ns = namespace();
  for (const version of ['garbage', '', '12.x', '-1.0']) {
    await t.throwsAsync(
      store.watch(
        'Queue',
        ns,
        version,
        () => {},
        () => {},
      ),
      { instanceOf: ResourceVersionExpired },
      JSON.stringify(version),
    );
  }
  // A list's resourceVersion is accepted.
  const { resourceVersion } = await store.list('Queue', ns);
  const { watch } = await watchFrom(t, 'Queue', ns, resourceVersion);
  await t.notThrowsAsync(watch.stop());
});

test('stop() ends a watch: no event and no read after it', async (t) => {
  const ns = namespace();
  const { source, reads } = countingSource();
  const { resourceVersion } = await store.list('Queue', ns);
  const stopped = await watchFrom(t, 'Queue', ns, resourceVersion, new PostgresResourceStore(pool, source));
  const live = await watchFrom(t, 'Queue', ns, resourceVersion);

  await store.apply({ kind: 'Queue', namespace: ns, name: 'a', spec: {} }, writer);
  await Promise.all([stopped.recorder.until(1), live.recorder.until(1)]);

  await stopped.watch.stop();
  const readsAtStop = reads();
  await store.apply({ kind: 'Queue', namespace: ns, name: 'b', spec: {} }, writer);
  await store.apply({ kind: 'Queue', namespace: ns, name: 'a', spec: { v: 2 } }, writer);
  await live.recorder.until(3);
  t.deepEqual(live.recorder.summary(), ['ADDED a', 'ADDED b', 'MODIFIED a'], 'a watch still running sees them');

  t.deepEqual(stopped.recorder.summary(), ['ADDED a'], 'the stopped watch reports nothing more');
  t.deepEqual(stopped.recorder.errors, []);
  t.is(reads(), readsAtStop, 'the stopped watch no longer reads');
  await t.notThrowsAsync(stopped.watch.stop(), 'stopping twice is harmless');
});
