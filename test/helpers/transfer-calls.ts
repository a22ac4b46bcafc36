/**
 * What the transfer tests need on the real engine (test/engine/transfer*.test.ts): a caller (sipp, its audio a test
 * socket speaking 1 kHz) queued and connected to agent 0 (a stand-in browser speaking 700 Hz), agents answering
 * offers with tones of their own, the call's `call.transferred` and last `call.connected`, and the end.
 */
import type { ExecutionContext } from 'ava';
import type { OfferRow } from '../../core/devices/offers.ts';
import {
  accept,
  callTimeline,
  type Agent,
  callRow,
  callTo,
  nextOffer,
  queueLine,
  type QueueLine,
  setAvailable,
  streamEvents,
} from './queue-lines.ts';
import { startRtpPhone, type RtpPhone } from './rtp-phone.ts';
import type { TestService } from './service.ts';
import { runSipp, type SippRun } from './sipp.ts';
import { answerOffer, type FakeBrowser, share, sine } from './webrtc-browser.ts';

import { sippFailed } from './engine-service.ts';
import { until } from './until.ts';

/** The agent's device answers its next offer with a browser speaking `frequency`. */
export async function answerAs(
  service: TestService,
  t: ExecutionContext,
  agent: Agent,
  frequency: number,
  seen: string[] = [],
) {
  const offer: OfferRow = await nextOffer(service, agent, seen);
  const browser = await answerOffer(offer.sdp_offer);
  const tone = sine(frequency, 48000);
  const speaking = setInterval(() => browser.send(tone(480)), 10);
  t.teardown(() => {
    clearInterval(speaking);
    browser.close();
  });
  await accept(service, agent, offer, browser.answer);
  await browser.connected();
  return browser;
}

export interface Connected {
  center: QueueLine;
  callId: string;
  phone: RtpPhone;
  sipp: Promise<SippRun>;
  first: FakeBrowser;
}

/** A caller connected to agent 0 through the queue, audio crossing both ways. */
export async function connectedToAgent(
  engine: { service: TestService; sipPort: number },
  t: ExecutionContext,
  options: { carrier?: string } = {},
): Promise<Connected> {
  const { service, sipPort } = engine;
  const center = await queueLine(t, service, { agents: 2 });
  if (options.carrier !== undefined) {
    await service.pool.query('UPDATE phone_numbers SET carrier = $2 WHERE e164 = $1', [
      center.line.e164,
      options.carrier,
    ]);
  }
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: center.line.e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port), HOLD_MS: '1000' },
    timeoutSeconds: 150,
  });
  const callId = await callTo(service, center.line.e164);
  await setAvailable(service, center.workspaceId, center.agents[0]!);
  const first = await answerAs(service, t, center.agents[0]!, 700);
  await until('connected', async () => ((await callRow(service, callId))?.state === 'connected' ? true : undefined));
  phone.speak(1000);
  await until('agent 0 at the caller', () => (share(phone.heard, 700, 8000, 1600) > 0.5 ? true : undefined));
  await until('the caller at agent 0', () => (share(first.heard, 1000, first.rate, 4800) > 0.5 ? true : undefined));
  return { center, callId, phone, sipp, first };
}

export async function transferred(service: TestService, callId: string) {
  const events = await streamEvents(service, `call:${callId}`);
  return events.filter((event) => event.type === 'call.transferred').map((event) => event.payload.transfer);
}

/**
 * The leg of the call's `call.connected` written after its last `call.transferred` (the transfer's target), once it
 * is written: the engine bridges the audio first, then records the connection.
 */
export async function lastConnected(service: TestService, callId: string) {
  return until('call.connected after the transfer', async () => {
    const events = await streamEvents(service, `call:${callId}`);
    const moved = events.map((event) => event.type).lastIndexOf('call.transferred');
    const connected = events.slice(moved + 1).find((event) => event.type === 'call.connected');
    return connected?.payload.leg as Record<string, unknown> | undefined;
  });
}

/** The call's timeline from its `call.transferred` on, once the target's `call.connected` closes it. */
export async function timelineAfterTransfer(service: TestService, callId: string): Promise<string[]> {
  await lastConnected(service, callId);
  const timeline = await callTimeline(service, callId);
  return timeline.slice(timeline.indexOf('call.transferred'));
}

export async function hangUp(t: ExecutionContext, call: Connected): Promise<void> {
  const hungUp = await call.center.line.api('POST', `/calls/${call.callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  call.phone.quiet();
  const run = await call.sipp;
  t.is(run.code, 0, sippFailed(run));
}
