/**
 * MMS (docs/messaging.md, "MMS") through HTTP against PostgreSQL, with real HTTPS servers of the test CA as the media
 * host and as the carrier's media interface: operation 67 with mediaUrls (each fetched and checked: a good image, a
 * wrong type, bytes that are not the type said, too large, a redirect, a private address when private networks are
 * not allowed; nothing written on a refusal), the MMS sender (engine/messaging/mms.ts, driven here against the
 * service's database) posting to the carrier with its Basic credentials (sent, refused, retried after a 503, taken
 * again after its lease when its sender went silent), status callbacks, and inbound MMS posted by the carrier.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import test from 'ava';
import { addCarrier } from '../../core/carriers/carriers.ts';
import { mmsAccount, setCarrierMessaging } from '../../core/carriers/messaging.ts';
import { inTransaction } from '../../core/database.ts';
import { checkMedia, mediaDefaults } from '../../core/messages/media.ts';
import { mmsLeaseMs, openMmsQueue } from '../../core/messages/mms.ts';
import { isOptedOut } from '../../core/messages/opt-outs.ts';
import { claimNumber, decideTextingRegistration, importNumbers, updateNumber } from '../../core/numbers/numbers.ts';
import { loadSigningKeys, type SigningKeys } from '../../core/service-secret.ts';
import { MmsSender } from '../../engine/messaging/mms.ts';
import { newNumber } from '../helpers/messages.ts';
import { httpsServer, png, type Posted, serveMedia } from '../helpers/https-server.ts';
import { isError, request, startService, type TestService, workspaceWithUser } from '../helpers/service.ts';
import { until } from '../helpers/until.ts';

/** The media host: what each path serves. */
const mediaRequests: string[] = [];
let media: Awaited<ReturnType<typeof httpsServer>>;

/** The carrier's media interface: what it answers each MMS (by its text), and every POST it got. */
const posted: Posted[] = [];
const carrierAnswers = new Map<string, Array<{ status: number; body: unknown } | 'hang'>>();
let carrierSite: Awaited<ReturnType<typeof httpsServer>>;
const hanging: ServerResponse[] = [];

function serveCarrier(request: IncomingMessage, body: Buffer, response: ServerResponse) {
  let parsed: Posted['body'];
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    parsed = undefined;
  }
  posted.push({ path: request.url ?? '', authorization: request.headers.authorization, body: parsed });
  const answer = carrierAnswers.get(String(parsed?.text))?.shift() ?? { status: 200, body: { id: randomUUID() } };
  if (answer === 'hang') {
    hanging.push(response);
    return;
  }
  response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
}

let service: TestService;
let keys: SigningKeys;
let sender: MmsSender;
const senderLog: string[] = [];

test.before(async () => {
  media = await httpsServer((request, body, response) => serveMedia(mediaRequests, media, request, response));
  carrierSite = await httpsServer(serveCarrier);
  service = await startService({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, ['api']);
  keys = await loadSigningKeys(service.pool, undefined);
  sender = new MmsSender({
    queue: openMmsQueue(service.pool),
    account: (carrier) => mmsAccount(service.pool, keys.carrierSecrets, carrier),
    databaseUrl: service.databaseUrl,
    log: (message) => senderLog.push(message),
    timeoutMs: 3_000,
  });
  await sender.start();
});

test.after.always(async () => {
  for (const response of hanging) response.destroy();
  await sender?.close();
  await service?.close();
  await media?.close();
  await carrierSite?.close();
});

let peers = 0;
function newPeer(): string {
  peers += 1;
  return `+1415${String(3_000_000 + ((process.pid * 100 + peers) % 6_000_000)).padStart(7, '0')}`;
}

/** A workspace with an approved number (voice, sms, mms) on a carrier whose MMS URL is the test's carrier site. */
async function mmsSetup(options: { mmsUrl?: boolean } = {}) {
  const setup = await workspaceWithUser(service);
  const carrier = `mms-${randomUUID().slice(0, 8)}`;
  await addCarrier(service.pool, keys.carrierSecrets, { name: carrier, address: '192.0.2.10' });
  await setCarrierMessaging(service.pool, keys.carrierSecrets, carrier, {
    host: '192.0.2.10',
    systemId: 'switchbd',
    password: 'pw:7x',
    ...(options.mmsUrl === false ? {} : { mmsUrl: carrierSite.url(`/${carrier}/mms`) }),
  });
  const e164 = newNumber();
  await importNumbers(service.pool, carrier, [e164], ['voice', 'sms', 'mms']);
  const claimed = await claimNumber(service.pool, setup.workspace.id, e164, 'Front desk');
  if (claimed === undefined) throw new Error('not claimed');
  await updateNumber(service.pool, claimed.id, {
    name: claimed.name,
    voiceLane: claimed.voice_lane,
    campaignId: 'C1234567',
    textingRegistration: 'pending',
    emergencyAddress: null,
    routingPlanId: null,
  });
  await inTransaction(service.pool, (db) => decideTextingRegistration(db, e164, 'approved'));
  const send = (body: unknown) =>
    service.request('POST', '/api/v1/messages', { auth: setup.apiKey, workspaceId: setup.workspace.id, body });
  const get = (id: string) =>
    service.request('GET', `/api/v1/messages/${id}`, { auth: setup.apiKey, workspaceId: setup.workspace.id });
  const carrierPost = (path: string, body: unknown, auth: string | null = 'switchbd:pw:7x', localAddress?: string) =>
    request(service.url, 'POST', `/carriers/${carrier}${path}`, {
      body,
      idempotencyKey: null,
      headers: auth === null ? {} : { authorization: `Basic ${Buffer.from(auth).toString('base64')}` },
      ...(localAddress === undefined ? {} : { localAddress }),
    });
  return { ...setup, carrier, e164, numberId: claimed.id, send, get, carrierPost };
}

async function messagesOf(workspaceId: string) {
  const result = await service.pool.query('SELECT id FROM messages WHERE workspace_id = $1', [workspaceId]);
  return result.rowCount;
}

test('an MMS with a good image is checked, posted to the carrier with its Basic credentials, sent, delivered', async (t) => {
  const { e164, send, get, carrier, carrierPost } = await mmsSetup();
  const to = newPeer();
  const text = `Here is the cat ${randomUUID()}`;
  const carrierId = `mms-${randomUUID()}`;
  carrierAnswers.set(text, [{ status: 202, body: { id: carrierId } }]);
  const urls = [media.url('/cat.png'), media.url('/card.vcf')];
  const sent = await send({ from: e164, to, text, mediaUrls: urls });
  t.is(sent.status, 202, sent.text);
  t.like(sent.body, { direction: 'outbound', from: e164, to, text, segments: 1, status: 'sent', error: null });
  t.deepEqual(sent.body.media, [
    { url: urls[0], contentType: 'image/png', size: png.length },
    { url: urls[1], contentType: 'text/vcard', size: 24 },
  ]);
  const post = posted.find((one) => one.body?.text === text);
  t.is(post?.path, `/${carrier}/mms`);
  t.is(post?.authorization, `Basic ${Buffer.from('switchbd:pw:7x').toString('base64')}`);
  t.deepEqual(post?.body, {
    from: e164,
    to,
    text,
    media: [
      { url: urls[0], contentType: 'image/png' },
      { url: urls[1], contentType: 'text/vcard' },
    ],
  });
  const part = await service.pool.query(
    "SELECT channel, state, carrier_message_id FROM message_parts WHERE message_id = $1 AND direction = 'outbound'",
    [sent.body.id],
  );
  t.deepEqual(part.rows, [{ channel: 'mms', state: 'acknowledged', carrier_message_id: carrierId }]);

  // The carrier's status callback: its credentials first, then the delivery.
  isError(
    t,
    await carrierPost('/mms/status', { id: carrierId, status: 'delivered' }, 'switchbd:wrong'),
    401,
    'unauthorized',
  );
  const status = await carrierPost('/mms/status', { id: carrierId, status: 'delivered' });
  t.is(status.status, 204, status.text);
  const shown = await get(sent.body.id);
  t.is(shown.body.status, 'delivered');
  t.deepEqual(
    shown.body.statusHistory.map((change: { status: string }) => change.status),
    ['queued', 'sending', 'sent', 'delivered'],
  );
});

test('media refused: wrong type, bytes not of the type, too large, a redirect, a bad second URL; nothing written', async (t) => {
  const setup = await mmsSetup();
  const cases: Array<[string[], number, RegExp]> = [
    [[media.url('/page.html')], 0, /text\/html/],
    [[media.url('/fake.png')], 0, /not that image type/],
    [[media.url('/declared-big.jpg')], 0, /too large: 6 MB/],
    [[media.url('/endless.jpg')], 0, /too large: over the 5 MB limit/],
    [[media.url('/moved')], 0, /redirect \(HTTP 302\)/],
    [[media.url('/cat.png'), media.url('/missing.png')], 1, /HTTP 404/],
    [['http://localhost/cat.png'], 0, /must use https/],
  ];
  for (const [mediaUrls, index, why] of cases) {
    const answer = await setup.send({ from: setup.e164, to: newPeer(), text: 'look', mediaUrls });
    isError(t, answer, 422, 'invalid_media', mediaUrls.join(' '));
    t.is(answer.body.error.mediaIndex, index);
    t.true(answer.body.error.message.startsWith(`mediaUrls[${index}]`), answer.body.error.message);
    t.regex(answer.body.error.message, why);
  }
  t.is(await messagesOf(setup.workspace.id), 0, 'nothing written');
  await until('the endless download dropped', () => (mediaRequests.includes('/endless.jpg closed') ? true : undefined));
  t.false(
    posted.some((one) => one.body?.text === 'look'),
    'nothing posted to the carrier',
  );
});

test('without WEBHOOK_ALLOW_PRIVATE_NETWORKS a media URL on a private address is refused before any request', async (t) => {
  const before = mediaRequests.length;
  const settings = { ...mediaDefaults, allowPrivateNetworks: false };
  for (const url of [`https://127.0.0.1:${media.port()}/cat.png`, media.url('/cat.png')]) {
    const error = await t.throwsAsync(checkMedia([url], settings));
    t.regex(error?.message ?? '', /^mediaUrls\[0\] is refused: the URL must be on a public host/);
  }
  t.is(mediaRequests.length, before, 'the media host was not asked');
  // The same URL passes when private networks are allowed: the refusal is the address rule's.
  const allowed = await checkMedia([media.url('/cat.png')], { ...mediaDefaults, allowPrivateNetworks: true });
  t.is(allowed[0]?.size, png.length);
});

test('a number whose carrier has no MMS URL is 422 invalid_media and writes nothing', async (t) => {
  const setup = await mmsSetup({ mmsUrl: false });
  const answer = await setup.send({ from: setup.e164, to: newPeer(), text: 'hi', mediaUrls: [media.url('/cat.png')] });
  isError(t, answer, 422, 'invalid_media');
  t.regex(answer.body.error.message, /carrier takes no MMS/);
  t.is(await messagesOf(setup.workspace.id), 0);
  // Text alone still goes (as an SMS).
  const sms = await setup.send({ from: setup.e164, to: newPeer(), text: 'hi' });
  t.is(sms.status, 202, sms.text);
});

test('the carrier refusing an MMS (4xx) is 422 message_rejected with its error; a 503 is tried again', async (t) => {
  const setup = await mmsSetup();
  const refusedText = `refused ${randomUUID()}`;
  carrierAnswers.set(refusedText, [
    { status: 400, body: { error: { code: 'bad_recipient', message: 'no MMS there' } } },
  ]);
  const refused = await setup.send({
    from: setup.e164,
    to: newPeer(),
    text: refusedText,
    mediaUrls: [media.url('/cat.png')],
  });
  isError(t, refused, 422, 'message_rejected');
  t.regex(refused.body.error.message, /bad_recipient no MMS there/);
  const failed = await setup.get(refused.body.error.messageId);
  t.deepEqual(failed.body.error, { code: 'bad_recipient', message: 'no MMS there' });

  const retriedText = `retried ${randomUUID()}`;
  carrierAnswers.set(retriedText, [{ status: 503, body: {} }]);
  const retried = await setup.send({
    from: setup.e164,
    to: newPeer(),
    text: retriedText,
    mediaUrls: [media.url('/cat.png')],
  });
  t.is(retried.status, 202, retried.text);
  const done = await until('the retry sent', async () => {
    const shown = await setup.get(retried.body.id);
    return shown.body.status === 'sent' ? shown.body : undefined;
  });
  t.is(done.error, null);
  t.is(posted.filter((one) => one.body?.text === retriedText).length, 2, 'posted twice: a 503, then taken');
});

// Serial (ava runs serial tests before the others): its second taker, its clock ahead, would take any MMS due.
test.serial(
  'an MMS whose sender went silent mid-POST is taken again once its lease ran out, and sent once recorded',
  async (t) => {
    const setup = await mmsSetup();
    const text = `silent ${randomUUID()}`;
    carrierAnswers.set(text, ['hang', 'hang']);
    const sent = await setup.send({ from: setup.e164, to: newPeer(), text, mediaUrls: [media.url('/cat.png')] });
    t.is(sent.status, 202, sent.text);
    await until('the sender posted', () => (posted.some((one) => one.body?.text === text) ? true : undefined));
    // Another engine, its clock past the lease: it takes the MMS the first still holds (as after a crash).
    const later = openMmsQueue(service.pool, () => new Date(Date.now() + mmsLeaseMs + 1_000));
    const taken = await until('taken again', async () => {
      const parts = await later.take(10);
      return parts.find((part) => part.messageId === sent.body.id);
    });
    t.is(taken.attempts, 1, 'its second submission');
    await later.sent(taken.id, 'carrier-42');
    const shown = await setup.get(sent.body.id);
    t.is(shown.body.status, 'sent');
    // The first sender's POST times out later: its retry changes nothing of a part already acknowledged.
    await until('the first POST gave up', () =>
      senderLog.some((line) => line.includes(sent.body.id)) ? true : undefined,
    );
    const part = await service.pool.query('SELECT state, carrier_message_id FROM message_parts WHERE message_id = $1', [
      sent.body.id,
    ]);
    t.deepEqual(part.rows, [{ state: 'acknowledged', carrier_message_id: 'carrier-42' }]);
  },
);

test('an inbound MMS posted by the carrier is a message received with its media and message.received', async (t) => {
  const setup = await mmsSetup();
  const from = newPeer();
  const body = {
    from,
    to: setup.e164,
    text: 'Look!',
    media: [{ url: 'https://carrier.example/m/1.jpg', contentType: 'image/jpeg' }],
  };
  const answer = await setup.carrierPost('/mms', body);
  t.is(answer.status, 200, answer.text);
  const shown = await setup.get(answer.body.id);
  t.like(shown.body, { direction: 'inbound', from, to: setup.e164, text: 'Look!', status: 'received', segments: 1 });
  t.deepEqual(shown.body.media, [{ url: 'https://carrier.example/m/1.jpg', contentType: 'image/jpeg', size: 0 }]);
  const events = await service.pool.query<{ payload: string }>(
    "SELECT payload FROM events WHERE stream_key = $1 AND type = 'message.received'",
    [`number:${setup.numberId}`],
  );
  t.is(events.rows.length, 1);
  t.deepEqual(JSON.parse(events.rows[0]?.payload ?? '{}').message.media, shown.body.media);
  // The carrier posting it again (its answer lost) gets the same message: no second one, no second event.
  const again = await setup.carrierPost('/mms', body);
  t.is(again.status, 200, again.text);
  t.is(again.body.id, answer.body.id, 'the repeat is the first message');

  isError(t, await setup.carrierPost('/mms', { ...body, to: newNumber() }), 404, 'not_found', 'unknown number');
  isError(t, await setup.carrierPost('/mms', { ...body, to: 'nope' }), 400, 'invalid_request', 'bad to');
  isError(
    t,
    await setup.carrierPost('/mms', { ...body, media: [{ url: 'x', contentType: 'text/html' }] }),
    400,
    'invalid_request',
  );
  isError(t, await setup.carrierPost('/mms', { from, to: setup.e164, text: '', media: [] }), 400, 'invalid_request');
  isError(t, await setup.carrierPost('/mms', body, 'switchbd:wrong'), 401, 'unauthorized', 'wrong password');
  isError(t, await setup.carrierPost('/mms', body, null), 401, 'unauthorized', 'no credentials');
  const otherCarrier = await request(service.url, 'POST', `/carriers/no-such-carrier/mms`, {
    body,
    idempotencyKey: null,
    headers: { authorization: `Basic ${Buffer.from('switchbd:pw:7x').toString('base64')}` },
  });
  isError(t, otherCarrier, 401, 'unauthorized', 'unknown carrier');
  const garbage = await request(service.url, 'POST', `/carriers/${setup.carrier}/mms`, {
    rawBody: '{"from": ',
    idempotencyKey: null,
    headers: { authorization: `Basic ${Buffer.from('switchbd:pw:7x').toString('base64')}` },
  });
  isError(t, garbage, 400, 'invalid_request', 'not JSON');
  const count = await service.pool.query('SELECT count(*)::int AS n FROM messages WHERE workspace_id = $1', [
    setup.workspace.id,
  ]);
  t.is(count.rows[0].n, 1, 'only the good one was recorded');
});

test('password guessing on the carrier interface is limited per address and per carrier; others still post', async (t) => {
  const victim = await mmsSetup();
  const other = await mmsSetup();
  const body = { from: newPeer(), to: victim.e164, text: 'Hi', media: [] };
  // A guesser from 127.0.0.2: ten wrong passwords are answered 401, then every request of that address is 429 with
  // Retry-After until the minute ends, before any database work, the right password included.
  const statuses: number[] = [];
  for (let index = 0; index < 60; index += 1) {
    statuses.push((await victim.carrierPost('/mms', body, `switchbd:g${index}`, '127.0.0.2')).status);
  }
  t.deepEqual(statuses.slice(0, 10), Array(10).fill(401));
  t.deepEqual(statuses.slice(10), Array(50).fill(429));
  const locked = await victim.carrierPost('/mms', body, 'switchbd:pw:7x', '127.0.0.2');
  isError(t, locked, 429, 'rate_limited', 'the right password while the address is locked out');
  const retryAfter = Number(locked.headers.get('retry-after'));
  t.true(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${locked.headers.get('retry-after')}`);
  isError(t, await other.carrierPost('/mms', body, 'switchbd:pw:7x', '127.0.0.2'), 429, 'rate_limited', 'any carrier');
  isError(
    t,
    await victim.carrierPost('/mms/status', { id: 'x', status: 'delivered' }, 'switchbd:pw:7x', '127.0.0.2'),
    429,
    'rate_limited',
    'status callbacks too',
  );
  // The guessed carrier is held back from any address for the window (the guesser may spread over many); another
  // carrier from another address posts as before.
  isError(t, await victim.carrierPost('/mms', body, 'switchbd:pw:7x', '127.0.0.3'), 429, 'rate_limited', 'carrier');
  const posted = await other.carrierPost('/mms', { ...body, to: other.e164 }, 'switchbd:pw:7x', '127.0.0.3');
  t.is(posted.status, 200, posted.text);
  t.is(await messagesOf(victim.workspace.id), 0, 'nothing of the guesser was recorded');
  // Made-up carrier names from one address are limited by the address alike.
  const names: number[] = [];
  for (let index = 0; index < 12; index += 1) {
    const answer = await request(service.url, 'POST', `/carriers/made-up-${index}/mms`, {
      body,
      idempotencyKey: null,
      headers: { authorization: `Basic ${Buffer.from('switchbd:pw:7x').toString('base64')}` },
      localAddress: '127.0.0.4',
    });
    names.push(answer.status);
  }
  t.deepEqual(names, [...Array(10).fill(401), 429, 429]);
  const metrics = await service.request('GET', '/metrics');
  t.regex(metrics.text, /switchboard_carrier_http_logins_total\{outcome="limited"\} \d+/);
});

test('an inbound MMS whose text is STOP opts the peer out and is answered; START opts back in', async (t) => {
  const setup = await mmsSetup();
  const from = newPeer();
  const media = [{ url: 'https://carrier.example/m/2.jpg', contentType: 'image/jpeg' }];
  const stop = await setup.carrierPost('/mms', { from, to: setup.e164, text: ' Stop. ', media });
  t.is(stop.status, 200, stop.text);
  t.true(await isOptedOut(service.pool, setup.numberId, from), 'opted out');
  const replies = () =>
    service.pool.query<{ text: string }>(
      "SELECT text FROM messages WHERE phone_number_id = $1 AND direction = 'outbound' AND to_number = $2 ORDER BY created_at",
      [setup.numberId, from],
    );
  t.is((await replies()).rows.length, 1, 'the confirmation goes out to a peer now opted out');
  const start = await setup.carrierPost('/mms', { from, to: setup.e164, text: 'START', media });
  t.is(start.status, 200, start.text);
  t.false(await isOptedOut(service.pool, setup.numberId, from), 'opted back in');
  t.is((await replies()).rows.length, 2);
});

test('the MMS URL is checked when set: https only', async (t) => {
  const carrier = `mms-${randomUUID().slice(0, 8)}`;
  await addCarrier(service.pool, keys.carrierSecrets, { name: carrier, address: '192.0.2.10' });
  const settings = { host: '192.0.2.10', systemId: 'switchbd', password: 'pw' };
  await t.throwsAsync(
    setCarrierMessaging(service.pool, keys.carrierSecrets, carrier, {
      ...settings,
      mmsUrl: 'http://carrier.example/mms',
    }),
    {
      message: /--mms-url must use https/,
    },
  );
  await t.throwsAsync(
    setCarrierMessaging(service.pool, keys.carrierSecrets, carrier, {
      ...settings,
      mmsUrl: 'https://u:p@carrier.example/mms',
    }),
    {
      message: /--mms-url must not carry a user name/,
    },
  );
  const set = await setCarrierMessaging(service.pool, keys.carrierSecrets, carrier, {
    ...settings,
    mmsUrl: 'https://carrier.example/mms',
  });
  t.is(set.messaging?.mmsUrl, 'https://carrier.example/mms');
  t.deepEqual(await mmsAccount(service.pool, keys.carrierSecrets, carrier), {
    url: 'https://carrier.example/mms',
    systemId: 'switchbd',
    password: 'pw',
  });
});
