/**
 * The carrier's link through the real engine role when things go wrong (docs/messaging.md): the carrier drops the
 * connection mid-window, throttles, sends bad input; two engine roles share one carrier. The `smpp` package's server
 * plays each carrier (test/helpers/smsc.ts); the engines run with their default timings (1 s backoff, 1 s retry after
 * throttling, 5 s between leadership tries), as `switchboard engine` does. The sending, receipts, long texts and
 * keywords are in texting.test.ts.
 */
import test from 'ava';
import { encodeText, type EncodedPart } from '../../../core/messages/encoding.ts';
import type { NumberRow } from '../../../core/numbers/numbers.ts';
import { numberEvents } from '../../helpers/messages.ts';
import { rawPdu, type Submitted, TestSmsc } from '../../helpers/smsc.ts';
import {
  type EngineRole,
  partStates,
  sendText,
  smscCarrier,
  startEngineRole,
  statusOf,
  textingService,
  type TextingService,
} from '../../helpers/texting.ts';
import { until } from '../../helpers/until.ts';

const peer = '+14155550124';
const cases = ['drop', 'throttle', 'bad'] as const;
let texting: TextingService;
let engine: EngineRole;
const lines = {} as Record<(typeof cases)[number], { smsc: TestSmsc; carrier: string; number: NumberRow }>;

test.before(async () => {
  texting = await textingService();
  for (const name of cases) {
    const smsc = await TestSmsc.start();
    lines[name] = { smsc, ...(await smscCarrier(texting, smsc)) };
  }
  engine = await startEngineRole(texting.service, `texting-link-${process.pid}`);
  await until('every link bound', () => cases.every((name) => lines[name].smsc.sessions.length === 1) || undefined);
});

// A failed test shows what the engine warned of (every test here shares it): the link's side of the failure.
test.afterEach.always((t) => {
  if (t.passed) return;
  for (const line of engine?.logs.filter((entry) => !entry.includes('"level":30')).slice(-40) ?? []) t.log(line);
});

test.after.always(async () => {
  await engine?.close();
  await Promise.all(Object.values(lines).map(({ smsc }) => smsc.close()));
  await texting?.close();
});

const textOf = (submitted: Submitted | { short_message: unknown }) =>
  (('pdu' in submitted ? submitted.pdu.short_message : submitted.short_message) as { message: string }).message;

async function deliver(smsc: TestSmsc, to: string, part: EncodedPart): Promise<number> {
  const answer = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr: peer.slice(1),
    dest_addr_ton: 1,
    destination_addr: to.slice(1),
    esm_class: part.esmClass,
    data_coding: part.dataCoding,
    short_message: part.bytes,
  });
  return answer.command_status as number;
}

test('the carrier drops the connection with parts unanswered: after the reconnect every part is acknowledged, none lost', async (t) => {
  const { smsc, number } = lines.drop;
  smsc.answerAtOnce = false;
  const held: Submitted[] = [];
  let dropped = false;
  smsc.on('submit', (submitted) => {
    if (dropped) return submitted.answer();
    held.push(submitted);
    if (held.length < 6) return;
    // Two answered, then the carrier ends the connection (its answers written first) with four unanswered.
    dropped = true;
    for (const answered of held.slice(0, 2)) answered.answer();
    submitted.session.socket.end();
  });
  const texts = Array.from({ length: 6 }, (_, index) => `Reminder ${index + 1}: your appointment is tomorrow.`);
  const messages = [];
  for (const text of texts) messages.push(await sendText(texting, number, peer, text));
  for (const message of messages) await statusOf(texting.service, message.id, 'sent');
  for (const message of messages) t.deepEqual(await partStates(texting.service, message.id), ['acknowledged']);
  t.is(smsc.binds.length, 2, 'bound again after the drop');
  const submitted = smsc.submits.map((pdu) => textOf({ short_message: pdu.short_message }));
  t.deepEqual([...new Set(submitted)].sort(), [...texts].sort(), 'every message went out');
  // At least once: the four parts unanswered at the drop are submitted again (the carrier may have taken them); the
  // two answered before it are not, unless their answers were still being recorded when the session ended.
  const duplicates = submitted.length - texts.length;
  t.log(`${duplicates} duplicate submit_sm after the reconnect (at least once)`);
  t.true(duplicates >= 4 && duplicates <= 6, `${duplicates} duplicates`);
  const unanswered = held.slice(2).map(textOf);
  for (const text of unanswered) t.true(submitted.filter((sent) => sent === text).length >= 2, text);
  t.true((await engine.metric('switchboard_smpp_reconnects_total', { carrier: lines.drop.carrier })) >= 1);
});

test('a submit_sm answered ESME_RTHROTTLED is submitted again later and the message ends sent', async (t) => {
  const { smsc, number } = lines.throttle;
  smsc.answerAtOnce = false;
  smsc.on('submit', (submitted) =>
    submitted.answer(smsc.submits.length === 1 ? { command_status: 0x58 } : { message_id: 'after-throttle' }),
  );
  const message = await sendText(texting, number, peer, 'Slow down');
  await statusOf(texting.service, message.id, 'sent');
  t.deepEqual(
    smsc.submits.map((pdu) => textOf({ short_message: pdu.short_message })),
    ['Slow down', 'Slow down'],
  );
  const parts = await texting.service.pool.query<{ attempts: number; carrier_message_id: string }>(
    'SELECT attempts, carrier_message_id FROM message_parts WHERE message_id = $1',
    [message.id],
  );
  t.like(parts.rows[0], { attempts: 2, carrier_message_id: 'after-throttle' });
  t.is(await engine.metric('switchboard_sms_parts_total', { result: 'throttled' }), 1);
});

test('a deliver_sm to an unknown number and malformed PDUs are refused and counted; the session and the service stay up', async (t) => {
  const { smsc, number } = lines.bad;
  const [hello] = encodeText('Hello?', 0);
  t.is(await deliver(smsc, '+15550000000', hello!), 0x0b, 'ESME_RINVDSTADR');
  // A deliver_sm whose short_message runs past its end, and one that does not decode at all.
  const truncated = Buffer.concat([
    Buffer.from(`\0\x01\x01${peer.slice(1)}\0\x01\x01${number.e164.slice(1)}\0\0\0\0\0\0\0\0\0\0`, 'latin1'),
    Buffer.from([50, 0x41]),
  ]);
  t.is((await smsc.raw(rawPdu(0x05, 901, truncated), 901)).command_status, 0x02, 'ESME_RINVCMDLEN');
  const undecodable = Buffer.concat([truncated.subarray(0, -2), Buffer.from([0, 0x04, 0x27, 0, 0])]);
  const nack = await smsc.raw(rawPdu(0x05, 902, undecodable), 902);
  t.is(nack.command, 'generic_nack');
  t.is(await engine.metric('switchboard_sms_refused_total', { reason: 'unknown_number' }), 1);
  t.is(await engine.metric('switchboard_sms_refused_total', { reason: 'malformed_pdu' }), 1);
  t.is(await engine.metric('switchboard_sms_refused_total', { reason: 'undecodable_pdu' }), 1);
  // The same session takes the next valid text, and the engine still answers.
  t.is(await deliver(smsc, number.e164, encodeText('Are you open today?', 0)[0]!), 0);
  const received = await until('message.received', async () => {
    const events = await numberEvents(texting.service.pool, number.id);
    return events.find((event) => event.type === 'message.received');
  });
  t.like(received.message, { text: 'Are you open today?', direction: 'inbound' });
  t.is(smsc.binds.length, 1, 'never bound again');
  t.is((await fetch(`${engine.url}/healthz`)).status, 200);
});

test('two engine roles on one database: one binds to the carrier; when it stops, the other binds and sends', async (t) => {
  const shared = await textingService();
  const smsc = await TestSmsc.start();
  const engines: EngineRole[] = [];
  t.teardown(async () => {
    for (const running of engines) await running.close();
    await smsc.close();
    await shared.close();
  });
  const { carrier, number } = await smscCarrier(shared, smsc);
  engines.push(await startEngineRole(shared.service, `texting-a-${process.pid}`));
  await until('the first engine bound', () => (smsc.sessions.length === 1 ? true : undefined));
  engines.push(await startEngineRole(shared.service, `texting-b-${process.pid}`));
  const [first, second] = engines as [EngineRole, EngineRole];
  const before = await sendText(shared, number, peer, 'From the first engine');
  await statusOf(shared.service, before.id, 'sent');
  t.is(smsc.binds.length, 1, 'one session for the carrier');
  t.is(await first.metric('switchboard_smpp_leader', { carrier }), 1);
  t.is(await second.metric('switchboard_smpp_leader', { carrier }), 0);

  const closed = engines.shift()!;
  await closed.close();
  // Written once the leader stopped: it waits in PostgreSQL until the other engine takes the lead (its next try).
  const after = await sendText(shared, number, peer, 'From the second engine');
  await statusOf(shared.service, after.id, 'sent');
  t.is(smsc.binds.length, 2);
  t.is(await second.metric('switchboard_smpp_leader', { carrier }), 1);
  t.is(await second.metric('switchboard_smpp_sessions', { carrier }), 1);
  t.is(textOf({ short_message: smsc.submits.at(-1)?.short_message }), 'From the second engine');
});
