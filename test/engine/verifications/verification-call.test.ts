/**
 * A voice verification heard by sipp (docs/messaging.md, "One-time codes"): POST /verifications with channel `call`,
 * the engine calls the recipient through the carrier of the workspace's voice number (sipp, answering with the test's
 * RTP socket as its audio), says the code twice, and hangs up. The test hears the code, digit by digit, in what it
 * received (the engine's own prompt maker, test/helpers/heard-prompt.ts), and checks it: approved.
 */
import test from 'ava';
import { importNumbers, claimNumber } from '../../../core/numbers/numbers.ts';
import { allScopes } from '../../../core/scopes.ts';
import { addFarCarrier } from '../../helpers/phone-lines.ts';
import { sippFailed, startEngineService } from '../../helpers/engine-service.ts';
import { freeUdpPort } from '../../helpers/free-port.ts';
import { heardAt, testPrompts } from '../../helpers/heard-prompt.ts';
import { startRtpPhone } from '../../helpers/rtp-phone.ts';
import type { TestService } from '../../helpers/service.ts';
import { startSippServer } from '../../helpers/sipp.ts';
import { until } from '../../helpers/until.ts';

let service: TestService;

test.before(async () => {
  ({ service } = await startEngineService());
});

test.after.always(async () => {
  await service?.close();
});

test('a voice verification calls the recipient through the carrier, says the code twice and hangs up', async (t) => {
  const to = '+33612345678';
  const caller = `+3319${String(Date.now()).slice(-7)}`;
  const phone = await startRtpPhone();
  t.teardown(() => phone.close());
  const port = await freeUdpPort();
  const far = startSippServer({
    scenario: 'uas-hears',
    port,
    mediaPort: await freeUdpPort(),
    replacements: { DIALED: `\\${to}`, CALLER: `\\${caller}`, AUDIO_PORT: String(phone.port) },
    timeoutSeconds: 90,
  });
  t.teardown(() => far.stop());
  const carrier = await addFarCarrier(t, service, port);

  const app = await service.application(undefined, allScopes);
  const workspace = await service.request('POST', '/api/v1/workspaces', {
    auth: app.apiKey,
    body: { externalWorkspaceId: `ws-${port}`, name: 'Acme', timezone: 'UTC' },
  });
  t.is(workspace.status, 201, workspace.text);
  await importNumbers(service.pool, carrier, [caller], ['voice']);
  t.truthy(await claimNumber(service.pool, workspace.body.id, caller, 'Main'));
  const key = await service.request('POST', `/api/v1/workspaces/${workspace.body.id}/keys`, { auth: app.apiKey });
  t.is(key.status, 201, key.text);
  const asWorkspace = { auth: key.body.apiKey as string, workspaceId: workspace.body.id as string };

  const sent = await service.request('POST', '/api/v1/verifications', {
    ...asWorkspace,
    body: { to, channel: 'call' },
  });
  t.is(sent.status, 201, sent.text);
  t.like(sent.body, { to, channel: 'call', status: 'pending' });

  // sipp exits 0 once the engine's BYE came and was answered: the call was for `to`, from the number, hung up by us.
  const run = await far.finished;
  t.is(run.code, 0, sippFailed(run));
  const row = await until('the call recorded', async () => {
    const found = await service.pool.query<{ call_state: string; sealed_code: string | null }>(
      'SELECT call_state, sealed_code FROM verifications WHERE id = $1',
      [sent.body.id],
    );
    const state = found.rows[0];
    return state?.call_state === 'answered' ? state : undefined;
  });
  t.is(row.sealed_code, null, 'the sealed code is cleared once the call is placed');

  // About two sayings of "Your code is" and six digits: several seconds of audio, not a blip.
  t.true(phone.heard.length > 8000 * 4, `${phone.heard.length} samples heard`);
  const prompts = await testPrompts(t);
  const intro = await prompts.pcm({ tts: 'Your code is' });
  const digits = await Promise.all([...'0123456789'].map((digit) => prompts.pcm({ tts: digit })));
  const intros = heardAt(phone.heard, intro);
  t.is(intros.length, 2, 'the code is said twice');
  // The code as heard the first time: after the intro, the digit heard first, six times.
  let at = (intros[0] as number) + intro.length;
  let heard = '';
  for (let place = 0; place < 6; place += 1) {
    let best: { digit: number; offset: number } | undefined;
    digits.forEach((pcm, digit) => {
      const offset = heardAt(phone.heard, pcm, at)[0];
      if (offset !== undefined && (best === undefined || offset < best.offset)) best = { digit, offset };
    });
    if (best === undefined) break;
    heard += String(best.digit);
    at = best.offset + (digits[best.digit] as Int16Array).length;
  }
  t.regex(heard, /^\d{6}$/);
  const checked = await service.request('POST', `/api/v1/verifications/${sent.body.id}/check`, {
    ...asWorkspace,
    body: { code: heard },
  });
  t.deepEqual(checked.body, { status: 'approved' }, checked.text);
});
