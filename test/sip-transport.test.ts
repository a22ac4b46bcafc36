/**
 * The SIP transport's own decisions (engine/sip/transport.ts, RFC 3261 section 18): where requests and responses
 * go, what an inbound request looks like once prepared for sip.js's core, and how a TCP stream splits into messages.
 * The calls tests exercise the same code with sipp; these pin the edge cases.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Grammar } from 'sip.js';
import {
  dialedHeader,
  prepareInboundRequest,
  requestTarget,
  responseTarget,
  StreamFramer,
  maxMessageBytes,
} from '../engine/sip/transport.ts';

const source = { protocol: 'udp' as const, address: '192.0.2.7', port: 40123 };

function invite(uri: string, via = 'SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1;rport') {
  return `INVITE ${uri} SIP/2.0\r\nVia: ${via}\r\nCall-ID: a\r\nContent-Length: 0\r\n\r\n`;
}

test('an inbound request gets received and rport from its source, and the dialed user moves to a header', (t) => {
  const prepared = prepareInboundRequest(
    invite('sip:+14155550100@198.51.100.1:5060;user=phone'),
    source,
    'switchboard',
  );
  t.truthy(prepared);
  const lines = (prepared as string).split('\r\n');
  t.is(lines[0], 'INVITE sip:switchboard@198.51.100.1:5060;user=phone SIP/2.0');
  t.is(lines[1], 'Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1;rport=40123;received=192.0.2.7');
  t.true(lines.includes(`${dialedHeader}: +14155550100`));
});

test("a request to the engine's own user is left as it is; a Via with received keeps it", (t) => {
  const raw = invite('sip:switchboard@198.51.100.1:5060', 'SIP/2.0/TCP 10.0.0.1;branch=z9hG4bK2;received=10.9.9.9');
  const prepared = prepareInboundRequest(raw, source, 'switchboard') as string;
  t.false(prepared.includes(dialedHeader));
  t.true(prepared.startsWith('INVITE sip:switchboard@198.51.100.1:5060 SIP/2.0\r\n'));
  t.true(prepared.includes('received=10.9.9.9'));
  t.false(prepared.includes('received=192.0.2.7'));
});

test('a request without a Via or a request line cannot be prepared', (t) => {
  t.is(prepareInboundRequest('INVITE sip:1@x SIP/2.0\r\nCall-ID: a\r\n\r\n', source, 'switchboard'), undefined);
  t.is(prepareInboundRequest('INVITE\r\nVia: SIP/2.0/UDP h\r\n\r\n', source, 'switchboard'), undefined);
});

test('requests go to the first Route, else the Request-URI; responses to the top Via', (t) => {
  t.deepEqual(requestTarget('BYE sip:alice@203.0.113.5:5070;transport=udp SIP/2.0\r\nVia: x\r\n\r\n'), {
    host: '203.0.113.5',
    port: 5070,
  });
  t.deepEqual(requestTarget('BYE sip:alice@203.0.113.5 SIP/2.0\r\nRoute: <sip:proxy.example.com:5080;lr>\r\n\r\n'), {
    host: 'proxy.example.com',
    port: 5080,
  });
  t.deepEqual(requestTarget('BYE sip:[2001:db8::1]:5062 SIP/2.0\r\n\r\n'), { host: '2001:db8::1', port: 5062 });
  t.deepEqual(requestTarget('BYE sip:carrier.example.net SIP/2.0\r\n\r\n'), {
    host: 'carrier.example.net',
    port: undefined,
  });
  t.is(requestTarget('BYE tel:+14155550100 SIP/2.0\r\n\r\n'), undefined);

  t.deepEqual(
    responseTarget('SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 10.0.0.1:5060;branch=b;rport=40123;received=192.0.2.7\r\n\r\n'),
    {
      host: '192.0.2.7',
      port: 40123,
    },
  );
  t.deepEqual(responseTarget('SIP/2.0 200 OK\r\nv: SIP/2.0/UDP 10.0.0.1;branch=b\r\n\r\n'), {
    host: '10.0.0.1',
    port: 5060,
  });
  t.is(responseTarget('SIP/2.0 200 OK\r\nCall-ID: a\r\n\r\n'), undefined);
});

test('a TCP stream splits into messages by Content-Length, across chunks; an endless header is oversize', (t) => {
  const framer = new StreamFramer();
  const first = 'OPTIONS sip:s@h SIP/2.0\r\nContent-Length: 4\r\n\r\nbody';
  const second = 'OPTIONS sip:s@h SIP/2.0\r\nl: 0\r\n\r\n';
  const both = Buffer.from(`\r\n\r\n${first}${second}`);
  t.deepEqual(framer.push(both.subarray(0, 30)), []);
  t.deepEqual(framer.push(both.subarray(30)), [first, second]);
  t.is(new StreamFramer().push(Buffer.alloc(maxMessageBytes + 1, 65)), 'oversize');
  t.is(
    new StreamFramer().push(Buffer.from(`OPTIONS sip:s@h SIP/2.0\r\nContent-Length: ${maxMessageBytes}\r\n\r\n`)),
    'oversize',
  );
});

test('a dialed-number header sent by the peer is dropped; only the one the transport writes remains', (t) => {
  const spoofed = `INVITE sip:+14155550100@h SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK3\r\n${dialedHeader}: +19005550000\r\n\r\n`;
  const prepared = prepareInboundRequest(spoofed, source, 'switchboard') as string;
  t.false(prepared.includes('+19005550000'));
  t.true(prepared.includes(`${dialedHeader}: +14155550100`));
  const toEngine = `INVITE sip:switchboard@h SIP/2.0\r\nVia: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK4\r\n${dialedHeader}: +19005550000\r\n\r\n`;
  t.false((prepareInboundRequest(toEngine, source, 'switchboard') as string).includes(dialedHeader));
});

test('sip.js is installed with our grammar patch: its parse tables are decoded once, and headers still parse', async (t) => {
  // patches/sip.js+0.21.2.patch, applied by `patch-package` at install. Unpatched, every header parse decoded the
  // grammar's 240 rule tables again (about 80 µs per header), which capped the engine near 100 calls/s.
  const grammarFile = fileURLToPath(new URL('grammar/pegjs/dist/grammar.js', import.meta.resolve('sip.js')));
  const source = await readFile(grammarFile, 'utf8');
  t.true(source.indexOf('const peg$bytecode = [') < source.indexOf('function peg$parse('), 'tables at module scope');
  t.like(Grammar.parse('SIP/2.0/TCP 192.0.2.1:5061;branch=z9hG4bK77;rport', 'Via'), {
    transport: 'TCP',
    host: '192.0.2.1',
    port: 5061,
    branch: 'z9hG4bK77',
  });
  const to = Grammar.parse('"Front Desk" <sip:+15550100001@192.0.2.1>;tag=a1', 'To');
  t.is(to.displayName, 'Front Desk');
  t.is(to.uri.user, '+15550100001');
  t.is(to.getParam('tag'), 'a1');
  t.like(Grammar.parse('314159 INVITE', 'CSeq'), { value: 314159, method: 'INVITE' });
  t.is(Grammar.parse('not a cseq', 'CSeq'), -1);
});
