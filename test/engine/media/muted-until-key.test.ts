/**
 * The ring step's `muted` mode on a SIP desk phone (engine/media/muted-until-key.ts, docs/phones.md "Ring modes"):
 * bridged to the caller, the phone's audio is held back until its first key press, which unmutes it and is not
 * passed on; the caller's audio reaches the phone from the start. Real RTP endpoints over loopback UDP:
 *
 *   caller <-> engine's caller endpoint ==bridge== mutedUntilKey(engine's phone endpoint) <-> phone
 */
import test, { type ExecutionContext } from 'ava';
import { bridge } from '../../../engine/media/bridge.ts';
import { mutedUntilKey } from '../../../engine/media/muted-until-key.ts';
import { RtpEndpoint, PortPool, type RemoteMedia } from '../../../engine/media/rtp.ts';
import { loopbackCarrier } from '../../helpers/media-peer.ts';
import { untilTrue } from '../../helpers/until.ts';

const host = '127.0.0.1';
/** An even base in 32000-39998, away from the default RTP range and from media.test.ts's. */
const base = 32000 + 2 * Math.floor(Math.random() * 3500);
const pool = new PortPool(base, base + 99);

/** Every datagram an endpoint receives counts once in its stats. */
function datagramsIn(endpoint: RtpEndpoint): number {
  const { packetsIn, ignored, malformed } = endpoint.stats;
  return packetsIn + ignored + malformed;
}

function tone(frequency: number): Int16Array {
  return Int16Array.from({ length: 160 }, (_, index) =>
    Math.round(6000 * Math.sin((2 * Math.PI * frequency * index) / 8000)),
  );
}

/** Zero crossings in a frame: about 40 for 1 kHz, 80 for 2 kHz. */
function crossings(frame: Int16Array): number {
  let count = 0;
  for (let index = 1; index < frame.length; index += 1) {
    if ((frame[index - 1] as number) < 0 !== (frame[index] as number) < 0) count += 1;
  }
  return count;
}

const remote = (port: number): RemoteMedia => ({
  address: host,
  port,
  codec: 'PCMU',
  payloadType: 0,
  telephoneEventPt: 101,
});

/** Two endpoints pointed at each other. */
async function pair(t: ExecutionContext) {
  const a = await RtpEndpoint.open(pool, host, { peer: loopbackCarrier });
  const b = await RtpEndpoint.open(pool, host, { peer: loopbackCarrier });
  t.teardown(() => {
    a.close();
    b.close();
  });
  a.setRemote(remote(b.localPort));
  b.setRemote(remote(a.localPort));
  return [a, b] as const;
}

test('a muted phone is not heard until it presses a key; that key is not passed on, later ones are', async (t) => {
  const [caller, callerSide] = await pair(t);
  const [phone, phoneSide] = await pair(t);
  const muted = mutedUntilKey(phoneSide);
  const unbridge = bridge(callerSide, muted);
  t.teardown(() => {
    unbridge();
    muted.close();
  });
  const heardByCaller: Int16Array[] = [];
  const digitsAtCaller: string[] = [];
  caller.onAudio((frame) => heardByCaller.push(frame));
  caller.onDtmf((digit) => digitsAtCaller.push(digit));
  const heardByPhone: Int16Array[] = [];
  phone.onAudio((frame) => heardByPhone.push(frame));

  // The caller is heard at once.
  for (let index = 0; index < 5; index += 1) caller.send(tone(440));
  await untilTrue('the caller at the phone', () => heardByPhone.length === 5, { everyMs: 1 });
  t.true(muted.muted);

  // The phone speaks: its frames reach the engine and stop there. A frame the caller's endpoint sends after them
  // would arrive after anything relayed, so once it is in, nothing was relayed.
  for (let index = 0; index < 5; index += 1) phone.send(tone(1000));
  await untilTrue('the phone at the engine', () => datagramsIn(phoneSide) >= 5, { everyMs: 1 });
  callerSide.send(tone(2000));
  await untilTrue('the direct frame', () => heardByCaller.some((frame) => crossings(frame) > 60), { everyMs: 1 });
  t.deepEqual(
    heardByCaller.map((frame) => crossings(frame) > 60),
    [true],
    'only the direct 2 kHz frame: the muted phone was not relayed',
  );

  // The key that unmutes is the phone's own: it does not reach the caller.
  await phone.sendDtmf('5', 60);
  await untilTrue('unmuted', () => !muted.muted, { everyMs: 1 });
  for (let index = 0; index < 5; index += 1) phone.send(tone(1000));
  await untilTrue('the phone at the caller', () => heardByCaller.length >= 6, { everyMs: 1 });
  await phone.sendDtmf('7', 60);
  await untilTrue('the 7 at the caller', () => digitsAtCaller.length >= 1, { everyMs: 1 });
  t.deepEqual(digitsAtCaller, ['7']);
});
