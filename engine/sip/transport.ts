/**
 * SIP over UDP and TCP for sip.js's core (docs/calls.md). sip.js parses and builds messages and runs transactions and
 * dialogs; this file moves bytes, and addressing.ts decides where they go (RFC 3261 section 18):
 *
 * - inbound: a datagram, or a TCP frame (headers, then Content-Length bytes), is size-checked and parsed by sip.js's
 *   `Parser`; the top Via of a request gets `received` and `rport` from the packet's source, replacing any the peer
 *   wrote; the Request-URI user, when it is not the engine's own, moves to the `X-Switchboard-Dialed` header (the
 *   core answers 404 to any other user, docs/calls.md) so the call handler can read the dialed number;
 * - outbound requests go to the first Route (loose routing) or else the Request-URI; responses go to the top Via's
 *   `received`/`rport`, that is where the request came from, over TCP on the connection the request came on (once
 *   it has closed, a new connection to the source address at the Via's sent-by port).
 *
 * Nothing a peer sends can throw out of here: unparseable, truncated or oversize input is counted by reason and
 * logged at debug level, and the socket goes on.
 */
import dgram from 'node:dgram';
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import {
  IncomingRequestMessage,
  IncomingResponseMessage,
  type Logger,
  Parser,
  type Transport,
} from 'sip.js/lib/core/index.js';
import { NameAddrHeader } from 'sip.js/lib/grammar/index.js';
import {
  dialedHeader,
  prepareInboundRequest,
  type Protocol,
  requestTarget,
  responseTarget,
  type Source,
} from './addressing.ts';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';

export { dialedHeader, prepareInboundRequest, type Protocol, requestTarget, responseTarget, type Source };

/** The largest message taken: far above any real INVITE, well below a datagram's limit. */
export const maxMessageBytes = 16_384;

export interface TransportEvents {
  request(message: IncomingRequestMessage, source: Source): void;
  response(message: IncomingResponseMessage, source: Source): void;
  /** Input that is not a SIP message we can take. */
  malformed(reason: 'unparseable' | 'oversize' | 'truncated' | 'not_sip', source: Source): void;
  /** A message sent (for the metrics), by method or status. */
  sent(kind: string): void;
}

async function resolve(host: string): Promise<string> {
  if (net.isIP(host) !== 0) return host;
  assertNotHoldingConnection(`a DNS lookup of ${host}`);
  const found = await lookup(host);
  return found.address;
}

/**
 * Why sip.js's core cannot take a parsed message, if it cannot. The core trusts what sip.js's user agent checks
 * before it (which this engine does not use), and throws, or half-handles a call, on a message without them:
 *
 * - the header fields every request and response carries (RFC 3261 section 8.1.1): From, To, Call-ID, CSeq and Via,
 *   each readable, and for a request a Request-URI it can read (a `tel:` one it cannot);
 * - a Contact that names a URI (`*` only means something in a REGISTER), which a dialog needs as its remote target;
 * - a Content-Type for any body (RFC 3261 section 20.15): without one, the core throws while it builds the dialog of
 *   an INVITE it answers, after arming the dialog's timer, which then throws out of the timer and ends the process;
 * - a body as long as its Content-Length (RFC 3261 section 18.3: a datagram that ends before is an error).
 */
function unusable(
  message: IncomingRequestMessage | IncomingResponseMessage,
  raw: string,
): 'unparseable' | 'truncated' | undefined {
  if (message.from === undefined || message.to === undefined || message.via === undefined) return 'unparseable';
  if (typeof message.callId !== 'string' || !Number.isSafeInteger(message.cseq)) return 'unparseable';
  if (message instanceof IncomingRequestMessage) {
    if (message.ruri === undefined) return 'unparseable';
    if (message.hasHeader('contact') && message.method !== 'REGISTER') {
      if (!(message.parseHeader('contact') instanceof NameAddrHeader)) return 'unparseable';
    }
  }
  if (message.body !== '' && !message.parseHeader('content-type')) return 'unparseable';
  const length = message.getHeader('content-length');
  if (length !== undefined) {
    const bodyStart = raw.indexOf('\r\n\r\n');
    const available = bodyStart === -1 ? 0 : Buffer.byteLength(raw.slice(bodyStart + 4));
    if (Number(length) > available) return 'truncated';
  }
  return undefined;
}

const silentLogger: Logger = {
  error() {},
  warn() {},
  log() {},
  debug() {},
} as unknown as Logger;

abstract class SipTransport implements Transport {
  abstract readonly protocol: string;

  constructor(
    protected readonly events: TransportEvents,
    protected readonly ownUser: string,
  ) {}

  abstract send(message: string): Promise<void>;

  /** Where the requests of a dialog go instead of their Request-URI or Route (a registered device's flow), by Call-ID. */
  private readonly pinned = new Map<string, { host: string; port: number }>();

  /** Sends every request of the Call-ID to `target` until the returned function is called. */
  pin(callId: string, target: { host: string; port: number }): () => void {
    this.pinned.set(callId, target);
    return () => {
      if (this.pinned.get(callId) === target) this.pinned.delete(callId);
    };
  }

  /** One complete message from a peer. */
  protected receive(raw: string, source: Source): void {
    try {
      if (!raw.startsWith('SIP/2.0 ') && !/^[A-Z]+ \S+ SIP\/2\.0\r\n/.test(raw)) {
        this.events.malformed('not_sip', source);
        return;
      }
      const response = raw.startsWith('SIP/2.0 ');
      const prepared = response ? raw : prepareInboundRequest(raw, source, this.ownUser);
      const message = prepared === undefined ? undefined : Parser.parseMessage(prepared, silentLogger);
      const problem = message === undefined ? 'unparseable' : unusable(message, raw);
      if (message === undefined || problem !== undefined) {
        this.events.malformed(problem ?? 'unparseable', source);
        return;
      }
      if (message instanceof IncomingResponseMessage) this.events.response(message, source);
      else this.events.request(message as IncomingRequestMessage, source);
    } catch {
      // sip.js's grammar throws on some input; it is garbage like any other.
      this.events.malformed('unparseable', source);
    }
  }

  protected target(message: string): { host: string; port: number } {
    if (message.startsWith('SIP/2.0 ')) {
      const target = responseTarget(message);
      if (target === undefined) throw new Error('response without a usable Via');
      return target;
    }
    // A request starts a transaction whose answer somebody waits for: never while a database connection is held.
    assertNotHoldingConnection(`a SIP ${this.kindOf(message)}`);
    if (this.pinned.size > 0) {
      const callId = /^(?:call-id|i)[ \t]*:[ \t]*(\S+)/im.exec(message)?.[1];
      const pinned = callId === undefined ? undefined : this.pinned.get(callId);
      if (pinned !== undefined) return pinned;
    }
    const target = requestTarget(message);
    if (target === undefined) throw new Error('request without a usable Request-URI');
    return { host: target.host, port: target.port ?? 5060 };
  }

  protected kindOf(message: string): string {
    return message.startsWith('SIP/2.0 ') ? (message.slice(8, 11) ?? '?') : (message.split(' ')[0] ?? '?');
  }
}

export class UdpTransport extends SipTransport {
  readonly protocol = 'UDP';
  private socket: dgram.Socket | undefined;

  async listen(host: string, port: number): Promise<number> {
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    socket.on('message', (data, info) => {
      const source: Source = { protocol: 'udp', address: info.address, port: info.port };
      if (data.length > maxMessageBytes) {
        this.events.malformed('oversize', source);
        return;
      }
      const raw = data.toString('utf8');
      if (raw.trim() === '') return; // keep-alive (RFC 5626 CRLF)
      this.receive(raw, source);
    });
    socket.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(port, host, () => {
        socket.off('error', reject);
        resolve();
      });
    });
    this.socket = socket;
    return socket.address().port;
  }

  async send(message: string): Promise<void> {
    const socket = this.socket;
    if (socket === undefined) throw new Error('the UDP transport is not listening');
    const target = this.target(message);
    const address = await resolve(target.host);
    await new Promise<void>((resolve, reject) =>
      socket.send(message, target.port, address, (error) => (error ? reject(error) : resolve())),
    );
    this.events.sent(this.kindOf(message));
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket === undefined) resolve();
      else this.socket.close(() => resolve());
      this.socket = undefined;
    });
  }
}

/**
 * Splits a TCP byte stream into SIP messages (headers, blank line, Content-Length bytes: RFC 3261 section 18.3).
 * A stream that cannot be split any more fails: `oversize` once a message would be longer than any we take,
 * `unparseable` when a message's length cannot be told (a Content-Length that is not a number, or two that differ),
 * since every byte after it would be read at the wrong place.
 */
export class StreamFramer {
  private buffer = Buffer.alloc(0);

  /** Adds bytes; returns the messages now complete, and the failure once the stream cannot be a SIP stream. */
  push(chunk: Buffer): { messages: string[]; failure?: 'oversize' | 'unparseable' } {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    const messages: string[] = [];
    for (;;) {
      // Keep-alives and stray line ends between messages.
      let start = 0;
      while (start < this.buffer.length && (this.buffer[start] === 0x0d || this.buffer[start] === 0x0a)) start += 1;
      if (start > 0) this.buffer = this.buffer.subarray(start);
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end === -1) return this.buffer.length > maxMessageBytes ? { messages, failure: 'oversize' } : { messages };
      if (end + 4 > maxMessageBytes) return { messages, failure: 'oversize' };
      const head = this.buffer.subarray(0, end).toString('latin1');
      const values = [...head.matchAll(/^(?:content-length|l)[ \t]*:(.*)$/gim)].map((match) =>
        (match[1] as string).trim(),
      );
      if (values.some((value) => !/^\d{1,9}$/.test(value) || Number(value) !== Number(values[0]))) {
        return { messages, failure: 'unparseable' };
      }
      const length = values.length === 0 ? 0 : Number(values[0]);
      if (end + 4 + length > maxMessageBytes) return { messages, failure: 'oversize' };
      if (this.buffer.length < end + 4 + length) return { messages };
      messages.push(this.buffer.subarray(0, end + 4 + length).toString('utf8'));
      this.buffer = this.buffer.subarray(end + 4 + length);
    }
  }
}

export class TcpTransport extends SipTransport {
  readonly protocol = 'TCP';
  private server: net.Server | undefined;
  /** Open connections by `address:port` of the peer. */
  private readonly connections = new Map<string, net.Socket>();

  async listen(host: string, port: number): Promise<number> {
    const server = net.createServer((socket) => this.adopt(socket));
    server.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    return (server.address() as net.AddressInfo).port;
  }

  private adopt(socket: net.Socket): void {
    const source: Source = {
      protocol: 'tcp',
      address: socket.remoteAddress?.replace(/^::ffff:/, '') ?? '',
      port: socket.remotePort ?? 0,
    };
    const key = `${source.address}:${source.port}`;
    this.connections.set(key, socket);
    const framer = new StreamFramer();
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      const { messages, failure } = framer.push(chunk);
      for (const message of messages) this.receive(message, source);
      if (failure !== undefined) {
        this.events.malformed(failure, source);
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (this.connections.get(key) === socket) this.connections.delete(key);
    });
    // A peer that never completes a message is cut after a while.
    socket.setTimeout(300_000, () => socket.destroy());
  }

  async send(message: string): Promise<void> {
    const socket = message.startsWith('SIP/2.0 ')
      ? await this.responseConnection(message)
      : await this.requestConnection(message);
    await new Promise<void>((resolve, reject) => socket.write(message, (error) => (error ? reject(error) : resolve())));
    this.events.sent(this.kindOf(message));
  }

  /** The connection to `address:port` while it can still be written to. */
  private openConnection(address: string, port: number): net.Socket | undefined {
    const open = this.connections.get(`${address}:${port}`);
    return open !== undefined && !open.destroyed && open.writable ? open : undefined;
  }

  /** The open connection to `address:port`, or a new one. */
  private async connection(address: string, port: number): Promise<net.Socket> {
    const open = this.openConnection(address, port);
    if (open !== undefined) return open;
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const connection = net.connect({ host: address, port }, () => resolve(connection));
      connection.once('error', reject);
    });
    this.adopt(socket);
    return socket;
  }

  private async requestConnection(message: string): Promise<net.Socket> {
    const target = this.target(message);
    return this.connection(await resolve(target.host), target.port);
  }

  /**
   * A response goes on the connection its request came on (`received`:`rport`, which the transport wrote from that
   * connection's peer). Once that connection has closed, RFC 3261 section 18.2.2: a new connection to the request's
   * source address (`received`), at the port of the Via's sent-by.
   */
  private async responseConnection(message: string): Promise<net.Socket> {
    const target = responseTarget(message);
    if (target === undefined) throw new Error('response without a usable Via');
    return this.openConnection(target.host, target.port) ?? this.connection(target.host, target.sentByPort);
  }

  async close(): Promise<void> {
    for (const socket of this.connections.values()) socket.destroy();
    this.connections.clear();
    await new Promise<void>((resolve) => (this.server === undefined ? resolve() : this.server.close(() => resolve())));
    this.server = undefined;
  }
}
