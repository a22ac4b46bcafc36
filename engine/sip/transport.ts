/**
 * SIP over UDP and TCP for sip.js's core (docs/calls.md). sip.js parses and builds messages and runs transactions and
 * dialogs; this file moves bytes and decides where they go (RFC 3261 section 18):
 *
 * - inbound: a datagram, or a TCP frame (headers, then Content-Length bytes), is size-checked and parsed by sip.js's
 *   `Parser`; the top Via of a request gets `received` (and `rport` filled) from the packet's source; the
 *   Request-URI user, when it is not the engine's own, moves to the `X-Switchboard-Dialed` header (the core answers
 *   404 to any other user, DESIGN.md) so the call handler can read the dialed number;
 * - outbound requests go to the first Route (loose routing) or else the Request-URI; responses go to the top Via's
 *   `received`/`rport` (else its sent-by), over TCP on the connection the request came on when it is still open.
 *
 * Nothing a peer sends can throw out of here: unparseable, truncated or oversize input is counted by reason and
 * logged at debug level, and the socket goes on.
 */
import dgram from 'node:dgram';
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import {
  type IncomingRequestMessage,
  type IncomingResponseMessage,
  type Logger,
  Parser,
  type Transport,
} from 'sip.js/lib/core/index.js';

export const dialedHeader = 'X-Switchboard-Dialed';
const dialedHeaderLine = new RegExp(`^${dialedHeader}\\s*:`, 'i');
/** The largest message taken: far above any real INVITE, well below a datagram's limit. */
export const maxMessageBytes = 16_384;

export type Protocol = 'udp' | 'tcp';

export interface Source {
  protocol: Protocol;
  address: string;
  port: number;
}

export interface TransportEvents {
  request(message: IncomingRequestMessage, source: Source): void;
  response(message: IncomingResponseMessage, source: Source): void;
  /** Input that is not a SIP message we can take. */
  malformed(reason: 'unparseable' | 'oversize' | 'truncated' | 'not_sip', source: Source): void;
  /** A message sent (for the metrics), by method or status. */
  sent(kind: string): void;
}

/**
 * The host and port of a SIP URI (`sip:user@host:port;params`, IPv6 in brackets). A plain pattern rather than
 * sip.js's grammar: its generated parser rebuilds its tables on every call, and this runs for every message sent.
 */
const uriHostPort = /^sips?:(?:[^@>]*@)?(\[[^\]]+\]|[^:;?>\s]+)(?::(\d{1,5}))?/i;

/** Where a request goes: the first Route (loose routing) or the Request-URI. */
export function requestTarget(raw: string): { host: string; port: number | undefined } | undefined {
  const lines = raw.split('\r\n');
  const route = lines.find((line) => /^route\s*:/i.test(line));
  const uriText = route !== undefined ? /<([^>]+)>/.exec(route)?.[1] : lines[0]?.split(' ')[1];
  if (uriText === undefined) return undefined;
  const match = uriHostPort.exec(uriText);
  if (match === null) return undefined;
  return {
    host: (match[1] as string).replace(/^\[|\]$/g, ''),
    port: match[2] === undefined ? undefined : Number(match[2]),
  };
}

/** Where a response goes: the top Via's received/rport, else its sent-by (RFC 3261 18.2.2, RFC 3581). */
export function responseTarget(raw: string): { host: string; port: number } | undefined {
  const via = raw.split('\r\n').find((line) => /^(via|v)\s*:/i.test(line));
  if (via === undefined) return undefined;
  const value =
    via
      .slice(via.indexOf(':') + 1)
      .split(',')[0]
      ?.trim() ?? '';
  const match = /^SIP\s*\/\s*2\.0\s*\/\s*\w+\s+(\[[^\]]+\]|[^;:\s]+)(?::(\d+))?(.*)$/i.exec(value);
  if (match === null) return undefined;
  const params = match[3] ?? '';
  const received = /;\s*received=([^;\s]+)/i.exec(params)?.[1];
  const rport = /;\s*rport=(\d+)/i.exec(params)?.[1];
  const host = (received ?? match[1] ?? '').replace(/^\[|\]$/g, '');
  const port = Number(rport ?? match[2] ?? 5060);
  return { host, port };
}

/**
 * The request as the core must see it: `received`/`rport` on the top Via, and the dialed user moved to a header
 * when the Request-URI names anyone but `ownUser`. Undefined when there is no Via or request line to work on.
 */
export function prepareInboundRequest(raw: string, source: Source, ownUser: string): string | undefined {
  const headerEnd = raw.indexOf('\r\n\r\n');
  const head = headerEnd === -1 ? raw : raw.slice(0, headerEnd);
  const rest = headerEnd === -1 ? '' : raw.slice(headerEnd);
  // The dialed-number header is ours alone: one a peer sent could name another number than the one it called.
  const lines = head.split('\r\n').filter((line) => !dialedHeaderLine.test(line));
  const viaIndex = lines.findIndex((line) => /^(via|v)\s*:/i.test(line));
  const requestLine = lines[0]?.split(' ');
  if (viaIndex === -1 || requestLine === undefined || requestLine.length !== 3) return undefined;
  const via = lines[viaIndex] as string;
  const colon = via.indexOf(':');
  const values = via.slice(colon + 1).split(',');
  let top = values[0] ?? '';
  top = top.replace(/;\s*rport(?!=)/i, `;rport=${source.port}`);
  if (!/;\s*received=/i.test(top)) top = `${top.trimEnd()};received=${source.address}`;
  values[0] = top;
  lines[viaIndex] = `${via.slice(0, colon + 1)}${values.join(',')}`;
  // The user part, found by pattern (see uriHostPort): in-dialog requests name the engine's own user already.
  const user = /^(sips?:)([^@;?>]*)@/i.exec(requestLine[1] as string);
  if (user !== null && user[2] !== ownUser) {
    lines.push(`${dialedHeader}: ${user[2]}`);
    requestLine[1] = `${user[1]}${ownUser}@${(requestLine[1] as string).slice(user[0].length)}`;
    lines[0] = requestLine.join(' ');
  }
  return lines.join('\r\n') + rest;
}

async function resolve(host: string): Promise<string> {
  if (net.isIP(host) !== 0) return host;
  const found = await lookup(host);
  return found.address;
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

  /** One complete message from a peer. */
  protected receive(raw: string, source: Source): void {
    try {
      if (!raw.startsWith('SIP/2.0 ') && !/^[A-Z]+ \S+ SIP\/2\.0\r\n/.test(raw)) {
        this.events.malformed('not_sip', source);
        return;
      }
      if (raw.startsWith('SIP/2.0 ')) {
        const message = Parser.parseMessage(raw, silentLogger);
        if (message === undefined || !('statusCode' in message)) {
          this.events.malformed('unparseable', source);
          return;
        }
        this.events.response(message as IncomingResponseMessage, source);
        return;
      }
      const prepared = prepareInboundRequest(raw, source, this.ownUser);
      const message = prepared === undefined ? undefined : Parser.parseMessage(prepared, silentLogger);
      if (message === undefined || !('method' in message) || message.method === undefined) {
        this.events.malformed('unparseable', source);
        return;
      }
      this.events.request(message as IncomingRequestMessage, source);
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

/** Splits a TCP byte stream into SIP messages (headers, blank line, Content-Length bytes). */
export class StreamFramer {
  private buffer = Buffer.alloc(0);

  /** Adds bytes; returns the complete messages, or 'oversize' once the stream cannot be a sane SIP stream. */
  push(chunk: Buffer): string[] | 'oversize' {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    const messages: string[] = [];
    for (;;) {
      // Keep-alives and stray line ends between messages.
      let start = 0;
      while (start < this.buffer.length && (this.buffer[start] === 0x0d || this.buffer[start] === 0x0a)) start += 1;
      if (start > 0) this.buffer = this.buffer.subarray(start);
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end === -1) return this.buffer.length > maxMessageBytes ? 'oversize' : messages;
      const head = this.buffer.subarray(0, end).toString('utf8');
      const lengthHeader = /^(?:content-length|l)\s*:\s*(\d+)\s*$/im.exec(head);
      const length = lengthHeader === null ? 0 : Number(lengthHeader[1]);
      if (end + 4 + length > maxMessageBytes) return 'oversize';
      if (this.buffer.length < end + 4 + length) return messages;
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
      const messages = framer.push(chunk);
      if (messages === 'oversize') {
        this.events.malformed('oversize', source);
        socket.destroy();
        return;
      }
      for (const message of messages) this.receive(message, source);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (this.connections.get(key) === socket) this.connections.delete(key);
    });
    // A peer that never completes a message is cut after a while.
    socket.setTimeout(300_000, () => socket.destroy());
  }

  async send(message: string): Promise<void> {
    const target = this.target(message);
    const address = await resolve(target.host);
    let socket = this.connections.get(`${address}:${target.port}`);
    if (socket === undefined || socket.destroyed) {
      socket = await new Promise<net.Socket>((resolve, reject) => {
        const connection = net.connect({ host: address, port: target.port }, () => resolve(connection));
        connection.once('error', reject);
      });
      this.adopt(socket);
    }
    const open = socket;
    await new Promise<void>((resolve, reject) => open.write(message, (error) => (error ? reject(error) : resolve())));
    this.events.sent(this.kindOf(message));
  }

  async close(): Promise<void> {
    for (const socket of this.connections.values()) socket.destroy();
    this.connections.clear();
    await new Promise<void>((resolve) => (this.server === undefined ? resolve() : this.server.close(() => resolve())));
    this.server = undefined;
  }
}
