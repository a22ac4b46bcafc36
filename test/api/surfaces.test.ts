/**
 * What the API's listener shows beside `/api/v1`, through real HTTP: the `/phone` page refuses to be framed unless
 * PHONE_FRAME_ANCESTORS names the embedding application's origins, and with METRICS_PORT `/metrics` is served on a
 * listener of its own and no longer on the API's port.
 */
import test from 'ava';
import { loadConfig } from '../../core/config.ts';
import { freePort } from '../helpers/free-port.ts';
import { request, startService, type TestService } from '../helpers/service.ts';

let plain: TestService;
let configured: TestService;
let metricsPort: number;

test.before(async () => {
  metricsPort = await freePort();
  [plain, configured] = await Promise.all([
    startService({}, ['api']),
    startService(
      {
        PHONE_FRAME_ANCESTORS: 'https://app.example.com, http://localhost:3000',
        METRICS_PORT: String(metricsPort),
      },
      ['api'],
    ),
  ]);
});

test.after.always(async () => {
  await Promise.all([plain?.close(), configured?.close()]);
});

/** The directives of a content-security-policy header, by name. */
function directives(header: string | null): Map<string, string> {
  return new Map(
    (header ?? '')
      .split(';')
      .map((directive) => directive.trim())
      .filter((directive) => directive !== '')
      .map((directive) => {
        const [name = '', ...values] = directive.split(/\s+/);
        return [name, values.join(' ')];
      }),
  );
}

test('/phone refuses to be framed by default: frame-ancestors none and X-Frame-Options DENY', async (t) => {
  const page = await request(plain.url, 'GET', '/phone');
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /^text\/html/);
  const policy = directives(page.headers.get('content-security-policy'));
  t.is(policy.get('frame-ancestors'), "'none'");
  t.is(policy.get('default-src'), "'self'", 'the rest of the policy stays');
  t.is(page.headers.get('x-frame-options'), 'DENY');
});

test('PHONE_FRAME_ANCESTORS lets the listed origins frame /phone, and no others', async (t) => {
  const page = await request(configured.url, 'GET', '/phone');
  t.is(page.status, 200);
  const policy = directives(page.headers.get('content-security-policy'));
  t.is(policy.get('frame-ancestors'), 'https://app.example.com http://localhost:3000');
  // X-Frame-Options cannot name several origins (ALLOW-FROM is gone from browsers): the CSP says it, alone.
  t.is(page.headers.get('x-frame-options'), null);
});

test('PHONE_FRAME_ANCESTORS takes origins only; anything else stops the start naming the setting', (t) => {
  t.deepEqual(loadConfig({}).phoneFrameAncestors, []);
  t.deepEqual(
    loadConfig({ PHONE_FRAME_ANCESTORS: 'https://App.Example.com:443/ https://b.example:8443' }).phoneFrameAncestors,
    ['https://app.example.com', 'https://b.example:8443'],
  );
  for (const value of [
    'https://app.example.com/embed',
    'https://app.example.com?x=1',
    '*',
    "'self'",
    'javascript:alert(1)',
    'https://user:pass@app.example.com',
    'app.example.com',
    'https://a.example.com; script-src *',
  ]) {
    t.throws(
      () => loadConfig({ PHONE_FRAME_ANCESTORS: value }),
      { message: /^PHONE_FRAME_ANCESTORS must list origins/ },
      value,
    );
  }
});

test('METRICS_PORT serves /metrics on its own listener; the API port answers 404 in the envelope', async (t) => {
  const metrics = await request(`http://127.0.0.1:${metricsPort}`, 'GET', '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.headers.get('content-type') ?? '', /^text\/plain/);
  t.regex(metrics.text, /^# TYPE switchboard_http_request_duration_seconds histogram$/m);
  const onApi = await request(configured.url, 'GET', '/metrics');
  t.is(onApi.status, 404);
  t.is(onApi.body?.error?.code, 'not_found');
  // The metrics listener serves nothing else: not the API, not health.
  const api = await request(`http://127.0.0.1:${metricsPort}`, 'GET', '/api/v1/workspaces');
  t.is(api.status, 404);
  t.is(api.body?.error?.code, 'not_found');
  // The start says where the metrics are.
  const started = configured.logs.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'switchboard started');
  t.is(started?.metricsUrl, `http://127.0.0.1:${metricsPort}/metrics`);
  // The API's port keeps its health checks, and the requests it served are counted on the metrics port.
  t.is((await request(configured.url, 'GET', '/readyz')).status, 200);
  const after = await request(`http://127.0.0.1:${metricsPort}`, 'GET', '/metrics');
  t.regex(after.text, /switchboard_http_request_duration_seconds_count\{[^}]*status="404"[^}]*\} [1-9]/);
});

test('METRICS_PORT must be a port, and another than PORT', (t) => {
  t.is(loadConfig({}).metricsPort, undefined);
  t.is(loadConfig({ METRICS_PORT: '9090' }).metricsPort, 9090);
  t.throws(() => loadConfig({ METRICS_PORT: 'metrics' }), { message: /^METRICS_PORT must be a whole number/ });
  t.throws(() => loadConfig({ PORT: '8080', METRICS_PORT: '8080' }), { message: /^METRICS_PORT must be another port/ });
});

test('without METRICS_PORT, /metrics stays on the API port', async (t) => {
  const metrics = await request(plain.url, 'GET', '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.text, /^# TYPE switchboard_http_request_duration_seconds histogram$/m);
});
