/**
 * The duplicate check's records (core/messages/dedupe.ts, docs/messaging.md "Sending"): a new hash is claimed, the
 * same hash within the window answers the earlier send, past it the send takes the row over; two sends of the same
 * message at once are decided one after the other (the second waits for the first's commit and sees it, or claims
 * the hash itself when the first rolled back); the sweep drops rows past the window.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { inTransaction, type Queryable } from '../../core/database.ts';
import { claimDedupeHash, dedupeHash, dropStaleDedupe, takeOverDedupeHash } from '../../core/messages/dedupe.ts';
import { optOut } from '../../core/messages/opt-outs.ts';
import { type MessagesDatabase, messagesDatabase, textingSetup } from '../helpers/messages.ts';
import { until } from '../helpers/until.ts';

let db: MessagesDatabase;

test.before(async () => {
  db = await messagesDatabase();
});

test.after.always(async () => {
  await db?.close();
});

const newHash = () => dedupeHash({ from: '+14155550100', to: '+14155550123', text: randomUUID() });
/** The earlier send a claim finds (the opt-out it reads is another test's). */
const claim = async (db: Queryable, hash: string, messageId: string) =>
  (await claimDedupeHash(db, hash, { messageId, numberId: randomUUID(), to: '+14155550123' })).earlier;

test('the hash is the same for the same send only', (t) => {
  const send = { from: '+14155550100', to: '+14155550123', text: 'Hi', mediaUrls: ['https://a.example/1.png'] };
  t.is(dedupeHash(send), dedupeHash({ ...send }));
  t.not(dedupeHash(send), dedupeHash({ ...send, to: '+14155550124' }));
  t.not(dedupeHash(send), dedupeHash({ ...send, mediaUrls: [] }));
  t.not(dedupeHash({ from: 'a', to: 'b', text: 'c' }), dedupeHash({ from: 'a', to: 'bc', text: '' }));
});

test('a new hash is claimed; the same hash again answers the earlier send, recent; taken over, it names the new one', async (t) => {
  const hash = newHash();
  const first = randomUUID();
  t.is(await inTransaction(db.pool, (tx) => claim(tx, hash, first)), undefined);
  const second = randomUUID();
  const earlier = await inTransaction(db.pool, async (tx) => {
    const found = await claim(tx, hash, second);
    await takeOverDedupeHash(tx, hash, second);
    return found;
  });
  t.like(earlier, { messageId: first, recent: true });
  t.true(earlier !== undefined && Math.abs(earlier.at.getTime() - Date.now()) < 60_000);
  t.like(await inTransaction(db.pool, (tx) => claim(tx, hash, randomUUID())), { messageId: second });
});

test('past the window the earlier send is not recent, and the sweep drops it', async (t) => {
  const hash = newHash();
  const old = randomUUID();
  await inTransaction(db.pool, (tx) => claim(tx, hash, old));
  await db.pool.query(`UPDATE message_dedupe SET at = at - interval '61 seconds' WHERE hash = $1`, [hash]);
  t.like(await inTransaction(db.pool, (tx) => claim(tx, hash, randomUUID())), {
    messageId: old,
    recent: false,
  });
  t.true((await dropStaleDedupe(db.pool, 1000)) >= 1);
  const left = await db.pool.query('SELECT 1 FROM message_dedupe WHERE hash = $1', [hash]);
  t.is(left.rowCount, 0);
});

test('two sends of one message at once: the second waits for the first and sees it; after a rollback it claims', async (t) => {
  for (const outcome of ['commit', 'rollback'] as const) {
    const hash = newHash();
    const first = randomUUID();
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      t.is(await claim(holder, hash, first), undefined);
      let decided = false;
      const second = inTransaction(db.pool, (tx) => claim(tx, hash, randomUUID())).then((found) => {
        decided = true;
        return found;
      });
      // The second is held on the first's row while the first's transaction is open.
      await until('the second send waiting on a lock', async () => {
        const waiting = await db.pool.query(
          `SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%message_dedupe%'`,
        );
        return waiting.rowCount === 1 ? true : undefined;
      });
      t.false(decided, `${outcome}: the second send decided before the first committed`);
      await holder.query(outcome === 'commit' ? 'COMMIT' : 'ROLLBACK');
      const found = await second;
      if (outcome === 'commit') t.like(found, { messageId: first, recent: true });
      else t.is(found, undefined);
    } finally {
      holder.release();
    }
  }
});

test('the claim reads whether the recipient opted out of the number', async (t) => {
  const setup = await textingSetup(db.pool);
  const peer = '+14155550199';
  const send = () =>
    inTransaction(db.pool, (tx) =>
      claimDedupeHash(tx, newHash(), { messageId: randomUUID(), numberId: setup.number.id, to: peer }),
    );
  t.like(await send(), { earlier: undefined, optedOut: false });
  await optOut(db.pool, { workspaceId: setup.workspace.id, phoneNumberId: setup.number.id, peer, keyword: 'STOP' });
  t.like(await send(), { earlier: undefined, optedOut: true });
});
