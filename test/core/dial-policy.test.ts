/**
 * The dial-out policy's decision (core/calls/dial-policy.ts): E.164 first, then emergency numbers, then the
 * workspace's prefixes; each refusal with the API's code and a message naming the kind of call.
 */
import test from 'ava';
import { judgeDialOut } from '../../core/calls/dial-policy.ts';

const open = { allowedPrefixes: [], blockedPrefixes: [] };

test('a number passes when it is E.164, no emergency number, and within the prefixes', (t) => {
  t.is(judgeDialOut('forward', '+15550104444', open), undefined);
  t.is(judgeDialOut('cell', '+33612345678', { allowedPrefixes: ['+33'], blockedPrefixes: ['+3389'] }), undefined);
});

test('refusals in order: invalid, emergency (before any prefix), blocked', (t) => {
  t.like(judgeDialOut('callback', 'anonymous', open), { code: 'invalid_destination' });
  t.like(judgeDialOut('callback', '+999123456', open), { code: 'invalid_destination' });
  for (const emergency of ['+1911', '+44999', '+44112', '+33112', '+49110']) {
    // Even a policy that allows only that prefix never lets an emergency number through.
    const allowing = { allowedPrefixes: [emergency.slice(0, 3)], blockedPrefixes: [] };
    t.like(judgeDialOut('transfer', emergency, allowing), { code: 'emergency_unavailable' }, emergency);
  }
  t.like(judgeDialOut('verification', '+19005550123', { allowedPrefixes: [], blockedPrefixes: ['+1900'] }), {
    code: 'destination_blocked',
    message: "a verification to +19005550123: outside the workspace's destination policy",
  });
  t.like(judgeDialOut('forward', '+4420', { allowedPrefixes: ['+33'], blockedPrefixes: [] }), {
    code: 'destination_blocked',
  });
});
