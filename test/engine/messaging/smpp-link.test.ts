/**
 * A carrier's SMPP link (engine/messaging/, docs/messaging.md) sending and receiving against the `smpp` package's
 * server playing the carrier (test/helpers/smsc.ts), with an in-memory double of the message records
 * (test/helpers/message-link-store.ts) and real PostgreSQL for the link's leadership. Sessions, reconnects and
 * leadership are in smpp-link-sessions.test.ts.
 */
import { once } from 'node:events';
import test from 'ava';
import { encodeText } from '../../../core/messages/encoding.ts';
import { freshDatabase, type TestDatabase } from '../../helpers/database.ts';
import { MemoryLinkStore, type StoreCall } from '../../helpers/message-link-store.ts';
import { linkTo, metricValue, rawPdu, type Submitted, TestSmsc } from '../../helpers/smsc.ts';

let database: TestDatabase;
test.before(async () => {
  database = await freshDatabase({ migrate: false });
});
test.after.always(async () => {
  await database.drop();
});

let carriers = 0;
/** A link bound to a new SMSC, for a carrier of its own (tests run at once, each with its own lock). */
async function bound(options: { throughput?: number } = {}) {
  const smsc = await TestSmsc.start();
  const store = new MemoryLinkStore();
  store.numbers.add('+15557650000');
  const carrier = `carrier-${(carriers += 1)}`;
  const settings = options.throughput === undefined ? {} : { throughput: options.throughput };
  const { link, registry } = linkTo(smsc, { carrier, databaseUrl: database.url, store, settings });
  const binding = once(link, 'bound');
  link.start();
  await binding;
  return {
    smsc,
    store,
    carrier,
    link,
    registry,
    async close() {
      await link.close();
      await smsc.close();
    },
  };
}

const is =
  <K extends StoreCall['call']>(call: K) =>
  (candidate: StoreCall): candidate is Extract<StoreCall, { call: K }> =>
    candidate.call === call;

test('binds with the carrier’s credentials, sends parts as international numbers and records the acknowledgements', async (t) => {
  const { smsc, store, carrier, registry, close } = await bound();
  t.teardown(close);
  const [bind] = smsc.binds;
  t.is(bind?.system_id, 'switchboard');
  t.is(bind?.password, 'secret');
  t.is(bind?.system_type, 'sb');
  t.is(bind?.interface_version, 0x34);
  const parts = store.add(carrier, 3);
  await store.settled(carrier);
  t.is(smsc.submits.length, 3);
  const [first] = smsc.submits;
  t.like(first, {
    source_addr_ton: 1,
    source_addr_npi: 1,
    source_addr: '15557650000',
    dest_addr_ton: 1,
    dest_addr_npi: 1,
    destination_addr: '15551230000',
    registered_delivery: 1,
    data_coding: 0,
  });
  t.deepEqual(
    store.calls.filter(is('acknowledged')).map((call) => call.partId),
    parts.map((part) => part.id),
  );
  t.true(store.calls.filter(is('acknowledged')).every((call) => /^c\d+$/.test(call.carrierMessageId)));
  t.is(await metricValue(registry, 'switchboard_sms_parts_total', { result: 'acknowledged' }), 3);
  t.is(await metricValue(registry, 'switchboard_smpp_sessions', { carrier }), 1);
});

test('a concatenated UCS-2 part goes with its header, its esm_class and its data_coding', async (t) => {
  const { smsc, store, carrier, close } = await bound();
  t.teardown(close);
  const [part] = store.add(carrier, 1);
  const [encoded] = encodeText('Привет '.repeat(20), 7);
  Object.assign(store.parts.get(part!.id)!.part, encoded);
  store.parts.get(part!.id)!.state = 'waiting';
  await store.settled(carrier);
  const sent = smsc.submits.at(-1)!;
  t.is(sent.esm_class, 0x40);
  t.is(sent.data_coding, 0x08);
  const message = sent.short_message as { udh: Buffer[] };
  t.deepEqual(message.udh[0], Buffer.from([0x00, 0x03, 7, 3, 1]));
});

test('never more than the window of submit_sm unanswered', async (t) => {
  const { smsc, store, carrier, link, close } = await bound();
  t.teardown(close);
  smsc.answerAtOnce = false;
  const held: Submitted[] = [];
  smsc.on('submit', (submitted) => {
    held.push(submitted);
    // Once ten are waiting, give an eleventh the time to come (it must not), then answer them all.
    if (smsc.outstanding === 10) {
      setTimeout(() => {
        for (const waiting of held.splice(0)) waiting.answer();
      }, 150);
    }
  });
  store.add(carrier, 25);
  // Fewer than ten are left at the end: those are answered when no more come.
  const rest = setInterval(() => {
    if (smsc.submits.length === 25) for (const waiting of held.splice(0)) waiting.answer();
  }, 50);
  t.teardown(() => clearInterval(rest));
  await store.settled(carrier);
  t.is(smsc.mostOutstanding, 10);
  t.is(smsc.submits.length, 25);
  t.is(link.unanswered, 0);
});

test('sends at the carrier’s throughput', async (t) => {
  const { smsc, store, carrier, close } = await bound({ throughput: 20 });
  t.teardown(close);
  const times: number[] = [];
  smsc.on('submit', () => times.push(Date.now()));
  store.add(carrier, 21);
  await store.settled(carrier);
  // 21 parts at 20 a second: twenty gaps of 50 ms, 1 s; unpaced they come within a few milliseconds. The pacing keeps
  // its schedule, so parts held up by a stall on a busy machine go at once after it: the bound leaves 400 ms of that.
  t.true(times.at(-1)! - times[0]! >= 600, `took ${times.at(-1)! - times[0]!} ms`);
});

test('a throttling answer puts the part back for later, and it is sent again and acknowledged', async (t) => {
  const { smsc, store, carrier, registry, close } = await bound();
  t.teardown(close);
  smsc.answerAtOnce = false;
  let first = true;
  smsc.on('submit', (submitted) => {
    submitted.answer(first ? { command_status: 0x58 } : {});
    first = false;
  });
  const [part] = store.add(carrier, 1);
  await store.settled(carrier);
  const retry = store.calls.find(is('retryLater'));
  t.is(retry?.partId, part!.id);
  t.is(store.state(part!.id), 'acknowledged');
  t.is(smsc.submits.length, 2);
  t.is(await metricValue(registry, 'switchboard_sms_parts_total', { result: 'throttled' }), 1);
  t.is(await metricValue(registry, 'switchboard_sms_parts_total', { result: 'acknowledged' }), 1);
});

test('a queue-full answer is throttling too; any other refusal fails the part with the status’s name', async (t) => {
  const { smsc, store, carrier, registry, close } = await bound();
  t.teardown(close);
  smsc.answerAtOnce = false;
  const answers = [0x14, 0x0b];
  smsc.on('submit', (submitted) => submitted.answer({ command_status: answers.shift() ?? 0 }));
  const [part] = store.add(carrier, 1);
  await store.settled(carrier);
  t.is(store.calls.filter(is('retryLater')).length, 1);
  const refused = store.calls.find(is('refused'));
  t.is(refused?.partId, part!.id);
  t.is(refused?.error.code, 'ESME_RINVDSTADR');
  t.is(store.state(part!.id), 'failed');
  t.is(await metricValue(registry, 'switchboard_sms_parts_total', { result: 'refused' }), 1);
});

test('receipts in and out of order are handed to the records, from their text or their TLVs', async (t) => {
  const { smsc, store, carrier, close } = await bound();
  t.teardown(close);
  smsc.answerAtOnce = false;
  // The receipt overtakes the submit_sm_resp it refers to.
  smsc.once('submit', (submitted) => {
    void smsc
      .request('deliver_sm', {
        source_addr_ton: 1,
        source_addr: '15551230000',
        esm_class: 0x04,
        short_message: Buffer.from(
          'id:early1 sub:001 dlvrd:001 submit date:2401011200 done date:2401011201 stat:DELIVRD err:000 text:Hello',
        ),
      })
      .then(() => submitted.answer({ message_id: 'early1' }));
  });
  store.add(carrier, 1);
  await store.settled(carrier);
  const order = store.calls.filter((call) => call.call === 'receipt' || call.call === 'acknowledged');
  t.deepEqual(
    order.map((call) => call.call),
    ['receipt', 'acknowledged'],
  );
  t.deepEqual(store.calls.find(is('receipt'))?.receipt, {
    carrierMessageId: 'early1',
    delivered: true,
    state: 'DELIVRD',
    error: null,
  });
  const answer = await smsc.request('deliver_sm', {
    esm_class: 0x04,
    receipted_message_id: 'c9',
    message_state: 5,
    short_message: Buffer.from('id:9 stat:UNDELIV err:034'),
  });
  t.is(answer.command_status, 0);
  t.like(store.calls.filter(is('receipt')).at(-1)?.receipt, {
    carrierMessageId: 'c9',
    delivered: false,
    state: 'UNDELIV',
    error: { code: '034' },
  });
});

test('an inbound part is handed with its bytes as sent; to an unknown number it is answered ESME_RINVDSTADR', async (t) => {
  const { smsc, store, registry, close } = await bound();
  t.teardown(close);
  const [part] = encodeText('ünïcode ✓ '.repeat(10), 42);
  const answer = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr_npi: 1,
    source_addr: '15551230000',
    dest_addr_ton: 1,
    dest_addr_npi: 1,
    destination_addr: '15557650000',
    esm_class: part!.esmClass,
    data_coding: part!.dataCoding,
    short_message: part!.bytes,
  });
  t.is(answer.command_status, 0);
  const inbound = store.calls.find(is('inbound'))?.part;
  t.deepEqual(inbound, {
    from: '+15551230000',
    to: '+15557650000',
    bytes: part!.bytes,
    esmClass: 0x40,
    dataCoding: 0x08,
  });
  const unknown = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr: '15551230000',
    dest_addr_ton: 1,
    destination_addr: '15550000000',
    short_message: Buffer.from('hi'),
  });
  t.is(unknown.command_status, 0x0b);
  t.is(await metricValue(registry, 'switchboard_sms_refused_total', { reason: 'unknown_number' }), 1);
  // The records away: a temporary error, so that the carrier delivers it again.
  store.failDeliveries = 1;
  const away = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr: '15551230000',
    dest_addr_ton: 1,
    destination_addr: '15557650000',
    short_message: Buffer.from('again'),
  });
  t.is(away.command_status, 0x64);
  t.is(await metricValue(registry, 'switchboard_sms_refused_total', { reason: 'store_error' }), 1);
});

test('malformed PDUs, receipts and addresses are answered with their error, counted, and the session stays up', async (t) => {
  const { smsc, store, carrier, link, registry, close } = await bound();
  t.teardown(close);
  let unbound = false;
  link.once('unbound', () => (unbound = true));
  // A deliver_sm whose short_message runs past its end.
  const truncated = Buffer.concat([
    Buffer.from('\0\x01\x0115551230000\0\x01\x0115557650000\0\0\0\0\0\0\0\0\0\0'),
    Buffer.from([50, 0x41]),
  ]);
  t.is((await smsc.raw(rawPdu(0x05, 901, truncated), 901)).command_status, 0x02);
  // A TLV the package cannot read (message_state with no value): not decodable at all.
  const undecodable = Buffer.concat([truncated.subarray(0, -2), Buffer.from([0, 0x04, 0x27, 0, 0])]);
  const nack = await smsc.raw(rawPdu(0x05, 902, undecodable), 902);
  t.is(nack.command, 'generic_nack');
  t.is(nack.command_status, 0x02);
  // A command that does not exist.
  const unknown = await smsc.raw(rawPdu(0x0999, 903, Buffer.alloc(0)), 903);
  t.is(unknown.command, 'generic_nack');
  t.is(unknown.command_status, 0x03);
  // A receipt without an id, and one with a state that does not exist.
  for (const text of ['sub:001 stat:DELIVRD err:000', 'id:x1 stat:GONE err:000']) {
    const answer = await smsc.request('deliver_sm', { esm_class: 0x04, short_message: Buffer.from(text) });
    t.is(answer.command_status, 0x65);
  }
  // An alphanumeric sender, and a destination that is no number.
  const alpha = await smsc.request('deliver_sm', {
    source_addr_ton: 5,
    source_addr: 'ACME',
    dest_addr_ton: 1,
    destination_addr: '15557650000',
    short_message: Buffer.from('hi'),
  });
  t.is(alpha.command_status, 0x0a);
  const nowhere = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr: '15551230000',
    dest_addr_ton: 1,
    destination_addr: '+1-555',
    short_message: Buffer.from('hi'),
  });
  t.is(nowhere.command_status, 0x0b);
  const count = (reason: string) => metricValue(registry, 'switchboard_sms_refused_total', { reason });
  t.is(await count('malformed_pdu'), 1);
  t.is(await count('undecodable_pdu'), 1);
  t.is(await count('unknown_command'), 1);
  t.is(await count('bad_receipt'), 2);
  t.is(await count('bad_source'), 1);
  t.is(await count('bad_destination'), 1);
  // Still bound, the same session: it answers, and it sends.
  t.is((await smsc.request('enquire_link')).command_status, 0);
  store.add(carrier, 1);
  await store.settled(carrier);
  t.false(unbound);
  t.is(smsc.binds.length, 1);
  t.is(store.calls.filter(is('inbound')).length, 0);
});
