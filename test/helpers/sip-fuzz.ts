/**
 * fast-check arbitraries of what a SIP listener may receive: valid messages (INVITE with SDP, OPTIONS, REGISTER,
 * BYE, ACK, CANCEL, other methods, responses) with fields cut, doubled, oversized, in wrong encodings, with bad
 * Content-Length and bad SDP, and plain random bytes. Used by test/engine/sip/sip-fuzz.test.ts against a running engine.
 */
import fc from 'fast-check';

/** Where the messages claim to come from and go to. */
export interface FuzzTarget {
  /** The engine's SIP address and port. */
  engineHost: string;
  enginePort: number;
  /** The sender's address and the port its Via and Contact name. */
  localHost: string;
  localPort: number;
  /** A port that takes (and drops) the RTP an answered call may send. */
  rtpPort: number;
  transport: 'UDP' | 'TCP';
  /** Numbers the engine has a plan for (digits, no '+'); the others are dialed too. */
  numbers: readonly string[];
}

const token = fc.stringMatching(/^[A-Za-z0-9]{1,12}$/);

/**
 * Random bytes, up to `maxLength`, from a seed fast-check draws: fast-check's own byte arrays cost a draw per byte,
 * too slow for a hundred thousand datagrams of up to 20 KB (mulberry32, deterministic per seed).
 */
function bytes(maxLength: number): fc.Arbitrary<Buffer> {
  return fc.tuple(fc.integer(), fc.nat(maxLength)).map(([seed, length]) => {
    const out = Buffer.alloc(length);
    let state = seed >>> 0;
    for (let i = 0; i < length; i += 1) {
      state = (state + 0x6d2b79f5) >>> 0;
      let value = Math.imul(state ^ (state >>> 15), state | 1);
      value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
      out[i] = (value ^ (value >>> 14)) & 0xff;
    }
    return out;
  });
}

/** Values that break SIP and SDP parsers in known ways, mixed into mutations. */
const nasty = [
  '',
  ' ',
  '\0',
  '\t',
  '<',
  '>',
  '<>',
  '<sip:>',
  'sip:',
  'sip:@',
  'sip:a@[',
  'sip:a@[::1',
  'sip:a@host:99999',
  'sip:a@host:-1',
  'tel:+1',
  '"',
  '"unterminated',
  '\\',
  ';',
  ';;;;;',
  ';a=;b==;=c',
  ',',
  ',,,,',
  '=',
  '%',
  '%zz',
  '%00',
  '\u00ff\u00fe',
  '\u2028',
  '\ud800',
  '😀',
  'SIP/2.0/UDP',
  'SIP/2.0/UDP [',
  'SIP/2.0/UDP host:0;branch=',
  'SIP/2.0/XYZ 1.2.3.4:5060;received=;rport=abc',
  'SIP/2.0/UDP 1.2.3.4;rport=99999999999999999999',
  '-1',
  '0',
  '4294967296',
  '99999999999999999999999',
  '1e308',
  'NaN',
  '0x10',
  'INVITE',
  '\r\n',
  '\r\n\r\n',
  '\n',
  '\r',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
];

const sdpLines = [
  'v=0',
  'v=1',
  'o=- 0 0 IN IP4 0.0.0.0',
  'o=',
  's=',
  'c=IN IP4 0.0.0.0',
  'c=IN IP4 999.999.999.999',
  'c=IN IP4 224.2.1.1/127/3',
  'c=IN IP6 ::',
  'c=IN IP6 ::1',
  'c=IN IP4 example.invalid',
  'c=IN IP4',
  'c=',
  't=0 0',
  'm=audio 0 RTP/AVP 0',
  'm=audio 65536 RTP/AVP 0',
  'm=audio -1 RTP/AVP 0',
  'm=audio 4000/2 RTP/AVP 0',
  'm=audio 4000 RTP/AVP',
  'm=audio 4000 RTP/AVP 128 255 -1 abc',
  'm=audio 4000 RTP/SAVP 0',
  'm=audio 4000 UDP/TLS/RTP/SAVPF 0',
  'm=audio abc RTP/AVP 0',
  'm=video 4002 RTP/AVP 96',
  'm=application 9 UDP/DTLS/SCTP webrtc-datachannel',
  'm=',
  'a=rtpmap:0 PCMU/8000',
  'a=rtpmap:0 PCMU/16000',
  'a=rtpmap:96 PCMA/8000',
  'a=rtpmap:101 telephone-event/8000',
  'a=rtpmap:101 telephone-event/0',
  'a=rtpmap:999 opus/48000/2',
  'a=rtpmap:',
  'a=rtpmap:abc',
  'a=fmtp:101 0-16',
  'a=fmtp:',
  'a=ptime:0',
  'a=ptime:-20',
  'a=sendonly',
  'a=recvonly',
  'a=inactive',
  'a=sendrecv',
  'a=rtcp:0',
  'a=candidate:1 1 UDP 1 1.2.3.4 5 typ host',
  'a=ssrc:1 cname:x',
  'a=',
  'x=unknown',
  '=',
];

const headerNames = [
  'Via',
  'v',
  'From',
  'f',
  'To',
  't',
  'Call-ID',
  'i',
  'CSeq',
  'Contact',
  'm',
  'Max-Forwards',
  'Content-Length',
  'l',
  'Content-Type',
  'c',
  'Route',
  'Record-Route',
  'Authorization',
  'Proxy-Authorization',
  'WWW-Authenticate',
  'Proxy-Authenticate',
  'Expires',
  'Require',
  'Supported',
  'Allow',
  'Event',
  'Refer-To',
  'r',
  'Session-Expires',
  'P-Asserted-Identity',
  'X-Switchboard-Dialed',
];

interface Fields {
  dialed: string;
  callId: string;
  branch: string;
  fromTag: string;
  toTag: string;
  cseq: number;
  rtpPort: number;
}

function sdp(target: FuzzTarget, fields: Fields): string {
  return [
    'v=0',
    `o=fuzz ${fields.cseq} 1 IN IP4 ${target.localHost}`,
    's=-',
    `c=IN IP4 ${target.localHost}`,
    't=0 0',
    `m=audio ${fields.rtpPort} RTP/AVP 0 8 101`,
    'a=rtpmap:0 PCMU/8000',
    'a=rtpmap:8 PCMA/8000',
    'a=rtpmap:101 telephone-event/8000',
    'a=fmtp:101 0-16',
    'a=ptime:20',
    'a=sendrecv',
    '',
  ].join('\r\n');
}

type Template = (target: FuzzTarget, fields: Fields) => string;

function message(startLine: string, headers: string[], body = ''): string {
  return `${[startLine, ...headers, `Content-Length: ${Buffer.byteLength(body)}`].join('\r\n')}\r\n\r\n${body}`;
}

function requestOf(method: string, extra: (target: FuzzTarget, fields: Fields) => string[], withSdp = false): Template {
  return (target, fields) => {
    const uri = `sip:${fields.dialed}@${target.engineHost}:${target.enginePort}`;
    const headers = [
      `Via: SIP/2.0/${target.transport} ${target.localHost}:${target.localPort};branch=z9hG4bK${fields.branch};rport`,
      'Max-Forwards: 70',
      `From: "Fuzz" <sip:+15550001111@${target.localHost}>;tag=${fields.fromTag}`,
      `To: <${uri}>${method === 'INVITE' || method === 'OPTIONS' || method === 'REGISTER' ? '' : `;tag=${fields.toTag}`}`,
      `Call-ID: ${fields.callId}`,
      `CSeq: ${fields.cseq} ${method}`,
      `Contact: <sip:fuzz@${target.localHost}:${target.localPort};transport=${target.transport.toLowerCase()}>`,
      'User-Agent: switchboard-fuzz',
      ...extra(target, fields),
    ];
    const body = withSdp ? sdp(target, fields) : '';
    if (withSdp) headers.push('Content-Type: application/sdp');
    return message(`${method} ${uri} SIP/2.0`, headers, body);
  };
}

function responseOf(status: string, method: string, withSdp = false, extra: string[] = []): Template {
  return (target, fields) => {
    const headers = [
      `Via: SIP/2.0/${target.transport} ${target.engineHost}:${target.enginePort};branch=z9hG4bK${fields.branch};rport`,
      `From: <sip:switchboard@${target.engineHost}>;tag=${fields.fromTag}`,
      `To: <sip:${fields.dialed}@${target.localHost}>;tag=${fields.toTag}`,
      `Call-ID: ${fields.callId}`,
      `CSeq: ${fields.cseq} ${method}`,
      `Contact: <sip:fuzz@${target.localHost}:${target.localPort}>`,
      ...extra,
    ];
    const body = withSdp ? sdp(target, fields) : '';
    if (withSdp) headers.push('Content-Type: application/sdp');
    return message(`SIP/2.0 ${status}`, headers, body);
  };
}

const templates: Template[] = [
  requestOf('INVITE', () => ['Allow: INVITE, ACK, CANCEL, BYE, OPTIONS', 'Supported: timer'], true),
  requestOf('INVITE', () => ['Session-Expires: 1800;refresher=uac'], true),
  requestOf('OPTIONS', () => ['Accept: application/sdp']),
  requestOf('REGISTER', (target) => [
    'Expires: 3600',
    `Authorization: Digest username="fuzz", realm="${target.engineHost}", nonce="abc", uri="sip:x", response="0123456789abcdef0123456789abcdef"`,
  ]),
  requestOf('BYE', () => []),
  requestOf('ACK', () => []),
  requestOf('CANCEL', () => []),
  requestOf('INFO', () => ['Content-Type: application/dtmf-relay']),
  requestOf('MESSAGE', () => ['Content-Type: text/plain']),
  requestOf('SUBSCRIBE', () => ['Event: presence', 'Expires: 60']),
  requestOf('NOTIFY', () => ['Event: refer', 'Subscription-State: active']),
  requestOf('REFER', (target) => [`Refer-To: <sip:other@${target.localHost}>`]),
  requestOf('UPDATE', () => [], true),
  requestOf('PRACK', () => ['RAck: 1 1 INVITE']),
  responseOf('100 Trying', 'INVITE'),
  responseOf('180 Ringing', 'INVITE'),
  responseOf('183 Session Progress', 'INVITE', true),
  responseOf('200 OK', 'INVITE', true),
  responseOf('200 OK', 'BYE'),
  responseOf('401 Unauthorized', 'INVITE', false, [
    'WWW-Authenticate: Digest realm="x", nonce="y", qop="auth", algorithm=MD5',
  ]),
  responseOf('407 Proxy Authentication Required', 'INVITE', false, ['Proxy-Authenticate: Digest realm="x", nonce="y"']),
  responseOf('486 Busy Here', 'INVITE'),
  responseOf('503 Service Unavailable', 'OPTIONS', false, ['Retry-After: 5']),
];

type Mutation = (data: Buffer) => Buffer;

/** `text` split in lines (CRLF), edited by `edit`, joined again. */
function onLines(data: Buffer, edit: (lines: string[]) => string[]): Buffer {
  return Buffer.from(edit(data.toString('latin1').split('\r\n')).join('\r\n'), 'latin1');
}

/** The name of the header on line `at`. */
function headerName(lines: string[], at: number): string {
  return (lines[at] ?? '').split(':')[0] ?? 'X';
}

/** The index of a header line (not the start line, not past the blank line), chosen by `pick`. */
function headerLine(lines: string[], pick: number): number {
  const end = lines.indexOf('');
  const count = (end === -1 ? lines.length : end) - 1;
  return count <= 0 ? 0 : 1 + (pick % count);
}

/** The body's lines (after the blank line), edited by `edit`; Content-Length is left as it was (wrong, often). */
function onBody(data: Buffer, edit: (lines: string[]) => string[]): Buffer {
  const text = data.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return data;
  return Buffer.from(text.slice(0, end + 4) + edit(text.slice(end + 4).split('\r\n')).join('\r\n'), 'latin1');
}

const position = fc.nat();

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  // Cut: a header line, the message's end, or a span in the middle.
  position.map(
    (pick) => (data: Buffer) =>
      onLines(data, (lines) => {
        const cut = headerLine(lines, pick);
        return lines.filter((_, i) => i !== cut);
      }),
  ),
  position.map((pick) => (data: Buffer) => data.subarray(0, pick % (data.length + 1))),
  fc.tuple(position, fc.nat(200)).map(([pick, length]) => (data: Buffer) => {
    const at = pick % (data.length + 1);
    return Buffer.concat([data.subarray(0, at), data.subarray(at + length)]);
  }),
  // Doubled: a header line (as it is, or with another value), or the whole message twice in one datagram.
  position.map(
    (pick) => (data: Buffer) =>
      onLines(data, (lines) => {
        const at = headerLine(lines, pick);
        return [...lines.slice(0, at + 1), lines[at] as string, ...lines.slice(at + 1)];
      }),
  ),
  fc.tuple(position, fc.constantFrom(...nasty)).map(
    ([pick, value]) =>
      (data: Buffer) =>
        onLines(data, (lines) => {
          const at = headerLine(lines, pick);
          return [...lines.slice(0, at + 1), `${headerName(lines, at)}: ${value}`, ...lines.slice(at + 1)];
        }),
  ),
  fc.constant((data: Buffer) => Buffer.concat([data, data])),
  // Oversized: a long value, a long token, a great many headers, many Via values.
  fc.tuple(position, fc.integer({ min: 64, max: 20_000 }), fc.constantFrom('a', '9', ';', ',', ' ', '<', '%')).map(
    ([pick, length, char]) =>
      (data: Buffer) =>
        onLines(data, (lines) => {
          const at = headerLine(lines, pick);
          lines[at] = `${lines[at] ?? ''}${char.repeat(length)}`;
          return lines;
        }),
  ),
  fc.tuple(fc.integer({ min: 10, max: 2_000 }), fc.constantFrom(...headerNames)).map(
    ([count, name]) =>
      (data: Buffer) =>
        onLines(data, (lines) => [
          lines[0] as string,
          ...Array.from({ length: count }, (_, i) => `${name}: ${i}`),
          ...lines.slice(1),
        ]),
  ),
  fc
    .integer({ min: 2, max: 400 })
    .map(
      (count) => (data: Buffer) =>
        onLines(data, (lines) =>
          lines.map((line) =>
            /^via:/i.test(line) ? `${line}${', SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bKx'.repeat(count)}` : line,
          ),
        ),
    ),
  // Values replaced: by known-bad ones, by any text, in a header chosen by name.
  fc.tuple(position, fc.constantFrom(...nasty)).map(
    ([pick, value]) =>
      (data: Buffer) =>
        onLines(data, (lines) => {
          const at = headerLine(lines, pick);
          lines[at] = `${headerName(lines, at)}: ${value}`;
          return lines;
        }),
  ),
  fc.tuple(fc.constantFrom(...headerNames), fc.string({ unit: 'binary', maxLength: 80 })).map(
    ([name, value]) =>
      (data: Buffer) =>
        onLines(data, (lines) => {
          const at = lines.findIndex((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`));
          if (at === -1) return [lines[0] as string, `${name}: ${value}`, ...lines.slice(1)];
          lines[at] = `${name}: ${value}`;
          return lines;
        }),
  ),
  // The start line: another method, URI, version or status.
  fc
    .tuple(
      fc.constantFrom('INVITE', 'invite', 'OPTIONS', 'BYE', 'ACK', 'XYZ', '', 'SIP/2.0', 'INVITE INVITE'),
      fc.constantFrom(
        'sip:switchboard@127.0.0.1',
        'sip:',
        '<sip:a@b>',
        'sip:a@[::1]:5060',
        'tel:+1',
        '*',
        '',
        'sip:%00@h',
        'sips:a@b;transport=tls',
      ),
      fc.constantFrom('SIP/2.0', 'SIP/1.0', 'SIP/2.0 ', 'sip/2.0', 'HTTP/1.1', '', 'SIP/2.0 extra'),
    )
    .map(
      ([method, uri, version]) =>
        (data: Buffer) =>
          onLines(data, (lines) => {
            lines[0] = lines[0]?.startsWith('SIP/2.0 ') ? `${version} ${method}` : `${method} ${uri} ${version}`;
            return lines;
          }),
    ),
  // Header names: odd case, space before the colon, no colon, folded lines.
  position.map(
    (pick) => (data: Buffer) =>
      onLines(data, (lines) => {
        const at = headerLine(lines, pick);
        lines[at] = (lines[at] ?? '').replace(':', pick % 3 === 0 ? ' : ' : pick % 3 === 1 ? '' : ':\r\n ');
        return lines;
      }),
  ),
  // Wrong encodings: bytes that are not UTF-8, UTF-16, NUL and control characters, bit flips.
  fc.tuple(position, bytes(64)).map(([pick, inserted]) => (data: Buffer) => {
    const at = pick % (data.length + 1);
    return Buffer.concat([data.subarray(0, at), inserted, data.subarray(at)]);
  }),
  fc.constant((data: Buffer) => Buffer.from(data.toString('latin1'), 'utf16le')),
  fc.constant((data: Buffer) => Buffer.from(data.toString('latin1').replace(/a/g, 'à').replace(/o/g, 'ö'), 'utf8')),
  fc.constant((data: Buffer) => Buffer.from(data.toString('latin1').replace(/a/g, 'à'), 'latin1')),
  fc
    .tuple(position, fc.constantFrom('\0', '\x01', '\x7f', '\x1b[2J', '\ufeff', '\r', '\n'))
    .map(([pick, char]) => (data: Buffer) => {
      const at = pick % (data.length + 1);
      return Buffer.concat([data.subarray(0, at), Buffer.from(char), data.subarray(at)]);
    }),
  fc.array(position, { minLength: 1, maxLength: 16 }).map((picks) => (data: Buffer) => {
    const copy = Buffer.from(data);
    for (const pick of picks) {
      const at = pick % Math.max(1, copy.length);
      if (at < copy.length) copy[at] = (copy[at] as number) ^ (1 << (pick % 8));
    }
    return copy;
  }),
  // Line ends: bare LF, bare CR, doubled CR.
  fc
    .constantFrom('\n', '\r', '\r\r\n', '\n\r')
    .map((end) => (data: Buffer) => Buffer.from(data.toString('latin1').split('\r\n').join(end), 'latin1')),
  // Content-Length: missing, wrong, not a number, twice with two values, compact.
  fc
    .constantFrom(
      '',
      '-1',
      '0',
      '1',
      '99999',
      '16384',
      '4294967296',
      '99999999999999999999',
      'abc',
      '1e3',
      '0x10',
      ' 12 ',
      '+5',
      '5 5',
      '١٢',
    )
    .map(
      (value) => (data: Buffer) =>
        onLines(data, (lines) =>
          lines.map((line) => (/^(content-length|l)\s*:/i.test(line) ? `Content-Length: ${value}` : line)),
        ),
    ),
  fc.integer({ min: -200, max: 200 }).map(
    (delta) => (data: Buffer) =>
      onLines(data, (lines) =>
        lines.map((line) => {
          const match = /^(content-length|l)\s*:\s*(\d+)/i.exec(line);
          return match === null ? line : `Content-Length: ${Math.max(0, Number(match[2]) + delta)}`;
        }),
      ),
  ),
  fc.constant((data: Buffer) =>
    onLines(data, (lines) => lines.filter((line) => !/^(content-length|l)\s*:/i.test(line))),
  ),
  fc.nat(5000).map(
    (value) => (data: Buffer) =>
      onLines(data, (lines) => {
        const at = lines.findIndex((line) => /^content-length\s*:/i.test(line));
        return at === -1 ? lines : [...lines.slice(0, at + 1), `l: ${value}`, ...lines.slice(at + 1)];
      }),
  ),
  // Bad SDP: lines cut, doubled, replaced, many m-lines, a huge attribute.
  position.map(
    (pick) => (data: Buffer) => onBody(data, (lines) => lines.filter((_, i) => i !== pick % Math.max(1, lines.length))),
  ),
  position.map(
    (pick) => (data: Buffer) =>
      onBody(data, (lines) => {
        const at = pick % Math.max(1, lines.length);
        return [...lines.slice(0, at + 1), lines[at] ?? '', ...lines.slice(at + 1)];
      }),
  ),
  fc.tuple(position, fc.constantFrom(...sdpLines)).map(
    ([pick, line]) =>
      (data: Buffer) =>
        onBody(data, (lines) => {
          lines[pick % Math.max(1, lines.length)] = line;
          return lines;
        }),
  ),
  fc.tuple(position, fc.constantFrom(...sdpLines)).map(
    ([pick, line]) =>
      (data: Buffer) =>
        onBody(data, (lines) => {
          const at = pick % Math.max(1, lines.length);
          return [...lines.slice(0, at), line, ...lines.slice(at)];
        }),
  ),
  fc
    .integer({ min: 2, max: 1_000 })
    .map(
      (count) => (data: Buffer) =>
        onBody(data, (lines) => [
          ...lines,
          ...Array.from({ length: count }, (_, i) => `m=audio ${i} RTP/AVP ${i % 128}`),
        ]),
    ),
  fc
    .integer({ min: 100, max: 16_000 })
    .map((length) => (data: Buffer) => onBody(data, (lines) => [...lines, `a=x:${'y'.repeat(length)}`])),
  fc.string({ unit: 'binary', maxLength: 200 }).map((text) => (data: Buffer) => onBody(data, () => [text])),
);

const fields: fc.Arbitrary<(target: FuzzTarget) => Fields> = fc
  .record({
    dialedPick: fc.nat(),
    otherNumber: fc.stringMatching(/^\+?[0-9]{2,15}$/),
    callId: token,
    branch: token,
    fromTag: token,
    toTag: token,
    cseq: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  })
  .map((values) => (target: FuzzTarget) => {
    const choices = [...target.numbers, values.otherNumber, 'switchboard'];
    return {
      dialed: choices[values.dialedPick % choices.length] as string,
      callId: `fuzz-${values.callId}`,
      branch: values.branch,
      fromTag: values.fromTag,
      toTag: values.toTag,
      cseq: values.cseq,
      rtpPort: target.rtpPort,
    };
  });

/** One datagram (or TCP message): a template as it is, mutated, or random bytes. */
export function datagram(target: FuzzTarget): fc.Arbitrary<Buffer> {
  const fromTemplate = fc
    .tuple(fc.nat(templates.length - 1), fields, fc.array(mutation, { minLength: 0, maxLength: 4 }))
    .map(([index, values, mutations]) => {
      const text = (templates[index] as Template)(target, values(target));
      return mutations.reduce<Buffer>((data, mutate) => mutate(data), Buffer.from(text, 'utf8'));
    });
  return fc.oneof(
    { weight: 16, arbitrary: fromTemplate },
    { weight: 1, arbitrary: bytes(1_500) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 300 }).map((text) => Buffer.from(text)) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom('INVITE ', 'SIP/2.0 ', 'OPTIONS sip:x SIP/2.0\r\n', '\r\n'), bytes(20_000))
        .map(([start, rest]) => Buffer.concat([Buffer.from(start), rest])),
    },
  );
}
