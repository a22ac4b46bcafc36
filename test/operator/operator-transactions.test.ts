/**
 * The operator's reconciles share the process's pool with the API under `all`. A reconcile that held its record's lock
 * and then asked the pool for a second connection deadlocked the whole process once API requests waiting on that lock
 * held every other connection: every request after that hung. A reconcile now reads the resource again through its
 * own transaction. Shown with a pool of two connections, where two writes of the same routing plan, queue or webhook
 * endpoint in a row are enough.
 */
import test from 'ava';
import { startService, type TestService, workspaceWithUser } from '../helpers/service.ts';

let service: TestService;

test.before(async () => {
  service = await startService({ DATABASE_POOL_SIZE: '2' });
});
test.after.always(async () => {
  await service?.close();
});

/** Sends `count` requests two at a time; a request the service never answers fails the test instead of hanging it. */
async function inPairs(count: number, send: (index: number) => Promise<{ status: number; text: string }>) {
  const statuses: number[] = [];
  for (let index = 0; index < count; index += 2) {
    const answers = await Promise.all([send(index), send(index + 1)].map((pending) => withDeadline(pending)));
    statuses.push(...answers.map((answer) => answer.status));
  }
  return statuses;
}

function withDeadline<T>(pending: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('no answer within 30 s: the service is stuck')), 30_000);
  });
  return Promise.race([pending, deadline]).finally(() => clearTimeout(timer));
}

test('concurrent writes of one routing plan, queue and webhook endpoint while the operator reconciles them all answer', async (t) => {
  const setup = await workspaceWithUser(service);
  const as = { auth: setup.apiKey, workspaceId: setup.workspace.id };
  const definition = { entry: 'bye', steps: { bye: { type: 'hangup', message: null } } };
  const plan = await service.request('POST', '/api/v1/routing-plans', { ...as, body: { name: 'Plan', definition } });
  t.is(plan.status, 201, plan.text);
  const queue = await service.request('POST', '/api/v1/queues', { ...as, body: { name: 'Queue' } });
  t.is(queue.status, 201, queue.text);
  const webhook = await service.request('POST', '/api/v1/webhooks', {
    ...as,
    body: { url: 'https://hooks.example.com/switchboard' },
  });
  t.is(webhook.status, 201, webhook.text);

  const plans = await inPairs(20, (index) =>
    service.request('PATCH', `/api/v1/routing-plans/${plan.body.id}`, { ...as, body: { name: `Plan ${index}` } }),
  );
  t.deepEqual(plans, Array(20).fill(200));
  const queues = await inPairs(20, (index) =>
    service.request('PATCH', `/api/v1/queues/${queue.body.id}`, { ...as, body: { name: `Queue ${index}` } }),
  );
  t.deepEqual(queues, Array(20).fill(200));
  const webhooks = await inPairs(20, (index) =>
    service.request('PATCH', `/api/v1/webhooks/${webhook.body.endpoint.id}`, {
      ...as,
      body: { description: `Endpoint ${index}` },
    }),
  );
  t.deepEqual(webhooks, Array(20).fill(200));
});
