/**
 * A queue's own hold prompt and announcements through HTTP (operations 34-38; docs/contact-center.md): defaults when
 * left out, set on create, changed and cleared by PATCH, kept in the `Queue` custom resource only when they differ
 * from their defaults, and 400 `invalid_request` for values out of their schemas.
 */
import test from 'ava';
import { serviceForFile } from '../helpers/service.ts';
import { created, isInvalid, routingConfigHelpers } from '../helpers/routing-config.ts';

const service = serviceForFile(test);
const { tenant, call } = routingConfigHelpers(() => service);

async function queueSpec(queueId: string): Promise<Record<string, unknown> | undefined> {
  const result = await service.pool.query<{ spec: Record<string, unknown> }>(
    "SELECT spec FROM resources WHERE kind = 'Queue' AND name = $1",
    [queueId],
  );
  return result.rows[0]?.spec;
}

test('a queue takes a hold prompt and announcements; PATCH changes and clears them; the resource follows', async (t) => {
  const owner = await tenant();
  const queue = await created(
    'queue',
    await call(owner, 'POST', '/queues', {
      name: 'Support',
      holdPrompt: { tts: 'Thank you for holding.' },
      announcePosition: true,
      announceIntervalSecs: 15,
    }),
  );
  t.like(queue, {
    holdPrompt: { tts: 'Thank you for holding.' },
    announcePosition: true,
    announceExpectedWait: false,
    announceIntervalSecs: 15,
  });
  t.deepEqual((await call(owner, 'GET', `/queues/${queue.id}`)).body, queue);
  const spec = await queueSpec(queue.id);
  t.like(spec, { holdPrompt: { tts: 'Thank you for holding.' }, announcePosition: true, announceIntervalSecs: 15 });
  t.false(spec !== undefined && 'announceExpectedWait' in spec, 'a default is left out of the resource');

  const patched = await call(owner, 'PATCH', `/queues/${queue.id}`, {
    holdPrompt: { audioUrl: 'https://example.com/hold.wav' },
    announceExpectedWait: true,
    announceIntervalSecs: 600,
  });
  t.is(patched.status, 200, patched.text);
  t.like(patched.body, {
    name: 'Support',
    holdPrompt: { audioUrl: 'https://example.com/hold.wav' },
    announcePosition: true,
    announceExpectedWait: true,
    announceIntervalSecs: 600,
  });
  t.like(await queueSpec(queue.id), { holdPrompt: { audioUrl: 'https://example.com/hold.wav' } });

  // A PATCH without holdPrompt keeps it; null clears it (the default music), and the resource drops it.
  const kept = await call(owner, 'PATCH', `/queues/${queue.id}`, { name: 'Help' });
  t.deepEqual(kept.body.holdPrompt, { audioUrl: 'https://example.com/hold.wav' });
  const cleared = await call(owner, 'PATCH', `/queues/${queue.id}`, {
    holdPrompt: null,
    announcePosition: false,
    announceIntervalSecs: 60,
  });
  t.is(cleared.status, 200, cleared.text);
  t.like(cleared.body, { holdPrompt: null, announcePosition: false, announceExpectedWait: true });
  const after = await queueSpec(queue.id);
  t.false(after !== undefined && 'holdPrompt' in after, 'no holdPrompt in the resource');
  t.false(after !== undefined && 'announceIntervalSecs' in after, 'the default interval is left out');
  t.like(after, { announceExpectedWait: true });
});

test('hold prompt and announcement values out of their schemas are 400 invalid_request', async (t) => {
  const owner = await tenant();
  const refusals: Array<[Record<string, unknown>, RegExp]> = [
    [{ announceIntervalSecs: 14 }, /announceIntervalSecs/],
    [{ announceIntervalSecs: 601 }, /announceIntervalSecs/],
    [{ announceIntervalSecs: 30.5 }, /announceIntervalSecs/],
    [{ announceIntervalSecs: '60' }, /announceIntervalSecs/],
    [{ announcePosition: 'yes' }, /announcePosition/],
    [{ announceExpectedWait: 1 }, /announceExpectedWait/],
    [{ holdPrompt: { audioUrl: 'http://example.com/hold.wav' } }, /holdPrompt/],
    [{ holdPrompt: { tts: '' } }, /holdPrompt/],
    [{ holdPrompt: { tts: 'a'.repeat(4001) } }, /holdPrompt/],
    [{ holdPrompt: { tts: 'Hold.', audioUrl: 'https://example.com/hold.wav' } }, /holdPrompt/],
    [{ holdPrompt: 'music' }, /holdPrompt/],
  ];
  for (const [fields, pattern] of refusals) {
    isInvalid(t, await call(owner, 'POST', '/queues', { name: 'Q', ...fields }), pattern, JSON.stringify(fields));
  }
  const queue = await created('queue', await call(owner, 'POST', '/queues', { name: 'Q' }));
  for (const [fields, pattern] of refusals) {
    isInvalid(t, await call(owner, 'PATCH', `/queues/${queue.id}`, fields), pattern, `PATCH ${JSON.stringify(fields)}`);
  }
  t.deepEqual((await call(owner, 'GET', '/queues')).body.data, [queue], 'only the valid queue, unchanged');
});
