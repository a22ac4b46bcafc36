/**
 * SDP later in a dialog (engine/media/sdp.ts; RFC 3264 section 8): `reoffer` (a hold or resume: our description
 * again with another direction), `nextVersion` (the o= line kept, its version raised only when something changed)
 * and `answer` narrowed by our own hold.
 */
import test from 'ava';
import sdpTransform from 'sdp-transform';
import type { MediaDirection } from '../../../engine/media/rtp.ts';
import { answer, nextVersion, offer, parseSdp, reoffer } from '../../../engine/media/sdp.ts';

const local = { address: '192.0.2.10', port: 40_000 };
const origin = (sdp: string) => sdpTransform.parse(sdp).origin;
const direction = (sdp: string) => sdpTransform.parse(sdp).media[0]?.direction;

const carrierOffer = [
  'v=0',
  'o=carrier 7 7 IN IP4 198.51.100.2',
  's=-',
  'c=IN IP4 198.51.100.2',
  't=0 0',
  'm=audio 30000 RTP/AVP 8 0 101',
  'a=rtpmap:101 telephone-event/8000',
  'a=sendrecv',
  '',
].join('\r\n');

test('reoffer: the same session id, address, port and codecs, the direction asked, the version one greater', (t) => {
  const first = offer(local);
  const held = reoffer(first, 'sendonly');
  t.is(direction(held), 'sendonly');
  t.is(origin(held)?.sessionId, origin(first)?.sessionId);
  t.is(origin(held)?.sessionVersion, (origin(first)?.sessionVersion ?? 0) + 1);
  const before = parseSdp(first);
  const after = parseSdp(held);
  t.like(after, { address: before.address, port: before.port, codecs: before.codecs });
  const resumed = reoffer(held, 'sendrecv');
  t.is(direction(resumed), 'sendrecv');
  t.is(origin(resumed)?.sessionVersion, (origin(first)?.sessionVersion ?? 0) + 2);
  // The answer we gave (one codec) offered again keeps that codec.
  const answered = answer(parseSdp(carrierOffer), local).sdp;
  t.deepEqual(
    parseSdp(reoffer(answered, 'inactive')).codecs.map((codec) => codec.name),
    ['PCMA', 'telephone-event'],
  );
  t.is(direction(reoffer(answered, 'inactive')), 'inactive');
});

test('nextVersion: nothing changed keeps the version (the same description); a change raises it by one', (t) => {
  const first = offer(local);
  t.is(nextVersion(first, first), first);
  // A fresh description (another session id) of the same media is the previous one again.
  const same = nextVersion(first, offer(local));
  t.is(same, first);
  const other = nextVersion(first, offer({ ...local, port: 40_002 }));
  t.is(origin(other)?.sessionId, origin(first)?.sessionId);
  t.is(origin(other)?.sessionVersion, (origin(first)?.sessionVersion ?? 0) + 1);
  t.is(parseSdp(other).port, 40_002);
});

test("answer while we hold: the offer's direction mirrored and narrowed by ours; the remote follows the offer", (t) => {
  const offered = (dir: string) => parseSdp(carrierOffer.replace('a=sendrecv', `a=${dir}`));
  const cases: Array<[string, 'sendrecv' | 'sendonly' | 'inactive', MediaDirection]> = [
    ['sendrecv', 'sendrecv', 'sendrecv'],
    ['sendonly', 'sendrecv', 'recvonly'],
    ['sendrecv', 'sendonly', 'sendonly'],
    ['sendonly', 'sendonly', 'inactive'],
    ['recvonly', 'sendonly', 'sendonly'],
    ['sendrecv', 'inactive', 'inactive'],
    ['inactive', 'sendrecv', 'inactive'],
  ];
  for (const [theirs, ours, expected] of cases) {
    const answered = answer(offered(theirs), local, ours);
    t.is(direction(answered.sdp), expected, `${theirs} offered while we are ${ours}`);
  }
  // Our hold is not the remote media's: it follows their offer alone.
  t.is(answer(offered('sendrecv'), local, 'inactive').remote.direction, 'sendrecv');
  t.is(answer(offered('sendonly'), local, 'sendonly').remote.direction, 'recvonly');
});
