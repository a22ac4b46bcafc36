/**
 * The records an SMPP link sends from (core/messages/store.ts over parts.ts, receipts.ts, messages.ts;
 * docs/messaging.md "Records"): parts taken once by racing takers, a message sent once every part is acknowledged,
 * receipts matched whether they come before or after the answer they refer to (and counted once), refusals,
 * sessions' ends, throttled parts held back until their time, the link woken by a send and by a retry coming due,
 * and every reported status (sent, delivered, failed) one `message.status` in the number's stream, in order.
 */
import test from 'ava';
import type { Clock } from '../../core/clock.ts';
import { createOutboundMessage, getMessage } from '../../core/messages/messages.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { type MessagesDatabase, messagesDatabase, numberEvents, textingSetup } from '../helpers/messages.ts';

let db: MessagesDatabase;
const store = () => openLinkStore(db.pool);

test.before(async () => {
  db = await messagesDatabase();
});

test.after.always(async () => {
  await db?.close();
});

const longText = 'The quick brown fox jumps over the lazy dog. '.repeat(5); // 225 septets: 2 parts

async function send(
  setup: Awaited<ReturnType<typeof textingSetup>>,
  text = 'Your table is ready.',
  to = '+14155550123',
) {
  return createOutboundMessage(db.pool, {
    workspace: setup.workspace,
    number: setup.number,
    to,
    text,
    actor: 'key:test',
  });
}

/** The lengths of an outbound message's parts' bytes, in order. */
async function partBytes(messageId: string): Promise<number[]> {
  const result = await db.pool.query<{ length: number }>(
    "SELECT length(bytes) AS length FROM message_parts WHERE message_id = $1 AND direction = 'outbound' ORDER BY part_index",
    [messageId],
  );
  return result.rows.map((row) => row.length);
}

test('racing takers take every waiting part exactly once, oldest first, with its submit_sm fields', async (t) => {
  const setup = await textingSetup(db.pool);
  const sent = [];
  for (let index = 0; index < 12; index += 1) sent.push(await send(setup, `${index} ${longText}`));
  const links = [store(), store(), store(), store()];
  const taken = (await Promise.all(links.map((link) => link.takeParts(setup.carrier, 10)))).flat();
  const more = await links[0]!.takeParts(setup.carrier, 100);
  const all = [...taken, ...more];
  t.is(all.length, 24);
  t.is(new Set(all.map((part) => part.id)).size, 24, 'no part taken twice');
  t.true(all.every((part) => part.attempts === 0));
  const attempts = await db.pool.query<{ attempts: number }>(
    'SELECT attempts FROM message_parts p JOIN messages m ON m.id = p.message_id WHERE m.phone_number_id = $1',
    [setup.number.id],
  );
  t.true(attempts.rows.every((row) => row.attempts === 1));
  t.deepEqual(await links[1]!.takeParts(setup.carrier, 10), []);
  // One taker alone gets them in order: each message's parts in order, the oldest message first.
  const other = await textingSetup(db.pool);
  const first = await send(other, `first ${longText}`);
  const second = await send(other, 'second');
  const ordered = await store().takeParts(other.carrier, 10);
  t.deepEqual(
    ordered.map((part) => part.messageId),
    [first.id, first.id, second.id],
  );
  t.like(ordered[0], { from: other.number.e164, to: '+14155550123', esmClass: 0x40, dataCoding: 0 });
  t.is(ordered[0]?.bytes.subarray(0, 3).toString('hex'), '050003');
  t.like(ordered[2], { esmClass: 0, bytes: Buffer.from('second') });
});

test('a message is sending once taken and sent once the carrier acknowledged every part', async (t) => {
  const setup = await textingSetup(db.pool);
  const message = await send(setup, longText);
  const link = store();
  const parts = await link.takeParts(setup.carrier, 10);
  t.is(parts.length, 2);
  t.is((await getMessage(db.pool, setup.workspace.id, message.id)).status, 'sending');
  await link.acknowledged(parts[0]!.id, 'smsc-1');
  t.is((await getMessage(db.pool, setup.workspace.id, message.id)).status, 'sending');
  await link.acknowledged(parts[1]!.id, 'smsc-2');
  await link.acknowledged(parts[1]!.id, 'smsc-2');
  const after = await getMessage(db.pool, setup.workspace.id, message.id);
  t.is(after.status, 'sent');
  t.deepEqual(
    after.statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent'],
  );
  t.deepEqual(await partBytes(message.id), [0, 0], 'the bytes are not kept once the carrier took them');
});

test('receipts: matched after the answer they overtook, counted once, and a failure kept with its error', async (t) => {
  const setup = await textingSetup(db.pool);
  const link = store();
  const early = await send(setup, 'early receipt');
  const late = await send(setup, 'late receipt');
  const lost = await send(setup, 'not delivered');
  const [earlyPart, latePart, lostPart] = await link.takeParts(setup.carrier, 10);
  const delivered = { delivered: true, state: 'DELIVRD', error: null };
  // The receipt overtakes the submit_sm_resp: kept, then matched when the answer is recorded.
  await link.receipt(setup.carrier, { carrierMessageId: 'early-1', ...delivered });
  await link.receipt(setup.carrier, { carrierMessageId: 'early-1', ...delivered });
  const waiting = await db.pool.query('SELECT 1 FROM message_receipts WHERE carrier = $1', [setup.carrier]);
  t.is(waiting.rowCount, 1);
  t.is((await getMessage(db.pool, setup.workspace.id, early.id)).status, 'sending');
  await link.acknowledged(earlyPart!.id, 'early-1');
  t.is((await getMessage(db.pool, setup.workspace.id, early.id)).status, 'delivered');
  t.is((await db.pool.query('SELECT 1 FROM message_receipts WHERE carrier = $1', [setup.carrier])).rowCount, 0);
  // In order, and repeated: the repeat changes nothing.
  await link.acknowledged(latePart!.id, 'late-1');
  await link.receipt(setup.carrier, { carrierMessageId: 'late-1', ...delivered });
  await link.receipt(setup.carrier, { carrierMessageId: 'late-1', ...delivered });
  t.deepEqual(
    (await getMessage(db.pool, setup.workspace.id, late.id)).statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent', 'delivered'],
  );
  await link.acknowledged(lostPart!.id, 'lost-1');
  const error = { code: 'UNDELIV', message: 'err:001' };
  await link.receipt(setup.carrier, { carrierMessageId: 'lost-1', delivered: false, state: 'UNDELIV', error });
  await link.receipt(setup.carrier, { carrierMessageId: 'lost-1', ...delivered });
  const failed = await getMessage(db.pool, setup.workspace.id, lost.id);
  t.like(failed, { status: 'failed', error });
  t.deepEqual(failed.statusHistory.at(-1), { status: 'failed', error, at: failed.statusHistory.at(-1)?.at });
  // A receipt of another carrier with the same id is not this one's; nonsense is dropped, not thrown.
  await link.receipt('another-carrier', { carrierMessageId: 'late-1', delivered: false, state: 'UNDELIV', error });
  await link.receipt(setup.carrier, { carrierMessageId: '', ...delivered });
  t.is((await getMessage(db.pool, setup.workspace.id, late.id)).status, 'delivered');
  // The stream: one event per status change, in the order they happened.
  const events = (await numberEvents(db.pool, setup.number.id)).filter((event) => event.message.id === late.id);
  t.deepEqual(
    events.map((event) => [event.type, event.message.status]),
    [
      ['message.status', 'sent'],
      ['message.status', 'delivered'],
    ],
  );
  t.true(events.every((event, index) => index === 0 || event.sequence > events[index - 1]!.sequence));
});

test('a receipt and its answer recorded at the same moment never miss each other', async (t) => {
  const setup = await textingSetup(db.pool);
  const link = store();
  const messages = [];
  for (let index = 0; index < 20; index += 1) messages.push(await send(setup, `race ${index}`));
  const parts = await link.takeParts(setup.carrier, 100);
  await Promise.all(
    parts.flatMap((part, index) => [
      link.acknowledged(part.id, `race-${index}`),
      link.receipt(setup.carrier, {
        carrierMessageId: `race-${index}`,
        delivered: true,
        state: 'DELIVRD',
        error: null,
      }),
    ]),
  );
  const statuses = await db.pool.query<{ status: string }>('SELECT status FROM messages WHERE phone_number_id = $1', [
    setup.number.id,
  ]);
  t.deepEqual(new Set(statuses.rows.map((row) => row.status)), new Set(['delivered']));
});

test('answers that come together are recorded together: every part once, overtaken receipts matched', async (t) => {
  const setup = await textingSetup(db.pool);
  const link = store();
  const long = await send(setup, `grouped ${longText}`);
  const short = [];
  for (let index = 0; index < 8; index += 1) short.push(await send(setup, `grouped ${index}`));
  const parts = await link.takeParts(setup.carrier, 20);
  t.is(parts.length, 10);
  await link.receipt(setup.carrier, { carrierMessageId: 'g-3', delivered: true, state: 'DELIVRD', error: null });
  // All at once: the first is recorded alone, the others wait for it and go in one transaction.
  const answers = parts.map((part, index) => link.acknowledged(part.id, `g-${index}`));
  // The same part answered again in the same group keeps its first id.
  answers.push(link.acknowledged(parts[5]!.id, 'g-again'));
  await Promise.all(answers);
  const recorded = await db.pool.query<{ id: string; carrier_message_id: string; state: string }>(
    'SELECT id, carrier_message_id, state FROM message_parts WHERE id = ANY ($1::uuid[])',
    [parts.map((part) => part.id)],
  );
  const byId = new Map(recorded.rows.map((row) => [row.id, row]));
  t.deepEqual(
    parts.map((part) => byId.get(part.id)?.carrier_message_id),
    parts.map((_, index) => `g-${index}`),
  );
  t.true(recorded.rows.every((row) => row.state === 'acknowledged'));
  const statuses = await Promise.all(
    [long, ...short].map(async (message) => (await getMessage(db.pool, setup.workspace.id, message.id)).status),
  );
  // Part 3 is the second short message's (the long one has parts 0 and 1): its receipt came first.
  t.deepEqual(statuses, ['sent', 'sent', 'delivered', 'sent', 'sent', 'sent', 'sent', 'sent', 'sent']);
  t.is((await db.pool.query('SELECT 1 FROM message_receipts WHERE carrier = $1', [setup.carrier])).rowCount, 0);
  const history = await getMessage(db.pool, setup.workspace.id, long.id);
  t.deepEqual(
    history.statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent'],
  );
});

test('a refusal fails the message with the carrier error and holds back its other parts', async (t) => {
  const setup = await textingSetup(db.pool);
  const link = store();
  const message = await send(setup, longText);
  const [first] = await link.takeParts(setup.carrier, 1);
  const error = { code: 'ESME_RINVDSTADR', message: 'invalid destination address' };
  await link.refused(first!.id, error);
  await link.refused(first!.id, error);
  const failed = await getMessage(db.pool, setup.workspace.id, message.id);
  t.like(failed, { status: 'failed', error });
  t.deepEqual(
    failed.statusHistory.map((change) => change.status),
    ['queued', 'sending', 'failed'],
  );
  t.deepEqual(await link.takeParts(setup.carrier, 10), [], 'the second part is not sent');
  t.deepEqual(await partBytes(message.id), [0, 0], 'nor kept');
  // A late answer for the refused part changes nothing.
  await link.acknowledged(first!.id, 'late');
  t.is((await getMessage(db.pool, setup.workspace.id, message.id)).status, 'failed');
});

test('parts left submitted when a session ends go back to waiting and are sent again', async (t) => {
  const setup = await textingSetup(db.pool);
  const link = store();
  const message = await send(setup, longText);
  const parts = await link.takeParts(setup.carrier, 10);
  await link.acknowledged(parts[0]!.id, 'before-drop');
  t.is(await link.requeueSubmitted(setup.carrier), 1);
  t.is(await link.requeueSubmitted(setup.carrier), 0);
  const again = await link.takeParts(setup.carrier, 10);
  t.deepEqual(
    again.map((part) => [part.id, part.attempts]),
    [[parts[1]!.id, 1]],
  );
  await link.acknowledged(again[0]!.id, 'after-drop');
  t.deepEqual(
    (await getMessage(db.pool, setup.workspace.id, message.id)).statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent'],
  );
});

test('a throttled part is not taken before its time, and the link is woken when it comes due', async (t) => {
  const setup = await textingSetup(db.pool);
  let now = Date.now();
  const clock: Clock = { now: () => new Date(now) };
  const link = openLinkStore(db.pool, { clock });
  await send(setup);
  const [part] = await link.takeParts(setup.carrier, 10);
  await link.retryLater(part!.id, new Date(now + 60_000));
  t.deepEqual(await link.takeParts(setup.carrier, 10), []);
  now += 59_999;
  t.deepEqual(await link.takeParts(setup.carrier, 10), []);
  now += 1;
  const retried = await link.takeParts(setup.carrier, 10);
  t.deepEqual(
    retried.map((taken) => [taken.id, taken.attempts]),
    [[part!.id, 1]],
  );
  // The wake-up: a retry 200 ms from the clock's now wakes the waiting link then, not before.
  const wakes = wakeCounter();
  const stop = link.onWaiting(setup.carrier, () => wakes.woke(setup.carrier));
  // Woken at once (parts may wait already) and when its LISTEN connection is up (notices may have been missed).
  await wakes.reached(2);
  const asked = Date.now();
  await link.retryLater(part!.id, new Date(now + 200));
  await wakes.reached(3);
  t.true(Date.now() - asked >= 190, `woken after ${Date.now() - asked} ms`);
  stop();
  await link.close();
});

/** Counts a link's wake-ups and resolves when there have been so many. */
function wakeCounter() {
  const carriers: string[] = [];
  let waiting: { count: number; resolve: () => void } | undefined;
  return {
    carriers,
    woke(carrier: string) {
      carriers.push(carrier);
      if (waiting !== undefined && carriers.length >= waiting.count) waiting.resolve();
    },
    reached(count: number) {
      return new Promise<void>((resolve) => {
        if (carriers.length >= count) resolve();
        else waiting = { count, resolve };
      });
    },
  };
}

test('a send wakes the link of its carrier (notified at commit), not the links of other carriers', async (t) => {
  const setup = await textingSetup(db.pool);
  const other = await textingSetup(db.pool);
  const link = store();
  const wakes = wakeCounter();
  const stops = [setup.carrier, other.carrier].map((carrier) => link.onWaiting(carrier, () => wakes.woke(carrier)));
  // Each woken at once and when the LISTEN connection is up.
  await wakes.reached(4);
  wakes.carriers.length = 0;
  await send(setup);
  await wakes.reached(1);
  t.deepEqual(wakes.carriers, [setup.carrier]);
  for (const stop of stops) stop();
  await link.close();
});
