/**
 * Message records for operations 67-69 (core/messages/messages.ts, core/numbers/numbers.ts `senderOf`,
 * core/messages/keywords.ts; docs/messaging.md "Records", "Sending"): a send written `queued` with its parts and
 * its first history row (no event: `queued` is not reported), and announced to its carrier's link at commit (not before, never for a
 * rollback); one message with its history, in its workspace only; lists by
 * number, peer and direction, newest first, page by page; which numbers can text; the keywords.
 */
import test from 'ava';
import pg from 'pg';
import { inTransaction } from '../../core/database.ts';
import { notFound } from '../../core/errors.ts';
import { type Keyword, keywordOf } from '../../core/messages/keywords.ts';
import {
  createOutboundMessage,
  getMessage,
  listMessages,
  messageJson,
  type MessageFilters,
} from '../../core/messages/messages.ts';
import { dedupeHash } from '../../core/messages/dedupe.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { senderOf } from '../../core/numbers/numbers.ts';
import { type MessagesDatabase, messagesDatabase, numberEvents, textingSetup } from '../helpers/messages.ts';

let db: MessagesDatabase;

test.before(async () => {
  db = await messagesDatabase();
});

test.after.always(async () => {
  await db?.close();
});

test('a send is written queued with its parts and its history (no event: queued is not reported), and announced to its carrier at commit', async (t) => {
  const setup = await textingSetup(db.pool);
  const listener = new pg.Client({ connectionString: db.database.url });
  await listener.connect();
  const notices: string[] = [];
  // Only this test's carrier: the file's other tests send at the same time.
  listener.on('notification', (notice) => notice.payload === setup.carrier && notices.push(notice.payload));
  await listener.query('LISTEN switchboard_messages');
  try {
    const text = 'Your table is ready. '.repeat(9); // 189 septets: two parts
    const hash = dedupeHash({ from: setup.number.e164, to: '+14155550123', text });
    const heard = new Promise<void>((resolve) =>
      listener.on('notification', (notice) => notice.payload === setup.carrier && resolve()),
    );
    const message = await inTransaction(db.pool, async (client) => {
      const row = await createOutboundMessage(client, {
        workspace: setup.workspace,
        number: setup.number,
        to: '+14155550123',
        text,
        actor: 'key:abc',
        dedupeHash: hash,
      });
      t.deepEqual(notices, [], 'not before commit');
      return row;
    });
    await heard;
    t.deepEqual(notices, [setup.carrier]);
    t.like(messageJson(message), {
      phoneNumberId: setup.number.id,
      direction: 'outbound',
      from: setup.number.e164,
      to: '+14155550123',
      text,
      media: [],
      status: 'queued',
      error: null,
      segments: 2,
    });
    const parts = await db.pool.query<{ part_index: number; part_count: number; state: string; carrier: string }>(
      'SELECT part_index, part_count, state, carrier FROM message_parts WHERE message_id = $1 ORDER BY part_index',
      [message.id],
    );
    t.deepEqual(parts.rows, [
      { part_index: 1, part_count: 2, state: 'waiting', carrier: setup.carrier },
      { part_index: 2, part_count: 2, state: 'waiting', carrier: setup.carrier },
    ]);
    t.deepEqual(await numberEvents(db.pool, setup.number.id), []);
    t.deepEqual(
      (await getMessage(db.pool, setup.workspace.id, message.id)).statusHistory.map((change) => change.status),
      ['queued'],
    );
    // A rolled-back send leaves nothing and wakes nobody.
    notices.length = 0;
    await t.throwsAsync(
      inTransaction(db.pool, async (client) => {
        await createOutboundMessage(client, {
          workspace: setup.workspace,
          number: setup.number,
          to: '+14155550123',
          text: 'x',
          actor: null,
        });
        throw new Error('the request failed');
      }),
    );
    await listener.query('SELECT 1');
    t.deepEqual(notices, []);
    const left = await db.pool.query('SELECT 1 FROM messages WHERE phone_number_id = $1', [setup.number.id]);
    t.is(left.rowCount, 1, 'only the committed send');
  } finally {
    await listener.end();
  }
});

test('one message with its status history, in its own workspace only', async (t) => {
  const setup = await textingSetup(db.pool);
  const other = await textingSetup(db.pool);
  const message = await createOutboundMessage(db.pool, {
    workspace: setup.workspace,
    number: setup.number,
    to: '+14155550123',
    text: 'hello',
    actor: null,
  });
  const store = openLinkStore(db.pool);
  const [part] = await store.takeParts(setup.carrier, 1);
  await store.refused(part!.id, { code: 'ESME_RSUBMITFAIL', message: 'submit_sm failed' });
  const found = await getMessage(db.pool, setup.workspace.id, message.id);
  t.like(found, { id: message.id, status: 'failed', error: { code: 'ESME_RSUBMITFAIL', message: 'submit_sm failed' } });
  t.deepEqual(
    found.statusHistory.map((change) => [change.status, change.error?.code ?? null]),
    [
      ['queued', null],
      ['sending', null],
      ['failed', 'ESME_RSUBMITFAIL'],
    ],
  );
  t.true(found.statusHistory.every((change) => change.at instanceof Date));
  await t.throwsAsync(getMessage(db.pool, other.workspace.id, message.id), { message: notFound('message').message });
});

test('lists by number, peer and direction, newest first, page by page', async (t) => {
  const setup = await textingSetup(db.pool);
  const second = await textingSetup(db.pool, { carrier: setup.carrier, workspace: setup.workspace });
  const elsewhere = await textingSetup(db.pool);
  const store = openLinkStore(db.pool);
  for (const [index, to] of ['+14155550101', '+14155550102', '+14155550101'].entries()) {
    await createOutboundMessage(db.pool, {
      workspace: setup.workspace,
      number: setup.number,
      to,
      text: `out ${index}`,
      actor: null,
    });
  }
  await createOutboundMessage(db.pool, {
    workspace: setup.workspace,
    number: second.number,
    to: '+14155550101',
    text: 'from the second',
    actor: null,
  });
  await store.inbound(setup.carrier, {
    from: '+14155550101',
    to: setup.number.e164,
    bytes: Buffer.from('in 1'),
    esmClass: 0,
    dataCoding: 0,
  });
  await store.inbound(setup.carrier, {
    from: '+14155550102',
    to: setup.number.e164,
    bytes: Buffer.from('in 2'),
    esmClass: 0,
    dataCoding: 0,
  });

  const texts = async (filters: MessageFilters, limit = 100) =>
    (await listMessages(db.pool, setup.workspace.id, filters, { limit })).map((row) => row.text);
  t.deepEqual(await texts({}), ['in 2', 'in 1', 'from the second', 'out 2', 'out 1', 'out 0']);
  t.deepEqual(await texts({ phoneNumberId: setup.number.id }), ['in 2', 'in 1', 'out 2', 'out 1', 'out 0']);
  t.deepEqual(await texts({ phoneNumberId: second.number.id }), ['from the second']);
  t.deepEqual(await texts({ peer: '+14155550101' }), ['in 1', 'from the second', 'out 2', 'out 0']);
  t.deepEqual(await texts({ direction: 'inbound' }), ['in 2', 'in 1']);
  t.deepEqual(await texts({ direction: 'outbound', peer: '+14155550102' }), ['out 1']);
  t.deepEqual(await texts({ phoneNumberId: setup.number.id, peer: '+14155550101', direction: 'outbound' }), [
    'out 2',
    'out 0',
  ]);
  t.deepEqual(
    await listMessages(db.pool, elsewhere.workspace.id, {}, { limit: 10 }),
    [],
    'another workspace sees none',
  );

  // Page by page: limit + 1 rows tell that another page follows; the last row's position starts the next.
  const pages: string[][] = [];
  let after: { ts: string; id: string } | undefined;
  for (;;) {
    const rows = await listMessages(db.pool, setup.workspace.id, {}, { limit: 4, after });
    pages.push(rows.slice(0, 4).map((row) => row.text));
    if (rows.length <= 4) break;
    const last = rows[3]!;
    after = { ts: last.cursor_ts, id: last.id };
  }
  t.deepEqual(pages, [
    ['in 2', 'in 1', 'from the second', 'out 2'],
    ['out 1', 'out 0'],
  ]);
});

test('which of a workspace’s numbers can text: a messaging carrier and SMS among its capabilities', async (t) => {
  const texting = await textingSetup(db.pool);
  const noMessaging = await textingSetup(db.pool, { messaging: false });
  const voiceOnly = await textingSetup(db.pool, { capabilities: ['voice'] });
  const byId = await senderOf(db.pool, texting.workspace.id, { phoneNumberId: texting.number.id });
  t.like(byId, {
    canText: true,
    workspace: texting.workspace,
    number: { id: texting.number.id, carrier: texting.carrier },
  });
  t.like(await senderOf(db.pool, texting.workspace.id, { e164: texting.number.e164 }), { canText: true });
  t.like(await senderOf(db.pool, noMessaging.workspace.id, { e164: noMessaging.number.e164 }), { canText: false });
  t.like(await senderOf(db.pool, voiceOnly.workspace.id, { phoneNumberId: voiceOnly.number.id }), { canText: false });
  t.is(await senderOf(db.pool, noMessaging.workspace.id, { phoneNumberId: texting.number.id }), undefined);
  t.is(await senderOf(db.pool, texting.workspace.id, { phoneNumberId: 'not-a-uuid' }), undefined);
});

test('keywords: the whole text, any case, whitespace and punctuation around it ignored', (t) => {
  const cases: Array<[string, Keyword | undefined]> = [
    ['STOP', 'stop'],
    [' stop! ', 'stop'],
    ['Stop.', 'stop'],
    ['...UNSUBSCRIBE...', 'stop'],
    ['\tOptOut\n', 'stop'],
    ['«end»', 'stop'],
    ['start', 'start'],
    ['Yes!', 'start'],
    ['UnStop', 'start'],
    ['help?', 'help'],
    ['HELP ME', undefined],
    ['stop it', undefined],
    ['opt out', undefined],
    ['st op', undefined],
    ['STOP 🙏', undefined],
    ['', undefined],
    [`${' '.repeat(5000)}STOP`, undefined],
  ];
  for (const [text, keyword] of cases) t.is(keywordOf(text)?.keyword, keyword, JSON.stringify(text.slice(0, 20)));
  t.is(keywordOf(' stopall. ')?.word, 'STOPALL');
});
