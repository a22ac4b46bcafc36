/** The registrar's digest pieces (engine/sip/digest.ts): parsing an Authorization value, nonces, responses. */
import test from 'ava';
import {
  challengeHeaders,
  checkNonce,
  digestResponse,
  makeNonce,
  parseDigestCredentials,
} from '../../../engine/sip/digest.ts';

const key = new Uint8Array(32).fill(7);
const sha = 'a'.repeat(64);

test('an Authorization value is read with quoted strings, escapes and either algorithm', (t) => {
  const parsed = parseDigestCredentials(
    `Digest username="sb\\"x", realm="switchboard",nonce="n.o, nce", uri="sip:h:5060", response="${sha}", ` +
      'algorithm=sha-256, qop=auth, nc=0000000A, cnonce="c,n"',
  );
  t.like(parsed, {
    username: 'sb"x',
    realm: 'switchboard',
    nonce: 'n.o, nce',
    uri: 'sip:h:5060',
    algorithm: 'SHA-256',
    nc: 10,
    ncText: '0000000A',
    cnonce: 'c,n',
  });
  // MD5 by default.
  t.is(
    parseDigestCredentials(
      `Digest username="u", realm="r", nonce="n", uri="sip:h", response="${'b'.repeat(32)}", qop=auth, nc=00000001, cnonce="c"`,
    )?.algorithm,
    'MD5',
  );
});

test('an Authorization value this registrar does not take is refused', (t) => {
  const good = `username="u", realm="r", nonce="n", uri="sip:h", response="${sha}", algorithm=SHA-256, qop=auth, nc=00000001, cnonce="c"`;
  t.truthy(parseDigestCredentials(`Digest ${good}`));
  for (const bad of [
    `Basic ${good}`,
    `Digest ${good}, username="v"`,
    `Digest ${good.replace('algorithm=SHA-256', 'algorithm=SHA-512-256')}`,
    `Digest ${good.replace('qop=auth, ', '')}`,
    `Digest ${good.replace('qop=auth', 'qop=auth-int')}`,
    `Digest ${good.replace('nc=00000001', 'nc=1')}`,
    `Digest ${good.replace(sha, 'a'.repeat(32))}`,
    `Digest ${good.replace(', cnonce="c"', '')}`,
    `Digest ${good.replace('uri="sip:h"', 'uri="sip:h')}`,
    `Digest ${good},`,
    // A control character, even escaped, would reach the database's look-up of the username.
    `Digest ${good.replace('username="u"', 'username="u\\\u0000"')}`,
    `Digest ${good}, x="${'y'.repeat(5000)}"`,
    'Digest',
    '',
  ]) {
    t.is(parseDigestCredentials(bad), undefined, bad.slice(0, 120));
  }
});

test('nonces verify statelessly, for the address they went to, until stale', (t) => {
  const now = new Date('2030-01-01T00:00:00Z');
  const nonce = makeNonce(key, now, '192.0.2.1');
  t.is(checkNonce(key, nonce, now, '192.0.2.1', 300_000), 'valid');
  t.is(checkNonce(key, nonce, new Date(now.getTime() + 301_000), '192.0.2.1', 300_000), 'stale');
  t.is(checkNonce(key, nonce, now, '192.0.2.2', 300_000), 'invalid');
  t.is(checkNonce(new Uint8Array(32), nonce, now, '192.0.2.1', 300_000), 'invalid');
  t.is(checkNonce(key, `${nonce}x`, now, '192.0.2.1', 300_000), 'invalid');
  t.is(checkNonce(key, nonce, new Date(now.getTime() - 60_000), '192.0.2.1', 300_000), 'invalid');
});

test('challenges come SHA-256 first; the response is RFC 2617 qop=auth', (t) => {
  t.deepEqual(challengeHeaders('switchboard', 'n', ['SHA-256', 'MD5']), [
    'WWW-Authenticate: Digest realm="switchboard", nonce="n", algorithm=SHA-256, qop="auth"',
    'WWW-Authenticate: Digest realm="switchboard", nonce="n", algorithm=MD5, qop="auth"',
  ]);
  // RFC 2617 section 3.5's example, with its method and uri (qop=auth, MD5).
  t.is(
    digestResponse(
      {
        username: 'Mufasa',
        realm: 'testrealm@host.com',
        nonce: 'dcd98b7102dd2f0e8b11d0f600bfb0c093',
        uri: '/dir/index.html',
        algorithm: 'MD5',
        ncText: '00000001',
        cnonce: '0a4f113b',
      },
      'GET',
      'Circle Of Life',
    ),
    '6629fae49393a05397450978507c4ef1',
  );
});
