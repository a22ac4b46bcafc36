/**
 * The conversions between WebRTC's audio and the carrier leg's (engine/media/stream-resample.ts, reframe.ts): the
 * streaming resampler, the rate follower that takes libwebrtc's playout at whatever rate it comes (docs/phones.md,
 * "Legs"), and the re-framer. Pure computation, no sockets.
 */
import test from 'ava';
import { Reframer } from '../../../engine/media/reframe.ts';
import { RateFollower, StreamResampler } from '../../../engine/media/stream-resample.ts';
import { sine, tonePower, zeroCrossingFrequency } from '../../helpers/webrtc-browser.ts';

test('the streaming resampler keeps a tone across chunks, 8 kHz to 48 kHz and back, and the re-framer loses nothing', (t) => {
  const up = new StreamResampler(8000, 48000);
  const down = new StreamResampler(48000, 8000);
  const tone = sine(1000, 8000);
  const out: number[] = [];
  let upSamples = 0;
  for (let chunk = 0; chunk < 100; chunk += 1) {
    const wide = up.push(tone(160));
    upSamples += wide.length;
    out.push(...down.push(wide));
  }
  // Each converter holds back its half-width (about 1.7 ms) until the input after it comes.
  t.true(upSamples > 96000 - 100 && upSamples <= 96000, `48 kHz samples: ${upSamples}`);
  t.true(out.length > 16000 - 40 && out.length <= 16000, `8 kHz samples: ${out.length}`);
  const steady = out.slice(800);
  t.true(Math.abs(zeroCrossingFrequency(steady, 8000) - 1000) < 1);
  t.true(tonePower(steady, 1000, 8000) > 0.99);
  // A 5 kHz tone at 48 kHz, which dropping samples would fold back to 3 kHz, is filtered out (under -40 dB).
  const alias = new StreamResampler(48000, 8000);
  const high = sine(5000, 48000);
  const filtered: number[] = [];
  for (let chunk = 0; chunk < 50; chunk += 1) filtered.push(...alias.push(high(480)));
  const rms = Math.sqrt(
    filtered.slice(400).reduce((sum, sample) => sum + sample * sample, 0) / (filtered.length - 400),
  );
  t.true(rms < 8000 / Math.SQRT2 / 100, `5 kHz left at ${rms.toFixed(0)} RMS of ${(8000 / Math.SQRT2).toFixed(0)}`);
  t.throws(() => new StreamResampler(0, 8000), { instanceOf: RangeError });
  t.throws(() => new StreamResampler(44100.5, 8000), { instanceOf: RangeError });

  const reframer = new Reframer(160);
  const frames = [...reframer.push(new Int16Array(100).fill(1)), ...reframer.push(new Int16Array(300).fill(2))];
  t.is(frames.length, 2);
  t.deepEqual([...(frames[1] ?? [])].slice(0, 2), [2, 2]);
  t.is(frames[0]?.[99], 1);
  t.is(frames[0]?.[100], 2);
});

test('the rate follower passes 8 kHz as it is and keeps a tone continuous as the rate changes to 16 and 48 kHz and back', (t) => {
  const follower = new RateFollower(8000);
  const amplitude = 8000;
  const at = (seconds: number) => Math.round(amplitude * Math.sin(2 * Math.PI * 437 * seconds));
  // 10 ms chunks, as libwebrtc's playout hands them: its rate changes when a call joins or an Opus call comes.
  const schedule: [number, number][] = [
    [8000, 30],
    [16000, 5],
    [8000, 20],
    [48000, 10],
    [16000, 3],
    [8000, 30],
  ];
  const heard: number[] = [];
  let chunk = 0;
  for (const [rate, chunks] of schedule) {
    for (let end = chunk + chunks; chunk < end; chunk += 1) {
      const input = Int16Array.from({ length: rate / 100 }, (_, index) => at(chunk / 100 + index / rate));
      const output = follower.push(input, rate);
      if (rate === 8000 && heard.length === chunk * 80) t.is(output, input, '8 kHz after 8 kHz passes as it is');
      heard.push(...output);
    }
  }
  t.is(heard.length, chunk * 80, 'nothing lost or added where the rate changed');
  const worst = Math.max(...heard.map((sample, index) => Math.abs(sample - at(index / 8000))));
  t.log(`worst deviation from the tone: ${worst} of ${amplitude}`);
  t.true(worst < amplitude * 0.05, `${worst} off the tone somewhere`);
});
