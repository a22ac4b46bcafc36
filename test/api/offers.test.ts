/**
 * Operations 63-65 through HTTP (docs/phones.md, "Offers"): offers made by `makeOffers` (as the ring step will) on
 * calls written the way the engine writes them (core/calls/calls.ts); the long-poll answering at once, woken by an
 * offer or a withdrawal, and holding no database connection while hundreds wait; the first accept of a call wins;
 * call_ended, call_conflict, device_busy; another person's offer is 404; malformed SDP answers are 400.
 *
 * One service for the file (API role only), with a pool of 4 connections: long-polls that held one each could not
 * all wait. The tests run one at a time: they count the service's waiting long-polls (its metrics) to know theirs
 * wait.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { type CallRow, endCall } from '../../core/calls/calls.ts';
import { ConfigError, loadConfig } from '../../core/config.ts';
import { setDeviceBusy } from '../../core/devices/devices.ts';
import {
  callOffers,
  expireOffers,
  makeOffers,
  type NewOffers,
  withdrawLapsedOffers,
  withdrawOffers,
} from '../../core/devices/offers.ts';
import {
  type Answer,
  isError,
  liveCall,
  serviceForFile,
  startService,
  userToken as sessionToken,
  workspaceWithUser,
  type WorkspaceSetup,
} from '../helpers/service.ts';

const poolSize = 4;
const service = serviceForFile(test, { DATABASE_POOL_SIZE: String(poolSize) });

const sdpOffer = [
  'v=0',
  'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'm=audio 9 UDP/TLS/RTP/SAVPF 111 0',
  'c=IN IP4 0.0.0.0',
  'a=rtpmap:111 opus/48000/2',
  'a=rtpmap:0 PCMU/8000',
  'a=setup:actpass',
  'a=sendrecv',
  '',
].join('\r\n');
const sdpAnswer = sdpOffer.replace('4611731400430051336', '8402283922311234567').replace('actpass', 'active');

/** A user token of the setup's workspace with devices:* (the user is created first when it is not alice). */
const userToken = (setup: WorkspaceSetup, externalUserId = 'alice') =>
  sessionToken(service, setup, ['devices:*'], externalUserId);

/** A browser device of the token's person, its presence lease live (registration starts it). */
async function device(token: string, kind = 'browser'): Promise<string> {
  const answer = await service.request('POST', '/api/v1/devices', { auth: token, body: { kind } });
  if (answer.status !== 201) throw new Error(`device: ${answer.status} ${answer.text}`);
  return answer.body.id as string;
}

let calls = 0;

/** A live call of the setup's workspace, written as the engine writes one. */
function newCall(setup: WorkspaceSetup): Promise<CallRow> {
  calls += 1;
  return liveCall(service.pool, setup, { from: `+1415555${String(1000 + calls).slice(-4)}` });
}

/** Offers the call to the devices, as the ring step does. */
function offer(setup: WorkspaceSetup, call: CallRow, deviceIds: string[], more: Partial<NewOffers> = {}) {
  return makeOffers(service.pool, {
    callId: call.id,
    workspaceId: setup.workspace.id,
    ringSeq: 1,
    devices: deviceIds.map((deviceId) => ({ deviceId, sdpOffer })),
    expiresAt: new Date(Date.now() + 60_000),
    ...more,
  });
}

function poll(token: string, deviceId: string, query = ''): Promise<Answer> {
  return service.request('GET', `/api/v1/devices/${deviceId}/offers${query}`, { auth: token });
}

function accept(token: string, offerId: string, sdp: unknown = sdpAnswer, idempotencyKey?: string): Promise<Answer> {
  return service.request('POST', `/api/v1/offers/${offerId}/accept`, {
    auth: token,
    body: { sdp },
    ...(idempotencyKey ? { idempotencyKey } : {}),
  });
}

function decline(token: string, offerId: string): Promise<Answer> {
  return service.request('POST', `/api/v1/offers/${offerId}/decline`, { auth: token });
}

const offerIds = (answer: Answer) => (answer.body.data as { id: string }[]).map((item) => item.id).sort();

/** Resolves once at least `count` long-polls wait in the service (its switchboard_offer_long_polls gauge). */
async function pollsWaiting(count: number): Promise<void> {
  while ((await pollsWaitingNow()) < count);
}

/** The long-polls waiting in the service now (its metrics). */
async function pollsWaitingNow(): Promise<number> {
  const metrics = await service.request('GET', '/metrics');
  return Number(/^switchboard_offer_long_polls (\d+)$/m.exec(metrics.text)?.[1] ?? -1);
}

/** The long-polls answered so far, by what ended their wait (the service's metrics). */
async function pollsAnswered(): Promise<{ change: number; wait: number }> {
  const metrics = (await service.request('GET', '/metrics')).text;
  const count = (by: string) =>
    Number(
      new RegExp(`^switchboard_offer_long_polls_answered_total\\{by="${by}"\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0,
    );
  return { change: count('change'), wait: count('wait') };
}

/** The long-polls answered between two readings of `pollsAnswered`. */
function since(before: { change: number; wait: number }, after: { change: number; wait: number }) {
  return { change: after.change - before.change, wait: after.wait - before.wait };
}

/** The service's own connections to its database (application_name switchboard), by state. */
async function serviceConnections() {
  const result = await service.pool.query<{ state: string | null; count: number }>(
    `SELECT state, count(*)::int AS count FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'switchboard' GROUP BY state`,
  );
  return Object.fromEntries(result.rows.map((row) => [row.state ?? 'none', row.count])) as Record<string, number>;
}

test.serial("each offer carries its target's ring mode; an offer made without one rings", async (t) => {
  const setup = await workspaceWithUser(service);
  const token = await userToken(setup);
  const [loud, muted] = [await device(token), await device(token)];
  const call = await newCall(setup);
  await offer(setup, call, [], {
    devices: [
      { deviceId: loud, sdpOffer },
      { deviceId: muted, sdpOffer, mode: 'muted' },
    ],
  });
  const modeOf = async (deviceId: string) => {
    const answer = await poll(token, deviceId, '?wait=0');
    t.is(answer.status, 200, answer.text);
    return (answer.body.data as { mode: string }[]).map((offered) => offered.mode);
  };
  t.deepEqual(await modeOf(loud), ['ring']);
  t.deepEqual(await modeOf(muted), ['muted']);
});

test.serial(
  'a waiting offer answers at once with its call, the SDP offer, the ICE servers and its expiry; wait=0 answers at once',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const phone = await device(token);
    const quiet = await device(token);
    const call = await newCall(setup);
    const expiresAt = new Date(Date.now() + 30_000);
    const made = await offer(setup, call, [phone], {
      ringSeq: 2,
      expiresAt,
      devices: [{ deviceId: phone, sdpOffer, mode: 'silent' }],
    });
    t.is(made.offers.length, 1);
    t.deepEqual(made.notOffered, []);

    const counted = await pollsAnswered();
    const answer = await poll(token, phone);
    t.is(answer.status, 200, answer.text);
    t.deepEqual(since(counted, await pollsAnswered()), { change: 1, wait: 0 }, 'answered at once, not after its wait');
    t.deepEqual(answer.body, {
      data: [
        {
          id: made.offers[0]?.id,
          callId: call.id,
          deviceId: phone,
          ringSeq: 2,
          mode: 'silent',
          from: call.from_number,
          to: call.to_number,
          sdp: sdpOffer,
          state: 'offered',
          expiresAt: expiresAt.toISOString(),
          createdAt: made.offers[0]?.created_at.toISOString(),
          decidedAt: null,
          // ICE_SERVERS unset: host candidates only.
          iceServers: [],
        },
      ],
      nextCursor: null,
    });

    const before = await pollsAnswered();
    const empty = await poll(token, quiet, '?wait=0');
    t.is(empty.status, 200, empty.text);
    t.deepEqual(empty.body, { data: [], nextCursor: null });
    t.deepEqual(since(before, await pollsAnswered()), { change: 0, wait: 0 }, 'wait=0 is no long-poll');

    // With nothing waiting, a short wait ends empty after it.
    const beforeWait = await pollsAnswered();
    const waited = Date.now();
    const after = await poll(token, quiet, '?wait=1');
    t.deepEqual(since(beforeWait, await pollsAnswered()), { change: 0, wait: 1 });
    t.deepEqual(after.body, { data: [], nextCursor: null });
    t.true(Date.now() - waited >= 950, `answered after ${Date.now() - waited} ms`);

    // Bad waits and unknown parameters are 400 invalid_request.
    isError(t, await poll(token, phone, '?wait=11'), 400, 'invalid_request');
    isError(t, await poll(token, phone, '?wait=-1'), 400, 'invalid_request');
    isError(t, await poll(token, phone, '?known=abc'), 400, 'invalid_request');
    isError(t, await poll(token, phone, '?since=1'), 400, 'invalid_request');
  },
);

test.serial(
  '500 long-polls wait with no database connection held, and an offer made after they started wakes them at once',
  async (t) => {
    const setup = await workspaceWithUser(service);
    // 50 people with 5 phones each, every phone polling twice (within the caps: 3 a device, 10 a person).
    const people = await Promise.all(
      Array.from({ length: 50 }, async (_, index) => {
        const token = await userToken(setup, index === 0 ? 'alice' : `person-${index}`);
        const phones = await Promise.all(Array.from({ length: 5 }, () => device(token)));
        return { token, phones };
      }),
    );
    const call = await newCall(setup);

    const started = Date.now();
    const polls = people.flatMap(({ token, phones }) =>
      phones.flatMap((phone) => [1, 2].map(async () => ({ phone, answer: await poll(token, phone, '?wait=10') }))),
    );
    await pollsWaiting(500);
    // Waiting, they hold no connection: the service's pool (4) is all it has, nothing is inside a transaction, and
    // another request is served while they wait.
    const connections = await serviceConnections();
    const total = Object.values(connections).reduce((sum, count) => sum + count, 0);
    t.true(total <= poolSize, `service connections while 500 wait: ${JSON.stringify(connections)}`);
    t.falsy(connections['idle in transaction'], JSON.stringify(connections));
    const listed = await service.request('GET', '/api/v1/devices', { auth: people[0]?.token ?? '' });
    t.is(listed.status, 200, listed.text);
    t.is(await pollsWaitingNow(), 500, 'the request was answered while the 500 still waited');

    const before = await pollsAnswered();
    const offered = Date.now();
    const made = await offer(
      setup,
      call,
      people.flatMap(({ phones }) => phones),
    );
    const offerOf = new Map(made.offers.map((item) => [item.device_id, item.id]));
    const answers = await Promise.all(polls);
    const woken = Date.now();
    // Each was woken by the offer, none let go by its wait running out.
    t.deepEqual(since(before, await pollsAnswered()), { change: 500, wait: 0 });
    for (const { phone, answer } of answers) {
      t.is(answer.status, 200, answer.text);
      t.deepEqual(offerIds(answer), [offerOf.get(phone)]);
    }
    t.log(
      `500 long-polls waiting ${offered - started} ms after the first was sent, woken ${woken - offered} ms after ` +
        `the offer; connections while waiting: ${total}`,
    );
  },
);

test.serial(
  'long-polls wait at most 3 a device and 10 a person: one more is 409 limit_exceeded with Retry-After until one ends',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const phones = [await device(token), await device(token), await device(token), await device(token)];
    const [first, second, third, fourth] = phones as [string, string, string, string];
    const waiting = [first, first, first].map((phone) => poll(token, phone, '?wait=10'));
    await pollsWaiting(3);
    const refused = await poll(token, first, '?wait=10');
    isError(t, refused, 409, 'limit_exceeded', 'a fourth on one device');
    t.regex(refused.body.error.message, /3 .*this device/);
    const retryAfter = Number(refused.headers.get('retry-after'));
    t.true(retryAfter >= 1 && retryAfter <= 10, `Retry-After ${refused.headers.get('retry-after')}`);
    // A read that does not wait needs no place.
    t.is((await poll(token, first, '?wait=0')).status, 200);

    waiting.push(
      ...[second, second, second, third, third, third, fourth].map((phone) => poll(token, phone, '?wait=10')),
    );
    await pollsWaiting(10);
    const person = await poll(token, fourth, '?wait=10');
    isError(t, person, 409, 'limit_exceeded', 'an eleventh of one person');
    t.regex(person.body.error.message, /10 .*person/);
    // Another person's polls wait as ever.
    const bob = await userToken(setup, 'bob');
    const bobs = await poll(bob, await device(bob), '?wait=1');
    t.is(bobs.status, 200, bobs.text);

    // The first phone's polls end (an offer wakes them): their places are free again.
    const call = await newCall(setup);
    const made = await offer(setup, call, [first]);
    for (const answer of await Promise.all(waiting.slice(0, 3))) t.deepEqual(offerIds(answer), [made.offers[0]?.id]);
    const freed = await poll(token, fourth, '?wait=1');
    t.is(freed.status, 200, freed.text);
    // The others end with an offer to their phones.
    await offer(setup, await newCall(setup), [second, third, fourth]);
    for (const answer of await Promise.all(waiting.slice(3))) t.is(answer.status, 200, answer.text);
  },
);

test.serial(
  'two devices of one user: the first accept wins, the other is withdrawn and its long-poll wakes without it; a second accept is 409 call_conflict',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const desk = await device(token);
    const laptop = await device(token);
    const call = await newCall(setup);
    const made = await offer(setup, call, [desk, laptop]);
    t.is(made.offers.length, 2);
    const deskOffer = made.offers.find((item) => item.device_id === desk)?.id as string;
    const laptopOffer = made.offers.find((item) => item.device_id === laptop)?.id as string;

    // The laptop rings: it polls again, saying what it shows, and waits for a change.
    const shown = await poll(token, laptop);
    t.deepEqual(offerIds(shown), [laptopOffer]);
    const ringing = poll(token, laptop, `?known=${laptopOffer}`);
    await pollsWaiting(1);

    const counted = await pollsAnswered();
    const won = await accept(token, deskOffer);
    t.is(won.status, 200, won.text);
    t.is(won.body.state, 'accepted');
    t.is(won.body.id, deskOffer);
    const gone = await ringing;
    t.is(gone.status, 200, gone.text);
    t.deepEqual(gone.body.data, []);
    t.deepEqual(since(counted, await pollsAnswered()), { change: 1, wait: 0 }, 'the laptop heard of it at once');

    isError(t, await accept(token, laptopOffer), 409, 'call_conflict');
    isError(t, await accept(token, deskOffer), 409, 'call_conflict', 'accepting again with a new key');
    isError(t, await decline(token, deskOffer), 409, 'call_conflict', 'declining an accepted offer');

    const stored = await callOffers(service.pool, call.id);
    t.deepEqual(
      stored.map((row) => [row.device_id, row.state, row.sdp_answer]).sort(),
      [
        [desk, 'accepted', sdpAnswer],
        [laptop, 'withdrawn', null],
      ].sort(),
    );
    const devices = await service.request('GET', '/api/v1/devices', { auth: token });
    const busy = Object.fromEntries((devices.body.data as { id: string; busy: boolean }[]).map((d) => [d.id, d.busy]));
    t.deepEqual(busy, { [desk]: true, [laptop]: false });
  },
);

test.serial(
  'a replayed accept answers as the first did; concurrent accepts of one call: exactly one wins',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const phones = [await device(token), await device(token), await device(token)];
    const call = await newCall(setup);
    const made = await offer(setup, call, phones);
    const answers = await Promise.all(made.offers.map((item) => accept(token, item.id)));
    t.deepEqual(answers.map((answer) => answer.status).sort(), [200, 409, 409]);
    for (const answer of answers.filter((item) => item.status === 409)) isError(t, answer, 409, 'call_conflict');

    const second = await newCall(setup);
    const [free] = (await offer(setup, second, [await device(token)])).offers;
    const key = randomUUID();
    const first = await accept(token, free?.id as string, sdpAnswer, key);
    const replay = await accept(token, free?.id as string, sdpAnswer, key);
    t.is(first.status, 200, first.text);
    t.is(replay.status, 200, replay.text);
    t.is(replay.headers.get('idempotent-replayed'), 'true');
    t.deepEqual(replay.body, first.body);
  },
);

test.serial(
  'accept on an ended call is 409 call_ended; on a declined, withdrawn or expired offer 409 call_conflict; busy elsewhere 409 device_busy',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const phone = await device(token);

    const ended = await newCall(setup);
    const [endedOffer] = (await offer(setup, ended, [phone])).offers;
    await endCall(service.pool, ended.id, 'caller_hangup');
    isError(t, await accept(token, endedOffer?.id as string), 409, 'call_ended');
    // Its offer no longer waits.
    t.deepEqual((await poll(token, phone, '?wait=0')).body.data, []);

    const declined = await newCall(setup);
    const [declinedOffer] = (await offer(setup, declined, [phone])).offers;
    const answer = await decline(token, declinedOffer?.id as string);
    t.is(answer.status, 200, answer.text);
    t.is(answer.body.state, 'declined');
    t.not(answer.body.decidedAt, null);
    // Declining again answers it as it is.
    t.is((await decline(token, declinedOffer?.id as string)).body.state, 'declined');
    isError(t, await accept(token, declinedOffer?.id as string), 409, 'call_conflict');

    const withdrawnCall = await newCall(setup);
    const [withdrawnOffer] = (await offer(setup, withdrawnCall, [phone])).offers;
    const notices = await withdrawOffers(service.pool, withdrawnCall.id);
    t.deepEqual(notices, [
      { deviceId: phone, callId: withdrawnCall.id, offerId: withdrawnOffer?.id, state: 'withdrawn' },
    ]);
    isError(t, await accept(token, withdrawnOffer?.id as string), 409, 'call_conflict');

    const expiring = await newCall(setup);
    const [expiredOffer] = (await offer(setup, expiring, [phone], { expiresAt: new Date(Date.now() - 1_000) })).offers;
    t.deepEqual((await poll(token, phone, '?wait=0')).body.data, [], 'an expired offer does not wait');
    isError(t, await accept(token, expiredOffer?.id as string), 409, 'call_conflict');
    const expired = await expireOffers(service.pool);
    t.true(expired.some((notice) => notice.offerId === expiredOffer?.id && notice.state === 'expired'));

    // A device on another call cannot take this one.
    const other = await newCall(setup);
    const current = await newCall(setup);
    const [currentOffer] = (await offer(setup, current, [phone])).offers;
    await setDeviceBusy(service.pool, phone, other.id);
    isError(t, await accept(token, currentOffer?.id as string), 409, 'device_busy');
    await setDeviceBusy(service.pool, phone, null);
    t.is((await accept(token, currentOffer?.id as string)).status, 200);
  },
);

test.serial("another person's offer or device is 404; malformed SDP answers are 400 invalid_request", async (t) => {
  const setup = await workspaceWithUser(service);
  const alice = await userToken(setup);
  const bob = await userToken(setup, 'bob');
  const phone = await device(alice);
  const call = await newCall(setup);
  const [made] = (await offer(setup, call, [phone])).offers;
  const offerId = made?.id as string;

  isError(t, await poll(bob, phone), 404, 'not_found');
  isError(t, await accept(bob, offerId), 404, 'not_found');
  isError(t, await decline(bob, offerId), 404, 'not_found');
  isError(t, await accept(alice, randomUUID()), 404, 'not_found');
  // An application key takes none of the three.
  const key = await service.request('GET', `/api/v1/devices/${phone}/offers`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.true(key.status === 401 || key.status === 403, key.text);

  for (const [label, sdp] of [
    ['empty', ''],
    ['not SDP', 'hello'],
    ['no v=0 first', sdpAnswer.replace('v=0\r\n', '')],
    ['no audio m-line', sdpAnswer.replace('m=audio', 'm=video')],
    ['no origin', sdpAnswer.replace(/o=[^\r]*\r\n/, '')],
    ['a line that is not type=value', `${sdpAnswer}garbage\r\n`],
    ['too long', `${sdpAnswer}${'a=x\r\n'.repeat(10_000)}`],
    ['a number', 42],
  ] as const) {
    isError(t, await accept(alice, offerId, sdp), 400, 'invalid_request', label);
  }
  isError(
    t,
    await service.request('POST', `/api/v1/offers/${offerId}/accept`, { auth: alice, body: {} }),
    400,
    'invalid_request',
  );
  // None of them touched the offer.
  t.deepEqual(offerIds(await poll(alice, phone)), [offerId]);
});

test.serial(
  'devices without a live presence lease, busy, of another workspace or sip are not offered; a lapsed lease withdraws',
  async (t) => {
    const setup = await workspaceWithUser(service);
    const token = await userToken(setup);
    const live = await device(token);
    const lapsed = await device(token);
    const busy = await device(token);
    const desk = await device(token, 'sip');
    const elsewhere = await workspaceWithUser(service);
    const stranger = await device(await userToken(elsewhere));
    await service.pool.query(
      "UPDATE devices SET presence_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1",
      [lapsed],
    );
    const call = await newCall(setup);
    const other = await newCall(setup);
    await setDeviceBusy(service.pool, busy, other.id);

    const made = await offer(setup, call, [live, lapsed, busy, desk, stranger]);
    t.deepEqual(
      made.offers.map((row) => row.device_id),
      [live],
    );
    t.deepEqual(made.notOffered.sort(), [lapsed, busy, desk, stranger].sort());

    // The live device's lease lapses while its offer rings: the sweep withdraws it and its long-poll hears so.
    const ringing = poll(token, live, `?known=${made.offers[0]?.id}`);
    await pollsWaiting(1);
    await service.pool.query(
      "UPDATE devices SET presence_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1",
      [live],
    );
    const withdrawn = await withdrawLapsedOffers(service.pool);
    t.true(withdrawn.some((notice) => notice.offerId === made.offers[0]?.id && notice.state === 'withdrawn'));
    t.deepEqual((await ringing).body.data, []);

    // An ended call offers nobody.
    await endCall(service.pool, other.id, 'caller_hangup');
    const none = await offer(setup, other, [live]);
    t.deepEqual(none, { offers: [], notOffered: [live] });
  },
);

test.serial(
  'with ICE_SERVERS set, each polled offer carries them; nothing of them is stored, logged or in the accept answer',
  async (t) => {
    const iceServers = [
      { urls: 'stun:stun.example.net:3478' },
      {
        urls: ['turn:turn.example.net:3478?transport=udp', 'turns:turn.example.net:5349'],
        username: 'switchboard',
        credential: 'turn-credential-7f3a',
      },
    ];
    const withIce = await startService({ ICE_SERVERS: JSON.stringify(iceServers) }, ['api']);
    t.teardown(() => withIce.close());
    const setup = await workspaceWithUser(withIce);
    const session = await withIce.request('POST', '/api/v1/sessions', {
      auth: setup.apiKey,
      body: {
        externalWorkspaceId: setup.workspace.externalWorkspaceId,
        externalUserId: 'alice',
        scopes: ['devices:*'],
      },
    });
    t.is(session.status, 201, session.text);
    const token = session.body.token as string;
    const registered = await withIce.request('POST', '/api/v1/devices', { auth: token, body: { kind: 'browser' } });
    t.is(registered.status, 201, registered.text);
    const phone = registered.body.id as string;
    const call = await liveCall(withIce.pool, setup);
    const made = await makeOffers(withIce.pool, {
      callId: call.id,
      workspaceId: setup.workspace.id,
      ringSeq: 1,
      devices: [{ deviceId: phone, sdpOffer }],
      expiresAt: new Date(Date.now() + 60_000),
    });
    t.is(made.offers.length, 1);

    const polled = await withIce.request('GET', `/api/v1/devices/${phone}/offers`, { auth: token });
    t.is(polled.status, 200, polled.text);
    t.is(polled.body.data.length, 1);
    t.deepEqual(polled.body.data[0].iceServers, iceServers);
    t.is(polled.body.data[0].id, made.offers[0]?.id);

    // The accept's answer is kept for replays: it carries no ICE servers.
    const accepted = await withIce.request('POST', `/api/v1/offers/${made.offers[0]?.id}/accept`, {
      auth: token,
      body: { sdp: sdpAnswer },
    });
    t.is(accepted.status, 200, accepted.text);
    t.false('iceServers' in accepted.body);

    // Never stored: no row of the database holds the credential, and no log line names it.
    const tables = await withIce.pool.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
    );
    for (const { table_name: table } of tables.rows) {
      const found = await withIce.pool.query(
        `SELECT 1 FROM ${JSON.stringify(table)} AS row WHERE row::text LIKE '%turn-credential-7f3a%' LIMIT 1`,
      );
      t.is(found.rowCount, 0, table);
    }
    t.false(
      withIce.logs.some((line) => line.includes('turn-credential-7f3a')),
      'the credential is in no log line',
    );
  },
);

test('ICE_SERVERS is checked at start: each refusal names the setting and never echoes the value', (t) => {
  const refused = [
    'not json',
    '{"urls":"stun:a"}',
    '[1]',
    '[{}]',
    '[{"urls":[]}]',
    '[{"urls":"http://a"}]',
    '[{"urls":"stun:a","extra":1}]',
    '[{"urls":"turn:a","username":"u"}]',
    '[{"urls":"turn:a","username":"u","credential":7}]',
    JSON.stringify(Array.from({ length: 17 }, () => ({ urls: 'stun:a' }))),
  ];
  for (const value of refused) {
    const error = t.throws(() => loadConfig({ ICE_SERVERS: value }), { instanceOf: ConfigError }, value);
    t.regex(error?.message ?? '', /^ICE_SERVERS must be/, value);
    t.false(error?.message.includes(value), value);
  }
  const secret = '[{"urls":"turn:a","username":"u","credential":"secret-value","extra":1}]';
  t.false(
    t.throws(() => loadConfig({ ICE_SERVERS: secret }))?.message.includes('secret-value'),
    'the credential is not echoed',
  );
  t.deepEqual(loadConfig({}).iceServers, []);
  t.deepEqual(loadConfig({ ICE_SERVERS: ' [] ' }).iceServers, []);
  t.deepEqual(loadConfig({ ICE_SERVERS: '[{"urls":["stun:a:3478","stuns:b"]}]' }).iceServers, [
    { urls: ['stun:a:3478', 'stuns:b'] },
  ]);
});
