/**
 * Who answered a ring round (round.ts's `RoundWinner`), and what becomes of them: connected to the caller
 * (`connectWinner`, through connect-party.ts) until either side hangs up, or let go (`dropWinner`: a queue's entry
 * that is no longer theirs). A browser's leg is recorded and its media up when the round returns it; a desk phone
 * becomes the call's `device` leg here, busy while on the call; a cell's dialled leg is answered already. The device
 * is let go beside the write of the leg's end: freed, or by its queue with its agent's wrap-up.
 */
import { addLeg, setLegState } from '../../../../core/calls/calls.ts';
import { setDeviceBusy } from '../../../../core/devices/devices.ts';
import type { RingTarget } from '../../../../core/routing/definition.ts';
import { connectParty, type Party } from '../../connect-party.ts';
import { mutedUntilKey } from '../../../media/muted-until-key.ts';
import type { RingOutcome } from '../../control.ts';
import { hangUpDialled } from '../../dial-out.ts';
import type { CallServices } from '../../services.ts';
import { type RoundContext, ringRound, type RoundWinner } from './round.ts';

/** The person who answered (none for a cell): a queue's offer is claimed in their name. */
export function winnerMember(winner: RoundWinner): string | null {
  if (winner.kind === 'browser') return winner.device?.member_id ?? null;
  if (winner.kind === 'phone') return winner.answer.device.member_id;
  return null;
}

/** A winner not wanted after all (a queue's entry is no longer theirs): hung up, its leg ended, its device free. */
export async function dropWinner(services: CallServices, winner: RoundWinner): Promise<void> {
  const { pool } = services;
  if (winner.kind === 'cell') return hangUpDialled(services, winner.leg);
  if (winner.kind === 'phone') {
    winner.answer.hangup();
    await setDeviceBusy(pool, winner.answer.device.id, null);
    return;
  }
  winner.leg.close();
  await Promise.all([setLegState(pool, winner.leg.id, 'ended'), setDeviceBusy(pool, winner.leg.deviceId, null)]);
}

/** How the answering device is let go once its connection is over: freed alone, unless its queue frees it. */
export type ReleaseDevice = (deviceId: string) => Promise<void>;

/**
 * The winner connected to the caller (connect-party.ts) until either side hangs up; a desk phone is recorded as the
 * call's `device` leg first (busy while on the call; rung `muted`, its audio held back until a key). Its device is
 * let go by `release` (by default freed) beside the write of the leg's end, whatever happens.
 */
export async function connectWinner(
  services: CallServices,
  winner: RoundWinner,
  release: ReleaseDevice = (deviceId) => setDeviceBusy(services.pool, deviceId, null),
): Promise<void> {
  const { side } = winner;
  if (winner.kind === 'cell') {
    const { ended } = await connectParty(services, side, {
      leg: winner.leg,
      who: { role: 'cell', memberId: null, externalUserId: null },
    });
    await ended;
    return;
  }
  let ended: Promise<void> | undefined;
  const deviceId = winner.kind === 'browser' ? winner.leg.deviceId : winner.answer.device.id;
  try {
    const party = winner.kind === 'browser' ? browserParty(winner) : await phoneParty(services, side.callId, winner);
    ({ ended } = await connectParty(services, side, party));
  } finally {
    await Promise.all([release(deviceId), ended]);
  }
}

function browserParty(winner: Extract<RoundWinner, { kind: 'browser' }>): Party {
  const { device } = winner;
  return {
    leg: winner.leg,
    who: { role: 'browser', memberId: device?.member_id ?? null, externalUserId: device?.external_user_id ?? null },
  };
}

/** The answering desk phone as the call's `device` leg: the device busy, the leg recorded. */
async function phoneParty(
  services: CallServices,
  callId: string,
  { answer }: Extract<RoundWinner, { kind: 'phone' }>,
): Promise<Party> {
  const { pool } = services;
  const { device } = answer;
  try {
    await setDeviceBusy(pool, device.id, callId);
    const legId = await addLeg(pool, callId, {
      role: 'device',
      remote: `device ${device.id} at ${answer.binding.source.address}:${answer.binding.source.port}`,
      sipCallId: answer.sipCallId,
    });
    const leg = answer.leg(legId);
    return {
      leg,
      who: { role: 'device', memberId: device.member_id, externalUserId: device.external_user_id },
      // `muted`: the phone's audio is held back until its person presses a key (muted-until-key.ts).
      ...(answer.mode === 'muted' ? { heard: mutedUntilKey(leg.media) } : {}),
    };
  } catch (error) {
    answer.hangup();
    throw error;
  }
}

/** A round rung and its winner connected until either side hangs up (`answered`); nobody answered: `unanswered`. */
export async function ringAndConnect(
  services: CallServices,
  round: RoundContext,
  targets: readonly RingTarget[],
  timeoutMs: number,
): Promise<RingOutcome> {
  const winner = await ringRound(services, round, targets, timeoutMs);
  if (winner === undefined) return 'unanswered';
  await connectWinner(services, winner);
  return 'answered';
}
