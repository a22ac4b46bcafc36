/**
 * Numbers through HTTP: operations 19-24 (search the inventory, claim, list, get, change, release), the admin
 * command that fills the inventory, and the `number.updated` events every change writes.
 *
 * One service for the file (API role). The inventory is shared by every application, so each test imports numbers
 * of its own (random digits) and searches with `contains` narrowed to them.
 */
import { randomInt } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { importNumbers } from '../../core/numbers/numbers.ts';
import { runCli } from '../helpers/cli.ts';
import { isError, workspaceWithUser, serviceForFile } from '../helpers/service.ts';

const service = serviceForFile(test);

/** `count` numbers that share a random 7-digit stem of their own: `+1 <area> <stem><n>` */
function freshNumbers(count: number, area = '415') {
  const stem = String(randomInt(1_000_000, 9_999_999));
  const numbers = Array.from({ length: count }, (_, index) => `+1${area}${stem}${index}`.slice(0, 13));
  return { stem, numbers };
}

/**
 * The number's `number.updated` events from the event log, once there are `count` of them. The log serves only what
 * committed below the oldest running transaction, so an event shows once concurrent tests' transactions end.
 */
async function numberEvents(t: ExecutionContext, apiKey: string, numberId: string, count: number) {
  // The log serves an event once every older transaction on the server has ended (docs/events.md): on a busy
  // machine another test's open transaction holds it back a while.
  const deadline = Date.now() + 120_000;
  for (;;) {
    const log = await service.request('GET', '/api/v1/events?type=number.updated&limit=500', { auth: apiKey });
    t.is(log.status, 200, log.text);
    const events = (log.body.data as { number: { id: string; changes: string[] } }[]).filter(
      (event) => event.number.id === numberId,
    );
    if (events.length >= count || Date.now() > deadline) return events;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function claimed(t: ExecutionContext) {
  const setup = await workspaceWithUser(service);
  const { numbers } = freshNumbers(1);
  await importNumbers(service.pool, 'acme', numbers, ['voice', 'sms']);
  const claim = await service.request('POST', '/api/v1/numbers', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { e164: numbers[0], name: 'Support line' },
  });
  t.is(claim.status, 201, claim.text);
  return { ...setup, number: claim.body };
}

test('switchboard numbers import fills the inventory; bad numbers are a usage error and import nothing', async (t) => {
  const run = (args: string[]) => runCli(service.databaseUrl, args);
  const { stem, numbers } = freshNumbers(3, '212');
  const imported = await run(['numbers', 'import', '--carrier', 'acme', '--capabilities', 'voice', ...numbers]);
  t.is(imported.code, 0, imported.stderr);
  t.deepEqual(JSON.parse(imported.stdout), { added: numbers, alreadyPresent: [] });
  const again = await run(['numbers', 'import', '--carrier', 'acme', numbers[0] as string]);
  t.is(again.code, 0, again.stderr);
  t.deepEqual(JSON.parse(again.stdout), { added: [], alreadyPresent: [numbers[0]] });

  const bad = await run(['numbers', 'import', '--carrier', 'acme', '+1999', '4155550100']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /E\.164/);
  const noCarrier = await run(['numbers', 'import', '+14155550100']);
  t.is(noCarrier.code, 2);
  t.regex(noCarrier.stderr, /--carrier/);

  const setup = await workspaceWithUser(service);
  const search = await service.request('GET', `/api/v1/numbers/available?contains=${stem}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.is(search.status, 200, search.text);
  t.deepEqual(
    search.body.data,
    numbers.map((e164) => ({ e164, region: 'US', capabilities: ['voice'] })),
  );
  t.is(search.body.nextCursor, null);
});

test('search narrows by region, area code, digits and capabilities, and pages', async (t) => {
  const setup = await workspaceWithUser(service);
  const stem = String(randomInt(100_000, 999_999));
  const sf = [`+1415${stem}1`, `+1415${stem}2`, `+1415${stem}3`];
  const ny = [`+1212${stem}4`];
  const london = [`+44207${stem}5`];
  await importNumbers(service.pool, 'acme', sf, ['voice', 'sms']);
  await importNumbers(service.pool, 'acme', ny, ['voice']);
  await importNumbers(service.pool, 'uk-carrier', london, ['voice', 'sms', 'mms']);
  const search = async (query: string) => {
    const answer = await service.request('GET', `/api/v1/numbers/available?contains=${stem}&${query}`, {
      auth: setup.apiKey,
    });
    t.is(answer.status, 200, answer.text);
    return answer.body as { data: { e164: string }[]; nextCursor: string | null };
  };
  t.deepEqual(
    (await search('region=US')).data.map((n) => n.e164),
    [...ny, ...sf],
  );
  t.deepEqual(
    (await search('region=US&areaCode=415')).data.map((n) => n.e164),
    sf,
  );
  t.deepEqual(
    (await search('capabilities=sms')).data.map((n) => n.e164),
    [...sf, ...london],
  );
  t.deepEqual(
    (await search('capabilities=sms,mms')).data.map((n) => n.e164),
    london,
  );
  t.deepEqual(
    (await search('region=GB')).data.map((n) => n.e164),
    london,
  );

  const first = await search('region=US&areaCode=415&limit=2');
  t.deepEqual(
    first.data.map((n) => n.e164),
    sf.slice(0, 2),
  );
  t.truthy(first.nextCursor);
  const second = await search(`region=US&areaCode=415&limit=2&cursor=${encodeURIComponent(first.nextCursor ?? '')}`);
  t.deepEqual(
    second.data.map((n) => n.e164),
    sf.slice(2),
  );
  t.is(second.nextCursor, null);

  isError(
    t,
    await service.request('GET', '/api/v1/numbers/available?cursor=garbage', { auth: setup.apiKey }),
    400,
    'invalid_cursor',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/numbers/available?capabilities=fax', { auth: setup.apiKey }),
    400,
    'invalid_request',
  );
  isError(
    t,
    await service.request('GET', '/api/v1/numbers/available?areaCode=41a', { auth: setup.apiKey }),
    400,
    'invalid_request',
  );
});

test('claim takes a number into the workspace once; list, get and the event follow', async (t) => {
  const setup = await workspaceWithUser(service);
  const other = await workspaceWithUser(service);
  const { stem, numbers } = freshNumbers(2);
  await importNumbers(service.pool, 'acme', numbers, ['voice', 'sms']);
  const claim = await service.request('POST', '/api/v1/numbers', {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
    body: { e164: numbers[0], name: 'Support line' },
  });
  t.is(claim.status, 201, claim.text);
  t.like(claim.body, {
    e164: numbers[0],
    name: 'Support line',
    status: 'active',
    region: 'US',
    capabilities: ['voice', 'sms'],
    voiceLane: 'service',
    textingRegistration: { status: 'unregistered', campaignId: null },
    emergencyAddress: null,
    routingPlanId: null,
  });

  isError(
    t,
    await service.request('POST', '/api/v1/numbers', {
      auth: other.apiKey,
      workspaceId: other.workspace.id,
      body: { e164: numbers[0] },
    }),
    404,
    'number_unavailable',
    'taken',
  );
  isError(
    t,
    await service.request('POST', '/api/v1/numbers', {
      auth: other.apiKey,
      workspaceId: other.workspace.id,
      body: { e164: '+19999999999' },
    }),
    404,
    'number_unavailable',
    'never imported',
  );
  const available = await service.request('GET', `/api/v1/numbers/available?contains=${stem}`, {
    auth: setup.apiKey,
  });
  t.deepEqual(
    available.body.data.map((n: { e164: string }) => n.e164),
    [numbers[1]],
  );

  const list = await service.request('GET', '/api/v1/numbers', { auth: setup.apiKey, workspaceId: setup.workspace.id });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((n: { id: string }) => n.id),
    [claim.body.id],
  );
  const get = await service.request('GET', `/api/v1/numbers/${claim.body.id}`, {
    auth: setup.apiKey,
    workspaceId: setup.workspace.id,
  });
  t.deepEqual(get.body, claim.body);
  isError(
    t,
    await service.request('GET', `/api/v1/numbers/${claim.body.id}`, {
      auth: other.apiKey,
      workspaceId: other.workspace.id,
    }),
    404,
    'not_found',
    'another workspace',
  );

  const events = await numberEvents(t, setup.apiKey, claim.body.id, 1);
  t.is(events.length, 1);
  t.like(events[0], {
    type: 'number.updated',
    workspaceId: setup.workspace.id,
    externalWorkspaceId: setup.workspace.externalWorkspaceId,
    sequence: 1,
    number: {
      id: claim.body.id,
      e164: numbers[0],
      status: 'active',
      voiceLane: 'service',
      textingRegistration: 'unregistered',
      workspaceId: setup.workspace.id,
      routingPlanId: null,
      changes: ['claimed'],
    },
  });
});

test('PATCH changes name, voice lane, texting registration and emergency address, each change an event', async (t) => {
  const { apiKey, workspace, number } = await claimed(t);
  const patch = (body: unknown) =>
    service.request('PATCH', `/api/v1/numbers/${number.id}`, { auth: apiKey, workspaceId: workspace.id, body });
  const address = {
    street: '1 Market St',
    unit: 'Suite 300',
    city: 'San Francisco',
    region: 'CA',
    postalCode: '94105',
    country: 'US',
  };
  const changed = await patch({
    name: 'Sales',
    voiceLane: 'off',
    textingRegistration: { campaignId: 'C1234567' },
    emergencyAddress: address,
  });
  t.is(changed.status, 200, changed.text);
  t.like(changed.body, {
    name: 'Sales',
    voiceLane: 'off',
    textingRegistration: { status: 'pending', campaignId: 'C1234567' },
    emergencyAddress: address,
  });
  const unchanged = await patch({ name: 'Sales' });
  t.is(unchanged.status, 200, unchanged.text);
  const cleared = await patch({ name: null, emergencyAddress: null, textingRegistration: { campaignId: null } });
  t.like(cleared.body, { name: null, emergencyAddress: null, textingRegistration: { status: 'unregistered' } });

  const events = await numberEvents(t, apiKey, number.id, 3);
  t.deepEqual(
    events.map((event) => event.number.changes),
    [
      ['claimed'],
      ['name', 'voiceLane', 'textingRegistration', 'emergencyAddress'],
      ['name', 'textingRegistration', 'emergencyAddress'],
    ],
    'a PATCH that changes nothing writes no event',
  );
  t.deepEqual(
    (events as unknown as { sequence: number }[]).map((event) => event.sequence),
    [1, 2, 3],
  );
});

test('an emergency address that cannot be right is 422 emergency_address_invalid; a malformed one is 400', async (t) => {
  const { apiKey, workspace, number } = await claimed(t);
  const patch = (emergencyAddress: unknown) =>
    service.request('PATCH', `/api/v1/numbers/${number.id}`, {
      auth: apiKey,
      workspaceId: workspace.id,
      body: { emergencyAddress },
    });
  const base = { street: '1 Market St', city: 'San Francisco', region: 'CA', postalCode: '94105', country: 'US' };
  const badPostal = await patch({ ...base, postalCode: '9410' });
  isError(t, badPostal, 422, 'emergency_address_invalid', 'postal code');
  t.regex(badPostal.body.error.message, /postal code/);
  const otherCountry = await patch({ ...base, postalCode: 'SW1A 1AA', country: 'GB' });
  isError(t, otherCountry, 422, 'emergency_address_invalid', 'country of another number');
  t.regex(otherCountry.body.error.message, /US number/);
  isError(t, await patch({ ...base, country: 'QQ' }), 422, 'emergency_address_invalid', 'no such country');
  isError(t, await patch({ ...base, street: '' }), 400, 'invalid_request', 'empty street');
  isError(t, await patch({ ...base, country: 'usa' }), 400, 'invalid_request', 'country format');
  isError(t, await patch({ ...base, floor: 3 }), 400, 'invalid_request', 'unknown field');
  const get = await service.request('GET', `/api/v1/numbers/${number.id}`, { auth: apiKey, workspaceId: workspace.id });
  t.is(get.body.emergencyAddress, null, 'nothing was saved');
  isError(
    t,
    await service.request('PATCH', `/api/v1/numbers/${number.id}`, {
      auth: apiKey,
      workspaceId: workspace.id,
      body: {},
    }),
    400,
    'invalid_request',
    'empty body',
  );
});

test('release returns the number to the inventory as it came, with an event', async (t) => {
  const { apiKey, workspace, number } = await claimed(t);
  await service.request('PATCH', `/api/v1/numbers/${number.id}`, {
    auth: apiKey,
    workspaceId: workspace.id,
    body: { textingRegistration: { campaignId: 'C1' } },
  });
  const released = await service.request('DELETE', `/api/v1/numbers/${number.id}`, {
    auth: apiKey,
    workspaceId: workspace.id,
  });
  t.is(released.status, 200, released.text);
  t.like(released.body, { status: 'available', name: null, textingRegistration: { campaignId: null } });
  isError(
    t,
    await service.request('GET', `/api/v1/numbers/${number.id}`, { auth: apiKey, workspaceId: workspace.id }),
    404,
    'not_found',
  );
  const events = await numberEvents(t, apiKey, number.id, 3);
  t.like(events.at(-1), {
    workspaceId: workspace.id,
    number: { status: 'available', workspaceId: null, changes: ['released'] },
  });

  const other = await workspaceWithUser(service);
  const again = await service.request('POST', '/api/v1/numbers', {
    auth: other.apiKey,
    workspaceId: other.workspace.id,
    body: { e164: number.e164 },
  });
  t.is(again.status, 201, again.text);
  t.like(again.body, { id: number.id, name: null, textingRegistration: { status: 'unregistered' } });
});

test('user tokens with numbers:* read the workspace numbers but cannot change them', async (t) => {
  const { apiKey, workspace, number } = await claimed(t);
  const session = await service.request('POST', '/api/v1/sessions', {
    auth: apiKey,
    body: { externalWorkspaceId: workspace.externalWorkspaceId, externalUserId: 'alice', scopes: ['numbers:*'] },
  });
  t.is(session.status, 201, session.text);
  const token: string = session.body.token;
  const list = await service.request('GET', '/api/v1/numbers', { auth: token });
  t.is(list.status, 200, list.text);
  t.deepEqual(
    list.body.data.map((n: { id: string }) => n.id),
    [number.id],
  );
  isError(
    t,
    await service.request('PATCH', `/api/v1/numbers/${number.id}`, { auth: token, body: { name: 'x' } }),
    403,
    'application_key_required',
  );
});
