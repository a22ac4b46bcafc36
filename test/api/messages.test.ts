/**
 * Operations 67-69 through HTTP against PostgreSQL (docs/messaging.md, "Sending"): every refusal in the design's order
 * with nothing written, the opt-out, the duplicate window, the accepted message's parts waiting for the link, the
 * carrier's refusal while the send waits (the link's side driven through the store, core/messages/store.ts: our own
 * interface, no carrier needed), lists with their filters and pages, and workspaces kept apart.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { inTransaction } from '../../core/database.ts';
import type { OutboundPart } from '../../core/messages/link-store.ts';
import { recordInboundMessage } from '../../core/messages/messages.ts';
import { optOut } from '../../core/messages/opt-outs.ts';
import { openLinkStore } from '../../core/messages/store.ts';
import { type Capability, decideTextingRegistration } from '../../core/numbers/numbers.ts';
import { textingSetup } from '../helpers/messages.ts';
import { isError, userToken, workspaceWithUser, serviceForFile } from '../helpers/service.ts';

const service = serviceForFile(test);

let peers = 0;
/** A valid US number (libphonenumber) no other send of the file uses. */
function newPeer(): string {
  peers += 1;
  return `+1415${String(2_000_000 + ((process.pid * 100 + peers) % 7_000_000)).padStart(7, '0')}`;
}

/**
 * A workspace (through the API) with a number claimed on a carrier that texts; its registration `approved` (through
 * the campaign of operation 23 and the admin's decision) unless `registration` says otherwise.
 */
async function texting(
  t: ExecutionContext,
  options: {
    registration?: 'unregistered' | 'pending' | 'approved';
    messaging?: boolean;
    capabilities?: Capability[];
  } = {},
) {
  const setup = await workspaceWithUser(service);
  const workspace = {
    id: setup.workspace.id as string,
    applicationId: setup.applicationId,
    externalWorkspaceId: setup.workspace.externalWorkspaceId as string,
  };
  const { carrier, number } = await textingSetup(service.pool, {
    workspace,
    ...(options.messaging === undefined ? {} : { messaging: options.messaging }),
    ...(options.capabilities === undefined ? {} : { capabilities: options.capabilities }),
  });
  const registration = options.registration ?? 'approved';
  if (registration !== 'unregistered') {
    const patched = await service.request('PATCH', `/api/v1/numbers/${number.id}`, {
      auth: setup.apiKey,
      workspaceId: workspace.id,
      body: { textingRegistration: { campaignId: 'C7654321' } },
    });
    t.is(patched.status, 200, patched.text);
  }
  if (registration === 'approved') {
    await inTransaction(service.pool, (db) => decideTextingRegistration(db, number.e164, 'approved'));
  }
  const send = (body: unknown, options: { idempotencyKey?: string; auth?: string } = {}) =>
    service.request('POST', '/api/v1/messages', {
      auth: options.auth ?? setup.apiKey,
      workspaceId: workspace.id,
      body,
      ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
    });
  const get = (path: string, auth = setup.apiKey) =>
    service.request('GET', `/api/v1/messages${path}`, { auth, workspaceId: workspace.id });
  return { ...setup, carrier, number, send, get };
}

/** What the workspace has written: its messages and their parts. */
async function written(workspaceId: string) {
  const messages = await service.pool.query('SELECT id FROM messages WHERE workspace_id = $1', [workspaceId]);
  const parts = await service.pool.query(
    'SELECT p.id FROM message_parts p JOIN messages m ON m.id = p.message_id WHERE m.workspace_id = $1',
    [workspaceId],
  );
  return { messages: messages.rowCount, parts: parts.rowCount };
}

test('a send is accepted 202 queued, its parts wait for the link, and GET shows its history', async (t) => {
  const setup = await texting(t);
  const { number, send, get, workspace } = setup;
  const to = newPeer();
  const text = 'Your table is ready. '.repeat(9); // 189 GSM characters: two parts
  const sent = await send({ from: number.e164, to, text });
  t.is(sent.status, 202, sent.text);
  t.like(sent.body, {
    phoneNumberId: number.id,
    direction: 'outbound',
    from: number.e164,
    to,
    text,
    media: [],
    status: 'queued',
    error: null,
    segments: 2,
  });
  const parts = await service.pool.query(
    'SELECT part_index, part_count, state, direction FROM message_parts WHERE message_id = $1 ORDER BY part_index',
    [sent.body.id],
  );
  t.deepEqual(parts.rows, [
    { part_index: 1, part_count: 2, state: 'waiting', direction: 'outbound' },
    { part_index: 2, part_count: 2, state: 'waiting', direction: 'outbound' },
  ]);
  const actor = await service.pool.query('SELECT actor FROM messages WHERE id = $1', [sent.body.id]);
  t.is(actor.rows[0].actor, 'application');

  const one = await get(`/${sent.body.id}`);
  t.is(one.status, 200, one.text);
  t.like(one.body, { id: sent.body.id, status: 'queued' });
  t.deepEqual(
    one.body.statusHistory.map((change: { status: string; error: unknown }) => [change.status, change.error]),
    [['queued', null]],
  );
  t.is((await written(workspace.id)).messages, 1);

  // By id, and with a user token of the workspace.
  const token = await userToken(service, setup, ['messages:*']);
  const byId = await send({ from: { phoneNumberId: number.id }, to: newPeer(), text: 'hi' }, { auth: token });
  t.is(byId.status, 202, byId.text);
  const actorOfToken = await service.pool.query('SELECT actor FROM messages WHERE id = $1', [byId.body.id]);
  t.is(actorOfToken.rows[0].actor, 'user:alice');
});

test('the refusals come in the design order and write nothing', async (t) => {
  const noMessaging = await texting(t, { messaging: false });
  const refusedText = { to: newPeer(), text: 'hello' };
  isError(t, await noMessaging.send({ from: noMessaging.number.e164, ...refusedText }), 422, 'sender_unavailable');
  t.deepEqual(await written(noMessaging.workspace.id), { messages: 0, parts: 0 });

  const voiceOnly = await texting(t, { capabilities: ['voice'] });
  isError(t, await voiceOnly.send({ from: voiceOnly.number.e164, ...refusedText }), 422, 'sender_unavailable');

  // Not approved (pending or unregistered): 403, even to a peer who opted out (the registration comes first).
  for (const registration of ['pending', 'unregistered'] as const) {
    const notApproved = await texting(t, { registration });
    const to = newPeer();
    await optOut(service.pool, {
      workspaceId: notApproved.workspace.id,
      phoneNumberId: notApproved.number.id,
      peer: to,
      keyword: 'STOP',
    });
    const answer = await notApproved.send({ from: notApproved.number.e164, to, text: 'hello' });
    isError(t, answer, 403, 'sender_not_eligible', registration);
    t.regex(answer.body.error.message, new RegExp(registration));
    t.deepEqual(await written(notApproved.workspace.id), { messages: 0, parts: 0 });
  }

  const ready = await texting(t);
  // A number the workspace does not have (another workspace's): sender_unavailable, saying nothing of whose it is.
  isError(t, await ready.send({ from: noMessaging.number.e164, ...refusedText }), 422, 'sender_unavailable');
  isError(t, await ready.send({ from: { phoneNumberId: randomUUID() }, ...refusedText }), 422, 'sender_unavailable');

  const optedOut = newPeer();
  await optOut(service.pool, {
    workspaceId: ready.workspace.id,
    phoneNumberId: ready.number.id,
    peer: optedOut,
    keyword: 'STOP',
  });
  isError(t, await ready.send({ from: ready.number.e164, to: optedOut, text: 'hi' }), 409, 'recipient_opted_out');
  // Media: this number's carrier has no MMS URL (test/api/messages-mms.test.ts has the MMS); with an opted-out peer
  // the opt-out answers first.
  const media = { from: ready.number.e164, text: 'look', mediaUrls: ['https://example.com/a.png'] };
  isError(t, await ready.send({ ...media, to: optedOut }), 409, 'recipient_opted_out');
  const mms = await ready.send({ ...media, to: newPeer() });
  isError(t, mms, 422, 'invalid_media');
  t.regex(mms.body.error.message, /carrier takes no MMS/);

  for (const [body, field] of [
    [{ to: '+1415' }, /body\.to/],
    [{ to: '4155552671' }, /body\.to/],
    [{ to: '+1 415 555 2671' }, /body\.to/],
    [{ to: '+447700900123' }, /body\.to/],
    [{ to: newPeer(), text: 'x'.repeat(1601) }, /body\.text/],
    [{ to: newPeer(), text: undefined }, /body\.text/],
    [{ to: newPeer(), mediaUrls: Array.from({ length: 11 }, (_, i) => `https://example.com/${i}.png`) }, /mediaUrls/],
    [{ to: newPeer(), from: 'front desk' }, /body\.from/],
    [{ to: newPeer(), color: 'red' }, /color/],
  ] as const) {
    const answer = await ready.send({ from: ready.number.e164, text: 'hi', ...body });
    isError(t, answer, 400, 'invalid_request', JSON.stringify(body));
    t.regex(answer.body.error.message, field);
  }
  t.deepEqual(await written(ready.workspace.id), { messages: 0, parts: 0 });
  // 1,600 characters are fine.
  const longest = await ready.send({ from: ready.number.e164, to: newPeer(), text: 'y'.repeat(1600) });
  t.is(longest.status, 202, longest.text);
});

test('the same message under another idempotency key within 60 s is message_conflict; the same key replays', async (t) => {
  const { number, send, workspace } = await texting(t);
  const body = { from: number.e164, to: newPeer(), text: 'See you at 9' };
  const first = await send(body, { idempotencyKey: 'first-send' });
  t.is(first.status, 202, first.text);
  const replay = await send(body, { idempotencyKey: 'first-send' });
  t.is(replay.status, first.status, replay.text);
  t.is(replay.headers.get('idempotent-replayed'), 'true');
  t.is(replay.body.id, first.body.id);

  const again = await send(body, { idempotencyKey: 'second-send' });
  isError(t, again, 409, 'message_conflict');
  t.is(again.body.error.messageId, first.body.id);
  t.is((await written(workspace.id)).messages, 1, 'nothing more written');
  // Another text, or another peer, is another message.
  t.is((await send({ ...body, text: 'See you at 10' })).status, 202);
  t.is((await send({ ...body, to: newPeer() })).status, 202);

  // Past the window the same message goes again.
  await service.pool.query("UPDATE message_dedupe SET at = at - interval '61 seconds' WHERE message_id = $1", [
    first.body.id,
  ]);
  const later = await send(body, { idempotencyKey: 'third-send' });
  t.is(later.status, 202, later.text);
  t.not(later.body.id, first.body.id);
});

/** Takes the carrier's parts as the engine's link would once the send's notice wakes it. */
function partsTaken(store: ReturnType<typeof openLinkStore>, carrier: string): Promise<OutboundPart[]> {
  return new Promise((resolve, reject) => {
    let taking = false;
    // A wake while a take runs (the send committing meanwhile) asks for one more take: none is lost.
    let again = false;
    const take = () => {
      if (taking) {
        again = true;
        return;
      }
      taking = true;
      store
        .takeParts(carrier, 10)
        .then((parts) => {
          taking = false;
          if (parts.length > 0) {
            stop();
            resolve(parts);
          } else if (again) {
            again = false;
            take();
          }
        })
        .catch(reject);
    };
    const stop = store.onWaiting(carrier, take);
  });
}

test('a carrier that refuses the submit while the send waits answers 422 message_rejected', async (t) => {
  const { number, carrier, send, get } = await texting(t);
  const store = openLinkStore(service.pool, { databaseUrl: service.databaseUrl });
  t.teardown(() => store.close());
  const taken = partsTaken(store, carrier);
  const sending = send({ from: number.e164, to: newPeer(), text: 'Refused, sadly' });
  const [part] = await taken;
  if (part === undefined) throw new Error('no part taken');
  await store.refused(part.id, { code: 'ESME_RINVDSTADR', message: 'invalid destination address' });
  const answer = await sending;
  isError(t, answer, 422, 'message_rejected');
  t.regex(answer.body.error.message, /ESME_RINVDSTADR/);
  t.is(answer.body.error.messageId, part.messageId);

  const one = await get(`/${part.messageId}`);
  t.like(one.body, { status: 'failed', error: { code: 'ESME_RINVDSTADR' } });
  t.deepEqual(
    one.body.statusHistory.map((change: { status: string }) => change.status),
    ['queued', 'sending', 'failed'],
  );
  // A failed message is no duplicate: the same text goes again under a new key (it waits for the link, 202).
  const retried = await send({ from: number.e164, to: one.body.to, text: 'Refused, sadly' });
  t.is(retried.status, 202, retried.text);
});

test('a carrier that takes the submit while the send waits answers 202 with the message sent', async (t) => {
  const { number, carrier, send } = await texting(t);
  const store = openLinkStore(service.pool, { databaseUrl: service.databaseUrl });
  t.teardown(() => store.close());
  const taken = partsTaken(store, carrier);
  const sending = send({ from: number.e164, to: newPeer(), text: 'Taken' });
  const [part] = await taken;
  if (part === undefined) throw new Error('no part taken');
  await store.acknowledged(part.id, `smsc-${randomUUID()}`);
  const answer = await sending;
  t.is(answer.status, 202, answer.text);
  t.like(answer.body, { id: part.messageId, status: 'sent', error: null });
});

test('lists filter by number, peer and direction, page newest first, and keep workspaces apart', async (t) => {
  const one = await texting(t);
  const second = await textingSetup(service.pool, {
    workspace: {
      id: one.workspace.id,
      applicationId: one.applicationId,
      externalWorkspaceId: one.workspace.externalWorkspaceId,
    },
  });
  const campaign = await service.request('PATCH', `/api/v1/numbers/${second.number.id}`, {
    auth: one.apiKey,
    workspaceId: one.workspace.id,
    body: { textingRegistration: { campaignId: 'C1' } },
  });
  t.is(campaign.status, 200, campaign.text);
  await inTransaction(service.pool, (db) => decideTextingRegistration(db, second.number.e164, 'approved'));
  const [alice, bob] = [newPeer(), newPeer()];
  const ids: string[] = [];
  for (const [from, to] of [
    [one.number.e164, alice],
    [one.number.e164, bob],
    [second.number.e164, alice],
  ] as const) {
    const sent = await one.send({ from, to, text: `hello ${to}` });
    t.is(sent.status, 202, sent.text);
    ids.push(sent.body.id);
  }
  const inbound = await recordInboundMessage(service.pool, {
    workspace: {
      id: one.workspace.id,
      applicationId: one.applicationId,
      externalWorkspaceId: one.workspace.externalWorkspaceId,
    },
    numberId: one.number.id,
    from: alice,
    to: one.number.e164,
    text: 'STOPPING BY',
    segments: 1,
  });
  ids.push(inbound.id);
  const list = async (query: string) => {
    const answer = await one.get(`?${query}`);
    t.is(answer.status, 200, answer.text);
    return answer.body as { data: { id: string }[]; nextCursor: string | null };
  };
  const idsOf = (page: { data: { id: string }[] }) => page.data.map((message) => message.id);
  const [toAlice, toBob, fromSecond, fromAlice] = ids as [string, string, string, string];
  t.deepEqual(idsOf(await list('')), [fromAlice, fromSecond, toBob, toAlice]);
  t.deepEqual(idsOf(await list(`phoneNumberId=${one.number.id}`)), [fromAlice, toBob, toAlice]);
  t.deepEqual(idsOf(await list(`number=${encodeURIComponent(one.number.e164)}`)), [fromAlice, toBob, toAlice]);
  t.deepEqual(idsOf(await list(`peer=${encodeURIComponent(alice)}`)), [fromAlice, fromSecond, toAlice]);
  t.deepEqual(idsOf(await list(`peer=${encodeURIComponent(alice)}&direction=inbound`)), [fromAlice]);
  t.deepEqual(idsOf(await list('direction=outbound')), [fromSecond, toBob, toAlice]);

  const first = await list('limit=3');
  t.deepEqual(idsOf(first), [fromAlice, fromSecond, toBob]);
  t.truthy(first.nextCursor);
  const next = await list(`limit=3&cursor=${encodeURIComponent(first.nextCursor as string)}`);
  t.deepEqual(idsOf(next), [toAlice]);
  t.is(next.nextCursor, null);
  isError(t, await one.get('?cursor=nonsense'), 400, 'invalid_cursor');
  isError(t, await one.get('?direction=sideways'), 400, 'invalid_request');
  isError(t, await one.get('?peer=alice'), 400, 'invalid_request');

  // Another application's workspace sees none of them, by list or by id; a user token of it neither.
  const other = await texting(t);
  t.deepEqual(idsOf((await other.get('')).body), []);
  isError(t, await other.get(`/${toAlice}`), 404, 'not_found');
  const otherToken = await userToken(service, other, ['messages:*']);
  isError(t, await other.get(`/${toAlice}`, otherToken), 404, 'not_found');
  // A user token of this workspace sees them; one without messages:* does not.
  const token = await userToken(service, one, ['messages:*']);
  const seen = await one.get(`/${toAlice}`, token);
  t.is(seen.status, 200, seen.text);
  const unscoped = await userToken(service, one, ['devices:*']);
  isError(t, await one.get('', unscoped), 403, 'insufficient_scope');
  isError(
    t,
    await one.send({ from: one.number.e164, to: bob, text: 'x' }, { auth: unscoped }),
    403,
    'insufficient_scope',
  );
});
