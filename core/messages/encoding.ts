/**
 * How a text travels over SMPP (docs/messaging.md, "Sending"): GSM 03.38 7-bit when every character is in the
 * default alphabet or its extension table (an extension character costs two septets, its escape and itself), else
 * UCS-2. One part holds 160 septets or 70 UCS-2 units; a longer text is split into parts of 153 septets or 67 units,
 * each behind a concatenation header (UDH, IEI 0x00: 8-bit reference, part count, part number). A split never
 * separates an escape from its character (the split is by characters) or a UTF-16 surrogate pair.
 *
 * The bytes are what `submit_sm`'s `short_message` carries: GSM unpacked, one septet per octet (SMPP's data_coding
 * 0, as carriers take it), encoded by the `smpp` package's own GSM coder; UCS-2 big-endian.
 */
import smpp from 'smpp';

export type TextEncoding = 'gsm7' | 'ucs2';

/** SMPP data_coding: 0 (SMSC default alphabet, GSM 03.38) or 8 (UCS-2). */
export const dataCoding: Record<TextEncoding, number> = { gsm7: 0x00, ucs2: 0x08 };

const single = { gsm7: 160, ucs2: 70 };
const concatenated = { gsm7: 153, ucs2: 67 };
/** The longest text operation 67 takes (ten parts of UCS-2 and more of GSM). */
export const maxTextLength = 1600;

const gsm = smpp.gsmCoder.GSM;
const basic = new Set([...gsm.chars].filter((char) => char !== '\x1B'));
// The package keeps the backslash escaped twice in its table; the set needs it once.
const extension = new Set([...gsm.extChars.replace('\\\\', '\\')]);

/** GSM 7-bit when every character can be, else UCS-2. */
export function encodingOf(text: string): TextEncoding {
  for (const char of text) if (!basic.has(char) && !extension.has(char)) return 'ucs2';
  return 'gsm7';
}

/** A character's cost in its encoding: septets (1, or 2 for an extension character) or UTF-16 units. */
function cost(char: string, encoding: TextEncoding): number {
  if (encoding === 'ucs2') return char.length;
  return extension.has(char) && !basic.has(char) ? 2 : 1;
}

/** The text's parts (their texts), as many as its length needs. */
export function splitText(text: string): { encoding: TextEncoding; parts: string[] } {
  const encoding = encodingOf(text);
  const chars = [...text];
  const total = chars.reduce((sum, char) => sum + cost(char, encoding), 0);
  if (total <= single[encoding]) return { encoding, parts: [text] };
  const parts: string[] = [];
  let current = '';
  let used = 0;
  for (const char of chars) {
    const size = cost(char, encoding);
    if (used + size > concatenated[encoding]) {
      parts.push(current);
      current = '';
      used = 0;
    }
    current += char;
    used += size;
  }
  if (current !== '') parts.push(current);
  return { encoding, parts };
}

/** One part's `short_message` bytes and `esm_class` (0x40, UDH indicator, when it has a header). */
export interface EncodedPart {
  bytes: Buffer;
  esmClass: number;
  dataCoding: number;
}

/**
 * The PDUs' payloads for `text`: one part without a header, or each part behind the concatenation header with
 * `reference` (0-255, the same for every part of the text).
 */
export function encodeText(text: string, reference: number): EncodedPart[] {
  const { encoding, parts } = splitText(text);
  const encode = (part: string) =>
    encoding === 'gsm7' ? smpp.gsmCoder.encode(part, 0x00) : smpp.encodings.UCS2.encode(part);
  if (parts.length === 1) return [{ bytes: encode(parts[0] ?? ''), esmClass: 0, dataCoding: dataCoding[encoding] }];
  return parts.map((part, index) => ({
    bytes: Buffer.concat([Buffer.from([0x05, 0x00, 0x03, reference & 0xff, parts.length, index + 1]), encode(part)]),
    esmClass: 0x40,
    dataCoding: dataCoding[encoding],
  }));
}

/** A concatenated part's header, read from `short_message` bytes with the UDH indicator set. */
export interface Concatenation {
  reference: number;
  count: number;
  index: number;
}

/**
 * The text and concatenation of an inbound part: `bytes` as `deliver_sm` carried them, with its `esm_class` and
 * `data_coding`. Undefined for a header that is malformed (longer than the bytes).
 */
export function decodePart(
  bytes: Buffer,
  esmClass: number,
  coding: number,
): { text: string; concatenation?: Concatenation } | undefined {
  let body = bytes;
  let concatenation: Concatenation | undefined;
  if ((esmClass & 0x40) !== 0 && bytes.length > 0) {
    const headerLength = bytes[0] ?? 0;
    if (headerLength + 1 > bytes.length) return undefined;
    const header = bytes.subarray(1, headerLength + 1);
    body = bytes.subarray(headerLength + 1);
    for (let at = 0; at + 1 < header.length;) {
      const id = header[at] ?? 0;
      const length = header[at + 1] ?? 0;
      const value = header.subarray(at + 2, at + 2 + length);
      if (value.length !== length) return undefined;
      if (id === 0x00 && length === 3) concatenation = { reference: value[0]!, count: value[1]!, index: value[2]! };
      if (id === 0x08 && length === 4) {
        concatenation = { reference: (value[0]! << 8) | value[1]!, count: value[2]!, index: value[3]! };
      }
      at += 2 + length;
    }
  }
  const scheme = coding & 0x0f;
  // 8: UCS-2; 3: Latin-1; 0 (the SMSC's default) and the rest: GSM 03.38.
  const text =
    scheme === 0x08
      ? smpp.encodings.UCS2.decode(body)
      : scheme === 0x03
        ? smpp.encodings.LATIN1.decode(body)
        : smpp.gsmCoder.decode(body, 0x00);
  return concatenation === undefined ? { text } : { text, concatenation };
}
