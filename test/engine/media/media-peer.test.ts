/**
 * Where a leg's audio may go and come from (engine/media/media-peer.ts): the SDP's address only where the peer could
 * receive, a NAT's inside address replaced by the signalling address, and datagrams only from the peer.
 */
import test from 'ava';
import { MediaAddressError, type MediaPeer, mediaAddress, sendsMedia } from '../../../engine/media/media-peer.ts';

const carrier: MediaPeer = {
  kind: 'carrier',
  name: 'carrier acme',
  signalling: '203.0.113.10',
  networks: ['203.0.113.10', '8.8.4.0/24', '2001:4860::/32'],
};
const phone: MediaPeer = { kind: 'phone', name: 'the desk phone', signalling: '8.8.8.8' };

test("a carrier's media stays in its networks; a NAT's inside address becomes its signalling address", (t) => {
  t.is(mediaAddress(carrier, '203.0.113.10', true), '203.0.113.10');
  t.is(mediaAddress(carrier, '8.8.4.77', true), '8.8.4.77', 'a configured media network');
  t.is(mediaAddress(carrier, '2001:4860::5', true), '2001:4860::5');
  t.is(mediaAddress(carrier, '::ffff:8.8.4.9', true), '8.8.4.9', 'an IPv4-mapped address is its IPv4 address');
  for (const inside of ['10.1.2.3', '192.168.0.4', '172.16.9.9', '100.64.0.1', '127.0.0.1', 'fd00::1']) {
    t.is(mediaAddress(carrier, inside, true), '203.0.113.10', `${inside} is behind the carrier's NAT`);
  }
  const outside = t.throws(() => mediaAddress(carrier, '1.1.1.1', true), { instanceOf: MediaAddressError });
  t.regex(outside.message, /1\.1\.1\.1 is outside carrier acme's networks/);
});

test("a desk phone's media goes to where it signals from, whatever unicast address its SDP names", (t) => {
  for (const named of ['8.8.8.8', '1.1.1.1', '10.0.0.9', '127.0.0.2', '2001:4860::1']) {
    t.is(mediaAddress(phone, named, true), '8.8.8.8', named);
  }
});

test('multicast, broadcast, link-local, reserved and non-IP addresses are refused for every peer', (t) => {
  for (const peer of [carrier, phone]) {
    for (const address of ['224.0.0.1', 'ff02::1', '255.255.255.255', '169.254.10.10', 'fe80::1', '240.0.0.1']) {
      t.throws(() => mediaAddress(peer, address, false), { instanceOf: MediaAddressError }, address);
    }
    t.throws(() => mediaAddress(peer, 'media.example.com', true), {
      instanceOf: MediaAddressError,
      message: /not an IP address/,
    });
  }
});

test('the unspecified address is refused in a first description and kept as a hold later', (t) => {
  for (const peer of [carrier, phone]) {
    t.throws(() => mediaAddress(peer, '0.0.0.0', true), { instanceOf: MediaAddressError, message: /unspecified/ });
    t.is(mediaAddress(peer, '0.0.0.0', false), '0.0.0.0');
    t.is(mediaAddress(peer, '::', false), '::');
  }
});

test("datagrams are the peer's only from its media address or its signalling address, on any port", (t) => {
  t.true(sendsMedia(carrier, '8.8.4.77', '8.8.4.77'));
  t.true(sendsMedia(carrier, '8.8.4.77', '203.0.113.10'), 'symmetric RTP from the signalling address');
  t.true(sendsMedia(carrier, '8.8.4.77', '::ffff:203.0.113.10'));
  t.false(sendsMedia(carrier, '8.8.4.77', '8.8.4.78'), 'another host of the media network is not the call');
  t.false(sendsMedia(carrier, '8.8.4.77', '198.51.100.1'));
  t.false(sendsMedia(phone, '8.8.8.8', '8.8.8.9'));
  t.false(sendsMedia(phone, '8.8.8.8', 'not an address'));
});
