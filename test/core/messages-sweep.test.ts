/**
 * The message records' sweep (core/messages/sweep.ts; docs/messaging.md "Receiving", "Records"): a concatenated
 * text whose siblings did not all come within an hour becomes one message of the parts that came, in order, marked
 * `incomplete`, with `message.received`; unmatched receipts are dropped after 7 days without a later receipt. Rows
 * are aged in the database (the sweep goes by the database's clock, which wrote them): no waiting. Serial: the sweep
 * takes every carrier's rows.
 */
import test from 'ava';
import { encodeText, splitText } from '../../core/messages/encoding.ts';
import type { InboundPart } from '../../core/messages/link-store.ts';
import { getMessage, listMessages, messageObject } from '../../core/messages/messages.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { sweepMessages } from '../../core/messages/sweep.ts';
import { type MessagesDatabase, messagesDatabase, numberEvents, textingSetup } from '../helpers/messages.ts';

let db: MessagesDatabase;
const peer = '+14155550177';

test.before(async () => {
  db = await messagesDatabase();
});

test.after.always(async () => {
  await db?.close();
});

/** Makes the number's inbound parts look `minutes` older. */
async function age(numberId: string, minutes: number) {
  await db.pool.query(
    `UPDATE message_parts SET created_at = created_at - make_interval(mins => $2) WHERE phone_number_id = $1`,
    [numberId, minutes],
  );
}

test.serial('parts whose siblings never came are one incomplete message after an hour, in order', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = openLinkStore(db.pool);
  t.teardown(() => store.close());
  const text = `Привет! ${'Можно забронировать столик на четверых? '.repeat(5)}`;
  const parts: InboundPart[] = encodeText(text, 90).map((part) => ({ from: peer, to: setup.number.e164, ...part }));
  const texts = splitText(text).parts;
  t.is(parts.length, 4);
  // Parts 4 and 1 come (out of order); 2 and 3 never do.
  t.is(await store.inbound(setup.carrier, parts[3]!), 'accepted');
  t.is(await store.inbound(setup.carrier, parts[0]!), 'accepted');
  const messages = () => listMessages(db.pool, setup.workspace.id, { phoneNumberId: setup.number.id }, { limit: 10 });

  await age(setup.number.id, 59);
  await sweepMessages(db.pool);
  t.deepEqual(await messages(), [], 'not before the hour');

  await age(setup.number.id, 2);
  const outcome = await sweepMessages(db.pool);
  t.is(outcome.incomplete, 1);
  const [message] = await messages();
  t.like(message, {
    direction: 'inbound',
    from_number: peer,
    to_number: setup.number.e164,
    text: texts[0]! + texts[3]!,
    status: 'received',
    segments: 2,
    incomplete: true,
  });
  t.like(messageObject(message!), { incomplete: true, segments: 2 });
  const events = await numberEvents(db.pool, setup.number.id);
  t.deepEqual(
    events.map((event) => [event.type, event.message.id, (event.message as { incomplete?: boolean }).incomplete]),
    [['message.received', message!.id, true]],
  );
  t.true((await getMessage(db.pool, setup.workspace.id, message!.id)).incomplete);

  // Swept once: the parts are the message's now.
  t.is((await sweepMessages(db.pool)).incomplete, 0);
  t.is((await messages()).length, 1);
  const waiting = await db.pool.query(`SELECT 1 FROM message_parts WHERE phone_number_id = $1 AND state = 'waiting'`, [
    setup.number.id,
  ]);
  t.is(waiting.rowCount, 0);
});

test.serial('a text that came whole shows no incomplete mark; a STOP made incomplete is not answered', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = openLinkStore(db.pool);
  t.teardown(() => store.close());
  const [whole] = encodeText('Are you open on Sunday?', 1);
  await store.inbound(setup.carrier, { from: peer, to: setup.number.e164, ...whole! });
  // A text of two parts whose first part says STOP: what came is not the whole text, so it is no keyword.
  const stop = encodeText(`STOP${' '.repeat(200)}`, 5);
  await store.inbound(setup.carrier, { from: peer, to: setup.number.e164, ...stop[0]! });
  await age(setup.number.id, 61);
  await sweepMessages(db.pool);
  const rows = await listMessages(db.pool, setup.workspace.id, { phoneNumberId: setup.number.id }, { limit: 10 });
  t.deepEqual(
    rows.map((row) => [row.direction, row.incomplete]),
    [
      ['inbound', true],
      ['inbound', false],
    ],
  );
  t.false('incomplete' in messageObject(rows[1]!));
  const optedOut = await db.pool.query('SELECT 1 FROM opt_outs WHERE phone_number_id = $1', [setup.number.id]);
  t.is(optedOut.rowCount, 0);
});

test.serial('the parts of a number no longer claimed are dropped, not delivered', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = openLinkStore(db.pool);
  t.teardown(() => store.close());
  const [first] = encodeText('x'.repeat(200), 9);
  await store.inbound(setup.carrier, { from: peer, to: setup.number.e164, ...first! });
  await db.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE id = $1', [setup.number.id, 'another-carrier']);
  await age(setup.number.id, 61);
  const outcome = await sweepMessages(db.pool);
  t.is(outcome.dropped, 1);
  const left = await db.pool.query('SELECT 1 FROM message_parts WHERE phone_number_id = $1', [setup.number.id]);
  t.is(left.rowCount, 0);
  t.deepEqual(await listMessages(db.pool, setup.workspace.id, { phoneNumberId: setup.number.id }, { limit: 10 }), []);
});

test.serial('unmatched receipts are dropped after 7 days by the sweep, with no receipt after them', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = openLinkStore(db.pool);
  t.teardown(() => store.close());
  const receipt = { delivered: true, state: 'DELIVRD', error: null };
  await store.receipt(setup.carrier, { carrierMessageId: 'old-1', ...receipt });
  await store.receipt(setup.carrier, { carrierMessageId: 'recent-1', ...receipt });
  await db.pool.query(
    `UPDATE message_receipts SET received_at = received_at - interval '7 days 1 minute'
      WHERE carrier = $1 AND carrier_message_id = 'old-1'`,
    [setup.carrier],
  );
  await db.pool.query(
    `UPDATE message_receipts SET received_at = received_at - interval '6 days'
      WHERE carrier = $1 AND carrier_message_id = 'recent-1'`,
    [setup.carrier],
  );
  const outcome = await sweepMessages(db.pool);
  t.is(outcome.receipts, 1);
  const left = await db.pool.query<{ id: string }>(
    'SELECT carrier_message_id AS id FROM message_receipts WHERE carrier = $1',
    [setup.carrier],
  );
  t.deepEqual(
    left.rows.map((row) => row.id),
    ['recent-1'],
  );
});
