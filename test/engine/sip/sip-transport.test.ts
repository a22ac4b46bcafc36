/**
 * The SIP transport's own decisions (engine/sip/transport.ts, RFC 3261 section 18): where requests and responses
 * go, what an inbound request looks like once prepared for sip.js's core, and how a TCP stream splits into messages.
 * The calls tests exercise the same code with sipp; these pin the edge cases, and, against a running engine, that
 * an answer goes back to where its request came from, whatever the request's Via says.
 */
import { randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Grammar } from 'sip.js';
import type { IncomingRequestMessage } from 'sip.js/lib/core/index.js';
import {
  dialedHeader,
  prepareInboundRequest,
  requestTarget,
  responseTarget,
  StreamFramer,
  maxMessageBytes,
  TcpTransport,
  UdpTransport,
} from '../../../engine/sip/transport.ts';
import { startService, type TestService } from '../../helpers/service.ts';

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
  t.is(lines[1], 'Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK1;received=192.0.2.7;rport=40123');
  t.true(lines.includes(`${dialedHeader}: +14155550100`));
});

test("a request to the engine's own user is left as it is", (t) => {
  const raw = invite('sip:switchboard@198.51.100.1:5060', 'SIP/2.0/TCP 10.0.0.1;branch=z9hG4bK2');
  const prepared = prepareInboundRequest(raw, source, 'switchboard') as string;
  t.false(prepared.includes(dialedHeader));
  t.true(prepared.startsWith('INVITE sip:switchboard@198.51.100.1:5060 SIP/2.0\r\n'));
});

test('received and rport come from the source, whatever the peer wrote, and only the top Via changes', (t) => {
  const topVia = (via: string) =>
    (prepareInboundRequest(invite('sip:switchboard@h', via), source, 'switchboard') as string).split('\r\n')[1];
  // RFC 3261 section 18.2.1, RFC 3581: the server writes both; what the peer wrote steers nothing.
  t.is(
    topVia('SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK2;received=10.9.9.9;rport=9999'),
    'Via: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK2;received=192.0.2.7;rport=40123',
  );
  t.is(
    topVia('SIP/2.0/UDP 10.0.0.1;RECEIVED = 10.9.9.9 ; Rport;branch=z9hG4bK2'),
    'Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK2;received=192.0.2.7;rport=40123',
  );
  // No rport asked for: added all the same (symmetric response routing, docs/calls.md).
  t.is(
    topVia('SIP/2.0/UDP 10.0.0.1:5062;branch=z9hG4bK2'),
    'Via: SIP/2.0/UDP 10.0.0.1:5062;branch=z9hG4bK2;received=192.0.2.7;rport=40123',
  );
  // A quoted comma or semicolon splits nothing; the second Via value keeps what it says.
  t.is(
    topVia('SIP/2.0/UDP 10.0.0.1;x="a,b;received=10.9.9.9";branch=z9hG4bK2, SIP/2.0/UDP 10.0.0.2;received=10.0.0.3'),
    'Via: SIP/2.0/UDP 10.0.0.1;x="a,b;received=10.9.9.9";branch=z9hG4bK2;received=192.0.2.7;rport=40123, SIP/2.0/UDP 10.0.0.2;received=10.0.0.3',
  );
  // A folded header line is one line (RFC 3261 section 7.3.1): a received on the continuation goes too.
  t.is(
    topVia('SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK2\r\n ;received=10.9.9.9;rport=9'),
    'Via: SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK2 ;received=192.0.2.7;rport=40123',
  );
  const prepared = prepareInboundRequest(
    invite('sip:switchboard@h', 'SIP/2.0/UDP 10.0.0.1;branch=z9hG4bK2;received=10.9.9.9;rport=9'),
    source,
    'switchboard',
  ) as string;
  t.deepEqual(responseTarget(prepared.replace(/^INVITE [^\r]*/, 'SIP/2.0 200 OK')), {
    host: '192.0.2.7',
    port: 40123,
    sentByPort: 5060,
  });
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
      sentByPort: 5060,
    },
  );
  t.deepEqual(responseTarget('SIP/2.0 200 OK\r\nv: SIP/2.0/UDP 10.0.0.1;branch=b\r\n\r\n'), {
    host: '10.0.0.1',
    port: 5060,
    sentByPort: 5060,
  });
  t.is(responseTarget('SIP/2.0 200 OK\r\nCall-ID: a\r\n\r\n'), undefined);
});

test('a TCP stream splits into messages by Content-Length, across chunks; an endless header is oversize', (t) => {
  const framer = new StreamFramer();
  const first = 'OPTIONS sip:s@h SIP/2.0\r\nContent-Length: 4\r\n\r\nbody';
  const second = 'OPTIONS sip:s@h SIP/2.0\r\nl: 0\r\n\r\n';
  const both = Buffer.from(`\r\n\r\n${first}${second}`);
  t.deepEqual(framer.push(both.subarray(0, 30)), { messages: [] });
  t.deepEqual(framer.push(both.subarray(30)), { messages: [first, second] });
  t.deepEqual(new StreamFramer().push(Buffer.alloc(maxMessageBytes + 1, 65)), { messages: [], failure: 'oversize' });
  t.deepEqual(
    new StreamFramer().push(Buffer.from(`OPTIONS sip:s@h SIP/2.0\r\nContent-Length: ${maxMessageBytes}\r\n\r\n`)),
    { messages: [], failure: 'oversize' },
  );
});

test('a TCP message whose length cannot be told ends the stream; the messages before it still count', (t) => {
  const first = 'OPTIONS sip:s@h SIP/2.0\r\nContent-Length: 0\r\n\r\n';
  for (const lengths of ['Content-Length: abc', 'Content-Length: -1', 'l: 4\r\nContent-Length: 5', 'l: 1e3']) {
    const framer = new StreamFramer();
    const bad = `OPTIONS sip:s@h SIP/2.0\r\n${lengths}\r\n\r\nbody!`;
    t.deepEqual(framer.push(Buffer.from(first + bad)), { messages: [first], failure: 'unparseable' }, lengths);
  }
  // The same length twice is one length.
  const twice = 'OPTIONS sip:s@h SIP/2.0\r\nContent-Length: 4\r\nl: 4\r\n\r\nbody';
  t.deepEqual(new StreamFramer().push(Buffer.from(twice)), { messages: [twice] });
});

test('a message sip.js core cannot take is dropped as malformed: mandatory fields, a Contact URI, a whole body', async (t) => {
  const outcomes: string[] = [];
  let arrived = () => {};
  const transport = new UdpTransport(
    {
      request: (message) => (outcomes.push(`request ${message.method}`), arrived()),
      response: (message) => (outcomes.push(`response ${message.statusCode}`), arrived()),
      malformed: (reason) => (outcomes.push(reason), arrived()),
      sent() {},
    },
    'switchboard',
  );
  const port = await transport.listen('127.0.0.1', 0);
  const peer = dgram.createSocket('udp4');
  t.teardown(() => {
    peer.close();
    return transport.close();
  });
  const fields = [
    'Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bKm',
    'From: <sip:a@127.0.0.1>;tag=1',
    'To: <sip:switchboard@127.0.0.1>',
    'Call-ID: m1',
    'CSeq: 1 INVITE',
    'Contact: <sip:a@127.0.0.1>',
  ];
  const invite = (lines: string[], body = '', length = Buffer.byteLength(body)) =>
    `INVITE sip:switchboard@127.0.0.1 SIP/2.0\r\n${lines.join('\r\n')}\r\nContent-Length: ${length}\r\n\r\n${body}`;
  const cases: Array<[string, string]> = [
    [invite(fields), 'request INVITE'],
    ...fields
      .slice(0, 5)
      .map((field): [string, string] => [invite(fields.filter((line) => line !== field)), 'unparseable']),
    [invite(fields).replace('INVITE sip:switchboard@127.0.0.1', 'INVITE tel:+14155550100'), 'unparseable'],
    [invite([...fields.slice(0, 5), 'Contact: *']), 'unparseable'],
    [invite([...fields, 'Content-Type: application/sdp'], 'v=0\r\n', 999), 'truncated'],
    // A body without a Content-Type: sip.js's core would throw out of a timer once it answers the INVITE.
    [invite(fields, 'v=0\r\n'), 'unparseable'],
    [invite([...fields, 'Content-Type: application/sdp'], 'v=0\r\n'), 'request INVITE'],
    [invite(fields).replace('CSeq: 1 INVITE', 'CSeq: 99999999999999999999 INVITE'), 'unparseable'],
    [`SIP/2.0 200 OK\r\n${fields.slice(0, 4).join('\r\n')}\r\nContent-Length: 0\r\n\r\n`, 'unparseable'],
  ];
  for (const [datagram, outcome] of cases) {
    const next = new Promise<void>((resolve) => (arrived = resolve));
    peer.send(datagram, port, '127.0.0.1');
    await next;
    t.is(outcomes.at(-1), outcome, datagram);
  }
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

/** A UDP socket that keeps what it receives, and can wait for a message that matches. */
class Peer {
  readonly received: string[] = [];
  private waiters: Array<{ match: (text: string) => boolean; resolve: (text: string) => void }> = [];

  private constructor(readonly socket: dgram.Socket) {
    socket.on('message', (data) => {
      const text = data.toString('utf8');
      this.received.push(text);
      this.waiters = this.waiters.filter((waiter) => !(waiter.match(text) && (waiter.resolve(text), true)));
    });
  }

  static async bind(address: string): Promise<Peer> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, address, () => resolve());
    });
    return new Peer(socket);
  }

  get address(): string {
    return this.socket.address().address;
  }

  get port(): number {
    return this.socket.address().port;
  }

  /** The first message received (or to come) for which `match` holds. */
  next(match: (text: string) => boolean): Promise<string> {
    const found = this.received.find(match);
    if (found !== undefined) return Promise.resolve(found);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  send(text: string, port: number): Promise<void> {
    return new Promise((resolve, reject) =>
      this.socket.send(text, port, '127.0.0.1', (error) => (error ? reject(error) : resolve())),
    );
  }

  close(): void {
    this.socket.close();
  }
}

/** A request to the engine on `port`, without a body, with `via` as its only Via (and `toTag` on its To). */
function sipRequest(
  method: string,
  port: number,
  via: string,
  callId: string,
  extra: string[] = [],
  toTag = '',
): string {
  return [
    `${method} sip:switchboard@127.0.0.1:${port} SIP/2.0`,
    `Via: ${via}`,
    'From: <sip:probe@192.0.2.1>;tag=probe1',
    `To: <sip:switchboard@127.0.0.1:${port}>${toTag}`,
    `Call-ID: ${callId}`,
    `CSeq: 1 ${method}`,
    'Max-Forwards: 70',
    ...extra,
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
}

const isAnswerTo = (callId: string, status: string) => (text: string) =>
  text.startsWith(`SIP/2.0 ${status} `) && text.includes(`Call-ID: ${callId}\r\n`);

let engine: Promise<TestService> | undefined;

/** One engine for the tests below (no carrier: every INVITE gets 403), started by the first that needs it. */
async function runningEngine(): Promise<number> {
  engine ??= startService({ ENGINE_HTTP_PORT: '0' }, ['engine']);
  return (await engine).sipPort as number;
}

test.after.always(async () => {
  await (await engine)?.close();
});

test('over UDP, an answer goes to the socket the request came from, never to an address its Via names', async (t) => {
  t.timeout(60_000, 'an answer never came back');
  const sipPort = await runningEngine();
  const sender = await Peer.bind('127.0.0.2');
  // A host the Via names, and a neighbour on the sender's own host (another client behind the same NAT).
  const elsewhere = await Peer.bind('127.0.0.1');
  const neighbour = await Peer.bind('127.0.0.2');
  t.teardown(() => [sender, elsewhere, neighbour].forEach((peer) => peer.close()));
  const vias = [
    `SIP/2.0/UDP 127.0.0.1:${elsewhere.port};received=127.0.0.1;rport=${elsewhere.port}`,
    `SIP/2.0/UDP 127.0.0.1:${elsewhere.port};rport=${neighbour.port};received=127.0.0.1`,
    `SIP/2.0/UDP 127.0.0.2:${neighbour.port};rport=${neighbour.port}`,
    `SIP/2.0/UDP 127.0.0.2:${neighbour.port}`,
  ];
  for (const [index, via] of vias.entries()) {
    // OPTIONS: 200 from sip.js's core.
    const options = randomUUID();
    await sender.send(sipRequest('OPTIONS', sipPort, `${via};branch=z9hG4bK-o${index}-${options}`, options), sipPort);
    const ok = await sender.next(isAnswerTo(options, '200'));
    t.regex(ok, new RegExp(`;received=127\\.0\\.0\\.2;rport=${sender.port}\\r\\n`), via);
    // An INVITE from an address no carrier names: 403 (after 100 Trying), then our ACK ends its retransmissions.
    const invite = randomUUID();
    const branch = `${via};branch=z9hG4bK-i${index}-${invite}`;
    await sender.send(sipRequest('INVITE', sipPort, branch, invite, ['Contact: <sip:probe@192.0.2.1>']), sipPort);
    const refused = await sender.next(isAnswerTo(invite, '403'));
    const toTag = /^To:.*?(;tag=[^;\r]+)/m.exec(refused)?.[1] ?? '';
    await sender.send(sipRequest('ACK', sipPort, branch, invite, [], toTag), sipPort);
  }
  // Each would-be target asks for an answer of its own: anything sent its way before came before that answer.
  for (const peer of [elsewhere, neighbour]) {
    const fence = randomUUID();
    const via = `SIP/2.0/UDP ${peer.address}:${peer.port};branch=z9hG4bK-f-${fence}`;
    await peer.send(sipRequest('OPTIONS', sipPort, via, fence), sipPort);
    await peer.next(isAnswerTo(fence, '200'));
    t.is(peer.received.length, 1, `${peer.address}:${peer.port} got only its own answer: ${peer.received.join('\n')}`);
  }
});

test('over TCP, an answer goes on the connection the request came on, never to an address its Via names', async (t) => {
  t.timeout(60_000, 'an answer never came back');
  const sipPort = await runningEngine();
  const named = net.createServer();
  let connections = 0;
  named.on('connection', (socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => named.listen(0, '127.0.0.1', resolve));
  const namedPort = (named.address() as net.AddressInfo).port;
  const client = net.connect({ host: '127.0.0.1', port: sipPort, localAddress: '127.0.0.2' });
  t.teardown(() => {
    client.destroy();
    named.close();
  });
  await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
  let text = '';
  const answered = new Promise<string>((resolve) =>
    client.on('data', (chunk: Buffer) => {
      text += chunk.toString('utf8');
      if (text.includes('\r\n\r\n')) resolve(text);
    }),
  );
  const callId = randomUUID();
  const via = `SIP/2.0/TCP 127.0.0.1:${namedPort};received=127.0.0.1;rport=${namedPort};branch=z9hG4bK-t-${callId}`;
  client.write(sipRequest('OPTIONS', sipPort, via, callId));
  const answer = await answered;
  t.true(isAnswerTo(callId, '200')(answer), answer);
  t.regex(answer, new RegExp(`;received=127\\.0\\.0\\.2;rport=${client.localPort}\\r\\n`));
  t.is(connections, 0);
});

test('a TCP answer whose connection has closed goes to the source address at the Via sent-by port', async (t) => {
  // RFC 3261 section 18.2.2: a new connection to `received` (the real source) at the sent-by port.
  t.timeout(30_000, 'the answer never came');
  let onRequest: (message: IncomingRequestMessage) => void = () => {};
  const requested = new Promise<IncomingRequestMessage>((resolve) => (onRequest = resolve));
  const transport = new TcpTransport(
    { request: (message) => onRequest(message), response() {}, malformed() {}, sent() {} },
    'switchboard',
  );
  const port = await transport.listen('127.0.0.1', 0);
  // A listener on the source's host, and one at the same port on the address the Via names.
  const atSource = net.createServer();
  const named = net.createServer();
  t.teardown(() => {
    atSource.close();
    named.close();
    return transport.close();
  });
  await new Promise<void>((resolve) => atSource.listen(0, '127.0.0.2', resolve));
  const sentByPort = (atSource.address() as net.AddressInfo).port;
  await new Promise<void>((resolve, reject) => named.once('error', reject).listen(sentByPort, '127.0.0.1', resolve));
  let namedConnections = 0;
  named.on('connection', (socket) => {
    namedConnections += 1;
    socket.destroy();
  });
  const delivered = new Promise<string>((resolve) =>
    atSource.on('connection', (socket) => {
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        if (text.includes('\r\n\r\n')) resolve(text);
      });
    }),
  );
  const client = net.connect({ host: '127.0.0.1', port, localAddress: '127.0.0.2' });
  const closed = new Promise<void>((resolve) => client.on('close', () => resolve()));
  client.on('error', () => {});
  const via = `SIP/2.0/TCP 127.0.0.1:${sentByPort};branch=z9hG4bK-c;received=127.0.0.1;rport=${sentByPort}`;
  client.write(sipRequest('OPTIONS', port, via, 'closed-call'));
  const request = await requested;
  // More than a message can hold: the transport cuts the connection.
  client.write(Buffer.alloc(maxMessageBytes + 1, 65));
  await closed;
  const response = ['SIP/2.0 200 OK', `Via: ${request.getHeader('via')}`, 'Call-ID: closed-call', 'CSeq: 1 OPTIONS'];
  await transport.send(`${response.join('\r\n')}\r\nContent-Length: 0\r\n\r\n`);
  t.true((await delivered).startsWith('SIP/2.0 200 OK\r\n'));
  t.is(namedConnections, 0);
});

test('a PRACK outside any dialog gets 481 (sip.js core has no answer for one)', async (t) => {
  t.timeout(60_000, 'no answer came back');
  const sipPort = await runningEngine();
  const peer = await Peer.bind('127.0.0.1');
  t.teardown(() => peer.close());
  const callId = randomUUID();
  const via = `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=z9hG4bK-p-${callId}`;
  await peer.send(sipRequest('PRACK', sipPort, via, callId, ['RAck: 1 1 INVITE']), sipPort);
  t.truthy(await peer.next(isAnswerTo(callId, '481')));
});

test('a PRACK whose To tag has no value (;tag) is outside any dialog too: 481', async (t) => {
  t.timeout(60_000, 'no answer came back');
  const sipPort = await runningEngine();
  const peer = await Peer.bind('127.0.0.1');
  t.teardown(() => peer.close());
  const callId = randomUUID();
  const via = `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=z9hG4bK-pe-${callId}`;
  await peer.send(sipRequest('PRACK', sipPort, via, callId, ['RAck: 1 1 INVITE'], ';tag'), sipPort);
  t.truthy(await peer.next(isAnswerTo(callId, '481')));
});

test('a method of no standard counts as other in the metrics: a peer cannot grow them without end', async (t) => {
  t.timeout(60_000, 'no answer came back');
  const sipPort = await runningEngine();
  const peer = await Peer.bind('127.0.0.1');
  t.teardown(() => peer.close());
  const callId = randomUUID();
  const via = `SIP/2.0/UDP 127.0.0.1:${peer.port};branch=z9hG4bK-m-${callId}`;
  await peer.send(sipRequest('FUZZYMETHOD', sipPort, via, callId), sipPort);
  t.truthy(await peer.next(isAnswerTo(callId, '405')));
  const metrics = await (await engine)?.request('GET', '/metrics');
  t.regex(metrics?.text ?? '', /switchboard_sip_messages_total\{direction="in",kind="other"\} [1-9]/);
  t.false(metrics?.text.includes('FUZZYMETHOD'));
});
