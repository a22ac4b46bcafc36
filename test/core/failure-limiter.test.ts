/**
 * The failure limiter (core/failure-limiter.ts) on given times: a key blocked at its limit until its window ends, a
 * success clearing it, and its memory bounded, the oldest keys going first.
 */
import test from 'ava';
import { FailureLimiter } from '../../core/failure-limiter.ts';

test('a key is blocked at its limit until the window ends, with the seconds left; a success clears it', (t) => {
  const limiter = new FailureLimiter(3, 60_000);
  const start = 1_000_000;
  for (let index = 0; index < 2; index += 1) limiter.fail('address:192.0.2.1', start + index);
  t.is(limiter.blocked('address:192.0.2.1', start + 10), undefined, 'under the limit');
  limiter.fail('address:192.0.2.1', start + 20);
  t.is(limiter.blocked('address:192.0.2.1', start + 20), 60);
  t.is(limiter.blocked('address:192.0.2.1', start + 59_001), 1);
  t.is(limiter.blocked('address:192.0.2.2', start + 20), undefined, 'another key');
  t.is(limiter.blocked('address:192.0.2.1', start + 60_000), undefined, 'the window ended');
  // A new window starts with the next failure.
  limiter.fail('address:192.0.2.1', start + 60_001);
  t.is(limiter.blocked('address:192.0.2.1', start + 60_002), undefined);
  for (let index = 0; index < 3; index += 1) limiter.fail('carrier:acme', start + index);
  limiter.reset('carrier:acme');
  t.is(limiter.blocked('carrier:acme', start + 10), undefined, 'cleared');
});

test('at most maxKeys keys are kept, the oldest dropped first', (t) => {
  const limiter = new FailureLimiter(1, 60_000, 3);
  for (const key of ['a', 'b', 'c', 'd']) limiter.fail(key, 0);
  t.is(limiter.blocked('a', 1), undefined, 'the oldest went');
  for (const key of ['b', 'c', 'd']) t.is(limiter.blocked(key, 1), 60, key);
});
