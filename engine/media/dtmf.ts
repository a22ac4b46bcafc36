/**
 * DTMF as RFC 4733 telephone events: the 4-byte event payload, the receive side's once-per-event rule, and the
 * packet plan of a sent event. Also the in-band tone pair of a digit, for a leg whose remote did not offer
 * telephone-event.
 *
 * Receiving: every packet of one event carries the same RTP timestamp (the event's start); the sender repeats the
 * event while the key is held and sends the end packet three times, and the network may duplicate any of them. An
 * event is reported once, on the first packet seen of it (whatever its kind, so a lost start still reports), keyed
 * by SSRC, timestamp and event code; the last few keys are remembered so repeats and late stragglers are dropped.
 * Pressing the same key twice makes two events with different timestamps, reported twice.
 */

export const dtmfDigits = '0123456789*#ABCD';

/** The RFC 4733 event code of a DTMF digit (0-9, *, #, A-D; lower-case letters accepted), or undefined. */
export function eventOfDigit(digit: string): number | undefined {
  if (digit.length !== 1) return undefined;
  const index = dtmfDigits.indexOf(digit.toUpperCase());
  return index < 0 ? undefined : index;
}

export interface TelephoneEvent {
  event: number;
  end: boolean;
  volume: number;
  /** In timestamp units (8 kHz samples). */
  duration: number;
}

/** The event in an RFC 4733 payload, or null when the payload is too short to be one. */
export function parseTelephoneEvent(payload: Uint8Array): TelephoneEvent | null {
  if (payload.length < 4) return null;
  const flags = payload[1] as number;
  return {
    event: payload[0] as number,
    end: (flags & 0x80) !== 0,
    volume: flags & 0x3f,
    duration: ((payload[2] as number) << 8) | (payload[3] as number),
  };
}

export function buildTelephoneEvent(event: TelephoneEvent): Uint8Array {
  const duration = Math.min(0xffff, Math.max(0, Math.round(event.duration)));
  return Uint8Array.of(
    event.event & 0xff,
    (event.end ? 0x80 : 0) | (event.volume & 0x3f),
    duration >> 8,
    duration & 0xff,
  );
}

const rememberedEvents = 16;

/** Turns a stream of telephone-event packets into one digit per event. */
export class DtmfDetector {
  private readonly seen: string[] = [];

  /** The digit to report for this packet, or undefined when its event was already reported (or is not a digit). */
  packet(ssrc: number, timestamp: number, event: TelephoneEvent): string | undefined {
    const digit = dtmfDigits[event.event];
    if (digit === undefined) return undefined;
    const key = `${ssrc}:${timestamp}:${event.event}`;
    if (this.seen.includes(key)) return undefined;
    this.seen.push(key);
    if (this.seen.length > rememberedEvents) this.seen.shift();
    return digit;
  }
}

/** One packet of a sent event: when to send it (ms after the event starts) and what it says. */
export interface EventPacket {
  atMs: number;
  marker: boolean;
  event: TelephoneEvent;
}

export const eventVolume = 10;
export const endRepeats = 3;

/**
 * The packets of one event of `durationMs`: one every `packetMs` with the duration so far (the first with the
 * marker bit), then the end packet three times, back to back (RFC 4733 section 2.5.1.4).
 */
export function eventPackets(eventCode: number, durationMs: number, packetMs = 20): EventPacket[] {
  const total = Math.round(durationMs * 8);
  const step = packetMs * 8;
  const packets: EventPacket[] = [];
  let index = 0;
  for (let elapsed = step; elapsed < total; elapsed += step, index += 1) {
    packets.push({
      atMs: index * packetMs,
      marker: index === 0,
      event: { event: eventCode, end: false, volume: eventVolume, duration: elapsed },
    });
  }
  for (let repeat = 0; repeat < endRepeats; repeat += 1) {
    packets.push({
      atMs: index * packetMs,
      marker: packets.length === 0,
      event: { event: eventCode, end: true, volume: eventVolume, duration: total },
    });
  }
  return packets;
}

const toneFrequencies: Record<string, [number, number]> = {
  '1': [697, 1209],
  '2': [697, 1336],
  '3': [697, 1477],
  A: [697, 1633],
  '4': [770, 1209],
  '5': [770, 1336],
  '6': [770, 1477],
  B: [770, 1633],
  '7': [852, 1209],
  '8': [852, 1336],
  '9': [852, 1477],
  C: [852, 1633],
  '*': [941, 1209],
  '0': [941, 1336],
  '#': [941, 1477],
  D: [941, 1633],
};

/** The in-band tone of `digit` (8 kHz, each frequency at about -10 dBm0), followed by `gapMs` of silence. */
export function dtmfTone(digit: string, durationMs: number, gapMs = 50): Int16Array {
  const pair = toneFrequencies[digit.toUpperCase()];
  if (pair === undefined) throw new RangeError(`not a DTMF digit: ${JSON.stringify(digit)}`);
  const toneSamples = Math.round(durationMs * 8);
  const pcm = new Int16Array(toneSamples + Math.round(gapMs * 8));
  const amplitude = 7000;
  for (let index = 0; index < toneSamples; index += 1) {
    const time = index / 8000;
    pcm[index] = Math.round(
      amplitude * (Math.sin(2 * Math.PI * pair[0] * time) + Math.sin(2 * Math.PI * pair[1] * time)),
    );
  }
  return pcm;
}
