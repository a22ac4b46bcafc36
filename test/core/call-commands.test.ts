/** Call commands as the engine reads them from an announcement (core/calls/commands.ts): the union, nothing else. */
import test from 'ava';
import { parseCallCommand } from '../../core/calls/commands.ts';

test('a hangup announcement is a hangup command', (t) => {
  const callId = '0b5d8a3e-1f2c-4d5e-8f90-a1b2c3d4e5f6';
  t.deepEqual(parseCallCommand(JSON.stringify({ callId, action: 'hangup' })), { callId, action: 'hangup' });
});

test('garbage, wrong types and unknown actions are no command', (t) => {
  for (const payload of [
    '',
    'hangup',
    '{',
    'null',
    '42',
    '"hangup"',
    '[]',
    '[{"callId":"x","action":"hangup"}]',
    '{}',
    '{"action":"hangup"}',
    '{"callId":"x"}',
    '{"callId":42,"action":"hangup"}',
    '{"callId":null,"action":"hangup"}',
    '{"callId":"x","action":"HANGUP"}',
    '{"callId":"x","action":"transfer"}',
    '{"callId":"x","action":["hangup"]}',
  ]) {
    t.is(parseCallCommand(payload), undefined, payload);
  }
});
