/**
 * Rounds of the `ring` step nobody answers, seen on the service's own /phone page (client/softphone.ts) in Debian's
 * Chromium, on the real engine (roles api and engine) with sipp as the caller: the caller hanging up while two pages
 * of one user ring withdraws both offers (call.ended with connected false); a sequential plan rings alice's page,
 * then after timeoutSecs bob's, and with nobody answering takes `next` (a hangup: the caller gets the BYE). The
 * events come from a real HTTPS webhook receiver. Each page is a browser context of its own, so a device of its own.
 */
import test from 'ava';
import {
  callOfOffer,
  logEntry,
  pageLog,
  type PhoneBench,
  phoneLine,
  ringingOffer,
  startPhoneBench,
  webhookEvents,
} from '../helpers/phone-pages.ts';
import { runSipp } from '../helpers/sipp.ts';
import { exitPastWrtc, sippFailed } from '../helpers/engine-service.ts';
import { until } from '../helpers/until.ts';

// The engine in this worker makes RTCAudioSources: end it as `process.exit` would, or the binding's N-API cleanup
// crashes it at exit (see test/engine/media/webrtc.test.ts).
exitPastWrtc();

let bench: PhoneBench;

test.before(async () => {
  bench = await startPhoneBench();
});

test.after.always(async () => {
  await bench?.close();
});

async function endedCall(callId: string) {
  return until('the call to end', async () => {
    const result = await bench.service.pool.query<{ end_reason: string; steps_taken: string[] }>(
      'SELECT end_reason, steps_taken FROM calls WHERE id = $1 AND ended_at IS NOT NULL',
      [callId],
    );
    return result.rows[0];
  });
}

async function offersOf(callId: string) {
  const result = await bench.service.pool.query<{
    id: string;
    device_id: string;
    ring_seq: number;
    state: string;
    created_at: Date;
    decided_at: Date | null;
    expires_at: Date;
  }>(
    'SELECT id, device_id, ring_seq, state, created_at, decided_at, expires_at FROM offers WHERE call_id = $1 ORDER BY ring_seq, created_at',
    [callId],
  );
  return result.rows;
}

/** The page's log lines of one kind (`incoming call from …`, `… ended: withdrawn`). */
async function logLines(page: Parameters<typeof pageLog>[0], pattern: RegExp): Promise<string[]> {
  return (await pageLog(page)).map((entry) => entry.text).filter((text) => pattern.test(text));
}

test.serial(
  'the caller hangs up while two pages of alice ring: both calls end withdrawn, call.ended with connected false',
  async (t) => {
    const { line, token } = await phoneLine(t, bench, { users: ['alice'], strategy: 'simultaneous', timeoutSecs: 60 });
    const pages = [await bench.openPage(t, await token('alice')), await bench.openPage(t, await token('alice'))];
    t.not(pages[0]!.deviceId, pages[1]!.deviceId, 'two browsers are two devices');
    // The caller hangs up 8 s after the engine answered: long before the round's 60 s, long after the pages rang.
    const sipp = runSipp({
      scenario: 'caller-hangs-up',
      sipPort: bench.sipPort,
      dialed: line.e164.slice(1),
      replacements: { HOLD_MS: '8000' },
    });
    const offers = await Promise.all(pages.map(({ page }) => ringingOffer(page)));
    const callId = await callOfOffer(bench.service, offers[0]!);
    t.is(await callOfOffer(bench.service, offers[1]!), callId, 'one call offered to both');
    const run = await sipp;
    t.is(run.code, 0, sippFailed(run));

    for (const { page } of pages) {
      await logEntry(page, /ended: withdrawn$/);
      t.is(await page.locator('#incoming li').count(), 0, 'the page shows no call');
      t.is(await page.locator('#call').isHidden(), true, 'the page never answered');
    }
    t.deepEqual(
      (await offersOf(callId)).map((offer) => offer.state),
      ['withdrawn', 'withdrawn'],
    );
    t.like(await endedCall(callId), { end_reason: 'caller_hangup', steps_taken: ['r'] });
    const events = await webhookEvents(bench, callId, 4);
    t.deepEqual(
      events.map((event) => event.type),
      ['call.started', 'call.answered', 'call.ringing', 'call.ended'],
    );
    t.like(events[2].ring, { ringSeq: 1, memberIds: [], externalUserIds: ['alice'] });
    t.like(events[3], { connected: false, call: { endReason: 'caller_hangup' } });
    t.deepEqual([...pages[0]!.errors, ...pages[1]!.errors], []);
  },
);

test.serial(
  "sequential: alice's page rings, after timeoutSecs bob's does, nobody answers and the plan takes next",
  async (t) => {
    const timeoutSecs = 5;
    const { line, token } = await phoneLine(t, bench, { users: ['alice', 'bob'], strategy: 'sequential', timeoutSecs });
    const alice = await bench.openPage(t, await token('alice'));
    const bob = await bench.openPage(t, await token('bob'));
    // The engine's BYE after the plan's hangup step ends sipp's scenario.
    const sipp = runSipp({ scenario: 'answered', sipPort: bench.sipPort, dialed: line.e164.slice(1) });

    const aliceOffer = await ringingOffer(alice.page);
    const callId = await callOfOffer(bench.service, aliceOffer);
    await logEntry(alice.page, /ended: withdrawn$/);
    const bobOffer = await ringingOffer(bob.page);
    const run = await sipp;
    t.is(run.code, 0, sippFailed(run));
    await logEntry(bob.page, /ended: withdrawn$/);

    // Each page rang once, for its own round.
    t.is((await logLines(alice.page, /incoming call from/)).length, 1);
    t.is((await logLines(bob.page, /incoming call from/)).length, 1);
    const offers = await offersOf(callId);
    t.deepEqual(
      offers.map((offer) => [offer.id, offer.device_id, offer.ring_seq, offer.state]),
      [
        [aliceOffer, alice.deviceId, 1, 'withdrawn'],
        [bobOffer, bob.deviceId, 2, 'withdrawn'],
      ],
    );
    const [first, second] = offers;
    // Alice's offer lasted its round (withdrawn when it expired), and bob's was made only after it was gone.
    t.true(
      first!.expires_at.getTime() - first!.created_at.getTime() > (timeoutSecs - 1) * 1000,
      'a round lasts timeoutSecs',
    );
    t.true(first!.decided_at!.getTime() >= first!.expires_at.getTime() - 100, 'withdrawn when the round ended');
    t.true(second!.created_at.getTime() >= first!.decided_at!.getTime(), "bob's round came after alice's");
    t.log(
      `alice's offer ${first!.decided_at!.getTime() - first!.created_at.getTime()} ms, ` +
        `bob's ${second!.decided_at!.getTime() - second!.created_at.getTime()} ms (timeoutSecs ${timeoutSecs})`,
    );

    t.like(await endedCall(callId), { end_reason: 'plan_hangup', steps_taken: ['r', 'bye'] });
    const events = await webhookEvents(bench, callId, 5);
    t.deepEqual(
      events.map((event) => event.type),
      ['call.started', 'call.answered', 'call.ringing', 'call.ringing', 'call.ended'],
    );
    t.like(events[2].ring, { ringSeq: 1, memberIds: [], externalUserIds: ['alice'], offerId: aliceOffer });
    t.like(events[3].ring, { ringSeq: 2, memberIds: [], externalUserIds: ['bob'], offerId: bobOffer });
    t.like(events[4], { connected: false, call: { endReason: 'plan_hangup' } });
    t.deepEqual([...alice.errors, ...bob.errors], []);
  },
);
