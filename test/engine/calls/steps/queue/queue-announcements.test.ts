/**
 * A queue's own hold prompt and its position announcements on the real engine (docs/contact-center.md): sipp callers
 * whose audio is a socket of the test (test/helpers/rtp-phone.ts) wait in a queue with a hold prompt and
 * `announcePosition`; the test makes the same prompts with the engine's prompt maker and finds them sample by sample
 * in what each caller heard (test/helpers/heard-prompt.ts). Checked: the hold prompt instead of the default music,
 * "You are number N in line." with the caller's own N after `firstAnnouncementMs`, the hold prompt again after it;
 * an offer ringing at that moment is not cut into (no announcement while the agent's device rings).
 */
import test from 'ava';
import { firstAnnouncementMs, positionSentence } from '../../../../../engine/calls/steps/queue/announcements.ts';
import { heardAt, testPrompts } from '../../../../helpers/heard-prompt.ts';
import { accept, entryOf, nextOffer, queueLine, setAvailable } from '../../../../helpers/queue-lines.ts';
import { startRtpPhone } from '../../../../helpers/rtp-phone.ts';
import type { TestService } from '../../../../helpers/service.ts';
import { runSipp } from '../../../../helpers/sipp.ts';
import { answerOffer } from '../../../../helpers/webrtc-browser.ts';
import { exitPastWrtc, musicShare, sippFailed, startEngineService } from '../../../../helpers/engine-service.ts';
import { until } from '../../../../helpers/until.ts';

let service: TestService;
let sipPort: number;

test.before(async () => {
  exitPastWrtc();
  ({ service, sipPort } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

const holdPrompt = { tts: 'Please hold.' };

/** A caller on the number whose audio the test hears (sipp waits for the engine's BYE). */
async function caller(t: Parameters<typeof queueLine>[0], e164: string, after?: string) {
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const sipp = runSipp({
    scenario: 'answered',
    sipPort,
    dialed: e164.slice(1),
    replacements: { AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 120,
  });
  const callId = await until('the call', async () => {
    const result = await service.pool.query<{ id: string }>(
      'SELECT id FROM calls WHERE to_number = $1 AND ($2::uuid IS NULL OR id <> $2) ORDER BY started_at',
      [e164, after ?? null],
    );
    return result.rows[0]?.id;
  });
  return { phone, sipp, callId };
}

test('waiting callers hear the queue’s hold prompt, not the music, and each their own position in line', async (t) => {
  const prompts = await testPrompts(t);
  const [hold, first, second] = await Promise.all([
    prompts.pcm(holdPrompt),
    prompts.pcm({ tts: positionSentence(1) }),
    prompts.pcm({ tts: positionSentence(2) }),
  ]);
  const center = await queueLine(t, service, {
    agents: 1,
    settings: { holdPrompt, announcePosition: true, announceIntervalSecs: 60 },
  });
  const one = await caller(t, center.line.e164);
  await until('the first entry', async () => ((await entryOf(service, one.callId)) === undefined ? undefined : true));
  const two = await caller(t, center.line.e164, one.callId);

  // The second caller: the hold prompt, then "You are number 2 in line.", then the hold prompt again.
  const heard = two.phone.heard;
  const announced = await until(
    'the position announced to the second caller',
    () => {
      const at = heardAt(heard, second)[0];
      return at !== undefined && heardAt(heard, hold, at + second.length).length > 0 ? at : undefined;
    },
    20_000,
  );
  t.true(announced >= (firstAnnouncementMs / 1000 - 1) * 8000, `announced after ${announced / 8000} s of waiting`);
  t.true(heardAt(heard.slice(0, announced), hold).length > 0, 'the hold prompt before the announcement');
  t.deepEqual(heardAt(heard, first), [], 'not the first caller’s position');
  t.true(musicShare(heard.slice(8000, announced)) < 0.1, 'no hold music');
  // The first caller is told theirs.
  await until('the position announced to the first caller', () =>
    heardAt(one.phone.heard, first).length > 0 ? true : undefined,
  );
  t.deepEqual(heardAt(one.phone.heard, second), []);

  for (const call of [two, one]) {
    const hungUp = await center.line.api('POST', `/calls/${call.callId}/hangup`);
    t.is(hungUp.status, 200, hungUp.text);
    call.phone.quiet();
    const run = await call.sipp;
    t.is(run.code, 0, sippFailed(run));
  }
});

test('an offer ringing when the announcement is due is not cut into', async (t) => {
  const prompts = await testPrompts(t);
  const sentence = await prompts.pcm({ tts: positionSentence(1) });
  const center = await queueLine(t, service, { agents: 1, settings: { announcePosition: true } });
  const agent = center.agents[0]!;
  await setAvailable(service, center.workspaceId, agent);
  const { phone, sipp, callId } = await caller(t, center.line.e164);
  const offer = await nextOffer(service, agent);
  t.is(offer.call_id, callId);
  // The device rings past the announcement's time: the caller hears the hold music, no announcement.
  const from = phone.heard.length;
  await phone.hear(0, ((firstAnnouncementMs + 2000) * 8000) / 1000);
  t.deepEqual(heardAt(phone.heard, sentence), [], 'no announcement while the offer rings');
  t.true(musicShare(phone.heard) > 0.2, 'the music goes on');
  t.true(phone.heard.length - from >= (firstAnnouncementMs * 8000) / 1000);

  const browser = await answerOffer(offer.sdp_offer);
  t.teardown(() => browser.close());
  await accept(service, agent, offer, browser.answer);
  await until('connected', async () => ((await entryOf(service, callId))?.state === 'connected' ? true : undefined));
  const hungUp = await center.line.api('POST', `/calls/${callId}/hangup`);
  t.is(hungUp.status, 200, hungUp.text);
  phone.quiet();
  const run = await sipp;
  t.is(run.code, 0, sippFailed(run));
  t.deepEqual(heardAt(phone.heard, sentence), [], 'never announced');
});
