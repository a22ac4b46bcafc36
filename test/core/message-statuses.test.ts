/**
 * A message's statuses (core/messages/statuses.ts, docs/messaging.md "Records", "Events"): which are events, the steps
 * a message passes when its parts move on, and the settled notices that answer a waiting send.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { parseSettledNotice, reportedStatuses, settledNotices, statusSteps } from '../../core/messages/statuses.ts';

const parts = (summary: Partial<Parameters<typeof statusSteps>[1]>) => ({
  total: 2,
  acknowledged: 0,
  delivered: 0,
  taken: 0,
  error: null,
  ...summary,
});
const statuses = (steps: ReturnType<typeof statusSteps>) => steps.map((step) => step.status);

test('sent, delivered and failed are reported (and received); queued and sending are history only', (t) => {
  t.deepEqual([...reportedStatuses].sort(), ['delivered', 'failed', 'received', 'sent']);
});

test('a message passes every status on the way to where its parts put it, and never goes back', (t) => {
  t.deepEqual(statuses(statusSteps('queued', parts({}))), []);
  t.deepEqual(statuses(statusSteps('queued', parts({ taken: 1 }))), ['sending']);
  t.deepEqual(statuses(statusSteps('queued', parts({ taken: 2, acknowledged: 2 }))), ['sending', 'sent']);
  t.deepEqual(statuses(statusSteps('sending', parts({ taken: 2, acknowledged: 2, delivered: 2 }))), [
    'sent',
    'delivered',
  ]);
  t.deepEqual(statuses(statusSteps('sent', parts({ taken: 2, acknowledged: 2, delivered: 1 }))), []);
  t.deepEqual(statuses(statusSteps('delivered', parts({ taken: 2, acknowledged: 1 }))), [], 'never back');
  const error = { code: 'ESME_RINVDSTADR', message: 'invalid destination' };
  t.deepEqual(statusSteps('sending', parts({ taken: 1, error })), [{ status: 'failed', error }]);
});

test('settled notices name each message with its status and time, in groups that fit a notice', (t) => {
  const settled = Array.from({ length: 250 }, (_, index) => ({
    id: randomUUID(),
    status: index % 3 === 0 ? ('failed' as const) : ('sent' as const),
    at: 1_764_000_000_000 + index,
  }));
  const payloads = settledNotices(settled);
  t.is(payloads.length, 3);
  for (const payload of payloads) t.true(Buffer.byteLength(payload) < 8000);
  t.deepEqual(payloads.flatMap(parseSettledNotice), settled);
  t.deepEqual(settledNotices([]), []);
});

test('a settled notice that is not well formed names nothing it cannot read', (t) => {
  const id = randomUUID();
  t.deepEqual(parseSettledNotice(`${id} sent 12,garbage,${id} queued 5,${id} sent -1,,${id} delivered 7`), [
    { id, status: 'sent', at: 12 },
    { id, status: 'delivered', at: 7 },
  ]);
  t.deepEqual(parseSettledNotice(''), []);
  t.deepEqual(parseSettledNotice(id), [], 'an id alone (an engine of the version before) names no status');
});
