/**
 * The messages bench's SMSC (bench/messages.ts), in a process of its own so it never competes with what it measures
 * for an event loop: the tests' SMSC (test/helpers/smsc.ts, the `smpp` package's server) answering every `submit_sm`
 * at once. Each message of the bench goes to a destination of its own, so the SMSC tells each message apart by
 * `destination_addr`: how many submits, how many distinct, and when each destination was first answered (this
 * host's wall clock, which the parent shares). It says `{ type: 'ready', port }` to its parent, answers
 * `{ type: 'report' }`, and exits on `{ type: 'stop' }` or when the parent goes.
 */
import { TestSmsc } from '../test/helpers/smsc.ts';

interface Request {
  type: 'report' | 'stop';
}

const smsc = await TestSmsc.start();
let submits = 0;
const answeredAt = new Map<string, number>();
smsc.on('submit', ({ pdu }) => {
  // Answered already (answerAtOnce): this is the acknowledgement's time.
  const at = Date.now();
  submits += 1;
  // The tests' SMSC keeps every PDU for the tests to read; the bench reads only these counts.
  smsc.submits.length = 0;
  const destination = String(pdu.destination_addr);
  if (!answeredAt.has(destination)) answeredAt.set(destination, at);
});

const send = (message: unknown) => process.send?.(message);
process.on('message', (request: Request) => {
  if (request.type === 'report') {
    send({ type: 'report', submits, distinct: answeredAt.size, answeredAt: Object.fromEntries(answeredAt) });
  } else if (request.type === 'stop') {
    void smsc.close().then(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
send({ type: 'ready', port: smsc.port });
