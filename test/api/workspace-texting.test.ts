/**
 * A workspace's texting settings through HTTP (operations 6, 8, 9; docs/messaging.md "Receiving"): the help text an
 * inbound HELP is answered with, shown as the default until set, checked to fit one SMS part, merged by PATCH, reset
 * by null, and used by the reply the store's inbound path queues for a HELP to the workspace's number.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { encodeText } from '../../core/messages/encoding.ts';
import { defaultHelpReply } from '../../core/messages/keywords.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { textingSetup } from '../helpers/messages.ts';
import { isError, workspaceWithUser, serviceForFile } from '../helpers/service.ts';

const service = serviceForFile(test);

test('the help text is the default until set; PATCH sets it, keeps it across other changes, null resets it', async (t) => {
  const setup = await workspaceWithUser(service);
  const path = `/api/v1/workspaces/${setup.workspace.id}`;
  t.deepEqual(setup.workspace.texting, { helpText: defaultHelpReply });
  const helpText = 'Acme Support: call +1 415 555 0100, Mon-Fri 9-17. Reply STOP to unsubscribe.';
  const set = await service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { helpText } } });
  t.is(set.status, 200, set.text);
  t.deepEqual(set.body.texting, { helpText });
  const renamed = await service.request('PATCH', path, { auth: setup.apiKey, body: { name: 'Acme', texting: {} } });
  t.is(renamed.status, 200, renamed.text);
  t.deepEqual(renamed.body.texting, { helpText }, 'kept when not named');
  const got = await service.request('GET', path, { auth: setup.apiKey });
  t.deepEqual(got.body.texting, { helpText });
  const reset = await service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { helpText: null } } });
  t.is(reset.status, 200, reset.text);
  t.deepEqual(reset.body.texting, { helpText: defaultHelpReply });

  const created = await service.request('POST', '/api/v1/workspaces', {
    auth: setup.apiKey,
    body: { externalWorkspaceId: `ws-${randomUUID()}`, name: 'Beta', timezone: 'UTC', texting: { helpText: 'Aide ?' } },
  });
  t.is(created.status, 201, created.text);
  t.deepEqual(created.body.texting, { helpText: 'Aide ?' });
});

test('a help text must fit one SMS part: 160 GSM characters, 70 UCS-2, no control characters, not blank', async (t) => {
  const setup = await workspaceWithUser(service);
  const path = `/api/v1/workspaces/${setup.workspace.id}`;
  const patch = (helpText: unknown) =>
    service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { helpText } } });
  t.is((await patch('x'.repeat(160))).status, 200);
  t.is((await patch('é'.repeat(160))).status, 200, 'é is in the GSM alphabet');
  t.is((await patch('Привет'.repeat(11) + 'Прив')).status, 200, '70 UCS-2 characters');
  for (const [helpText, message] of [
    ['x'.repeat(161), /body\.texting\.helpText/],
    ['Привет'.repeat(11) + 'Приве', /one SMS/],
    ['{'.repeat(81), /one SMS/],
    ['   ', /empty/],
    ['', /body\.texting\.helpText/],
    ['Help\u0007', /control/],
    [42, /body\.texting\.helpText/],
  ] as const) {
    const refused = await patch(helpText);
    isError(t, refused, 400, 'invalid_request');
    t.regex(refused.body.error.message, message, JSON.stringify(helpText));
  }
  isError(
    t,
    await service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { other: 'x' } } }),
    400,
    'invalid_request',
  );
  const after = await service.request('GET', path, { auth: setup.apiKey });
  t.deepEqual(after.body.texting, { helpText: 'Привет'.repeat(11) + 'Прив' }, 'refusals changed nothing');
});

test('an inbound HELP is answered with the workspace’s help text, and with the default once it is reset', async (t) => {
  const setup = await workspaceWithUser(service);
  const workspace = {
    id: setup.workspace.id as string,
    applicationId: setup.applicationId,
    externalWorkspaceId: setup.workspace.externalWorkspaceId as string,
  };
  const { carrier, number } = await textingSetup(service.pool, { workspace });
  const store = openLinkStore(service.pool);
  t.teardown(() => store.close());
  const peer = '+14155550142';
  const help = async () => {
    const [part] = encodeText('Help?', 1);
    t.is(await store.inbound(carrier, { from: peer, to: number.e164, ...part! }), 'accepted');
    // A repeat within two minutes is the same message: each HELP here is a new one.
    await service.pool.query(`UPDATE message_parts SET created_at = created_at - interval '1 hour' WHERE peer = $1`, [
      peer,
    ]);
  };
  const replies = async () => {
    const result = await service.pool.query<{ text: string }>(
      `SELECT text FROM messages WHERE phone_number_id = $1 AND direction = 'outbound' ORDER BY created_at`,
      [number.id],
    );
    return result.rows.map((row) => row.text);
  };
  const path = `/api/v1/workspaces/${workspace.id}`;
  await help();
  const helpText = 'Acme: text us your order number. Reply STOP to unsubscribe.';
  const set = await service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { helpText } } });
  t.is(set.status, 200, set.text);
  await help();
  await service.request('PATCH', path, { auth: setup.apiKey, body: { texting: { helpText: null } } });
  await help();
  t.deepEqual(await replies(), [defaultHelpReply, helpText, defaultHelpReply]);
});
