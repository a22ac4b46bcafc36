/**
 * AI agents through HTTP: operations 44-48 (create, list, get, update, delete), the API key that is stored sealed and
 * never shown, and the refusal to delete an agent, or change its provider, (409 `in_use`) while a routing plan's
 * ai_answer step names it. The setup shared with queues.test.ts and schedules.test.ts is in
 * test/helpers/routing-config.ts.
 *
 * One service running the API role only. Every test makes its own application and workspace, so tests run
 * concurrently without seeing each other's data.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { openSecret } from '../../core/sealing.ts';
import { isError, serviceForFile } from '../helpers/service.ts';
import {
  agentBody,
  connection,
  created,
  hangup,
  isInUse,
  isInvalid,
  routingConfigHelpers,
  uuidRegex,
} from '../helpers/routing-config.ts';

const service = serviceForFile(test);
const { tenant, secondWorkspace, call, createPlan, archivePlan } = routingConfigHelpers(() => service);

// ---------------------------------------------------------------------------------------------------------------
// Helpers

function aiPlan(agentId: string, provider: string) {
  return {
    entry: 'ai',
    steps: { ai: { type: 'ai_answer', provider, agentId, onCap: 'bye', next: 'bye' }, bye: hangup },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// AI agents

test('an AI agent is created; its API key is never shown, only hasApiKey', async (t) => {
  const owner = await tenant();
  const apiKey = `sk-live-${randomUUID()}`;
  const answer = await call(owner, 'POST', '/ai-agents', agentBody(apiKey));
  t.is(answer.status, 201, answer.text);
  t.regex(answer.body.id, uuidRegex);
  t.like(answer.body, {
    workspaceId: owner.workspaceId,
    name: 'Receptionist',
    provider: 'provider_a',
    connection,
    hasApiKey: true,
    minuteCap: 600,
    minutesUsed: 0,
  });
  t.false(answer.text.includes(apiKey), 'the create answer holds no API key');
  t.false('apiKey' in answer.body);

  const read = await call(owner, 'GET', `/ai-agents/${answer.body.id}`);
  t.is(read.status, 200, read.text);
  t.deepEqual(read.body, answer.body);
  t.false(read.text.includes(apiKey), 'GET holds no API key');
  const list = await call(owner, 'GET', '/ai-agents');
  t.is(list.status, 200, list.text);
  t.deepEqual(list.body.data, [answer.body]);
  t.false(list.text.includes(apiKey), 'the list holds no API key');
  t.false(
    service.logs.some((line) => line.includes(apiKey)),
    'no log line holds the API key',
  );

  // Stored sealed, and opened with the service's key.
  const row = await service.pool.query<{ api_key: string }>('SELECT api_key FROM ai_agents WHERE id = $1', [
    answer.body.id,
  ]);
  const stored = row.rows[0]?.api_key as string;
  t.false(stored.includes(apiKey), 'not stored in clear');
  const keys = await loadSigningKeys(service.pool, undefined);
  t.is(openSecret(keys.providerSecrets, stored), apiKey);

  const keyless = await call(owner, 'POST', '/ai-agents', {
    name: 'No key',
    provider: 'provider_b',
    connection: { url: 'https://api.example.com/realtime', instructions: 'Be brief.', voice: 'alloy' },
  });
  t.is(keyless.status, 201, keyless.text);
  t.like(keyless.body, { hasApiKey: false, minuteCap: null, minutesUsed: 0, provider: 'provider_b' });
});

test('AI agent fields are checked: https or wss url, known provider, minute cap', async (t) => {
  const owner = await tenant();
  const body = agentBody();
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['http url', { connection: { url: 'http://realtime.example.com/v1' } }, /connection\.url/],
    ['ws url', { connection: { url: 'ws://realtime.example.com/v1' } }, /connection\.url/],
    ['not a url', { connection: { url: 'wss://realtime example.com/v1' } }, /connection\.url/],
    ['unknown connection field', { connection: { ...connection, token: 'x' } }, /token/],
    ['unknown provider', { provider: 'provider_z' }, /provider/],
    ['minute cap 0', { minuteCap: 0 }, /minuteCap/],
    ['empty API key', { apiKey: '' }, /apiKey/],
    ['API key null on create', { apiKey: null }, /apiKey/],
  ];
  for (const [label, change, field] of cases) {
    isInvalid(t, await call(owner, 'POST', '/ai-agents', { ...body, ...change }), field, label);
  }
  const list = await call(owner, 'GET', '/ai-agents');
  t.deepEqual(list.body.data, [], 'no agent was made');
  t.false(list.text.includes(body.apiKey));

  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', body));
  isInvalid(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { connection: { url: 'http://x.example.com' } }),
    /connection\.url/,
  );
  isInvalid(t, await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_z' }), /provider/);
  isInvalid(t, await call(owner, 'PATCH', `/ai-agents/${agent.id}`, {}), /body/, 'empty PATCH');
  const read = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(read.body, agent);
});

test('PATCH of an AI agent: the API key can be removed and set again; other fields keep their values', async (t) => {
  const owner = await tenant();
  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', agentBody()));

  const renamed = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { name: 'Front desk' });
  t.is(renamed.status, 200, renamed.text);
  t.like(renamed.body, { name: 'Front desk', hasApiKey: true, minuteCap: 600, connection, provider: 'provider_a' });

  const removed = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: null });
  t.is(removed.status, 200, removed.text);
  t.like(removed.body, { name: 'Front desk', hasApiKey: false, minuteCap: 600 });
  const stored = await service.pool.query('SELECT 1 FROM ai_agents WHERE id = $1 AND api_key IS NULL', [agent.id]);
  t.is(stored.rowCount, 1, 'the key is gone from the database');

  const newKey = `sk-new-${randomUUID()}`;
  const set = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: newKey, minuteCap: null });
  t.is(set.status, 200, set.text);
  t.like(set.body, { hasApiKey: true, minuteCap: null });
  t.false(set.text.includes(newKey));

  const moved = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, {
    provider: 'provider_c',
    connection: { url: 'https://c.example.com/rt' },
  });
  t.is(moved.status, 200, moved.text);
  t.like(moved.body, { provider: 'provider_c', connection: { url: 'https://c.example.com/rt' }, hasApiKey: true });
  t.is(moved.body.createdAt, agent.createdAt);

  const read = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(read.body, moved.body);
  isError(t, await call(owner, 'PATCH', `/ai-agents/${randomUUID()}`, { name: 'x' }), 404, 'not_found');
  const other = await secondWorkspace(owner);
  isError(t, await call(other, 'GET', `/ai-agents/${agent.id}`), 404, 'not_found', 'other workspace');
  isError(t, await call(other, 'PATCH', `/ai-agents/${agent.id}`, { apiKey: null }), 404, 'not_found');
});

test('an AI agent an ai_answer step uses cannot be deleted, nor its provider changed, until the plan is archived', async (t) => {
  const owner = await tenant();
  const apiKey = `sk-live-${randomUUID()}`;
  const agent = await created('agent', await call(owner, 'POST', '/ai-agents', agentBody(apiKey)));

  // The step's provider must be the agent's.
  const mismatch = await call(owner, 'POST', '/routing-plans', {
    name: 'Wrong',
    definition: aiPlan(agent.id, 'provider_b'),
  });
  isError(t, mismatch, 422, 'invalid_plan', 'provider mismatch');

  const planName = 'AI first';
  const planId = await createPlan(t, owner, planName, aiPlan(agent.id, 'provider_a'));
  isInUse(t, await call(owner, 'DELETE', `/ai-agents/${agent.id}`), planId, planName, 'DELETE');
  isInUse(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_b' }),
    planId,
    planName,
    'PATCH',
  );
  isInUse(
    t,
    await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_c', name: 'Renamed too' }),
    planId,
    planName,
    'PATCH with a name',
  );
  const unchanged = await call(owner, 'GET', `/ai-agents/${agent.id}`);
  t.deepEqual(unchanged.body, agent, 'the refused changes changed nothing');

  // Other changes, and naming the same provider, are fine.
  const same = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_a', name: 'Still A' });
  t.is(same.status, 200, same.text);
  t.like(same.body, { provider: 'provider_a', name: 'Still A' });

  await archivePlan(t, owner, planId);
  const moved = await call(owner, 'PATCH', `/ai-agents/${agent.id}`, { provider: 'provider_b' });
  t.is(moved.status, 200, moved.text);
  t.is(moved.body.provider, 'provider_b');
  const deleted = await call(owner, 'DELETE', `/ai-agents/${agent.id}`);
  t.is(deleted.status, 200, deleted.text);
  t.like(deleted.body, { id: agent.id, provider: 'provider_b', hasApiKey: true });
  t.false(deleted.text.includes(apiKey), 'no key in the delete answer');
  isError(t, await call(owner, 'GET', `/ai-agents/${agent.id}`), 404, 'not_found');
  isError(t, await call(owner, 'DELETE', `/ai-agents/${agent.id}`), 404, 'not_found', 'deleted twice');
});
