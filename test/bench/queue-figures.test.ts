/**
 * The queue-agents bench's arithmetic (bench/queue-figures.ts): a phone's sipp message trace read back, offers paired
 * with the moment their agent became free, calls per agent, and phones rung while on a call.
 */
import test from 'ava';
import { doubleBooked, fairness, offerTimings, type PhoneMessage, phoneMessages } from '../../bench/queue-figures.ts';

const stamp = (time: string) => `----------------------------------------------- 2026-11-24 ${time}`;
const at = (time: string) => new Date(`2026-11-24T${time}`).getTime();

const trace = [
  stamp('15:44:10.707399'),
  'UDP message received [511] bytes :',
  '',
  'INVITE sip:sbagent1@127.0.0.1:5070;transport=UDP SIP/2.0',
  'Via: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1',
  'Call-ID: first-call',
  'CSeq: 1 INVITE',
  '',
  stamp('15:44:10.707800'),
  'UDP message sent (312 bytes):',
  '',
  'SIP/2.0 180 Ringing',
  'Call-ID: first-call',
  '',
  // A retransmission of the same INVITE: only the first counts.
  stamp('15:44:11.207399'),
  'UDP message received [511] bytes :',
  '',
  'INVITE sip:sbagent1@127.0.0.1:5070;transport=UDP SIP/2.0',
  'Call-ID: first-call',
  '',
  stamp('15:44:14.000250'),
  'UDP message sent (300 bytes):',
  '',
  'BYE sip:engine@127.0.0.1:5060 SIP/2.0',
  'From: <sip:sbagent1@127.0.0.1:5070>;tag=1',
  'Call-ID: first-call',
  '',
  stamp('15:44:14.100000'),
  'UDP message received [511] bytes :',
  '',
  'INVITE sip:sbagent2@127.0.0.1:5070;transport=UDP SIP/2.0',
  'Call-ID: second-call',
  '',
].join('\n');

test('a trace gives each INVITE received and BYE sent once, with its user and wall-clock time', (t) => {
  t.deepEqual(phoneMessages(trace), [
    { at: at('15:44:10.707') + 0.399, user: 'sbagent1', callId: 'first-call', kind: 'invite' },
    { at: at('15:44:14.000') + 0.25, user: 'sbagent1', callId: 'first-call', kind: 'bye' },
    { at: at('15:44:14.100'), user: 'sbagent2', callId: 'second-call', kind: 'invite' },
  ]);
});

test('an offer is timed from its agent last becoming available, and split at the offer', (t) => {
  const changes = [
    { agent: 'a', state: 'available', previous: 'offline', at: 1000 },
    { agent: 'a', state: 'offered', previous: 'available', at: 1030 },
    { agent: 'a', state: 'on_call', previous: 'offered', at: 1300 },
    { agent: 'a', state: 'available', previous: 'on_call', at: 5010 },
    { agent: 'a', state: 'offered', previous: 'available', at: 5040 },
    // Another agent's changes never count for this one; its offer, decided while a waited, is counted.
    { agent: 'b', state: 'available', previous: 'on_call', at: 5015 },
    { agent: 'b', state: 'offered', previous: 'available', at: 5020 },
  ];
  const byes: PhoneMessage[] = [{ at: 5000, user: 'a', callId: 'one', kind: 'bye' }];
  const timed = offerTimings(
    [
      { agent: 'a', at: 1050, enqueuedAt: 500 },
      { agent: 'a', at: 5070, enqueuedAt: 900 },
      // The caller came after the agent was free: not ours to time.
      { agent: 'b', at: 6000, enqueuedAt: 5900 },
      // No availability before it.
      { agent: 'c', at: 6000, enqueuedAt: 100 },
    ],
    changes,
    byes,
  );
  t.deepEqual(timed, {
    timings: [
      {
        agent: 'a',
        freedBy: 'sign_in',
        fromAvailableMs: 50,
        toOfferedMs: 30,
        fromByeMs: undefined,
        othersOfferedFirst: 0,
      },
      { agent: 'a', freedBy: 'after_call', fromAvailableMs: 60, toOfferedMs: 30, fromByeMs: 70, othersOfferedFirst: 1 },
    ],
    callerLater: 1,
    unmatched: 1,
  });
});

test('fairness: spread and standard deviation of calls per agent', (t) => {
  t.deepEqual(fairness([12, 12, 11, 13]), { agents: 4, min: 11, max: 13, mean: 12, stddev: Math.sqrt(0.5), spread: 2 });
  t.deepEqual(fairness([]), { agents: 0, min: 0, max: 0, mean: 0, stddev: 0, spread: 0 });
});

test('a phone rung while still on a call is found, one rung after its BYE is not', (t) => {
  const message = (time: number, user: string, callId: string, kind: 'invite' | 'bye'): PhoneMessage => ({
    at: time,
    user,
    callId,
    kind,
  });
  const found = doubleBooked([
    message(1, 'a', 'one', 'invite'),
    message(2, 'b', 'two', 'invite'),
    message(3, 'a', 'one', 'bye'),
    message(4, 'a', 'three', 'invite'),
    message(5, 'b', 'four', 'invite'),
  ]);
  t.deepEqual([...found], [['b', 1]]);
});
