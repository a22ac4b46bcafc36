/**
 * Where SIP messages go and what an inbound request looks like once prepared for sip.js's core (RFC 3261 section 18,
 * RFC 3581; docs/calls.md, "Where answers go"): the pure text work of the transport (transport.ts), apart from its
 * sockets. Requests go to the first Route (loose routing) or else the Request-URI; responses go to the top Via's
 * `received`/`rport`, which an inbound request gets from the packet's source whatever the peer wrote; the dialed
 * user moves to the `X-Switchboard-Dialed` header.
 */
export const dialedHeader = 'X-Switchboard-Dialed';
/**
 * A REGISTER's `Contact: *` (remove every binding, RFC 3261 section 10.2.2): sip.js's parser knows no `*` Contact and
 * drops the whole message, so the transport moves it to this header of ours before the parser sees it.
 */
export const contactWildcardHeader = 'X-Switchboard-Contact-Wildcard';
const privateHeaderLine = new RegExp(`^(?:${dialedHeader}|${contactWildcardHeader})\\s*:`, 'i');
const wildcardContactLine = /^(?:contact|m)\s*:\s*\*\s*$/i;

export type Protocol = 'udp' | 'tcp';

export interface Source {
  protocol: Protocol;
  address: string;
  port: number;
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

/**
 * Splits `text` at `separator`, except inside double-quoted strings (Via parameters may be quoted strings, RFC 3261
 * section 25.1 `gen-value`, and a comma or semicolon inside one separates nothing).
 */
function splitOutsideQuotes(text: string, separator: ',' | ';'): string[] {
  const parts: string[] = [];
  let start = 0;
  let quoted = false;
  for (let index = 0; index < text.length; index += 1) {
    const char = text[index];
    if (char === '\\' && quoted) index += 1;
    else if (char === '"') quoted = !quoted;
    else if (char === separator && !quoted) {
      parts.push(text.slice(start, index));
      start = index + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** The top Via of a message head whose lines are unfolded: which line, and its first value split in parts. */
function topVia(
  lines: readonly string[],
): { index: number; prefix: string; sentBy: string; params: string[]; others: string[] } | undefined {
  const index = lines.findIndex((line) => /^(via|v)\s*:/i.test(line));
  if (index === -1) return undefined;
  const line = lines[index] as string;
  const colon = line.indexOf(':');
  const [top = '', ...others] = splitOutsideQuotes(line.slice(colon + 1), ',');
  const [sentBy = '', ...params] = splitOutsideQuotes(top, ';');
  return { index, prefix: line.slice(0, colon + 1), sentBy, params, others };
}

const paramName = (param: string) => (param.split('=', 1)[0] as string).trim().toLowerCase();
const paramValue = (param: string) => param.slice(param.indexOf('=') + 1).trim();

/**
 * Where a response goes (RFC 3261 section 18.2.2, RFC 3581): the top Via's `received` and `rport`, which the
 * transport wrote from the request's real source (`prepareInboundRequest`), else its sent-by. `sentByPort` is where
 * a TCP response goes when the request's connection has closed: a new connection to `received` at that port.
 */
export function responseTarget(raw: string): { host: string; port: number; sentByPort: number } | undefined {
  const head = raw.split('\r\n\r\n', 1)[0] as string;
  const via = topVia(head.split('\r\n'));
  if (via === undefined) return undefined;
  const match = /^\s*SIP\s*\/\s*2\.0\s*\/\s*\w+\s+(\[[^\]]+\]|[^\s:]+)(?::(\d{1,5}))?\s*$/i.exec(via.sentBy);
  if (match === null) return undefined;
  const param = (name: string) => {
    const found = via.params.find((entry) => paramName(entry) === name && entry.includes('='));
    return found === undefined ? undefined : paramValue(found);
  };
  const received = param('received');
  const rport = param('rport');
  const sentByPort = Number(match[2] ?? 5060);
  const host = (received ?? (match[1] as string)).replace(/^\[|\]$/g, '');
  const port = rport !== undefined && /^\d{1,5}$/.test(rport) ? Number(rport) : sentByPort;
  return { host, port, sentByPort };
}

/**
 * The request as the core must see it: its header lines unfolded (RFC 3261 section 7.3.1), the top Via's `received`
 * and `rport` set from the packet's source whatever the peer wrote (RFC 3261 section 18.2.1, RFC 3581: responses then
 * go back where the request came from, docs/calls.md), any of our private headers the peer sent dropped, and the dialed
 * user moved to that header when the Request-URI names anyone but `ownUser`. A REGISTER's `Contact: *` moves to
 * `contactWildcardHeader`, and its Request-URI without a user (`sip:host`, the usual) gets `ownUser`. Undefined when there is no Via or
 * request line to work on.
 */
export function prepareInboundRequest(raw: string, source: Source, ownUser: string): string | undefined {
  const headerEnd = raw.indexOf('\r\n\r\n');
  const head = headerEnd === -1 ? raw : raw.slice(0, headerEnd);
  const rest = headerEnd === -1 ? '' : raw.slice(headerEnd);
  // The private headers are ours alone: a dialed number a peer sent could name another number than the one it called.
  const lines = head
    .replace(/\r\n[ \t]+/g, ' ')
    .split('\r\n')
    .filter((line) => !privateHeaderLine.test(line));
  const via = topVia(lines);
  const requestLine = lines[0]?.split(' ');
  if (via === undefined || requestLine === undefined || requestLine.length !== 3) return undefined;
  if (requestLine[0] === 'REGISTER') {
    for (let index = 1; index < lines.length; index += 1) {
      if (wildcardContactLine.test(lines[index] as string)) lines[index] = `${contactWildcardHeader}: *`;
    }
    // A REGISTER names the domain (`sip:host`), no user: it is for the engine's own user, as the core requires.
    if (/^sips?:/i.test(requestLine[1] as string) && !(requestLine[1] as string).includes('@')) {
      requestLine[1] = (requestLine[1] as string).replace(/^(sips?:)/i, `$1${ownUser}@`);
      lines[0] = requestLine.join(' ');
    }
  }
  // The peer's own received and rport say nothing we may trust: both are replaced by the packet's source, rport
  // even when the peer did not ask for it (symmetric response routing, as SIP servers force behind NAT).
  const params = via.params.filter((param) => !['received', 'rport'].includes(paramName(param)));
  const top = [via.sentBy.trimEnd(), ...params, `received=${source.address}`, `rport=${source.port}`].join(';');
  lines[via.index] = `${via.prefix}${[top, ...via.others].join(',')}`;
  // The user part, found by pattern (see uriHostPort): in-dialog requests name the engine's own user already.
  const user = /^(sips?:)([^@;?>]*)@/i.exec(requestLine[1] as string);
  if (user !== null && user[2] !== ownUser) {
    lines.push(`${dialedHeader}: ${user[2]}`);
    requestLine[1] = `${user[1]}${ownUser}@${(requestLine[1] as string).slice(user[0].length)}`;
    lines[0] = requestLine.join(' ');
  }
  return lines.join('\r\n') + rest;
}
