/**
 * RTP that cannot be hijacked (docs/calls.md, Media addresses): while another host sprays well-formed RTP at every
 * even port of the engine's RTP range, 20 calls are set up, each forwarded to a far end that echoes its audio. The
 * host gets not one packet, and every caller hears its own tone come back through the far end (both ways through
 * the engine), half of them from behind a NAT: their SDP names a private address and another port, and their RTP
 * comes from the SIP source's address (127.0.0.1) and a port of its own.
 *
 * The spraying host is 127.0.0.2: loopback too, so it reaches the engine's sockets on 127.0.0.1, but not the
 * carrier's address.
 */
import { randomUUID } from 'node:crypto';
import dgram from 'node:dgram';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { sippFailed } from '../../helpers/engine-service.ts';
import { addSippCarrier, farEndCarrier, numberRunning } from '../../helpers/phone-lines.ts';
import { startRtpPhone } from '../../helpers/rtp-phone.ts';
import { startService, type TestService } from '../../helpers/service.ts';
import { runSipp } from '../../helpers/sipp.ts';
import { until } from '../../helpers/until.ts';
import { tonePower } from '../../helpers/webrtc-browser.ts';

/**
 * A range of 100 even ports of its own, so the spray covers all of it every 20 ms: below the kernel's ephemeral ports
 * (32768 and up), where the other tests' sockets are (sipp's echo would send the spray back, and their phones would
 * take it for the engine's), and away from the ranges the other tests' engines and pools use (20000 and up).
 */
const rtpMin = 12000 + 2 * Math.floor(Math.random() * 3000);
const rtpMax = rtpMin + 199;

let service: TestService;

test.before(async () => {
  service = await startService({ RTP_PORT_MIN: String(rtpMin), RTP_PORT_MAX: String(rtpMax) }, ['api', 'engine']);
  await addSippCarrier(service);
});

test.after.always(async () => {
  await service?.close();
});

/** Every 20 ms, one RTP packet of loud PCMU to each even port of the range, from 127.0.0.2; counts what comes back. */
async function startSpray() {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.2', resolve));
  let received = 0;
  let sent = 0;
  let stopped = false;
  socket.on('message', () => (received += 1));
  socket.on('error', () => {});
  let sequence = 0;
  const payload = Buffer.alloc(160, 0x80);
  const timer = setInterval(() => {
    sequence = (sequence + 1) & 0xffff;
    const header = Buffer.from([0x80, 0, sequence >> 8, sequence & 0xff, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78]);
    header.writeUInt32BE((sequence * 160) >>> 0, 4);
    const packet = Buffer.concat([header, payload]);
    for (let port = rtpMin; port <= rtpMax; port += 2) {
      socket.send(packet, port, '127.0.0.1');
      sent += 1;
    }
  }, 20);
  return {
    get received() {
      return received;
    },
    get sent() {
      return sent;
    },
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      socket.close();
    },
  };
}

/**
 * One call through sipp (its media a test socket): behind a NAT, the SDP names 10.20.30.40 and a port nobody uses,
 * and the socket sends from its own. Resolves with the share of 1 kHz in what the caller heard of the far end.
 */
async function callAndHearEcho(e164: string, behindNat: boolean): Promise<number> {
  const phone = await startRtpPhone();
  try {
    const engineSdp = path.join(os.tmpdir(), `engine-sdp-${randomUUID()}`);
    const sipp = runSipp({
      scenario: 'phone-caller',
      sipPort: service.sipPort as number,
      dialed: e164.slice(1),
      replacements: {
        TEST_RTP_ADDRESS: behindNat ? '10.20.30.40' : '127.0.0.1',
        TEST_RTP_PORT: behindNat ? '9' : String(phone.port),
        ENGINE_SDP_FILE: engineSdp,
      },
      timeoutSeconds: 120,
    });
    const [, address, port] = await until('the engine’s SDP address from sipp', () =>
      readFile(engineSdp, 'utf8').then(
        (text) => /^c=IN IP4 (\S+) m=audio (\d+)$/.exec(text.trim()) ?? undefined,
        () => undefined,
      ),
    );
    // The caller speaks first, as a phone behind a NAT must for its media to find it.
    phone.speak(1000, { address: address as string, port: Number(port) });
    // The far end answers after 2 s of ringing, echoes for 5 s and hangs up; the engine then hangs up on sipp.
    const run = await sipp;
    if (run.code !== 0) throw new Error(`sipp failed: ${sippFailed(run)}`);
    // A second of the echo, ending half a second before the far end hung up (nothing at all: no share).
    const heard = phone.heard.slice(-12_000, -4000);
    return heard.length < 8000 ? 0 : tonePower(heard, 1000, 8000);
  } finally {
    phone.close();
  }
}

test('a host spraying RTP at every port during 20 call set-ups hears nothing, and every call connects both ways', async (t) => {
  const { carrier, far } = await farEndCarrier(t, service, 5000, 20);
  void far.finished;
  const line = await numberRunning(t, service, {
    entry: 'out',
    steps: {
      out: { type: 'forward', to: '+15550104444', timeoutSecs: 30, next: 'bye' },
      bye: { type: 'hangup', message: null },
    },
  });
  // The far end's number goes through its carrier: the forward leaves through the called number's carrier.
  await service.pool.query('UPDATE phone_numbers SET carrier = $1 WHERE e164 = $2', [carrier, line.e164]);
  const spray = await startSpray();
  t.teardown(() => spray.stop());
  const shares: number[] = [];
  for (let round = 0; round < 4; round += 1) {
    const calls = Array.from({ length: 5 }, (_, index) => callAndHearEcho(line.e164, index % 2 === 1));
    shares.push(...(await Promise.all(calls)));
  }
  spray.stop();
  t.log(`${spray.sent} packets sprayed; the echo's share of 1 kHz per call: ${shares.map((s) => s.toFixed(2))}`);
  t.is(spray.received, 0, 'the spraying host got none of the calls’ audio');
  t.is(shares.length, 20);
  for (const [index, share] of shares.entries()) {
    t.true(share > 0.5, `call ${index + 1} heard its tone come back at ${share.toFixed(2)} of the power`);
  }
  const foreign = await until('the engine’s count of foreign datagrams', async () => {
    const metrics = await service.request('GET', '/metrics');
    const value = /^switchboard_rtp_foreign_datagrams_total (\d+)/m.exec(metrics.text)?.[1];
    return value === undefined || Number(value) === 0 ? undefined : Number(value);
  });
  t.log(`the engine dropped ${foreign} datagrams from the spraying host`);
});
