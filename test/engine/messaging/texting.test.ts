/**
 * Texting end to end through the real engine role (docs/messaging.md): the `smpp` package's server plays each
 * carrier (test/helpers/smsc.ts), the carriers' messaging settings point at them, and the engine role, started after
 * them as a pod starts, binds and keeps the links over the records' PostgreSQL store. Messages are written the way
 * operation 67 writes them (createOutboundMessage in a transaction); events are read from the number's stream and
 * received as webhooks over HTTPS. Each test has a carrier and SMSC of its own, so they run at once. The carrier
 * dropping the link, throttling, bad input and two engines sharing a carrier are in texting-link.test.ts.
 */
import { once } from 'node:events';
import test from 'ava';
import { encodeText, type EncodedPart } from '../../../core/messages/encoding.ts';
import { getMessage } from '../../../core/messages/messages.ts';
import { isOptedOut } from '../../../core/messages/opt-outs.ts';
import type { NumberRow } from '../../../core/numbers/numbers.ts';
import { allScopes } from '../../../core/scopes.ts';
import { numberEvents } from '../../helpers/messages.ts';
import type { Answer } from '../../helpers/service.ts';
import { type Submitted, TestSmsc } from '../../helpers/smsc.ts';
import {
  type EngineRole,
  sendText,
  smscCarrier,
  startEngineRole,
  statusOf,
  textingService,
  type TextingService,
} from '../../helpers/texting.ts';
import { until } from '../../helpers/until.ts';

const peer = '+14155550123';
const cases = ['send', 'early', 'long', 'keywords'] as const;
let texting: TextingService;
let engine: EngineRole;
const lines = {} as Record<(typeof cases)[number], { smsc: TestSmsc; number: NumberRow }>;
/** A workspace of its own whose only number (approved) sends one-time codes, with a workspace key's operation 17. */
let verifier: { smsc: TestSmsc; number: NumberRow; send: (to: string) => Promise<Answer> };

async function startVerifier(): Promise<typeof verifier> {
  const { service } = texting;
  const app = await service.application(undefined, allScopes);
  const created = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId: `ws-codes-${process.pid}`, name: 'Acme Codes', timezone: 'UTC' },
  });
  if (created.status !== 201) throw new Error(created.text);
  const workspace = { id: created.body.id, applicationId: app.applicationId, externalWorkspaceId: 'ws-codes' };
  const key = await service.request('POST', `/api/v1/workspaces/${workspace.id}/keys`, { auth: app.apiKey });
  if (key.status !== 201) throw new Error(key.text);
  const smsc = await TestSmsc.start();
  const { number } = await smscCarrier({ service, workspace }, smsc, { approved: true });
  const send = (to: string) =>
    service.request('POST', '/api/v1/verifications', {
      auth: key.body.apiKey,
      workspaceId: workspace.id,
      body: { to, channel: 'sms' },
    });
  return { smsc, number, send };
}

test.before(async () => {
  texting = await textingService();
  for (const name of cases) {
    const smsc = await TestSmsc.start();
    lines[name] = { smsc, number: (await smscCarrier(texting, smsc)).number };
  }
  verifier = await startVerifier();
  engine = await startEngineRole(texting.service, `texting-${process.pid}`);
  const smscs = [...cases.map((name) => lines[name].smsc), verifier.smsc];
  await until('every link bound', () => smscs.every((smsc) => smsc.sessions.length === 1) || undefined);
});

test.after.always(async () => {
  await engine?.close();
  await Promise.all([...Object.values(lines), verifier].map((line) => line?.smsc.close()));
  await texting?.close();
});

/** What a submit_sm carries, as the package's server decoded it. */
const textOf = (submitted: Submitted) => (submitted.pdu.short_message as { message: string }).message;

/** A deliver_sm from `from` to the number with `part`'s bytes; resolves with the answer's status. */
async function deliver(smsc: TestSmsc, from: string, to: string, part: EncodedPart): Promise<number> {
  const answer = await smsc.request('deliver_sm', {
    source_addr_ton: 1,
    source_addr_npi: 1,
    source_addr: from.slice(1),
    dest_addr_ton: 1,
    dest_addr_npi: 1,
    destination_addr: to.slice(1),
    esm_class: part.esmClass,
    data_coding: part.dataCoding,
    short_message: part.bytes,
  });
  return answer.command_status as number;
}

/** A delivery receipt (SMPP 3.4 Appendix B) for the carrier's message id. */
function receipt(carrierMessageId: string, state: string): EncodedPart {
  const text = `id:${carrierMessageId} sub:001 dlvrd:001 submit date:2611241200 done date:2611241201 stat:${state} err:000 text:`;
  return { bytes: Buffer.from(text), esmClass: 0x04, dataCoding: 0 };
}

/** The statuses of the message's `message.status` events, in the number's stream order. */
async function streamStatuses(number: NumberRow, messageId: string): Promise<string[]> {
  const events = await numberEvents(texting.service.pool, number.id);
  return events
    .filter((event) => event.type === 'message.status' && event.message.id === messageId)
    .map((event) => event.message.status);
}

/** The webhooks received of `type` about the message, once there are `count` of them. */
function webhooks(type: string, messageId: string, count: number) {
  return until(`${count} ${type} webhooks`, () => {
    const found = texting.receiver.received.filter(
      (request) => request.event?.type === type && request.event.message?.id === messageId,
    );
    return found.length >= count ? found : undefined;
  });
}

test('a text is submitted from the number to the peer, sent at its answer, delivered at its receipt, each status announced in order', async (t) => {
  const { smsc, number } = lines.send;
  const submitted = once(smsc, 'submit') as Promise<[Submitted]>;
  const message = await sendText(texting, number, peer, 'Your table is ready.');
  const [submit] = await submitted;
  t.like(submit.pdu, {
    source_addr_ton: 1,
    source_addr: number.e164.slice(1),
    dest_addr_ton: 1,
    destination_addr: peer.slice(1),
    registered_delivery: 1,
  });
  t.is(textOf(submit), 'Your table is ready.');
  await statusOf(texting.service, message.id, 'sent');
  const parts = await texting.service.pool.query<{ carrier_message_id: string }>(
    'SELECT carrier_message_id FROM message_parts WHERE message_id = $1',
    [message.id],
  );
  const carrierMessageId = parts.rows[0]?.carrier_message_id ?? '';
  t.regex(carrierMessageId, /^c\d+$/, 'the id the SMSC answered with');
  t.is(await deliver(smsc, peer, number.e164, receipt(carrierMessageId, 'DELIVRD')), 0);
  await statusOf(texting.service, message.id, 'delivered');
  // Every status in the history; the reported ones (spec section 6) as events.
  const { statusHistory } = await getMessage(texting.service.pool, texting.workspace.id, message.id);
  t.deepEqual(
    statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent', 'delivered'],
  );
  const statuses = ['sent', 'delivered'];
  t.deepEqual(await streamStatuses(number, message.id), statuses);
  const received = await webhooks('message.status', message.id, 2);
  t.deepEqual(
    received.map((request) => request.event.message.status),
    statuses,
    'delivered to the webhook in the stream’s order',
  );
  t.like(received.at(-1)?.event.message, { direction: 'outbound', from: number.e164, to: peer, segments: 1 });
});

test('a receipt that overtakes its submit_sm_resp is kept and matched: the message is sent, then delivered', async (t) => {
  const { smsc, number } = lines.early;
  smsc.answerAtOnce = false;
  let receiptStatus: number | undefined;
  smsc.once('submit', (submitted) => {
    // The carrier's receipt first, its answer to the submit_sm only once the receipt was answered.
    void deliver(smsc, peer, number.e164, receipt('early-1', 'DELIVRD')).then((status) => {
      receiptStatus = status;
      submitted.answer({ message_id: 'early-1' });
    });
  });
  const message = await sendText(texting, number, peer, 'Early bird');
  await statusOf(texting.service, message.id, 'delivered');
  t.is(receiptStatus, 0, 'the early receipt was taken');
  const { statusHistory } = await getMessage(texting.service.pool, texting.workspace.id, message.id);
  t.deepEqual(
    statusHistory.map((change) => change.status),
    ['queued', 'sending', 'sent', 'delivered'],
  );
  t.deepEqual(await streamStatuses(number, message.id), ['sent', 'delivered']);
});

test('a long UCS-2 text in three concatenated parts that come out of order is one message.received with the whole text', async (t) => {
  const { smsc, number } = lines.long;
  const text = 'Здравствуйте! Ваш заказ № 42 готов к выдаче ✓ '.repeat(4).trim();
  const parts = encodeText(text, 77);
  t.is(parts.length, 3);
  t.is(parts[0]?.dataCoding, 0x08, 'UCS-2');
  const received = async () =>
    (await numberEvents(texting.service.pool, number.id)).filter((event) => event.type === 'message.received');
  for (const index of [2, 0]) t.is(await deliver(smsc, peer, number.e164, parts[index]!), 0);
  t.deepEqual(await received(), [], 'nothing before the last part');
  t.is(await deliver(smsc, peer, number.e164, parts[1]!), 0);
  const [event, ...more] = await until('message.received', async () => {
    const found = await received();
    return found.length > 0 ? found : undefined;
  });
  t.deepEqual(more, []);
  t.like(event?.message, { direction: 'inbound', text, segments: 3, status: 'received' });
  const [webhook] = await webhooks('message.received', event!.message.id, 1);
  t.like(webhook?.event.message, { from: peer, to: number.e164, text });
});

test('STOP opts the peer out and its confirmation is still sent; START opts back in with its reply', async (t) => {
  const { smsc, number } = lines.keywords;
  const { pool } = texting.service;
  /** The next submit_sm with its text, and the message it carries once sent. */
  const reply = async (keyword: string) => {
    const submitted = once(smsc, 'submit') as Promise<[Submitted]>;
    t.is(await deliver(smsc, peer, number.e164, encodeText(keyword, 0)[0]!), 0, keyword);
    const [submit] = await submitted;
    t.is(submit.pdu.destination_addr, peer.slice(1));
    t.is(submit.pdu.source_addr, number.e164.slice(1));
    const message = await pool.query<{ id: string }>(
      `SELECT id FROM messages WHERE phone_number_id = $1 AND direction = 'outbound' AND to_number = $2
        ORDER BY created_at DESC LIMIT 1`,
      [number.id, peer],
    );
    await statusOf(texting.service, message.rows[0]!.id, 'sent');
    return textOf(submit);
  };
  t.is(
    await reply(' stop! '),
    'You have been unsubscribed and will receive no more messages. Reply START to resubscribe.',
  );
  // The check operation 67 makes before it writes anything: this peer is refused (409 recipient_opted_out).
  t.true(await isOptedOut(pool, number.id, peer));
  t.is(await reply('Start'), 'You have been resubscribed.');
  t.false(await isOptedOut(pool, number.id, peer));
  const inbound = (await numberEvents(pool, number.id)).filter((event) => event.type === 'message.received');
  t.deepEqual(
    inbound.map((event) => event.message.text),
    [' stop! ', 'Start'],
    'the keywords are messages received too',
  );
});

test('an SMS code to a peer that sent STOP is 409 recipient_opted_out: nothing sent, nothing to check', async (t) => {
  const { smsc, number, send } = verifier;
  const { pool } = texting.service;
  // Valid mobile numbers (operation 17 checks them), one opted out, one not.
  const [stopped, other] = ['+33612345601', '+33612345602'];
  const submitsTo = (to: string) =>
    smsc.submits.filter((pdu) => pdu.destination_addr === to.slice(1)).map((pdu) => textOf({ pdu } as Submitted));
  const confirmed = once(smsc, 'submit') as Promise<[Submitted]>;
  t.is(await deliver(smsc, stopped, number.e164, encodeText('STOP', 0)[0]!), 0);
  await confirmed;
  t.true(await isOptedOut(pool, number.id, stopped));

  const refused = await send(stopped);
  t.is(refused.status, 409, refused.text);
  t.is(refused.body.error.code, 'recipient_opted_out');
  t.regex(refused.body.error.message, /opted out/);
  const written = await pool.query(
    `SELECT 1 FROM verifications WHERE to_number = $1
     UNION ALL SELECT 1 FROM messages WHERE to_number = $1 AND direction = 'outbound' AND text <> $2`,
    [stopped, 'You have been unsubscribed and will receive no more messages. Reply START to resubscribe.'],
  );
  t.is(written.rowCount, 0, 'no verification to check and no message to send');

  // A code to another peer goes out after it: by then the refused one would have reached the SMSC too.
  const next = once(smsc, 'submit') as Promise<[Submitted]>;
  const sent = await send(other);
  t.is(sent.status, 201, sent.text);
  const [submit] = await next;
  t.is(submit.pdu.destination_addr, other.slice(1));
  t.regex(textOf(submit), /^Your code is \d{6}\.$/);
  t.deepEqual(submitsTo(stopped), [
    'You have been unsubscribed and will receive no more messages. Reply START to resubscribe.',
  ]);

  // Opted back in, the peer gets codes again.
  const resubscribed = once(smsc, 'submit') as Promise<[Submitted]>;
  t.is(await deliver(smsc, stopped, number.e164, encodeText('START', 0)[0]!), 0);
  await resubscribed;
  const code = once(smsc, 'submit') as Promise<[Submitted]>;
  const again = await send(stopped);
  t.is(again.status, 201, again.text);
  t.regex(textOf((await code)[0]), /^Your code is \d{6}\.$/);
});
