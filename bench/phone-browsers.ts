/**
 * The stand-in browsers of the phones bench (bench/phones.ts), forked as a process of their own so that the engine
 * process's CPU is the engine's alone. Each phone is one registered `browser` device of one user (registered by the
 * parent), driven as client/phone.ts drives one: its presence renewed every 20 s, its offers long-polled
 * (`GET /devices/{id}/offers?wait=10&known=…`, again at once after each answer), and, when it accepts, the offer
 * answered by a plain `@roamhq/wrtc` peer connection (test/helpers/webrtc-browser.ts) and `POST /offers/{id}/accept`.
 * An answering phone speaks from its accept on: a 400 Hz tone, 10 ms of 8 kHz PCM per 10 ms of wall clock (caught
 * up when the timer is late, never more than 0.5 s at once), while its sink counts what it hears.
 *
 * It records when each offer was first read and when a poll first answered without it (`performance.timeOrigin +
 * performance.now()`: the wall clock, with sub-ms precision), and for each call it accepted the accept's times, the
 * connection and, once the parent says the call ended, the peer connection's RTP statistics; then it closes it.
 *
 * Messages: `phones` adds phones or changes whether they accept; `ended` names calls that ended (the parent reads
 * the calls table); `report` answers with everything recorded so far; `stop` closes everything and exits (with
 * `process.exit`: a process that made an RTCAudioSource crashes at its natural exit, see engine/media/webrtc.ts).
 */
import { randomUUID } from 'node:crypto';
import { answerOffer, type FakeBrowser, sine } from '../test/helpers/webrtc-browser.ts';

export interface PhoneSpec {
  deviceId: string;
  token: string;
  accept: boolean;
}

export type ToBrowsers =
  | { type: 'phones'; apiUrl: string; phones: PhoneSpec[] }
  | { type: 'ended'; callIds: string[] }
  | { type: 'report' }
  | { type: 'stop' };

export interface OfferSeen {
  offerId: string;
  callId: string;
  deviceId: string;
  seenAt: number;
  /** When a poll first answered without it (accepted, withdrawn, expired), or null. */
  goneAt: number | null;
}

/** A peer connection's RTP counters (its getStats()), read when the call ended. */
export interface RtpFigures {
  /** inbound-rtp: what the engine sent us. */
  packetsReceived: number;
  packetsLost: number;
  concealedSamples: number;
  totalSamplesReceived: number;
  /** Mean audio power of what was received (totalAudioEnergy / totalSamplesDuration), 0 to 1. */
  meanPower: number;
  /** outbound-rtp: what we sent the engine. */
  packetsSent: number;
  /** remote-inbound-rtp: the engine's RTCP receiver reports on what we sent (null without one). */
  remotePacketsLost: number | null;
  remoteFractionLost: number | null;
}

export interface CallRecord {
  callId: string;
  offerId: string;
  deviceId: string;
  acceptSentAt: number | null;
  acceptDoneAt: number | null;
  acceptStatus: number | null;
  connectedAt: number | null;
  endedAt: number | null;
  error: string | null;
  /** 10 ms chunks handed to the RTCAudioSource, and chunks skipped because the timer was over 0.5 s late. */
  chunksSent: number;
  chunksSkipped: number;
  /** 10 ms frames its RTCAudioSink delivered (libwebrtc's playout: one every 10 ms, received or concealed). */
  sinkFrames: number;
  rtp: RtpFigures | null;
}

export type FromBrowsers =
  | { type: 'ready' }
  | {
      type: 'report';
      offers: OfferSeen[];
      calls: CallRecord[];
      pollErrors: number;
      lastPollError: string | null;
      presenceErrors: number;
    }
  | { type: 'stopped' };

interface Offer {
  id: string;
  callId: string;
  sdp: string;
}

interface Speaking {
  browser: FakeBrowser;
  record: CallRecord;
  startedAt: number;
  /** The last RTCP receiver report of the engine seen while the call lasted. */
  remote: Pick<RtpFigures, 'remotePacketsLost' | 'remoteFractionLost'> | null;
}

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const send = (message: FromBrowsers) => process.send?.(message);

let apiUrl = '';
const phones = new Map<string, { spec: PhoneSpec; known: Set<string> }>();
const offers = new Map<string, OfferSeen>();
const calls = new Map<string, CallRecord>();
const speaking = new Map<string, Speaking>();
const ended = new Set<string>();
const polls = new AbortController();
let pollErrors = 0;
let lastPollError: string | null = null;
let presenceErrors = 0;
// 400 Hz is 4 whole cycles in 10 ms: one chunk repeats seamlessly. At 8 kHz, not a microphone's 48 kHz: the call is
// PCMU, and resampling 48 kHz here would only spend the shared host's CPU that a real browser spends on its own.
const tone = sine(400, 8000)(80);

async function api(method: string, token: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${apiUrl}/api/v1${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json', 'idempotency-key': randomUUID() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: polls.signal,
  });
}

async function poll(deviceId: string): Promise<void> {
  while (!polls.signal.aborted) {
    const phone = phones.get(deviceId);
    if (phone === undefined) return;
    try {
      const known = phone.known.size > 0 ? `&known=${[...phone.known].join(',')}` : '';
      const response = await api('GET', phone.spec.token, `/devices/${deviceId}/offers?wait=10${known}`);
      const text = await response.text();
      const at = now();
      if (response.status !== 200) throw new Error(`${response.status} ${text.slice(0, 300)}`);
      const waiting = (JSON.parse(text) as { data: Offer[] }).data;
      const ids = new Set(waiting.map((offer) => offer.id));
      for (const offer of waiting) {
        if (phone.known.has(offer.id) || offers.has(offer.id)) continue;
        offers.set(offer.id, { offerId: offer.id, callId: offer.callId, deviceId, seenAt: at, goneAt: null });
        if (phone.spec.accept) void accept(phone.spec, offer);
      }
      for (const id of phone.known) {
        const seen = offers.get(id);
        if (!ids.has(id) && seen !== undefined && seen.goneAt === null) seen.goneAt = at;
      }
      phone.known = ids;
    } catch (error) {
      if (polls.signal.aborted) return;
      pollErrors += 1;
      lastPollError = error instanceof Error ? error.message : String(error);
      await sleep(500);
    }
  }
}

async function accept(spec: PhoneSpec, offer: Offer): Promise<void> {
  const record: CallRecord = {
    callId: offer.callId,
    offerId: offer.id,
    deviceId: spec.deviceId,
    acceptSentAt: null,
    acceptDoneAt: null,
    acceptStatus: null,
    connectedAt: null,
    endedAt: null,
    error: null,
    chunksSent: 0,
    chunksSkipped: 0,
    sinkFrames: 0,
    rtp: null,
  };
  calls.set(offer.callId, record);
  let browser: FakeBrowser | undefined;
  try {
    browser = await answerOffer(offer.sdp, false);
    record.acceptSentAt = now();
    const response = await api('POST', spec.token, `/offers/${offer.id}/accept`, { sdp: browser.answer });
    const text = await response.text();
    record.acceptDoneAt = now();
    record.acceptStatus = response.status;
    if (!response.ok) throw new Error(`accept: ${response.status} ${text.slice(0, 300)}`);
    speaking.set(offer.callId, { browser, record, startedAt: performance.now(), remote: null });
    if (ended.has(offer.callId)) return await end(offer.callId);
    await browser.connected(20_000);
    record.connectedAt = now();
  } catch (error) {
    record.error = error instanceof Error ? error.message : String(error);
    speaking.delete(offer.callId);
    browser?.close();
  }
}

async function end(callId: string): Promise<void> {
  const call = speaking.get(callId);
  if (call === undefined) return;
  speaking.delete(callId);
  const { browser, record } = call;
  record.endedAt = now();
  record.sinkFrames = browser.frames;
  try {
    const figures = rtpFigures(await browser.getStats());
    record.rtp = figures.remotePacketsLost === null && call.remote !== null ? { ...figures, ...call.remote } : figures;
  } catch (error) {
    record.error = `stats: ${error instanceof Error ? error.message : String(error)}`;
  }
  browser.close();
}

function rtpFigures(report: RTCStatsReport): RtpFigures {
  const figures: RtpFigures = {
    packetsReceived: 0,
    packetsLost: 0,
    concealedSamples: 0,
    totalSamplesReceived: 0,
    meanPower: 0,
    packetsSent: 0,
    remotePacketsLost: null,
    remoteFractionLost: null,
  };
  report.forEach((stat: Record<string, number | string | undefined>) => {
    const number = (name: string) => Number(stat[name] ?? 0);
    if (stat.type === 'inbound-rtp') {
      figures.packetsReceived += number('packetsReceived');
      figures.packetsLost += number('packetsLost');
      figures.concealedSamples += number('concealedSamples');
      figures.totalSamplesReceived += number('totalSamplesReceived');
      const duration = number('totalSamplesDuration');
      figures.meanPower = duration > 0 ? number('totalAudioEnergy') / duration : 0;
    } else if (stat.type === 'outbound-rtp') {
      figures.packetsSent += number('packetsSent');
    } else if (stat.type === 'remote-inbound-rtp') {
      figures.remotePacketsLost = number('packetsLost');
      figures.remoteFractionLost = number('fractionLost');
    }
  });
  return figures;
}

// One timer speaks for every call: each gets the 10 ms chunks the wall clock says are due.
const speaker = setInterval(() => {
  const at = performance.now();
  for (const { browser, record, startedAt } of speaking.values()) {
    let due = Math.floor((at - startedAt) / 10) - record.chunksSent - record.chunksSkipped;
    if (due > 50) {
      record.chunksSkipped += due - 50;
      due = 50;
    }
    for (let index = 0; index < due; index += 1) browser.send(tone, 8000);
    record.chunksSent += due;
  }
}, 10);

// The engine's RTCP receiver reports, read every 2 s while a call lasts: once the engine closed its side, the peer
// connection's statistics may no longer carry them.
const reports = setInterval(() => {
  for (const call of speaking.values()) {
    void call.browser
      .getStats()
      .then((report) => {
        const figures = rtpFigures(report);
        if (figures.remotePacketsLost !== null) call.remote = remoteOf(figures);
      })
      .catch(() => {});
  }
}, 2000);

const remoteOf = (figures: RtpFigures) => ({
  remotePacketsLost: figures.remotePacketsLost,
  remoteFractionLost: figures.remoteFractionLost,
});

// Presence every 20 s, as client/phone.ts renews it (the lease is 60 s).
const presence = setInterval(() => {
  for (const [deviceId, { spec }] of phones) {
    void api('POST', spec.token, `/devices/${deviceId}/presence`, {})
      .then(async (response) => {
        await response.text();
        if (!response.ok) presenceErrors += 1;
      })
      .catch(() => (presenceErrors += polls.signal.aborted ? 0 : 1));
  }
}, 20_000);

process.on('message', (message: ToBrowsers) => {
  switch (message.type) {
    case 'phones':
      apiUrl = message.apiUrl;
      for (const spec of message.phones) {
        const phone = phones.get(spec.deviceId);
        if (phone !== undefined) phone.spec = spec;
        else {
          phones.set(spec.deviceId, { spec, known: new Set() });
          void poll(spec.deviceId);
        }
      }
      break;
    case 'ended':
      for (const callId of message.callIds) {
        ended.add(callId);
        void end(callId);
      }
      break;
    case 'report':
      send({
        type: 'report',
        offers: [...offers.values()],
        calls: [...calls.values()],
        pollErrors,
        lastPollError,
        presenceErrors,
      });
      break;
    case 'stop':
      polls.abort();
      clearInterval(speaker);
      clearInterval(reports);
      clearInterval(presence);
      void Promise.all([...speaking.keys()].map((callId) => end(callId))).then(() => {
        send({ type: 'stopped' });
        setTimeout(() => process.exit(0), 100);
      });
      break;
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready' });
