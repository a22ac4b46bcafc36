/**
 * Texts over SMPP (core/messages/encoding.ts, docs/messaging.md "Sending"): GSM 7-bit or UCS-2 by content, one part
 * up to 160 septets or 70 units, then parts of 153 septets or 67 units behind a concatenation header; extension
 * characters cost two septets and are never split from their escape; surrogate pairs stay whole; what is encoded
 * decodes back, header included.
 */
import test from 'ava';
import { decodePart, encodeText, encodingOf, splitText } from '../../core/messages/encoding.ts';

test('GSM 7-bit by content, UCS-2 for anything else', (t) => {
  t.is(encodingOf('Hello, world! @£$¥ {}[]~€'), 'gsm7');
  t.is(encodingOf('Grüße aus Köln'), 'gsm7');
  t.is(encodingOf('Привет'), 'ucs2');
  t.is(encodingOf('ok 👍'), 'ucs2');
  t.is(encodingOf('ç is GSM, but Ç is too; ő is not'), 'ucs2');
});

test('one part up to 160 septets, then parts of 153; an extension character costs two', (t) => {
  t.deepEqual(splitText('a'.repeat(160)).parts, ['a'.repeat(160)]);
  const long = splitText('a'.repeat(161));
  t.deepEqual(
    long.parts.map((part) => part.length),
    [153, 8],
  );
  // 80 euro signs are 160 septets: one part; 81 are 162: two, never splitting a sign from its escape.
  t.is(splitText('€'.repeat(80)).parts.length, 1);
  const euros = splitText('€'.repeat(81));
  t.deepEqual(
    euros.parts.map((part) => part.length),
    [76, 5],
  );
  t.is(euros.parts.join(''), '€'.repeat(81));
});

test('UCS-2: one part up to 70 units, then 67; a surrogate pair is never split', (t) => {
  t.is(splitText('ж'.repeat(70)).parts.length, 1);
  t.deepEqual(
    splitText('ж'.repeat(71)).parts.map((part) => part.length),
    [67, 4],
  );
  const emoji = splitText('👍'.repeat(40)); // 80 units
  t.true(
    emoji.parts.every((part) => !/[\uD800-\uDBFF]$/.test(part)),
    'no part ends inside a pair',
  );
  t.is(emoji.parts.join(''), '👍'.repeat(40));
  t.deepEqual(
    emoji.parts.map((part) => part.length),
    [66, 14],
  );
});

test('encoded parts carry the concatenation header and decode back to the text', (t) => {
  const text = 'Привет! '.repeat(20);
  const parts = encodeText(text, 42);
  t.is(parts.length, 3);
  const decoded = parts.map((part) => decodePart(part.bytes, part.esmClass, part.dataCoding));
  t.deepEqual(
    decoded.map((part) => part?.concatenation),
    [1, 2, 3].map((index) => ({ reference: 42, count: 3, index })),
  );
  t.is(decoded.map((part) => part?.text).join(''), text);
  t.true(parts.every((part) => part.dataCoding === 8 && part.esmClass === 0x40));

  const [single] = encodeText('Your code is 123456.', 0);
  t.is(single?.esmClass, 0);
  t.is(single?.dataCoding, 0);
  t.deepEqual(decodePart(single!.bytes, 0, 0), { text: 'Your code is 123456.' });
  const gsm = encodeText('{€} '.repeat(50), 7);
  t.is(gsm.map((part) => decodePart(part.bytes, part.esmClass, part.dataCoding)?.text).join(''), '{€} '.repeat(50));
});

test('a header longer than its bytes is refused, not read past', (t) => {
  t.is(decodePart(Buffer.from([0x09, 0x00, 0x03, 1]), 0x40, 0), undefined);
  t.is(decodePart(Buffer.from([0x05, 0x00, 0x07, 1, 2, 3]), 0x40, 0), undefined);
});
