/**
 * RTP media for SIP calls (engine/media, docs/calls.md): the port pool, RtpEndpoints talking over loopback UDP in
 * PCMU and PCMA, paced playback, RFC 4733 DTMF both ways, malformed and foreign packets, SDP offer/answer, WAV
 * recording, bridging a PCMU leg with a PCMA leg, and prompts (espeak-ng TTS, and WAV files over HTTPS from a server
 * with a certificate of the test CA, trusted through NODE_EXTRA_CA_CERTS set by test/run.ts).
 *
 * Some checks talk to an endpoint from a bare UDP socket to see (or forge) the packets on the wire. Waits are for
 * events or counters, never fixed sleeps; timing assertions are loose, as test machines are noisy.
 */
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { bridge } from '../../../engine/media/bridge.ts';
import { decode, encode } from '../../../engine/media/g711.ts';
import { buildRtp, parseRtp } from '../../../engine/media/packet.ts';
import { PromptError, Prompts } from '../../../engine/media/prompts.ts';
import { WavRecorder } from '../../../engine/media/recorder.ts';
import { resample, resampleInSlices } from '../../../engine/media/resample.ts';
import {
  type Codec,
  type EndpointOptions,
  RtpEndpoint,
  PortPool,
  PortPoolExhaustedError,
  type RemoteMedia,
} from '../../../engine/media/rtp.ts';
import { answer, type MediaOffer, offer, parseSdp, remoteFromAnswer, SdpError } from '../../../engine/media/sdp.ts';
import { decodeWav, WavError } from '../../../engine/media/wav.ts';
import { MediaAddressError } from '../../../engine/media/media-peer.ts';
import { loopbackCarrier } from '../../helpers/media-peer.ts';
import { untilTrue } from '../../helpers/until.ts';

const host = '127.0.0.1';
/** An even base in 22000-31998, away from the default RTP range and (mostly) from the kernel's ephemeral ports. */
const base = 22000 + 2 * Math.floor(Math.random() * 4500);
const pool = new PortPool(base, base + 999);

const tlsDir = new URL('../../fixtures/tls/', import.meta.url);
const tls = {
  key: readFileSync(new URL('localhost-key.pem', tlsDir)),
  cert: readFileSync(new URL('localhost.pem', tlsDir)),
};

// ---------------------------------------------------------------------------------------------------------------
// Helpers

/** Every datagram an endpoint receives counts once in its stats. */
function datagramsIn(endpoint: RtpEndpoint): number {
  const { packetsIn, ignored, malformed, foreign } = endpoint.stats;
  return packetsIn + ignored + malformed + foreign;
}

/** Resolves once `to` has handled `count` datagrams in all (so nothing sent before is still in flight). */
function handled(to: RtpEndpoint, count: number): Promise<void> {
  return untilTrue(`${count} datagrams handled`, () => datagramsIn(to) >= count, { everyMs: 1 });
}

function sine(frequency: number, samples: number, amplitude = 8000, rate = 8000): Int16Array {
  const pcm = new Int16Array(samples);
  for (let index = 0; index < samples; index += 1) {
    pcm[index] = Math.round(amplitude * Math.sin((2 * Math.PI * frequency * index) / rate));
  }
  return pcm;
}

function concat(frames: Int16Array[]): Int16Array {
  const all = new Int16Array(frames.reduce((sum, frame) => sum + frame.length, 0));
  let offset = 0;
  for (const frame of frames) {
    all.set(frame, offset);
    offset += frame.length;
  }
  return all;
}

/** Signal-to-noise ratio of `received` against `sent`, in dB. */
function snr(sent: Int16Array, received: Int16Array): number {
  let signal = 0;
  let noise = 0;
  for (let index = 0; index < sent.length; index += 1) {
    const expected = sent[index] as number;
    signal += expected * expected;
    noise += (expected - (received[index] ?? 0)) ** 2;
  }
  return 10 * Math.log10(signal / Math.max(noise, 1));
}

function rms(pcm: Int16Array): number {
  let sum = 0;
  for (const sample of pcm) sum += sample * sample;
  return Math.sqrt(sum / Math.max(1, pcm.length));
}

/** The power of `frequency` in `pcm` (Goertzel), relative to the signal's total power. */
function tonePower(pcm: Int16Array, frequency: number, rate = 8000): number {
  const coefficient = 2 * Math.cos((2 * Math.PI * frequency) / rate);
  let previous = 0;
  let beforePrevious = 0;
  for (const sample of pcm) {
    const current = sample + coefficient * previous - beforePrevious;
    beforePrevious = previous;
    previous = current;
  }
  const power = previous * previous + beforePrevious * beforePrevious - coefficient * previous * beforePrevious;
  const total = pcm.reduce((sum, sample) => sum + sample * sample, 0);
  return power / Math.max(1, (total * pcm.length) / 2);
}

function remote(port: number, codec: Codec = 'PCMU', extra: Partial<RemoteMedia> = {}): RemoteMedia {
  return { address: host, port, codec, payloadType: codec === 'PCMU' ? 0 : 8, telephoneEventPt: 101, ...extra };
}

async function endpoint(t: ExecutionContext, options: Partial<EndpointOptions> = {}) {
  const opened = await RtpEndpoint.open(pool, host, { peer: loopbackCarrier, ...options });
  t.teardown(() => opened.close());
  return opened;
}

/** Two endpoints pointed at each other. */
async function pair(t: ExecutionContext, codecA: Codec = 'PCMU', codecB: Codec = codecA) {
  const a = await endpoint(t);
  const b = await endpoint(t);
  a.setRemote(remote(b.localPort, codecA));
  b.setRemote(remote(a.localPort, codecB));
  return { a, b };
}

/** A bare UDP socket on loopback that keeps what it receives. */
async function rawSocket(t: ExecutionContext, address = host) {
  const socket = dgram.createSocket('udp4');
  const received: Buffer[] = [];
  socket.on('message', (datagram) => received.push(datagram));
  await new Promise<void>((resolve) => socket.bind(0, address, resolve));
  t.teardown(() => socket.close());
  const port = socket.address().port;
  const send = (datagram: Uint8Array, to: number) =>
    new Promise<void>((resolve, reject) =>
      socket.send(datagram, to, host, (error) => (error ? reject(error) : resolve())),
    );
  return { socket, port, received, send };
}

/** A telephone-event payload. */
function eventPayload(event: number, end: boolean, duration: number): Uint8Array {
  return Uint8Array.of(event, (end ? 0x80 : 0) | 10, duration >> 8, duration & 0xff);
}

// ---------------------------------------------------------------------------------------------------------------
// Port pool

test('the port pool hands out distinct even ports of its range, refuses when full, and reuses released ones', async (t) => {
  const start = 32000 + 2 * Math.floor(Math.random() * 1000);
  const small = new PortPool(start - 1, start + 5); // odd bounds: the even ports are start, start+2, start+4
  t.is(small.size, 3);
  const sockets = await Promise.all([small.allocate(host), small.allocate(host), small.allocate(host)]);
  t.teardown(() => sockets.forEach((socket) => small.release(socket)));
  const ports = sockets.map((socket) => socket.address().port).sort((x, y) => x - y);
  t.deepEqual(ports, [start, start + 2, start + 4]);
  t.is(small.inUse, 3);
  await t.throwsAsync(small.allocate(host), { instanceOf: PortPoolExhaustedError, message: /no free RTP port/ });
  t.is(small.inUse, 3);

  const [released] = sockets.splice(
    sockets.findIndex((socket) => socket.address().port === start + 2),
    1,
  );
  small.release(released as dgram.Socket);
  small.release(released as dgram.Socket); // twice is harmless
  t.is(small.inUse, 2);
  const again = await small.allocate(host);
  sockets.push(again);
  t.is(again.address().port, start + 2);
  t.is(small.inUse, 3);

  t.throws(() => new PortPool(20001, 20001), { instanceOf: RangeError });
  t.throws(() => new PortPool(3000, 2000), { instanceOf: RangeError });
  t.throws(() => new PortPool(0, 70000), { instanceOf: RangeError });
});

test('the port pool takes ports at random, and the ports released last only when no other is free', async (t) => {
  const start = 36000 + 2 * Math.floor(Math.random() * 1000);
  // The pool's random numbers, given: it takes the even port at each index drawn.
  const draws = [7, 2, 9, 2, 2, 2];
  const drawn = new PortPool(start, start + 18, (n) => (draws.shift() ?? 0) % n);
  const first = await drawn.allocate(host);
  const second = await drawn.allocate(host);
  t.teardown(() => [first, second].forEach((socket) => drawn.release(socket)));
  t.deepEqual([first.address().port, second.address().port], [start + 14, start + 4]);
  drawn.release(second);
  // Index 2 again (three times, then random picks run out into 0, 0, ...): the port just released rests.
  const third = await drawn.allocate(host);
  t.teardown(() => drawn.release(third));
  t.not(third.address().port, start + 4);

  // With crypto's numbers, 20 ports of 500 are neither in order nor next to each other.
  const wide = new PortPool(start + 100, start + 1098);
  const sockets: dgram.Socket[] = [];
  t.teardown(() => sockets.forEach((socket) => wide.release(socket)));
  for (let index = 0; index < 20; index += 1) sockets.push(await wide.allocate(host));
  const ports = sockets.map((socket) => socket.address().port);
  t.is(new Set(ports).size, 20);
  t.true(ports.every((port) => port % 2 === 0 && port >= start + 100 && port <= start + 1098));
  const steps = ports.slice(1).map((port, index) => port - (ports[index] as number));
  t.false(
    steps.every((step) => step === 2),
    `ports handed out in order: ${ports.join(', ')}`,
  );
});

test('the port pool skips a port another socket holds', async (t) => {
  const start = 34000 + 2 * Math.floor(Math.random() * 1000);
  const squatter = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => squatter.bind(start, host, resolve));
  t.teardown(() => squatter.close());
  const small = new PortPool(start, start + 2);
  const socket = await small.allocate(host);
  t.teardown(() => small.release(socket));
  t.is(socket.address().port, start + 2);
  await t.throwsAsync(small.allocate(host), { instanceOf: PortPoolExhaustedError });
});

// ---------------------------------------------------------------------------------------------------------------
// Audio

for (const codec of ['PCMU', 'PCMA'] as const) {
  test(`a 1 kHz sine goes from one endpoint to another in ${codec} with small error`, async (t) => {
    const { a, b } = await pair(t, codec);
    const frames: Int16Array[] = [];
    b.onAudio((frame) => frames.push(frame));
    const sent = sine(1000, 160 * 25);
    for (let index = 0; index < 25; index += 1) a.send(sent.subarray(index * 160, (index + 1) * 160));
    await handled(b, 25);
    t.is(frames.length, 25);
    t.true(frames.every((frame) => frame.length === 160));
    const quality = snr(sent, concat(frames));
    t.true(quality > 30, `SNR ${quality.toFixed(1)} dB`);
    t.like(b.stats, { packetsIn: 25, lost: 0, malformed: 0, ignored: 0 });
    t.is(a.stats.packetsOut, 25);
  });
}

test('packets on the wire: RTP v2, the codec payload type, one SSRC, sequence +1 and timestamp +160', async (t) => {
  const a = await endpoint(t);
  const wire = await rawSocket(t);
  a.setRemote(remote(wire.port, 'PCMA', { payloadType: 8 }));
  const frame = sine(440, 160);
  for (let index = 0; index < 3; index += 1) a.send(frame);
  await untilTrue('3 packets', () => wire.received.length === 3, { everyMs: 1 });
  const packets = wire.received.map((datagram) => parseRtp(datagram));
  t.true(packets.every((packet) => packet !== null));
  const [first, second, third] = packets as NonNullable<(typeof packets)[number]>[];
  t.is(wire.received[0]?.[0], 0x80);
  t.is(first?.payloadType, 8);
  t.true(first?.marker, 'the first packet starts a talkspurt');
  t.false(second?.marker);
  t.is(first?.payload.length, 160);
  t.is(second?.ssrc, first?.ssrc);
  t.is(third?.ssrc, first?.ssrc);
  t.is(second?.sequence, ((first?.sequence ?? 0) + 1) & 0xffff);
  t.is(third?.sequence, ((first?.sequence ?? 0) + 2) & 0xffff);
  t.is(second?.timestamp, ((first?.timestamp ?? 0) + 160) >>> 0);
  t.true(snr(frame, decode('PCMA', first?.payload ?? new Uint8Array())) > 30);

  // Hold: recvonly, or the old 0.0.0.0 address, sends nothing.
  a.setRemote(remote(wire.port, 'PCMA', { direction: 'recvonly' }));
  a.send(frame);
  a.setRemote(remote(wire.port, 'PCMA', { address: '0.0.0.0' }));
  a.send(frame);
  t.is(a.stats.packetsOut, 3);
  // Resumed: the same stream goes on (same SSRC, next sequence number).
  a.setRemote(remote(wire.port, 'PCMA'));
  a.send(frame);
  await untilTrue('the 4th packet', () => wire.received.length === 4, { everyMs: 1 });
  const resumed = parseRtp(wire.received[3] as Buffer);
  t.is(resumed?.ssrc, first?.ssrc);
  t.is(resumed?.sequence, ((first?.sequence ?? 0) + 3) & 0xffff);
});

// ---------------------------------------------------------------------------------------------------------------
// Playback

// Serial: AVA runs serial tests first, alone, so the other tests' CPU work does not disturb the timing measured.
test.serial(
  'play() sends its frames paced, never faster than they play: 50 frames take at least a second',
  async (t) => {
    // The schedule itself (slots, catching up, a stall) is tested on a timer of the test's in player.test.ts; here the
    // frames cross a socket, on whatever machine runs the suite, so only what load cannot change is asserted.
    const { a, b } = await pair(t);
    const arrivals: number[] = [];
    b.onAudio(() => arrivals.push(performance.now()));
    const started = performance.now();
    const result = await a.play(sine(1000, 50 * 160 - 40)); // the last frame is padded
    const elapsed = performance.now() - started;
    t.is(result, 'done');
    await handled(b, 50);
    t.is(arrivals.length, 50);
    // 'done' one step after the last frame: 50 steps of 20 ms at the least (a timer may fire a millisecond early).
    t.true(elapsed >= 995, `play took ${elapsed.toFixed(0)} ms`);
    // Never ahead of the schedule: the last frame is sent 49 steps after the first, however busy the machine.
    const last = (arrivals.at(-1) as number) - started;
    t.true(last >= 49 * 20 - 5, `the last frame arrived ${last.toFixed(0)} ms after play began`);
    t.log(`play took ${elapsed.toFixed(0)} ms; the last frame arrived after ${last.toFixed(0)} ms`);
  },
);

test('play() stops on abort, on a newer play() and on close', async (t) => {
  const { a, b } = await pair(t);
  let frames = 0;
  b.onAudio(() => (frames += 1));
  const long = sine(500, 8000 * 5);

  const controller = new AbortController();
  const started = performance.now();
  const playing = a.play(long, controller.signal);
  await untilTrue('5 frames', () => frames >= 5, { everyMs: 1 });
  controller.abort();
  t.is(await playing, 'aborted');
  t.true(performance.now() - started < 2000);
  const sentAtAbort = a.stats.packetsOut;
  t.true(sentAtAbort < 50, `${sentAtAbort} frames sent`);
  // Nothing more goes out: a marker frame sent now is the next thing b sees.
  a.send(sine(500, 160));
  await handled(b, sentAtAbort + 1);
  t.is(a.stats.packetsOut, sentAtAbort + 1);

  const before = a.stats.packetsOut;
  t.is(await a.play(long, AbortSignal.abort()), 'aborted');
  t.is(a.stats.packetsOut, before, 'an aborted signal sends nothing');

  const first = a.play(long);
  const second = a.play(sine(500, 160 * 3));
  t.is(await first, 'aborted');
  t.is(await second, 'done');

  const third = a.play(long);
  a.close();
  t.is(await third, 'aborted');
  t.is(await a.play(long), 'aborted');
});

// ---------------------------------------------------------------------------------------------------------------
// DTMF

test('sendDtmf: each of 0-9, * and # arrives exactly once as that digit', async (t) => {
  const { a, b } = await pair(t);
  const digits: string[] = [];
  b.onDtmf((digit) => digits.push(digit));
  for (const digit of '0123456789*#') await a.sendDtmf(digit, 60);
  await handled(b, a.stats.packetsOut);
  t.is(digits.join(''), '0123456789*#');
  t.is(b.stats.malformed, 0);

  // Queued without waiting: still in order, once each; the same key twice is two events.
  const more = ['1', '1', 'a', 'D'].map((digit) => a.sendDtmf(digit, 40));
  await Promise.all(more);
  await handled(b, a.stats.packetsOut);
  t.is(digits.join(''), '0123456789*#11AD');
  await t.throwsAsync(a.sendDtmf('x'), { instanceOf: RangeError });
  await t.throwsAsync(a.sendDtmf('12'), { instanceOf: RangeError });
});

test('sendDtmf sends RFC 4733 packets: marker on the first, one timestamp, three end packets', async (t) => {
  const a = await endpoint(t);
  const wire = await rawSocket(t);
  a.setRemote(remote(wire.port, 'PCMU', { telephoneEventPt: 96 }));
  a.send(sine(440, 160));
  await a.sendDtmf('9', 100);
  a.send(sine(440, 160));
  await untilTrue('the audio after the event', () => wire.received.length >= 9, { everyMs: 1 });
  t.is(wire.received.length, 9);
  const packets = wire.received.map((datagram) => parseRtp(datagram));
  const events = packets.filter((packet) => packet?.payloadType === 96);
  t.is(events.length, 4 + 3);
  t.true(events[0]?.marker);
  t.true(events.slice(1).every((packet) => !packet?.marker));
  t.true(events.every((packet) => packet?.timestamp === events[0]?.timestamp));
  const payloads = events.map((packet) => packet?.payload ?? new Uint8Array());
  t.true(payloads.every((payload) => payload[0] === 9));
  t.deepEqual(
    payloads.map((payload) => (payload[1] as number) >> 7),
    [0, 0, 0, 0, 1, 1, 1],
  );
  t.deepEqual(
    payloads.map((payload) => ((payload[2] as number) << 8) | (payload[3] as number)),
    [160, 320, 480, 640, 800, 800, 800],
  );
  // The audio after the event starts past it: its timestamp is at least the event's start plus its duration.
  const before = packets[0];
  const after = packets.at(-1);
  t.is(after?.payloadType, 0);
  t.true(((after?.timestamp ?? 0) - (events[0]?.timestamp ?? 0)) >>> 0 >= 800);
  t.true(((events[0]?.timestamp ?? 0) - (before?.timestamp ?? 0)) >>> 0 >= 160);
});

test('received telephone events are reported once, whatever the retransmissions and losses', async (t) => {
  const b = await endpoint(t);
  const wire = await rawSocket(t);
  b.setRemote(remote(wire.port, 'PCMU', { telephoneEventPt: 101 }));
  const digits: string[] = [];
  b.onDtmf((digit) => digits.push(digit));
  let sequence = 1000;
  let sent = 0;
  const send = async (timestamp: number, payload: Uint8Array, marker = false) => {
    await wire.send(
      buildRtp({ marker, payloadType: 101, sequence: sequence++, timestamp, ssrc: 42 }, payload),
      b.localPort,
    );
    sent += 1;
  };
  // A full event, then its end packets again (a retransmission, or a duplicating network).
  await send(8000, eventPayload(5, false, 160), true);
  await send(8000, eventPayload(5, false, 320));
  for (let index = 0; index < 6; index += 1) await send(8000, eventPayload(5, true, 480));
  // The same key again: a new timestamp, a new event.
  await send(9000, eventPayload(5, false, 160), true);
  await send(9000, eventPayload(5, true, 320));
  // An event whose start and middle were lost: its end packets still report it, once.
  for (let index = 0; index < 3; index += 1) await send(10000, eventPayload(11, true, 800));
  // A late straggler of the first event, and a flash (event 16), which is not a digit.
  await send(8000, eventPayload(5, true, 480));
  await send(11000, eventPayload(16, true, 800));
  await handled(b, sent);
  t.deepEqual(digits, ['5', '5', '#']);
  t.is(b.stats.packetsIn, sent);
});

test('a remote without telephone-event gets DTMF as an in-band tone', async (t) => {
  const { a, b } = await pair(t);
  a.setRemote(remote(b.localPort, 'PCMU', { telephoneEventPt: null }));
  const frames: Int16Array[] = [];
  const digits: string[] = [];
  b.onAudio((frame) => frames.push(frame));
  b.onDtmf((digit) => digits.push(digit));
  await a.sendDtmf('0', 100);
  await handled(b, a.stats.packetsOut);
  t.deepEqual(digits, []);
  const tone = concat(frames).subarray(0, 800);
  t.true(tone.length === 800, `${frames.length} frames`);
  // 0 is 941 Hz + 1336 Hz; 1209 Hz (the 1, 4, 7, * column) is absent.
  t.true(tonePower(tone, 941) > 0.3, `941 Hz: ${tonePower(tone, 941)}`);
  t.true(tonePower(tone, 1336) > 0.3, `1336 Hz: ${tonePower(tone, 1336)}`);
  t.true(tonePower(tone, 1209) < 0.05, `1209 Hz: ${tonePower(tone, 1209)}`);
});

// ---------------------------------------------------------------------------------------------------------------
// Garbage, foreign sources, latching, loss

test('malformed datagrams are counted, never thrown, and the stream goes on', async (t) => {
  const errors: unknown[] = [];
  const b = await endpoint(t, { onError: (error) => errors.push(error) });
  const wire = await rawSocket(t);
  b.setRemote(remote(wire.port));
  const frames: Int16Array[] = [];
  b.onAudio((frame) => frames.push(frame));
  const header = (first: number, payloadType = 0) => Buffer.from([first, payloadType, 0, 1, 0, 0, 0, 160, 0, 0, 0, 7]);
  const malformed: Buffer[] = [
    Buffer.alloc(0),
    Buffer.from([0x80, 0, 1]),
    Buffer.concat([header(0x40), Buffer.alloc(160, 0xff)]), // version 1
    Buffer.concat([header(0x8f), Buffer.alloc(20)]), // 15 CSRCs announced, 5 present
    Buffer.concat([header(0x90), Buffer.from([0xbe, 0xde, 0x00, 0x10])]), // a 64-byte extension that is not there
    Buffer.concat([header(0xa0), Buffer.from([1, 2, 0xff])]), // padding longer than the packet
    Buffer.concat([header(0xa0), Buffer.from([1, 2, 0x00])]), // padding count 0
    Buffer.concat([header(0x80, 101), Buffer.from([5, 0x80])]), // a telephone event of 2 bytes
    header(0x80, 0), // audio without a payload
  ];
  const ignored: Buffer[] = [
    Buffer.from([0x80, 200, 0, 6, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 0]), // RTCP sender report
    Buffer.concat([header(0x80, 13), Buffer.from([40])]), // comfort noise
    Buffer.concat([header(0x80, 96), Buffer.alloc(20)]), // a payload type nobody negotiated
  ];
  for (const datagram of [...malformed, ...ignored]) await wire.send(datagram, b.localPort);
  const frame = sine(1000, 160);
  await wire.send(
    buildRtp({ marker: true, payloadType: 0, sequence: 2, timestamp: 320, ssrc: 7 }, encode('PCMU', frame)),
    b.localPort,
  );
  await untilTrue('the good packet', () => frames.length === 1, { everyMs: 1 });
  t.like(b.stats, { malformed: malformed.length, ignored: ignored.length, packetsIn: 1 });
  t.true(snr(frame, frames[0] as Int16Array) > 30);

  // A listener that throws is reported, and the others still hear the frame.
  b.onAudio(() => {
    throw new Error('listener bug');
  });
  await wire.send(
    buildRtp({ marker: false, payloadType: 0, sequence: 3, timestamp: 480, ssrc: 7 }, encode('PCMU', frame)),
    b.localPort,
  );
  await untilTrue('the second frame', () => frames.length === 2, { everyMs: 1 });
  t.is(errors.length, 1);
  t.regex(String(errors[0]), /listener bug/);
});

test('symmetric RTP: the endpoint latches to the first source and ignores others until setRemote', async (t) => {
  const b = await endpoint(t);
  const first = await rawSocket(t);
  const second = await rawSocket(t);
  // The SDP points somewhere else (a NAT's inside address); media really comes from `first`.
  b.setRemote(remote(9, 'PCMU'));
  const frames: Int16Array[] = [];
  b.onAudio((frame) => frames.push(frame));
  const packet = (sequence: number) =>
    buildRtp(
      { marker: false, payloadType: 0, sequence, timestamp: sequence * 160, ssrc: 1 },
      encode('PCMU', sine(800, 160)),
    );
  await first.send(packet(1), b.localPort);
  await untilTrue('the first frame', () => frames.length === 1, { everyMs: 1 });
  t.deepEqual(b.target, { address: host, port: first.port });
  b.send(sine(800, 160));
  await untilTrue('the answer reaches the latched source', () => first.received.length === 1, { everyMs: 1 });

  await second.send(packet(2), b.localPort);
  await handled(b, 2);
  t.is(frames.length, 1, 'a second source is ignored');
  t.is(b.stats.ignored, 1);

  // A re-INVITE forgets the latch: the next source is taken.
  b.setRemote(remote(9, 'PCMU'));
  await second.send(packet(3), b.localPort);
  await untilTrue('the frame from the new source', () => frames.length === 2, { everyMs: 1 });
  t.deepEqual(b.target, { address: host, port: second.port });

  // Without latching, only the exact SDP address and port are accepted.
  const strict = await endpoint(t, { latch: false });
  strict.setRemote(remote(second.port));
  let heard = 0;
  strict.onAudio(() => (heard += 1));
  await first.send(packet(4), strict.localPort);
  await second.send(packet(5), strict.localPort);
  await handled(strict, 2);
  t.is(heard, 1);
  t.like(strict.stats, { ignored: 1, packetsIn: 1 });
});

test("datagrams from an address that is not the peer's are never heard nor latched onto, and get nothing", async (t) => {
  const b = await endpoint(t);
  // Another host (127.0.0.2 is loopback too, but not the peer's address) sprays well-formed RTP at the port first.
  const stranger = await rawSocket(t, '127.0.0.2');
  const carrier = await rawSocket(t);
  b.setRemote(remote(carrier.port));
  const frames: Int16Array[] = [];
  b.onAudio((frame) => frames.push(frame));
  const packet = (sequence: number) =>
    buildRtp(
      { marker: false, payloadType: 0, sequence, timestamp: sequence * 160, ssrc: 3 },
      encode('PCMU', sine(800, 160)),
    );
  for (let sequence = 1; sequence <= 20; sequence += 1) await stranger.send(packet(sequence), b.localPort);
  await handled(b, 20);
  t.like(b.stats, { foreign: 20, packetsIn: 0 });
  t.is(frames.length, 0);
  t.deepEqual(b.target, { address: host, port: carrier.port }, 'still the SDP address');
  // The carrier's own packet, from another port than its SDP's (symmetric RTP), is heard and latched.
  const nat = await rawSocket(t);
  await nat.send(packet(21), b.localPort);
  await untilTrue('the carrier is heard', () => frames.length === 1, { everyMs: 1 });
  t.deepEqual(b.target, { address: host, port: nat.port });
  b.send(sine(800, 160));
  await untilTrue('the answer reaches the carrier', () => nat.received.length === 1, { everyMs: 1 });
  await stranger.send(packet(22), b.localPort);
  await handled(b, 22);
  t.is(b.stats.foreign, 21);
  t.is(stranger.received.length, 0, 'nothing was ever sent to the stranger');
});

test('an SDP address the peer could not receive at is refused and changes nothing', async (t) => {
  const b = await endpoint(t);
  const carrier = await rawSocket(t);
  t.throws(() => b.setRemote({ ...remote(carrier.port), address: '0.0.0.0' }), {
    instanceOf: MediaAddressError,
    message: /unspecified/,
  });
  t.is(b.target, null);
  b.setRemote(remote(carrier.port));
  for (const address of ['224.1.1.1', '169.254.3.3', '9.9.9.9']) {
    t.throws(() => b.setRemote({ ...remote(4000), address }), { instanceOf: MediaAddressError }, address);
  }
  t.deepEqual(b.target, { address: host, port: carrier.port }, 'the media stays where it was');
  // Later in the dialog the unspecified address is a hold: kept, and nothing is sent.
  b.setRemote({ ...remote(carrier.port), address: '0.0.0.0' });
  b.send(sine(800, 160));
  t.is(b.stats.packetsOut, 0);
});

test('loss is counted from sequence gaps, across a wrap', async (t) => {
  const b = await endpoint(t);
  const wire = await rawSocket(t);
  b.setRemote(remote(wire.port));
  const payload = encode('PCMU', sine(1000, 160));
  const sequences = [65530, 65531, 65533, 65535, 0, 1, 4];
  for (const sequence of sequences) {
    await wire.send(buildRtp({ marker: false, payloadType: 0, sequence, timestamp: 0, ssrc: 9 }, payload), b.localPort);
  }
  await handled(b, sequences.length);
  // 65530..4 is 11 packets and 7 arrived: 65532, 65534, 2 and 3 are lost.
  t.is(b.stats.lost, 4);
  // A new SSRC (a restarted sender) starts a new count; the earlier losses stay.
  for (const sequence of [100, 102]) {
    await wire.send(
      buildRtp({ marker: false, payloadType: 0, sequence, timestamp: 0, ssrc: 10 }, payload),
      b.localPort,
    );
  }
  await handled(b, sequences.length + 2);
  t.is(b.stats.lost, 5);
});

// ---------------------------------------------------------------------------------------------------------------
// SDP

const carrierOffer = [
  'v=0',
  'o=carrier 123456 654321 IN IP4 203.0.113.10',
  's=call',
  'c=IN IP4 203.0.113.10',
  't=0 0',
  'm=audio 40000 RTP/AVP 18 0 8 101',
  'a=rtpmap:18 G729/8000',
  'a=rtpmap:101 telephone-event/8000',
  'a=fmtp:101 0-15',
  'a=ptime:20',
  'a=sendrecv',
  '',
].join('\r\n');

test('SDP: a carrier offer is parsed and answered with PCMU and telephone-event 101', (t) => {
  const parsed = parseSdp(carrierOffer);
  t.like(parsed, { address: '203.0.113.10', port: 40000, telephoneEventPt: 101, direction: 'sendrecv' });
  t.deepEqual(parsed.codecs, [
    { payloadType: 18, name: 'G729', rate: 8000 },
    { payloadType: 0, name: 'PCMU', rate: 8000 },
    { payloadType: 8, name: 'PCMA', rate: 8000 },
    { payloadType: 101, name: 'telephone-event', rate: 8000 },
  ]);
  const answered = answer(parsed, { address: '198.51.100.7', port: 20002 });
  t.deepEqual(answered.remote, {
    address: '203.0.113.10',
    port: 40000,
    codec: 'PCMU',
    payloadType: 0,
    telephoneEventPt: 101,
    direction: 'sendrecv',
  });
  t.regex(answered.sdp, /^v=0\r\n/);
  t.regex(answered.sdp, /\r\nc=IN IP4 198\.51\.100\.7\r\n/);
  t.regex(answered.sdp, /\r\nm=audio 20002 RTP\/AVP 0 101\r\n/);
  t.regex(answered.sdp, /\r\na=rtpmap:101 telephone-event\/8000\r\n/);
  t.regex(answered.sdp, /\r\na=fmtp:101 0-16\r\n/);
  const back = parseSdp(answered.sdp);
  t.like(back, { address: '198.51.100.7', port: 20002, telephoneEventPt: 101, direction: 'sendrecv' });
  t.deepEqual(
    back.codecs.map((codec) => codec.name),
    ['PCMU', 'telephone-event'],
  );
});

test('SDP: an offer with only PCMA (static, no rtpmap) is answered with PCMA and no telephone-event', (t) => {
  const sdp = 'v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=audio 5004 RTP/AVP 8\r\n';
  const parsed = parseSdp(sdp);
  t.deepEqual(parsed.codecs, [{ payloadType: 8, name: 'PCMA', rate: 8000 }]);
  t.is(parsed.telephoneEventPt, null);
  const answered = answer(parsed, { address: '127.0.0.1', port: 20004 });
  t.like(answered.remote, { codec: 'PCMA', payloadType: 8, telephoneEventPt: null, port: 5004 });
  t.regex(answered.sdp, /\r\nm=audio 20004 RTP\/AVP 8\r\n/);
  t.notRegex(answered.sdp, /telephone-event/);
});

test("SDP: the answer follows the offer's codec order, its telephone-event type and its direction", (t) => {
  const sdp = (media: string, extra = '', address = '192.0.2.1') =>
    `v=0\r\no=- 1 1 IN IP4 ${address}\r\ns=-\r\nc=IN IP4 ${address}\r\nt=0 0\r\n${media}${extra}`;
  const pcmaFirst = parseSdp(sdp('m=audio 5004 RTP/AVP 8 0 96\r\na=rtpmap:96 telephone-event/8000\r\n'));
  const answered = answer(pcmaFirst, { address: '127.0.0.1', port: 20006 });
  t.like(answered.remote, { codec: 'PCMA', telephoneEventPt: 96 });
  t.regex(answered.sdp, /m=audio 20006 RTP\/AVP 8 96\r\n/);

  const hold = parseSdp(sdp('m=audio 5004 RTP/AVP 0\r\na=sendonly\r\n'));
  t.is(hold.direction, 'sendonly');
  const held = answer(hold, { address: '127.0.0.1', port: 20006 });
  t.is(held.remote.direction, 'recvonly');
  t.regex(held.sdp, /a=recvonly\r\n/);
  const sessionLevel = parseSdp(sdp('a=inactive\r\nm=audio 5004 RTP/AVP 0\r\n'));
  t.is(sessionLevel.direction, 'inactive');
  const oldHold = answer(parseSdp(sdp('m=audio 5004 RTP/AVP 0\r\n', '', '0.0.0.0')), { address: '127.0.0.1', port: 2 });
  t.is(oldHold.remote.direction, 'recvonly', 'c=0.0.0.0: nothing is sent');

  // Audio and video: the video stream is refused in place with port 0.
  const withVideo = parseSdp(sdp('m=video 6000 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\nm=audio 5004 RTP/AVP 0\r\n'));
  t.is(withVideo.port, 5004);
  const av = answer(withVideo, { address: '127.0.0.1', port: 20008 });
  t.regex(av.sdp, /m=video 0 RTP\/AVP 96\r\n[^]*m=audio 20008 RTP\/AVP 0\r\n/);

  // IPv6.
  const v6 = parseSdp(
    'v=0\r\no=- 1 1 IN IP6 2001:db8::1\r\ns=-\r\nc=IN IP6 2001:db8::1\r\nt=0 0\r\nm=audio 5004 RTP/AVP 0\r\n',
  );
  t.is(v6.address, '2001:db8::1');
  t.regex(answer(v6, { address: '::1', port: 20010 }).sdp, /c=IN IP6 ::1\r\n/);
});

test('SDP: our offer and the remote answer round-trip', (t) => {
  const ours = offer({ address: '127.0.0.1', port: 20012 });
  const parsedOffer = parseSdp(ours);
  t.deepEqual(parsedOffer.codecs, [
    { payloadType: 0, name: 'PCMU', rate: 8000 },
    { payloadType: 8, name: 'PCMA', rate: 8000 },
    { payloadType: 101, name: 'telephone-event', rate: 8000 },
  ]);
  t.like(parsedOffer, { address: '127.0.0.1', port: 20012, telephoneEventPt: 101, direction: 'sendrecv' });
  t.regex(ours, /a=fmtp:101 0-16\r\n/);
  t.regex(ours, /a=ptime:20\r\n/);
  const theirs = answer(parsedOffer, { address: '127.0.0.2', port: 30000 });
  t.deepEqual(remoteFromAnswer(parseSdp(theirs.sdp)), {
    address: '127.0.0.2',
    port: 30000,
    codec: 'PCMU',
    payloadType: 0,
    telephoneEventPt: 101,
    direction: 'sendrecv',
  });
  const noG711: MediaOffer = { ...parsedOffer, codecs: [{ payloadType: 18, name: 'G729', rate: 8000 }] };
  t.throws(() => remoteFromAnswer(noG711), { instanceOf: SdpError });
});

test('SDP: garbage, no audio, port 0, SRTP and no common codec are SdpErrors with a clear message', (t) => {
  const head = 'v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\n';
  const cases: [string, string, RegExp][] = [
    ['empty', '', /empty/],
    ['garbage', 'this is not sdp at all', /not SDP/],
    ['binary', '\u0000\u0001\u0002v=0', /not SDP/],
    ['no media', head, /no audio stream/],
    ['video only', `${head}m=video 5000 RTP/AVP 96\r\n`, /no audio stream/],
    ['port 0', `${head}m=audio 0 RTP/AVP 0\r\n`, /disabled \(port 0\)/],
    ['SRTP', `${head}m=audio 5000 RTP/SAVP 0\r\n`, /RTP\/SAVP.*only plain RTP/],
    ['no connection', 'v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nt=0 0\r\nm=audio 5000 RTP/AVP 0\r\n', /connection/],
    ['bad payload type', `${head}m=audio 5000 RTP/AVP 0 abc\r\n`, /payload type/],
    ['no payload types', `${head}m=audio 5000 RTP/AVP\r\n`, /payload types|audio stream/],
  ];
  for (const [label, sdp, message] of cases) {
    const error = t.throws(() => parseSdp(sdp), { instanceOf: SdpError }, label);
    t.regex(error?.message ?? '', message, label);
  }
  const g729 = parseSdp(`${head}m=audio 5000 RTP/AVP 18 101\r\na=rtpmap:101 telephone-event/8000\r\n`);
  const refused = t.throws(() => answer(g729, { address: '127.0.0.1', port: 20000 }), { instanceOf: SdpError });
  t.regex(refused?.message ?? '', /no common codec: the offer has G729\/8000, telephone-event\/8000/);
  t.throws(() => answer(parseSdp(carrierOffer), { address: 'not-an-ip', port: 20000 }), { instanceOf: RangeError });
});

// ---------------------------------------------------------------------------------------------------------------
// Recording

test('WavRecorder writes an 8 kHz mono 16-bit WAV whose header matches the frames written', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-media-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'voicemail.wav');
  const recorder = await WavRecorder.open(file);
  const audio = sine(700, 160 * 300 + 77); // 6 s: more than one 32 KiB block, and an odd frame at the end
  for (let offset = 0; offset < audio.length; offset += 160) recorder.write(audio.subarray(offset, offset + 160));
  const result = await recorder.close();
  recorder.write(audio.subarray(0, 160)); // after close: dropped
  t.deepEqual(await recorder.close(), result);

  const bytes = await readFile(file);
  t.is(bytes.toString('ascii', 0, 4), 'RIFF');
  t.is(bytes.readUInt32LE(4), bytes.length - 8);
  t.is(bytes.toString('ascii', 8, 16), 'WAVEfmt ');
  t.is(bytes.readUInt32LE(16), 16);
  t.is(bytes.readUInt16LE(20), 1, 'PCM');
  t.is(bytes.readUInt16LE(22), 1, 'mono');
  t.is(bytes.readUInt32LE(24), 8000, 'sample rate');
  t.is(bytes.readUInt32LE(28), 16000, 'byte rate');
  t.is(bytes.readUInt16LE(32), 2, 'block align');
  t.is(bytes.readUInt16LE(34), 16, 'bits per sample');
  t.is(bytes.toString('ascii', 36, 40), 'data');
  t.is(bytes.readUInt32LE(40), audio.length * 2);
  t.is(bytes.length, 44 + audio.length * 2);
  t.deepEqual(result, { durationMs: Math.round(audio.length / 8), bytes: bytes.length });
  const samples = new Int16Array(audio.length);
  for (let index = 0; index < audio.length; index += 1) samples[index] = bytes.readInt16LE(44 + index * 2);
  t.deepEqual(samples, audio);
});

// ---------------------------------------------------------------------------------------------------------------
// Bridge

test('bridge relays audio and DTMF between a PCMU leg and a PCMA leg, until unbridged', async (t) => {
  // caller (PCMU) <-> a ==bridge== b <-> wire (PCMA, a bare socket, to see the payload type)
  const caller = await endpoint(t);
  const a = await endpoint(t);
  const b = await endpoint(t);
  const wire = await rawSocket(t);
  caller.setRemote(remote(a.localPort, 'PCMU'));
  a.setRemote(remote(caller.localPort, 'PCMU'));
  b.setRemote(remote(wire.port, 'PCMA'));
  const unbridge = bridge(a, b);

  const speech = sine(1000, 160 * 10, 6000);
  for (let index = 0; index < 10; index += 1) caller.send(speech.subarray(index * 160, (index + 1) * 160));
  await untilTrue('10 relayed packets', () => wire.received.length === 10, { everyMs: 1 });
  const packets = wire.received.map((datagram) => parseRtp(datagram));
  t.true(
    packets.every((packet) => packet?.payloadType === 8),
    'the PCMA leg gets PCMA',
  );
  const relayed = concat(packets.map((packet) => decode('PCMA', packet?.payload ?? new Uint8Array())));
  const quality = snr(speech, relayed);
  t.true(quality > 25, `SNR after PCMU -> PCMA: ${quality.toFixed(1)} dB`);

  // The other way: PCMA packets from the wire reach the caller in PCMU.
  const heard: Int16Array[] = [];
  caller.onAudio((frame) => heard.push(frame));
  for (let index = 0; index < 10; index += 1) {
    const payload = encode('PCMA', speech.subarray(index * 160, (index + 1) * 160));
    await wire.send(
      buildRtp({ marker: index === 0, payloadType: 8, sequence: index, timestamp: index * 160, ssrc: 5 }, payload),
      b.localPort,
    );
  }
  await untilTrue('10 frames at the caller', () => heard.length === 10, { everyMs: 1 });
  t.true(snr(speech, concat(heard)) > 25);

  // DTMF from the caller comes out on the PCMA leg as telephone events.
  const isEnd = (datagram: Buffer, event: number) => {
    const packet = parseRtp(datagram);
    return packet?.payloadType === 101 && packet.payload[0] === event && (packet.payload[1] as number) >> 7 === 1;
  };
  await caller.sendDtmf('7', 60);
  await untilTrue('the relayed event', () => wire.received.filter((datagram) => isEnd(datagram, 7)).length === 3, {
    everyMs: 1,
  });
  // And DTMF from the PCMA side reaches the caller.
  const digits: string[] = [];
  caller.onDtmf((digit) => digits.push(digit));
  const hash = eventPayload(11, true, 480);
  await wire.send(
    buildRtp({ marker: true, payloadType: 101, sequence: 20, timestamp: 4000, ssrc: 5 }, hash),
    b.localPort,
  );
  await untilTrue('# at the caller', () => digits.length === 1, { everyMs: 1 });
  t.deepEqual(digits, ['#']);
  // b's events are sent one after the other: once this one is out, the relayed one is over too.
  await b.sendDtmf('1', 40);
  await untilTrue('the 1', () => wire.received.filter((datagram) => isEnd(datagram, 1)).length === 3, { everyMs: 1 });

  // Unbridged: the caller's audio reaches a and stops there. A direct frame on b, sent after a has handled the
  // caller's frames, is then the first thing the wire gets (anything relayed would have been sent before it).
  unbridge();
  unbridge();
  const onWire = wire.received.length;
  const atA = datagramsIn(a);
  for (let index = 0; index < 5; index += 1) caller.send(speech.subarray(0, 160));
  await handled(a, atA + 5);
  const direct = sine(2000, 160, 3000);
  b.send(direct);
  await untilTrue('the direct frame', () => wire.received.length > onWire, { everyMs: 1 });
  t.deepEqual(new Uint8Array(parseRtp(wire.received[onWire] as Buffer)?.payload ?? []), encode('PCMA', direct));
  t.throws(() => bridge(a, a));
});

// ---------------------------------------------------------------------------------------------------------------
// WAV reading and resampling

test('resampling to 8 kHz keeps the telephone band and filters out what would alias', async (t) => {
  const kept = resample(sine(1000, 44100, 10000, 44100), 44100);
  t.true(Math.abs(kept.length - 8000) <= 1);
  t.true(Math.abs(rms(kept.subarray(100, -100)) - 10000 / Math.SQRT2) < 200, `1 kHz rms ${rms(kept)}`);
  t.true(tonePower(kept.subarray(100, -100), 1000) > 0.9);
  // 6 kHz at 44.1 kHz would fold to 2 kHz if samples were just dropped.
  const folded = resample(sine(6000, 44100, 10000, 44100), 44100);
  t.true(rms(folded.subarray(100, -100)) < 50, `6 kHz leaks ${rms(folded)}`);
  t.deepEqual(await resampleInSlices(sine(1000, 44100, 10000, 44100), 44100, 8000, 700), kept);
  const up = resample(sine(440, 4000, 10000, 4000), 4000);
  t.is(up.length, 8000);
  t.true(tonePower(up.subarray(100, -100), 440) > 0.9);
});

function wavBytes(options: { rate: number; channels: number; bits: number; samples: number[]; format?: number }) {
  const { rate, channels, bits, samples, format = 1 } = options;
  const bytesPerSample = bits / 8;
  const data = Buffer.alloc(samples.length * bytesPerSample);
  samples.forEach((sample, index) => {
    if (bits === 8) data[index] = sample;
    else if (bits === 16) data.writeInt16LE(sample, index * 2);
    else data.writeIntLE(sample, index * 3, 3);
  });
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(format, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * channels * bytesPerSample, 28);
  header.writeUInt16LE(channels * bytesPerSample, 32);
  header.writeUInt16LE(bits, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

/** A 1 s 440 Hz WAV file at 16 kHz, stereo, 16-bit. */
function stereoWav(): Buffer {
  const tone = sine(440, 16000, 12000, 16000);
  return wavBytes({ rate: 16000, channels: 2, bits: 16, samples: [...tone].flatMap((sample) => [sample, sample]) });
}

test('WAV reading: PCM 8 and 16-bit, mono and stereo; anything else is a WavError', (t) => {
  const stereo = decodeWav(stereoWav());
  t.is(stereo.sampleRate, 16000);
  t.is(stereo.pcm.length, 16000);
  const eightBit = decodeWav(wavBytes({ rate: 11025, channels: 1, bits: 8, samples: [128, 255, 0, 192] }));
  t.deepEqual([...eightBit.pcm], [0, 127 << 8, -128 << 8, 64 << 8]);
  // A streamed WAV (espeak-ng --stdout) claims more data than there is.
  const streamed = wavBytes({ rate: 8000, channels: 1, bits: 16, samples: [1, 2, 3] });
  streamed.writeUInt32LE(0x7ffff000, 40);
  t.deepEqual([...decodeWav(streamed).pcm], [1, 2, 3]);
  for (const [label, file, message] of [
    ['text', Buffer.from('hello, not audio'), /not a WAV file/],
    ['24-bit', wavBytes({ rate: 8000, channels: 1, bits: 24, samples: [1] }), /24-bit/],
    ['float', wavBytes({ rate: 8000, channels: 1, bits: 16, samples: [1], format: 3 }), /format 3/],
    ['6 channels', wavBytes({ rate: 8000, channels: 6, bits: 16, samples: [1] }), /6 channels/],
    ['truncated', stereoWav().subarray(0, 30), /fmt chunk is too short|no data/],
  ] as const) {
    t.throws(() => decodeWav(file), { instanceOf: WavError, message }, label);
  }
});

// ---------------------------------------------------------------------------------------------------------------
// Prompts

async function cacheDir(t: ExecutionContext): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'switchboard-prompts-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

test('a TTS prompt is speech of plausible length, produced once, then served from memory and from disk', async (t) => {
  const dir = await cacheDir(t);
  const prompts = new Prompts({ cacheDir: dir, allowPrivateNetworks: false });
  const sentence = { tts: 'Thank you for calling. Please hold.' };
  const [first, concurrent] = await Promise.all([prompts.pcm(sentence), prompts.pcm(sentence)]);
  t.is(first, concurrent, 'one production for concurrent requests');
  const seconds = first.length / 8000;
  t.true(seconds > 0.5 && seconds < 5, `${seconds} s`);
  t.true(rms(first) > 300, `rms ${rms(first)}`);
  t.is(prompts.stats.ttsRuns, 1);

  const again = await prompts.pcm(sentence);
  t.is(again, first);
  t.like(prompts.stats, { ttsRuns: 1, memoryHits: 2 });

  const restarted = new Prompts({ cacheDir: dir, allowPrivateNetworks: false });
  const fromDisk = await restarted.pcm(sentence);
  t.like(restarted.stats, { ttsRuns: 0, diskHits: 1 });
  t.deepEqual(fromDisk, first);

  // A text that looks like an option is spoken, not obeyed (--version would print text, not a WAV).
  const option = await prompts.pcm({ tts: '--version' });
  t.true(option.length > 1000);
  t.is(prompts.stats.ttsRuns, 2);
});

test('TTS failures are PromptErrors', async (t) => {
  const dir = await cacheDir(t);
  const missing = new Prompts({ cacheDir: dir, allowPrivateNetworks: false, ttsCommand: 'no-such-tts-command' });
  await t.throwsAsync(missing.pcm({ tts: 'hello' }), { instanceOf: PromptError, message: /could not run: ENOENT/ });
  const failing = new Prompts({ cacheDir: dir, allowPrivateNetworks: false, ttsCommand: 'false' });
  await t.throwsAsync(failing.pcm({ tts: 'hello' }), { instanceOf: PromptError, message: /exited with 1/ });
  const notWav = new Prompts({ cacheDir: dir, allowPrivateNetworks: false, ttsCommand: 'echo' });
  await t.throwsAsync(notWav.pcm({ tts: 'hello' }), { instanceOf: PromptError, message: /not a WAV file/ });
  await t.throwsAsync(notWav.pcm({ tts: '  ' }), { instanceOf: PromptError, message: /empty/ });
  await t.throwsAsync(notWav.pcm({} as { tts: string }), { instanceOf: PromptError });
});

interface AudioServer {
  url(path: string, hostName?: string): string;
  requests: string[];
}

async function audioServer(t: ExecutionContext): Promise<AudioServer> {
  const requests: string[] = [];
  const bigWav = wavBytes({ rate: 8000, channels: 1, bits: 16, samples: Array.from({ length: 2000 }, () => 0) });
  const routes: Record<string, (response: ServerResponse) => void> = {
    '/stereo16k.wav': (response) => response.writeHead(200, { 'content-type': 'audio/wav' }).end(stereoWav()),
    '/mono8bit.wav': (response) =>
      response.end(
        wavBytes({
          rate: 11025,
          channels: 1,
          bits: 8,
          samples: [...sine(300, 11025, 100, 11025)].map((sample) => sample + 128),
        }),
      ),
    '/big.wav': (response) => response.end(bigWav),
    '/big-chunked.wav': (response) => {
      response.writeHead(200, { 'transfer-encoding': 'chunked' });
      for (let offset = 0; offset < bigWav.length; offset += 500) response.write(bigWav.subarray(offset, offset + 500));
      response.end();
    },
    '/page.html': (response) => response.end('<html><body>not audio</body></html>'),
    '/song.mp3': (response) => response.end(Buffer.concat([Buffer.from('ID3'), Buffer.alloc(500)])),
    '/moved.wav': (response) => response.writeHead(302, { location: '/stereo16k.wav' }).end(),
  };
  const server = https.createServer(tls, (request: IncomingMessage, response: ServerResponse) => {
    const route = (request.url ?? '').split('?')[0] ?? '';
    requests.push(route);
    const handler = routes[route];
    if (handler === undefined) response.writeHead(404).end('not found');
    else handler(response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  return { requests, url: (route, hostName = 'localhost') => `https://${hostName}:${port}${route}` };
}

test('an audioUrl WAV is downloaded over https once, converted to 8 kHz mono, and cached', async (t) => {
  const server = await audioServer(t);
  const prompts = new Prompts({ cacheDir: await cacheDir(t), allowPrivateNetworks: true });
  const pcm = await prompts.pcm({ audioUrl: server.url('/stereo16k.wav?v=1') });
  t.true(Math.abs(pcm.length - 8000) <= 1, `${pcm.length} samples`);
  t.true(tonePower(pcm.subarray(100, -100), 440) > 0.9);
  t.true(Math.abs(rms(pcm.subarray(100, -100)) - 12000 / Math.SQRT2) < 300);
  await prompts.pcm({ audioUrl: server.url('/stereo16k.wav?v=1') });
  t.deepEqual(server.requests, ['/stereo16k.wav'], 'the second time is served from the cache');
  t.like(prompts.stats, { downloads: 1, memoryHits: 1 });

  const eightBit = await prompts.pcm({ audioUrl: server.url('/mono8bit.wav', '127.0.0.1') });
  t.true(Math.abs(eightBit.length - 8000) <= 1);
  t.true(tonePower(eightBit.subarray(100, -100), 300) > 0.8);
});

test('audioUrl refusals: private addresses, size cap, non-WAV, MP3, redirects, errors, http', async (t) => {
  const server = await audioServer(t);
  const dir = await cacheDir(t);
  const publicOnly = new Prompts({ cacheDir: dir, allowPrivateNetworks: false });
  await t.throwsAsync(publicOnly.pcm({ audioUrl: server.url('/stereo16k.wav') }), {
    instanceOf: PromptError,
    message: /refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address/,
  });
  await t.throwsAsync(publicOnly.pcm({ audioUrl: server.url('/stereo16k.wav', '127.0.0.1') }), {
    instanceOf: PromptError,
    message: /refused: 127\.0\.0\.1 is a loopback address/,
  });
  await t.throwsAsync(publicOnly.pcm({ audioUrl: 'https://169.254.169.254/latest/audio.wav' }), {
    instanceOf: PromptError,
    message: /a link-local address/,
  });
  t.deepEqual(server.requests, [], 'nothing was fetched');

  const prompts = new Prompts({ cacheDir: dir, allowPrivateNetworks: true, maxBytes: 1000 });
  const refusals: [string, RegExp][] = [
    [server.url('/big.wav'), /too large: 4044 bytes, over the 1000 bytes limit/],
    [server.url('/big-chunked.wav'), /too large: over the 1000 bytes limit/],
    [server.url('/page.html'), /not a WAV file/],
    [server.url('/song.mp3'), /is MP3, which is not supported/],
    [server.url('/moved.wav'), /redirect not followed: HTTP 302/],
    [server.url('/missing.wav?token=secret'), /HTTP 404/],
    [server.url('/stereo16k.wav').replace('https:', 'http:'), /https only/],
    ['not a url', /not a valid URL/],
  ];
  for (const [audioUrl, message] of refusals) {
    const error = await t.throwsAsync(prompts.pcm({ audioUrl }), { instanceOf: PromptError }, audioUrl);
    t.regex(error?.message ?? '', message, audioUrl);
    t.notRegex(error?.message ?? '', /secret/, 'the query is not repeated in messages');
  }
  t.is(prompts.stats.downloads, 2, 'two bodies were read (the HTML page and the MP3)');
});
