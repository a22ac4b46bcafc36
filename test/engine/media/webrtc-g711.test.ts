/**
 * The G.711 WebRTC stack (engine/media/webrtc-g711.ts, docs/phones.md "Legs"): the engine's werift endpoint answered
 * by a plain `@roamhq/wrtc` peer connection standing in for the browser (libwebrtc, as in Chromium; Chromium itself
 * is in test/engine/calls/legs/browser.test.ts): what is offered, the ICE servers it uses (and that with none it asks no
 * STUN server), what every stack does (test/helpers/webrtc-contract.ts: tones both ways measured by frequency, a
 * bridge to a G.711 RTP endpoint, answers it must refuse), the timestamp over a pause, forged and garbage datagrams
 * from elsewhere and from the browser's own address (a werift peer stands in for it there, so that the test can send
 * from its socket), and the churn of 1,000 legs with memory and threads measured.
 *
 * Audio is paced by timers, as a microphone would be; waits for state are on events or counters, never sleeps.
 */
import { randomBytes } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import test, { type ExecutionContext } from 'ava';
import { MediaStreamTrack, RTCPeerConnection, RTCRtpCodecParameters, RtpHeader, RtpPacket } from 'werift';
import { G711WebRtcEndpoint, weriftIceServers } from '../../../engine/media/webrtc-g711.ts';
import { exitPastWrtc } from '../../helpers/engine-service.ts';
import { browserHears, sine, tonePower, zeroCrossingFrequency } from '../../helpers/webrtc-browser.ts';
import { churn } from '../../helpers/webrtc-churn-check.ts';
import { until } from '../../helpers/until.ts';
import { connectedPair, webrtcContract } from '../../helpers/webrtc-contract.ts';

// The stand-in browsers are libwebrtc's (see test/engine/media/webrtc.test.ts for why the worker ends this way).
exitPastWrtc();

const host = '127.0.0.1';
const newEndpoint = () => new G711WebRtcEndpoint();

test('the engine offers audio only, PCMU then PCMA, with its host candidates, and asks no STUN server', async (t) => {
  const endpoint = new G711WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const offer = await endpoint.createOffer();
  t.is(await endpoint.createOffer(), offer, 'a second call gives the same offer');
  const mLines = offer.split('\r\n').filter((line) => line.startsWith('m='));
  t.is(mLines.length, 1);
  t.regex(mLines[0] ?? '', /^m=audio \d+ UDP\/TLS\/RTP\/SAVPF 0 8$/);
  t.regex(offer, /^a=rtpmap:0 PCMU\/8000\r$/m);
  t.regex(offer, /^a=rtpmap:8 PCMA\/8000\r$/m);
  t.regex(offer, /^a=fingerprint:sha-256 /m, 'DTLS-SRTP');
  t.regex(offer, /^a=setup:actpass\r$/m);
  const candidates = offer.split('\r\n').filter((line) => line.startsWith('a=candidate:'));
  t.true(candidates.length > 0, 'the host candidates are in the offer');
  t.true(
    candidates.every((line) => / typ host( |$)/.test(line)),
    'host candidates only',
  );
  // Left to itself werift's ICE agent asks stun.l.google.com (and waits up to 5 s for it): the endpoint clears that.
  t.is(endpoint.stunServer, undefined, 'no STUN server is asked');
});

test('a configured STUN server is asked, from the host candidate, with a binding request', async (t) => {
  const stun = createSocket('udp4');
  t.teardown(() => stun.close());
  await new Promise<void>((resolve) => stun.bind(0, host, resolve));
  const asked = new Promise<Buffer>((resolve) => stun.once('message', (message) => resolve(message)));
  const endpoint = new G711WebRtcEndpoint({
    iceServers: [{ urls: [`stuns:${host}:9`, `stun:${host}:${stun.address().port}`] }],
  });
  t.is(endpoint.stunServer, `${host}:${stun.address().port}`);
  t.teardown(() => endpoint.close());
  const offering = endpoint.createOffer();
  const request = await asked;
  t.is(request.readUInt16BE(0), 0x0001, 'a STUN binding request');
  t.is(request.readUInt32BE(4), 0x2112a442, 'with the magic cookie');
  // This server never answers: the offer goes when werift gives up on it (5 s), with the host candidates.
  t.regex(await offering, / typ host/);
});

test('ICE_SERVERS as werift takes them: the first stun: and the first turn: with its credentials', (t) => {
  t.deepEqual(weriftIceServers([]), { servers: [], stun: false, turnOverTcp: false });
  t.deepEqual(
    weriftIceServers([
      { urls: ['stuns:stun.example.net', 'stun:stun.example.net'] },
      { urls: 'stun:second.example.net:3479' },
      { urls: 'turn:turn.example.net:443?transport=tcp', username: 'u', credential: 'c' },
      { urls: 'turn:other.example.net', username: 'v', credential: 'd' },
    ]),
    {
      servers: [
        { urls: 'stun:stun.example.net:3478' },
        { urls: 'turn:turn.example.net:443', username: 'u', credential: 'c' },
      ],
      stun: true,
      turnOverTcp: true,
    },
  );
  t.deepEqual(
    weriftIceServers([
      {
        urls: ['turns:turn.example.net', 'stun:[2001:db8::1]:3478', 'stun:stun.example.net:70000'],
        username: 'u',
        credential: 'c',
      },
    ]),
    { servers: [], stun: false, turnOverTcp: false },
    'no turns: and no IPv6 literal: werift takes neither',
  );
});

test.serial('after a pause in what the engine sends, the browser still hears the tone that follows', async (t) => {
  const { endpoint, browser } = await connectedPair(t, newEndpoint);
  const tone = sine(1000, 8000);
  const send = (frames: number) =>
    new Promise<void>((resolve) => {
      let left = frames;
      const timer = setInterval(() => {
        endpoint.send(tone(160));
        left -= 1;
        if (left === 0) {
          clearInterval(timer);
          resolve();
        }
      }, 20);
      t.teardown(() => clearInterval(timer));
    });
  await send(25);
  await new Promise((resolve) => setTimeout(resolve, 600)); // the pause under test: nothing is sent
  const resumed = send(100);
  const atBrowser = await browserHears(browser, 0.2, 0.5);
  await resumed;
  const frequency = zeroCrossingFrequency(atBrowser, browser.rate);
  t.true(Math.abs(frequency - 1000) < 10, `the browser heard ${frequency} Hz after the pause`);
  t.true(tonePower(atBrowser, 1000, browser.rate) > 0.7);
});

test('the browser closing its peer connection ends the connection (DTLS close_notify), without waiting on ICE consent', async (t) => {
  const { endpoint, browser } = await connectedPair(t, newEndpoint);
  const ended = new Promise<string>((resolve) =>
    endpoint.onState((state) => {
      if (state === 'failed' || state === 'closed') resolve(state);
    }),
  );
  browser.close();
  t.true(['failed', 'closed'].includes(await ended));
});

test('a forged DTLS close_notify or RTP from another address is dropped: the call stays up and its audio flows', async (t) => {
  const { endpoint, browser } = await connectedPair(t, newEndpoint);
  // The engine's host candidate (the browser's ICE pair uses one of them).
  const candidates = [...(await endpoint.createOffer()).matchAll(/^a=candidate:\S+ 1 udp \d+ (\S+) (\d+) typ host/gm)];
  const attacker = createSocket('udp4');
  t.teardown(() => attacker.close());
  // An alert record (content type 21, DTLS 1.2, epoch 1), warning close_notify, as werift would read it unencrypted;
  // and an RTP packet of PCMU (version 2, payload type 0).
  const alert = Buffer.from([21, 0xfe, 0xfd, 0, 1, 0, 0, 0, 0, 0, 99, 0, 2, 1, 0]);
  const rtp = Buffer.concat([Buffer.from([0x80, 0, 0, 1, 0, 0, 0, 160, 1, 2, 3, 4]), Buffer.alloc(160, 0x55)]);
  for (const [, address, port] of candidates) {
    if (address?.includes(':')) continue;
    for (const datagram of [alert, rtp]) {
      await new Promise<void>((resolve) => attacker.send(datagram, Number(port), address, () => resolve()));
    }
  }
  const heard = new Promise<void>((resolve) => {
    const stop = endpoint.onAudio(() => {
      stop();
      resolve();
    });
  });
  const speaking = setInterval(() => browser.send(sine(440, 48000)(480)), 10);
  t.teardown(() => clearInterval(speaking));
  await heard; // the browser's audio still reaches the engine, after the forged datagrams
  t.is(endpoint.state, 'connected');
  t.true(endpoint.strayDatagrams >= 2, `${endpoint.strayDatagrams} stray datagrams counted`);
});

/** A werift peer connection as the browser: its socket can send datagrams from the address ICE checked. */
async function weriftBrowser(t: ExecutionContext, endpoint: G711WebRtcEndpoint) {
  const codec = new RTCRtpCodecParameters({ mimeType: 'audio/PCMU', clockRate: 8000, channels: 1, payloadType: 0 });
  const peer = new RTCPeerConnection({ codecs: { audio: [codec], video: [] }, iceServers: [] });
  t.teardown(() => peer.close());
  const track = new MediaStreamTrack({ kind: 'audio' });
  peer.addTransceiver(track, { direction: 'sendrecv' });
  await peer.setRemoteDescription({ type: 'offer', sdp: await endpoint.createOffer() });
  for (const transport of peer.iceTransports) {
    (transport.connection as unknown as { stunServer?: unknown }).stunServer = undefined; // as the endpoint does
  }
  await peer.setLocalDescription(await peer.createAnswer());
  await endpoint.acceptAnswer(peer.localDescription?.sdp);
  await endpoint.connected();
  const agent = peer.iceTransports[0]?.connection as unknown as {
    nominated?: { remoteAddr: [string, number]; protocol: { transport: { socket: Socket } } };
  };
  const pair = await until('the browser nominated its pair', () => agent.nominated);
  // Its sender sends nothing until its own side of DTLS is up, which may be a moment after the engine's.
  await until('the browser connected', () => (peer.connectionState === 'connected' ? true : undefined));
  const [address, port] = pair.remoteAddr;
  let sequence = 1;
  const ssrc = Number(/^a=ssrc:(\d+) /m.exec(peer.localDescription?.sdp ?? '')?.[1]);
  return {
    /** The SSRC of the browser's audio. */
    ssrc,
    /** Sends raw datagrams from the browser's own ICE-checked address and port. */
    sendRaw: (datagram: Buffer) =>
      new Promise<void>((resolve) => pair.protocol.transport.socket.send(datagram, port, address, () => resolve())),
    /** Sends 20 ms of PCMU over the real SRTP session. */
    speak: () => {
      const header = new RtpHeader({ payloadType: 0, sequenceNumber: sequence, timestamp: sequence * 160 });
      sequence += 1;
      track.writeRtp(new RtpPacket(header, Buffer.alloc(160, 0xff)));
    },
  };
}

test("from the browser's own address: forged SRTP is never heard, and 20,000 garbage datagrams crash nothing", async (t) => {
  const endpoint = new G711WebRtcEndpoint();
  t.teardown(() => endpoint.close());
  const browser = await weriftBrowser(t, endpoint);
  const framesIn = (count: number) =>
    until(`${count} frames heard`, () => endpoint.stats.framesIn >= count || undefined);
  // Five real frames (sequence 1-5): the stream is up.
  for (let frame = 0; frame < 5; frame += 1) browser.speak();
  await framesIn(5);
  // SRTP packets of the browser's own stream, newer (sequence 100 on), with a made-up authentication tag: werift
  // 0.25 checks the tag (0.22 handed these up as audio, and the real frames after them would have been too late).
  for (let index = 0; index < 200; index += 1) {
    const header = Buffer.alloc(12);
    header.set([0x80, 0, 0, 100 + index, 0, 0, 0, 160]);
    header.writeUInt32BE(browser.ssrc, 8);
    await browser.sendRaw(Buffer.concat([header, randomBytes(160 + 10)]));
  }
  // Five more real frames (sequence 6-10): heard, and nothing else was.
  for (let frame = 0; frame < 5; frame += 1) browser.speak();
  await framesIn(10);
  t.is(endpoint.stats.framesIn, 10, 'the ten real frames and nothing forged');
  // Garbage of every kind the socket passes on from the peer: RTP, RTCP and DTLS handshake records. (An alert or a
  // record of an unknown type from the browser's own address makes werift close: the browser ends its own call.)
  for (let index = 0; index < 20000; index += 1) {
    const datagram = randomBytes(2 + (index % 300));
    const kind = index % 3;
    if (kind === 0) datagram[0] = 0x80 | ((datagram[0] as number) & 0x3f);
    if (kind === 1) datagram.set([0x80, 200 + (index % 8)]);
    if (kind === 2) datagram.set([22, 0xfe, 0xfd].slice(0, datagram.length));
    await browser.sendRaw(datagram);
  }
  // The call goes on: the browser's audio after the flood is heard (the flood itself overflows the socket's buffer,
  // so the first frames after it may be lost on the way).
  const speaking = setInterval(() => browser.speak(), 20);
  t.teardown(() => clearInterval(speaking));
  await framesIn(20);
  t.is(endpoint.strayDatagrams, 0, 'all came from the checked address: werift refused the forged ones itself');
  t.is(endpoint.state, 'connected');
});

webrtcContract(test, (options) => new G711WebRtcEndpoint(options));

test('churn: 1,000 legs opened and closed in one process, no crash, memory and threads flat', async (t) => {
  await churn(t, 'g711');
});
