/**
 * The addresses a browser leg's offer names (WEBRTC_ADDRESSES, docs/phones.md "Addresses offered"): both stacks list
 * as host candidates only the addresses the operator configured as reachable, by default the RTP address (127.0.0.1
 * on a laptop), never the machine's other interfaces (a container's pod network, a VPN, a host's private LAN); the
 * SDP's default address (`c=`, the `m=` port) names none of them either. A stand-in browser on loopback still
 * connects (test/helpers/webrtc-contract.ts runs each stack's calls on the defaults).
 */
import os from 'node:os';
import test from 'ava';
import { loadConfig } from '../../../core/config.ts';
import type { WebRtcEndpointOptions, WebRtcMedia } from '../../../engine/media/webrtc-endpoint.ts';
import { G711WebRtcEndpoint } from '../../../engine/media/webrtc-g711.ts';
import { offeringOnly, WebRtcEndpoint } from '../../../engine/media/webrtc.ts';
import { exitPastWrtc } from '../../helpers/engine-service.ts';
import { answerOffer } from '../../helpers/webrtc-browser.ts';

exitPastWrtc();

const stacks: Array<[string, (options?: WebRtcEndpointOptions) => WebRtcMedia]> = [
  ['g711', (options) => new G711WebRtcEndpoint(options)],
  ['libwebrtc', (options) => new WebRtcEndpoint(options)],
];

/** The machine's own addresses other than loopback: what an offer must not give away unless configured. */
const interfaceAddresses = Object.values(os.networkInterfaces())
  .flatMap((entries) => entries ?? [])
  .filter((entry) => !entry.internal)
  .map((entry) => entry.address);

interface Candidate {
  address: string;
  port: number;
  protocol: string;
  type: string;
  line: string;
}

function candidatesOf(sdp: string): Candidate[] {
  return [...sdp.matchAll(/^a=candidate:\S+ \d+ (\S+) \d+ (\S+) (\d+) typ (\S+).*$/gm)].map((match) => ({
    protocol: (match[1] as string).toLowerCase(),
    address: match[2] as string,
    port: Number(match[3]),
    type: match[4] as string,
    line: match[0],
  }));
}

for (const [stack, make] of stacks) {
  test(`${stack}: by default the offer lists 127.0.0.1 alone, none of the machine’s interface addresses`, async (t) => {
    const endpoint = make();
    t.teardown(() => endpoint.close());
    const offer = await endpoint.createOffer();
    const candidates = candidatesOf(offer);
    t.true(candidates.length > 0, offer);
    t.deepEqual([...new Set(candidates.map((candidate) => candidate.address))], ['127.0.0.1'], offer);
    for (const address of interfaceAddresses) t.false(offer.includes(address), `${address} is not in the offer`);
    // The default destination (c= and the m= port) names no other address.
    for (const line of offer.split('\r\n').filter((candidate) => candidate.startsWith('c='))) {
      t.regex(line, /^c=IN IP4 (0\.0\.0\.0|127\.0\.0\.1)$/);
    }
  });

  test(`${stack}: the offer lists the configured addresses, and a stand-in browser on loopback connects`, async (t) => {
    const endpoint = make({ hostAddresses: ['127.0.0.1', '::1'] });
    t.teardown(() => endpoint.close());
    const offer = await endpoint.createOffer();
    const addresses = new Set(candidatesOf(offer).map((candidate) => candidate.address));
    t.deepEqual([...addresses].sort(), ['127.0.0.1', '::1'], offer);
    const browser = await answerOffer(offer);
    t.teardown(() => browser.close());
    await endpoint.acceptAnswer(browser.answer);
    await Promise.all([endpoint.connected(20_000), browser.connected(20_000)]);
    t.is(endpoint.state, 'connected');
  });
}

test('g711: an address no interface has (a 1:1 NAT’s public address) is offered as it is, on a socket of every address', async (t) => {
  const endpoint = new G711WebRtcEndpoint({ hostAddresses: ['203.0.113.7'] });
  t.teardown(() => endpoint.close());
  const candidates = candidatesOf(await endpoint.createOffer());
  t.deepEqual(
    candidates.map((candidate) => [candidate.address, candidate.protocol, candidate.type]),
    [['203.0.113.7', 'udp', 'host']],
  );
});

test('WEBRTC_ADDRESSES: IP addresses, by default the RTP address; a host name or a wildcard is refused', (t) => {
  t.deepEqual(loadConfig({}).webrtcAddresses, ['127.0.0.1']);
  t.deepEqual(loadConfig({ RTP_HOST: '10.1.2.3' }).webrtcAddresses, ['10.1.2.3']);
  t.deepEqual(loadConfig({ SIP_HOST: '0.0.0.0', ADVERTISED_HOST: '198.51.100.7' }).webrtcAddresses, ['198.51.100.7']);
  t.deepEqual(
    loadConfig({
      SIP_HOST: '0.0.0.0',
      ADVERTISED_HOST: '198.51.100.7',
      WEBRTC_ADDRESSES: ' 203.0.113.7, 2001:DB8:0::1 ',
    }).webrtcAddresses,
    ['203.0.113.7', '2001:db8::1'],
  );
  t.throws(() => loadConfig({ SIP_HOST: '0.0.0.0', ADVERTISED_HOST: 'sip.example.com' }), {
    message:
      /^WEBRTC_ADDRESSES must list the IP addresses browsers reach the engine at: ADVERTISED_HOST \(sip\.example\.com\)/,
  });
  for (const value of ['0.0.0.0', '::', 'sip.example.com', '224.0.0.1', '1.2.3', '203.0.113.7,', '10.0.0.1/8']) {
    t.throws(
      () => loadConfig({ WEBRTC_ADDRESSES: value }),
      { message: /^WEBRTC_ADDRESSES must list unicast IP addresses/ },
      value,
    );
  }
});

test('libwebrtc: what is dropped from its offer, and how the candidates of ICE servers are told', (t) => {
  const sdp = [
    'v=0',
    'o=- 1 2 IN IP4 127.0.0.1',
    's=-',
    't=0 0',
    'm=audio 40000 UDP/TLS/RTP/SAVPF 0',
    'c=IN IP4 192.0.2.2',
    'a=candidate:1 1 udp 2122194687 192.0.2.2 40000 typ host generation 0',
    'a=candidate:2 1 udp 2122265343 2001:0db8:0000::5 40001 typ host generation 0',
    'a=candidate:3 1 tcp 1518214911 192.0.2.2 40002 typ host tcptype passive generation 0',
    'a=candidate:4 1 udp 1686052607 198.51.100.9 50000 typ srflx raddr 192.0.2.2 rport 40000 generation 0',
    'a=candidate:5 1 udp 41885439 203.0.113.5 60000 typ relay raddr 198.51.100.9 rport 50000 generation 0',
    'a=mid:0',
    '',
  ].join('\r\n');
  const offered = offeringOnly(sdp, new Set(['2001:db8::5']));
  t.deepEqual(offered.split('\r\n'), [
    'v=0',
    'o=- 1 2 IN IP4 127.0.0.1',
    's=-',
    't=0 0',
    'm=audio 40001 UDP/TLS/RTP/SAVPF 0',
    'c=IN IP6 2001:0db8:0000::5',
    'a=candidate:2 1 udp 2122265343 2001:0db8:0000::5 40001 typ host generation 0',
    'a=candidate:4 1 udp 1686052607 198.51.100.9 50000 typ srflx raddr 0.0.0.0 rport 0 generation 0',
    'a=candidate:5 1 udp 41885439 203.0.113.5 60000 typ relay raddr 0.0.0.0 rport 0 generation 0',
    'a=mid:0',
    '',
  ]);
  // No host candidate kept and none of a server: the default destination names no address.
  const none = offeringOnly(sdp.replace(/^a=candidate:[45] .*\r\n/gm, ''), new Set(['127.0.0.1']));
  t.regex(none, /^m=audio 9 /m);
  t.regex(none, /^c=IN IP4 0\.0\.0\.0\r$/m);
  t.notRegex(none, /192\.0\.2\.2|2001/);
});
