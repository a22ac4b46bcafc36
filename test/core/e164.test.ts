import test from 'ava';
import { validE164 } from '../../core/numbers/e164.ts';

test('validE164: valid numbers in E.164 come back as they are', (t) => {
  for (const number of ['+14155550100', '+14152001234', '+33612345678', '+33191230001', '+19005550123']) {
    t.is(validE164(number), number);
  }
});

test('validE164: a national prefix after the country code is dropped', (t) => {
  t.is(validE164('+4402079460000'), '+442079460000');
});

test('validE164: not + and digits, too short, unassigned or fictional ranges are refused', (t) => {
  for (const text of [
    '',
    'call me',
    '33612345678',
    '4155552671',
    '+33 6 12 34 56 78',
    '+1 415 555 2671',
    '+5',
    '+1415',
    '+1555',
    '+1911',
    '+15551230000',
    '+999123456789',
    '+447700900123',
  ]) {
    t.is(validE164(text), undefined, text);
  }
});
