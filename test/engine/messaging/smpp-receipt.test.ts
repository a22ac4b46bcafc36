/**
 * The SMPP link's pure parts (engine/messaging/): delivery receipts as SMPP 3.4 Appendix B writes them and as
 * carriers vary them, the reconnect backoff, the pace and its throttling (time given, not waited for), addresses.
 */
import test from 'ava';
import { reconnectDelayMs } from '../../../engine/messaging/backoff.ts';
import { internationalNumber, readDeliverSm } from '../../../engine/messaging/inbound.ts';
import { leadershipKey } from '../../../engine/messaging/leadership.ts';
import { Pacing } from '../../../engine/messaging/pacing.ts';
import { parseReceipt } from '../../../engine/messaging/receipt.ts';
import { statusName } from '../../../engine/messaging/sender.ts';

const appendixB =
  'id:0123456789 sub:001 dlvrd:001 submit date:0610191018 done date:0610191018 stat:DELIVRD err:000 text:Hello: id:x';

test('an Appendix B receipt: its id, state and error; text after text: is not read as fields', (t) => {
  t.deepEqual(parseReceipt(appendixB), {
    kind: 'receipt',
    receipt: { carrierMessageId: '0123456789', delivered: true, state: 'DELIVRD', error: null },
  });
});

test('failed states carry the err: code, or the state when there is none', (t) => {
  t.like(parseReceipt('id:abc sub:001 dlvrd:000 stat:UNDELIV err:034 text:'), {
    receipt: { delivered: false, state: 'UNDELIV', error: { code: '034' } },
  });
  t.like(parseReceipt('id:abc stat:expired'), {
    receipt: { delivered: false, state: 'EXPIRED', error: { code: 'EXPIRED' } },
  });
  for (const state of ['DELETED', 'REJECTD', 'UNKNOWN']) {
    t.like(parseReceipt(`id:1 stat:${state} err:001`), { receipt: { delivered: false, state } });
  }
});

test('the TLVs win over the text', (t) => {
  t.like(parseReceipt('id:12345 stat:DELIVRD err:000', { receiptedMessageId: '3039', messageState: 5 }), {
    receipt: { carrierMessageId: '3039', delivered: false, state: 'UNDELIV' },
  });
  t.like(parseReceipt('', { receiptedMessageId: 'abc', messageState: 2 }), {
    receipt: { carrierMessageId: 'abc', delivered: true, state: 'DELIVRD', error: null },
  });
});

test('intermediate states are not final; malformed receipts say why', (t) => {
  t.deepEqual(parseReceipt('id:1 stat:ENROUTE err:000'), { kind: 'intermediate' });
  t.like(parseReceipt('sub:001 stat:DELIVRD'), { kind: 'malformed', reason: 'no message id' });
  t.like(parseReceipt('id:1 sub:001'), { kind: 'malformed', reason: 'no state' });
  t.like(parseReceipt('id:1 stat:LOST'), { kind: 'malformed', reason: 'unknown state' });
  t.like(parseReceipt('id:1 stat:DELIVRD', { messageState: 42 }), { kind: 'malformed' });
  t.like(parseReceipt(`id:${'x'.repeat(66)} stat:DELIVRD`), { kind: 'malformed', reason: 'bad message id' });
  t.like(parseReceipt('id:1 stat:UNDELIV err:%%%'), { kind: 'malformed', reason: 'bad err' });
  t.like(parseReceipt('xid:1 stat:DELIVRD'), { kind: 'malformed', reason: 'no message id' });
});

test('reconnects back off from 1 s doubling to 60 s, half of it jitter', (t) => {
  t.is(
    reconnectDelayMs(1, () => 0),
    500,
  );
  t.is(
    reconnectDelayMs(1, () => 0.999),
    1_000,
  );
  t.is(
    reconnectDelayMs(2, () => 0.5),
    1_500,
  );
  t.is(
    reconnectDelayMs(7, () => 0.999),
    59_970,
  );
  t.is(
    reconnectDelayMs(50, () => 0),
    30_000,
  );
});

test('the pace spaces parts by the throughput, halves for the throttling period, and comes back', (t) => {
  let now = 0;
  const pacing = new Pacing(10, 10_000, () => now);
  t.deepEqual([pacing.take(), pacing.take(), pacing.take()], [0, 100, 200]);
  now = 1_000;
  pacing.throttled();
  t.is(pacing.currentRate(), 5);
  t.deepEqual([pacing.take(), pacing.take()], [0, 200]);
  pacing.throttled();
  t.is(pacing.currentRate(), 2.5);
  now = 10_999;
  t.is(pacing.currentRate(), 2.5);
  now = 11_000;
  t.is(pacing.currentRate(), 10);
});

test('addresses: international numbers only, with their +', (t) => {
  t.is(internationalNumber(1, '15551230000'), '+15551230000');
  t.is(internationalNumber(0, '+447700900123'), '+447700900123');
  t.is(internationalNumber(2, '5551230000'), undefined);
  t.is(internationalNumber(5, 'ACME'), undefined);
  t.is(internationalNumber(1, '0123'), undefined);
  t.is(internationalNumber(1, '1'.repeat(16)), undefined);
});

test('a deliver_sm read from its bytes; one whose fields run past its end is not', (t) => {
  const body = Buffer.concat([
    Buffer.from('\0\x01\x0115551230000\0\x01\x0115557650000\0\x40\0\0\0\0\0\0\x08\0'),
    Buffer.from([3, 0x05, 0x00, 0x03]),
    Buffer.from([0x04, 0x27, 0x00, 0x01, 0x02]),
  ]);
  const frame = Buffer.concat([Buffer.alloc(16), body]);
  t.like(readDeliverSm(frame), { source: '15551230000', destination: '15557650000', esmClass: 0x40, dataCoding: 8 });
  t.deepEqual(readDeliverSm(frame)?.text, Buffer.from([0x05, 0x00, 0x03]));
  t.is(readDeliverSm(frame.subarray(0, -2)), undefined);
  t.is(readDeliverSm(frame.subarray(0, -6)), undefined);
  t.is(readDeliverSm(Buffer.concat([Buffer.alloc(16), Buffer.from('toolongservice\0')])), undefined);
});

test('status names and lock keys are stable', (t) => {
  t.is(statusName(0x58), 'ESME_RTHROTTLED');
  t.is(statusName(0x400), '0x00000400');
  t.is(leadershipKey('acme'), leadershipKey('acme'));
  t.not(leadershipKey('acme'), leadershipKey('acme2'));
  t.regex(leadershipKey('acme'), /^-?\d+$/);
});
