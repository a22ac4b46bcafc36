/**
 * The receiver helper of the official client (`client/webhooks.ts`, published as `switchboard/webhooks`) against
 * section 6, Delivery: signatures over `<timestamp>.<rawBody>` keyed by the whole secret, any of several signatures
 * against any of several secrets, the 1-12 digit timestamp within 300 seconds either way.
 *
 * The expected signatures are not computed by the code under test: they were computed once with the openssl CLI,
 * `printf '%s' "$ts.$body" | openssl dgst -sha256 -hmac "$secret"`, and are written here as they came out. One test
 * sends what the service's own signing code produces through a real HTTP request to a receiver using the helper, and
 * one imports the helper the way an application would, through the package export, after `npm run build:client`.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import type * as Webhooks from '../../client/webhooks.ts';
import {
  verifyWebhook,
  type VerifyWebhookOptions,
  WebhookVerificationError,
  type WebhookVerificationReason,
} from '../../client/webhooks.ts';
import { newSigningSecret } from '../../core/webhooks/secrets.ts';
import { signatureHeader } from '../../core/webhooks/signature.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// ---------------------------------------------------------------------------------------------------------------
// Vectors (openssl dgst -sha256 -hmac)

const secret = 'whsec_tK9pX2mQ7vR4nB8cL1dF6hJ3sW5yA0eZ';
const rotatedSecret = 'whsec_rotated_Gm2Nq8Vx4Lp6Tz1Kc9Hb3Wd7';
const timestamp = '1741083330';
const body =
  '{"id":"6f1c2b1e-3a8d-4c5e-9f7a-2b3c4d5e6f70","type":"call.started","occurredAt":"2025-03-04T10:15:30.123Z","applicationId":"acme-phone","workspaceId":"0b9f6f3e-1c2d-4e5f-8a6b-7c8d9e0f1a2b","externalWorkspaceId":"acme-paris","sequence":1,"callId":"5d2e8f14-7b3a-4c6d-9e1f-2a3b4c5d6e7f","call":{"id":"5d2e8f14-7b3a-4c6d-9e1f-2a3b4c5d6e7f","direction":"inbound","from":"+33612345678","to":"+33198765432","phoneNumberId":null,"state":"initiated","startedAt":"2025-03-04T10:15:30.123Z","answeredAt":null,"endedAt":null,"endReason":null}}';
/** HMAC of `${timestamp}.${body}` keyed by `secret`. */
const signature = 'be29cae5940b1286146ada0b79a4726139079c953dfb57e439d13380ae3b1314';
/** The same, keyed by `rotatedSecret`. */
const rotatedSignature = '00baa3bcf1d864363860e06eadf1e11e549bbcd385e3a7ad6dfbcaf110e387cb';
/** The same, keyed by `secret` without its `whsec_` prefix (what a receiver that strips the prefix computes). */
const unprefixedSignature = '858aea5e61e26f34dce2266f1fc81074e8ca3a1a62e7bde26e8f2f7de48aa6f3';
/** A body with non-ASCII text, keyed by `secret` at `timestamp`: the signature is over its UTF-8 bytes. */
const utf8Body = '{"type":"message.received","message":{"body":"Café ouvert dimanche ? ☕"}}';
const utf8Signature = 'c4f2d14c372fc75271d8e8444e7659f331bf937a166293175bb0d5d1b29ffebe';
/** `body` signed by `secret` at other timestamps, so that only the timestamp's form is at fault. */
const signedAt: Record<string, string> = {
  '1741083330000': '55cd1c482bbc7aa9b6d15965c8c5dbcb4959cb7f0606f60d99574d95e0817688',
  '+1741083330': '72698d122731b697eaa7577a3c753a2f9deea79e95b0023c774a07150f88b54a',
  '1741083330.0': 'bb82a7f161fc4bbdc9594558585c1b85b8d5229999dccc74a3eb67c8857a2f06',
  '7': '2a641acbdcf55d3be9bbcf065f408be24c553dd1383c2fbdba8c83d418452c5e',
  '100000000000': '1967d6e3dc012249dac37b303d68288791ff7b2f872ad857b518840004ef5389',
};
/** Bodies that are not JSON objects, signed by `secret` at `timestamp`. */
const notJson = { body: 'not json', signature: 'd86b858406b33c6a31eb3276eb2c5955a5677a6e8008ec52e428cccb6fad333b' };
const jsonArray = { body: '[1,2]', signature: '4290ea558911ef8dabfe733e6c2baf8efdb3de17c449c41fb6f6cc962228a46e' };

/** The receiver's clock at `seconds` after the epoch. */
const at = (seconds: number) => seconds * 1000;
const sent = Number(timestamp);

function delivery(overrides: Partial<VerifyWebhookOptions> = {}, headers: Record<string, string> = {}) {
  return {
    headers: { 'x-service-timestamp': timestamp, 'x-service-signature': signature, ...headers },
    rawBody: body,
    secrets: secret,
    now: at(sent),
    ...overrides,
  };
}

function refused(
  t: ExecutionContext,
  options: VerifyWebhookOptions,
  reason: WebhookVerificationReason,
  label: string,
): void {
  const error = t.throws(() => verifyWebhook(options), { instanceOf: WebhookVerificationError }, label);
  t.is(error?.reason, reason, label);
  t.is(error?.name, 'WebhookVerificationError', label);
}

// ---------------------------------------------------------------------------------------------------------------
// Signatures

test('a delivery signed with the secret is accepted and its event returned, from a string or a Buffer', (t) => {
  const event = verifyWebhook(delivery());
  t.is(event.id, '6f1c2b1e-3a8d-4c5e-9f7a-2b3c4d5e6f70');
  t.is(event.type, 'call.started');
  t.is(event.sequence, 1);
  t.deepEqual(event, JSON.parse(body));

  t.deepEqual(verifyWebhook(delivery({ rawBody: Buffer.from(body) })), JSON.parse(body));
  t.deepEqual(verifyWebhook(delivery({ rawBody: new TextEncoder().encode(body) })), JSON.parse(body));
  // A Buffer that is a slice of a larger allocation.
  const padded = Buffer.from(`xx${body}yy`);
  t.deepEqual(verifyWebhook(delivery({ rawBody: padded.subarray(2, padded.length - 2) })), JSON.parse(body));

  const utf8 = { 'x-service-timestamp': timestamp, 'x-service-signature': utf8Signature };
  t.deepEqual(verifyWebhook(delivery({ headers: utf8, rawBody: utf8Body })), JSON.parse(utf8Body));
  t.deepEqual(verifyWebhook(delivery({ headers: utf8, rawBody: Buffer.from(utf8Body, 'utf8') })), JSON.parse(utf8Body));
});

test('headers may be a plain object with names in any case, or a Headers instance', (t) => {
  const expected = JSON.parse(body);
  const upper = { 'X-Service-Timestamp': timestamp, 'X-SERVICE-SIGNATURE': signature };
  t.deepEqual(verifyWebhook(delivery({ headers: upper })), expected);
  const headers = new Headers({ 'X-Service-Timestamp': timestamp, 'x-service-signature': signature });
  t.deepEqual(verifyWebhook(delivery({ headers })), expected);
  // A repeated header counts as its comma-joined values, as in HTTP.
  const repeated = { 'x-service-timestamp': timestamp, 'x-service-signature': [rotatedSignature, signature] };
  t.deepEqual(verifyWebhook(delivery({ headers: repeated })), expected);
  const split = {
    'x-service-timestamp': timestamp,
    'x-service-signature': rotatedSignature,
    'X-Service-Signature': signature,
  };
  t.deepEqual(verifyWebhook(delivery({ headers: split })), expected);
});

test('the key is the whole secret, whsec_ prefix included', (t) => {
  refused(
    t,
    delivery({}, { 'x-service-signature': unprefixedSignature }),
    'no_matching_signature',
    'signed without the prefix',
  );
  refused(t, delivery({ secrets: secret.slice('whsec_'.length) }), 'no_matching_signature', 'receiver strips it');
  t.truthy(
    verifyWebhook(delivery({ secrets: secret.slice('whsec_'.length) }, { 'x-service-signature': unprefixedSignature })),
  );
});

test('several signatures: any one that matches is enough', (t) => {
  const expected = JSON.parse(body);
  for (const header of [
    `${rotatedSignature},${signature}`,
    `${signature},${rotatedSignature}`,
    `${rotatedSignature}, ${signature}`,
    `not-hex,${signature}`,
    `${signature.slice(0, 32)},${signature}`,
    `,${signature},`,
    signature.toUpperCase(),
  ]) {
    t.deepEqual(verifyWebhook(delivery({}, { 'x-service-signature': header })), expected, header);
  }
  refused(
    t,
    delivery({}, { 'x-service-signature': `${rotatedSignature},${unprefixedSignature}` }),
    'no_matching_signature',
    'none of them matches',
  );
});

test('two secrets: a delivery signed by either one is accepted', (t) => {
  const secrets = [rotatedSecret, secret];
  t.truthy(verifyWebhook(delivery({ secrets })));
  t.truthy(verifyWebhook(delivery({ secrets }, { 'x-service-signature': rotatedSignature })));
  t.truthy(verifyWebhook(delivery({ secrets: [secret, rotatedSecret] }, { 'x-service-signature': rotatedSignature })));
  refused(t, delivery({ secrets: [rotatedSecret] }), 'no_matching_signature', 'only the other secret');
});

test('a wrong secret, an altered body or timestamp, or a damaged signature is refused', (t) => {
  refused(t, delivery({ secrets: 'whsec_someone-else' }), 'no_matching_signature', 'wrong secret');
  refused(
    t,
    delivery({ rawBody: body.replace('"sequence":1', '"sequence":2') }),
    'no_matching_signature',
    'tampered body',
  );
  refused(t, delivery({ rawBody: `${body}\n` }), 'no_matching_signature', 'a trailing newline');
  refused(t, delivery({ rawBody: JSON.stringify(JSON.parse(body), null, 2) }), 'no_matching_signature', 'reformatted');
  refused(
    t,
    delivery({ now: at(sent + 1) }, { 'x-service-timestamp': String(sent + 1) }),
    'no_matching_signature',
    'tampered timestamp',
  );
  const flipped = `${signature.slice(0, -1)}${signature.endsWith('4') ? '5' : '4'}`;
  refused(t, delivery({}, { 'x-service-signature': flipped }), 'no_matching_signature', 'one hex digit changed');
  refused(t, delivery({}, { 'x-service-signature': signature.slice(0, 62) }), 'no_matching_signature', 'truncated');
  refused(t, delivery({}, { 'x-service-signature': `${signature}00` }), 'no_matching_signature', 'extended');
  refused(t, delivery({}, { 'x-service-signature': `sha256=${signature}` }), 'no_matching_signature', 'prefixed');
});

// ---------------------------------------------------------------------------------------------------------------
// Timestamps and headers

test('the timestamp must be 1 to 12 digits, even when correctly signed', (t) => {
  for (const value of ['1741083330000', '+1741083330', '1741083330.0']) {
    refused(
      t,
      delivery({}, { 'x-service-timestamp': value, 'x-service-signature': signedAt[value] as string }),
      'malformed_timestamp',
      value,
    );
  }
  for (const value of ['abc', '-5', '1e9', '0x1F', '١٧٤١٠٨٣٣٣٠', '17410833 30']) {
    refused(t, delivery({}, { 'x-service-timestamp': value }), 'malformed_timestamp', value);
  }
  t.truthy(
    verifyWebhook(
      delivery({ now: at(7) }, { 'x-service-timestamp': '7', 'x-service-signature': signedAt['7'] as string }),
    ),
  );
  t.truthy(
    verifyWebhook(
      delivery(
        { now: at(100000000000) },
        { 'x-service-timestamp': '100000000000', 'x-service-signature': signedAt['100000000000'] as string },
      ),
    ),
    '12 digits',
  );
});

test('a timestamp more than 300 seconds from the receiver’s clock is refused, either way; 300 is accepted', (t) => {
  refused(t, delivery({ now: at(sent + 301) }), 'stale_timestamp', '301 s old');
  refused(t, delivery({ now: at(sent - 301) }), 'stale_timestamp', '301 s ahead');
  refused(t, delivery({ now: at(sent + 86_400) }), 'stale_timestamp', 'a day old (a replayed capture)');
  t.truthy(verifyWebhook(delivery({ now: at(sent + 300) })), 'exactly 300 s old');
  t.truthy(verifyWebhook(delivery({ now: at(sent - 300) })), 'exactly 300 s ahead');
  t.truthy(verifyWebhook(delivery({ now: at(sent + 300) + 999 })), 'within the 300th second');
  t.truthy(verifyWebhook(delivery({ now: new Date(at(sent + 120)) })), 'now as a Date');

  refused(t, delivery({ now: at(sent + 11), toleranceSeconds: 10 }), 'stale_timestamp', 'a tolerance of 10 s');
  t.truthy(verifyWebhook(delivery({ now: at(sent + 10), toleranceSeconds: 10 })));
  t.truthy(verifyWebhook(delivery({ now: at(sent) + 500, toleranceSeconds: 0 })));
  // Staleness is judged before the signature: an old capture is refused as stale whatever it carries.
  refused(t, delivery({ now: at(sent + 301), secrets: 'whsec_other' }), 'stale_timestamp', 'stale and unsigned');
});

test('a missing or empty timestamp or signature header is refused', (t) => {
  refused(t, delivery({ headers: { 'x-service-signature': signature } }), 'missing_header', 'no timestamp');
  refused(t, delivery({ headers: { 'x-service-timestamp': timestamp } }), 'missing_header', 'no signature');
  refused(t, delivery({}, { 'x-service-timestamp': '' }), 'missing_header', 'empty timestamp');
  refused(t, delivery({}, { 'x-service-signature': '' }), 'missing_header', 'empty signature');
  refused(t, delivery({}, { 'x-service-signature': ' , ' }), 'missing_header', 'only commas');
  refused(t, delivery({ headers: new Headers() }), 'missing_header', 'empty Headers');
  refused(t, delivery({ headers: {} }), 'missing_header', 'no headers');
});

test('a correctly signed body that is not a JSON object is refused as malformed', (t) => {
  for (const bad of [notJson, jsonArray]) {
    refused(t, delivery({ rawBody: bad.body }, { 'x-service-signature': bad.signature }), 'malformed_body', bad.body);
  }
});

test('a wrong call is a TypeError, not a refused delivery', (t) => {
  t.throws(() => verifyWebhook(delivery({ secrets: [] })), { instanceOf: TypeError });
  t.throws(() => verifyWebhook(delivery({ secrets: '' })), { instanceOf: TypeError });
  t.throws(() => verifyWebhook(delivery({ toleranceSeconds: -1 })), { instanceOf: TypeError });
  t.throws(() => verifyWebhook(delivery({ toleranceSeconds: Number.NaN })), { instanceOf: TypeError });
  t.throws(() => verifyWebhook(delivery({ now: new Date('not a date') })), { instanceOf: TypeError });
  const parsed = JSON.parse(body) as unknown as string;
  t.throws(() => verifyWebhook(delivery({ rawBody: parsed })), { instanceOf: TypeError, message: /parsed object/ });
});

// ---------------------------------------------------------------------------------------------------------------
// What the service sends, and the published package

test('the helper verifies what the service signs, through a real HTTP request, during a rotation too', async (t) => {
  const current = newSigningSecret();
  const previous = newSigningSecret();
  let receiverSecrets: string[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      try {
        const headers: IncomingHttpHeaders = request.headers;
        const event = verifyWebhook({ headers, rawBody: Buffer.concat(chunks), secrets: receiverSecrets });
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ id: event.id }));
      } catch (error) {
        const reason = error instanceof WebhookVerificationError ? error.reason : 'error';
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ reason }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const id = randomUUID();
  const payload = JSON.stringify({ ...JSON.parse(utf8Body), id, sequence: 3 });
  const deliver = async (signingSecrets: string[], sentAt = String(Math.floor(Date.now() / 1000))) => {
    const response = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-service-timestamp': sentAt,
        'x-service-signature': signatureHeader(signingSecrets, sentAt, payload),
        'x-service-event-id': id,
        'x-service-event-type': 'message.received',
      },
      body: payload,
    });
    return { status: response.status, body: (await response.json()) as { id?: string; reason?: string } };
  };

  receiverSecrets = [current];
  t.deepEqual(await deliver([current]), { status: 200, body: { id } });
  t.deepEqual(await deliver([current, previous]), { status: 200, body: { id } }, 'during a rotation');
  receiverSecrets = [previous];
  t.deepEqual(await deliver([current, previous]), { status: 200, body: { id } }, 'a receiver still on the old one');
  receiverSecrets = [current, previous];
  t.deepEqual(await deliver([previous]), { status: 200, body: { id } }, 'a receiver already holding both');
  receiverSecrets = [newSigningSecret()];
  t.deepEqual(await deliver([current, previous]), { status: 400, body: { reason: 'no_matching_signature' } });
  receiverSecrets = [current];
  const old = String(Math.floor(Date.now() / 1000) - 3600);
  t.deepEqual(await deliver([current], old), { status: 400, body: { reason: 'stale_timestamp' } });
});

test('the helper depends on node:crypto alone, and is importable through the package export', async (t) => {
  const source = await readFile(path.join(root, 'client/webhooks.ts'), 'utf8');
  const imports = [...source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+'([^']+)'/gm)].map((match) => match[1]);
  t.deepEqual(imports, ['node:crypto']);
  t.false(/\bimport\s*\(/.test(source), 'no dynamic import');

  await promisify(execFile)('npm', ['run', '--silent', 'build:client'], { cwd: root });
  const declarations = await readFile(path.join(root, 'dist/client/webhooks.d.ts'), 'utf8');
  t.regex(declarations, /export declare function verifyWebhook/);

  // A self-reference through package.json "exports", as an application importing switchboard/webhooks resolves it.
  const specifier = 'switchboard/webhooks';
  const published = (await import(specifier)) as typeof Webhooks;
  t.regex(fileURLToPath(import.meta.resolve(specifier)), /dist[\\/]client[\\/]webhooks\.js$/);
  const event = published.verifyWebhook(delivery());
  t.is(event.id, '6f1c2b1e-3a8d-4c5e-9f7a-2b3c4d5e6f70');
  const error = t.throws(() => published.verifyWebhook(delivery({ now: at(sent + 301) })));
  t.true(error instanceof published.WebhookVerificationError);
  t.is((error as Webhooks.WebhookVerificationError).reason, 'stale_timestamp');
  t.is(published.webhookHeaders.signature, 'x-service-signature');
});
