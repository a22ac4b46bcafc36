/**
 * Inbound texts (core/messages/inbound.ts through the link store; docs/messaging.md "Receiving"): one part or the
 * parts of a concatenated text in any order become one message and one `message.received`; a part the carrier
 * repeats after a reconnect changes nothing; keywords (STOP, START, HELP in any case, with punctuation around them)
 * opt the peer out or in and queue the reply even to a peer now opted out; a number that is not the carrier's or
 * not claimed is `unknown_number`; what cannot be decoded is `malformed`.
 */
import test from 'ava';
import { encodeText } from '../../core/messages/encoding.ts';
import { stopReply, startReply, defaultHelpReply } from '../../core/messages/keywords.ts';
import type { InboundPart } from '../../core/messages/link-store.ts';
import { listMessages } from '../../core/messages/messages.ts';
import { isOptedOut, optOutOf } from '../../core/messages/opt-outs.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import {
  type MessagesDatabase,
  messagesDatabase,
  newNumber,
  numberEvents,
  textingSetup,
  type TextingSetup,
} from '../helpers/messages.ts';

let db: MessagesDatabase;
const link = () => openLinkStore(db.pool);
const peer = '+14155550177';

test.before(async () => {
  db = await messagesDatabase();
});

test.after.always(async () => {
  await db?.close();
});

/** The parts a phone sends for `text` to the setup's number. */
function partsOf(setup: TextingSetup, text: string, reference = 7, from = peer): InboundPart[] {
  return encodeText(text, reference).map((part) => ({ from, to: setup.number.e164, ...part }));
}

async function messagesOf(setup: TextingSetup, direction?: 'inbound' | 'outbound') {
  const rows = await listMessages(
    db.pool,
    setup.workspace.id,
    { phoneNumberId: setup.number.id, direction },
    {
      limit: 100,
    },
  );
  return rows.reverse();
}

test('one part is one message and one message.received; the same part again after a reconnect is nothing', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = link();
  const [part] = partsOf(setup, 'Are you open on Sunday?');
  t.is(await store.inbound(setup.carrier, part!), 'accepted');
  t.is(await store.inbound(setup.carrier, part!), 'accepted');
  const messages = await messagesOf(setup);
  t.is(messages.length, 1);
  t.like(messages[0], {
    direction: 'inbound',
    from_number: peer,
    to_number: setup.number.e164,
    peer,
    text: 'Are you open on Sunday?',
    status: 'received',
    segments: 1,
  });
  const events = await numberEvents(db.pool, setup.number.id);
  t.deepEqual(
    events.map((event) => [event.type, event.message.id, event.message.text]),
    [['message.received', messages[0]!.id, 'Are you open on Sunday?']],
  );
  // Another text of the same peer is another message.
  await store.inbound(setup.carrier, partsOf(setup, 'And on Monday?')[0]!);
  t.is((await messagesOf(setup)).length, 2);
});

test('a concatenated text arriving out of order, with a part repeated, is one message once every part came', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = link();
  const text = `Привет! ${'Можно забронировать столик на четверых? '.repeat(4)}`;
  const parts = partsOf(setup, text, 201);
  t.is(parts.length, 3);
  t.is(await store.inbound(setup.carrier, parts[2]!), 'accepted');
  t.is(await store.inbound(setup.carrier, parts[0]!), 'accepted');
  t.is(await store.inbound(setup.carrier, parts[0]!), 'accepted');
  t.deepEqual(await messagesOf(setup), [], 'nothing until every part came');
  t.is(await store.inbound(setup.carrier, parts[1]!), 'accepted');
  // Repeats after the text was made: nothing more.
  t.is(await store.inbound(setup.carrier, parts[1]!), 'accepted');
  t.is(await store.inbound(setup.carrier, parts[2]!), 'accepted');
  const messages = await messagesOf(setup);
  t.is(messages.length, 1);
  t.like(messages[0], { text, segments: 3, status: 'received' });
  const events = await numberEvents(db.pool, setup.number.id);
  t.deepEqual(
    events.map((event) => [event.type, event.message.text, event.message.segments]),
    [['message.received', text, 3]],
  );
  // Another peer's text with the same reference is another text.
  const other = partsOf(setup, 'x'.repeat(200), 201, '+14155550188');
  for (const part of other) await store.inbound(setup.carrier, part);
  t.is((await messagesOf(setup)).length, 2);
});

test('siblings arriving at the same moment make one message', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = link();
  const parts = partsOf(setup, 'y'.repeat(153 * 5), 42);
  await Promise.all(parts.map((part) => store.inbound(setup.carrier, part)));
  const messages = await messagesOf(setup);
  t.is(messages.length, 1);
  t.is(messages[0]?.text, 'y'.repeat(153 * 5));
});

test('STOP, START and HELP in any case and punctuation: opt-out state and a queued reply', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = link();
  const say = async (text: string) => t.is(await store.inbound(setup.carrier, partsOf(setup, text)[0]!), 'accepted');
  const replies = async () => (await messagesOf(setup, 'outbound')).map((message) => message.text);

  await say('  stop! ');
  t.true(await isOptedOut(db.pool, setup.number.id, peer));
  t.is((await optOutOf(db.pool, setup.number.id, peer))?.keyword, 'STOP');
  t.deepEqual(await replies(), [stopReply], 'the confirmation goes out to a peer now opted out');
  const [reply] = await messagesOf(setup, 'outbound');
  t.like(reply, { from_number: setup.number.e164, to_number: peer, status: 'queued', actor: null });
  const parts = await store.takeParts(setup.carrier, 10);
  t.deepEqual(
    parts.map((part) => part.to),
    [peer],
    'the reply waits for the carrier',
  );

  await say('Yes.');
  t.false(await isOptedOut(db.pool, setup.number.id, peer));
  await say('¿UnSubscribe?');
  t.is((await optOutOf(db.pool, setup.number.id, peer))?.keyword, 'UNSUBSCRIBE');
  await say('unstop');
  t.false(await isOptedOut(db.pool, setup.number.id, peer));
  await say('help');
  // A keyword inside a longer text is a message, nothing more.
  await say('please stop calling me');
  await say('STOP STOP');
  t.false(await isOptedOut(db.pool, setup.number.id, peer));
  t.deepEqual(await replies(), [stopReply, startReply, stopReply, startReply, defaultHelpReply]);
  // Every text was received all the same.
  t.is((await messagesOf(setup, 'inbound')).length, 7);
  const types = (await numberEvents(db.pool, setup.number.id)).map((event) => event.type);
  t.is(types.filter((type) => type === 'message.received').length, 7);
});

test('the other keywords and a keyword sent in parts', async (t) => {
  const setup = await textingSetup(db.pool);
  const store = link();
  const words = ['STOPALL', 'cancel', 'End', 'quit', 'REVOKE', 'OptOut', '\u200bstop\u200b', '"Stop"'];
  for (const [index, word] of words.entries()) {
    const from = `+1415555${1000 + index}`;
    await store.inbound(setup.carrier, partsOf(setup, word, 1, from)[0]!);
    t.true(await isOptedOut(db.pool, setup.number.id, from), word);
  }
  // STOP in a text of two parts is a STOP all the same.
  const padded = `${' '.repeat(200)}STOP`;
  for (const part of partsOf(setup, padded, 9, '+14155552000')) await store.inbound(setup.carrier, part);
  t.true(await isOptedOut(db.pool, setup.number.id, '+14155552000'));
  // An alphanumeric sender is opted out but gets no reply: it cannot be texted back.
  await store.inbound(setup.carrier, partsOf(setup, 'STOP', 1, 'ACME')[0]!);
  t.true(await isOptedOut(db.pool, setup.number.id, 'ACME'));
  t.false((await messagesOf(setup, 'outbound')).some((message) => message.to_number === 'ACME'));
});

test('a number not claimed, not this carrier’s, or not a number at all is unknown; undecodable parts are malformed', async (t) => {
  const setup = await textingSetup(db.pool);
  const other = await textingSetup(db.pool);
  const store = link();
  const part = partsOf(setup, 'hello')[0]!;
  t.is(await store.inbound(setup.carrier, { ...part, to: newNumber() }), 'unknown_number');
  t.is(await store.inbound(other.carrier, part), 'unknown_number');
  t.is(await store.inbound(setup.carrier, { ...part, to: 'not a number' }), 'unknown_number');
  // A header longer than the bytes; a part numbered past its count; no sender.
  t.is(
    await store.inbound(setup.carrier, { ...part, bytes: Buffer.from([0x05, 0x00, 0x03]), esmClass: 0x40 }),
    'malformed',
  );
  const beyond = Buffer.from([0x05, 0x00, 0x03, 0x01, 0x02, 0x03, 0x41]);
  t.is(await store.inbound(setup.carrier, { ...part, bytes: beyond, esmClass: 0x40 }), 'malformed');
  t.is(await store.inbound(setup.carrier, { ...part, from: '' }), 'malformed');
  t.is(await store.inbound(setup.carrier, { ...part, bytes: 'text' as unknown as Buffer }), 'malformed');
  t.deepEqual(await messagesOf(setup), []);
  t.deepEqual(await numberEvents(db.pool, setup.number.id), []);
});

test('a text carrying a NUL is kept, the NUL shown as U+FFFD (PostgreSQL text holds none)', async (t) => {
  const setup = await textingSetup(db.pool);
  const bytes = Buffer.from([0x00, 0x41, 0x00, 0x00, 0x00, 0x42]);
  const outcome = await link().inbound(setup.carrier, {
    from: peer,
    to: setup.number.e164,
    bytes,
    esmClass: 0,
    dataCoding: 8,
  });
  t.is(outcome, 'accepted');
  t.is((await messagesOf(setup))[0]?.text, 'A\uFFFDB');
});
