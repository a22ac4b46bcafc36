/**
 * What one round of a `ring` step rings (round.ts): of its targets, the people's devices that can ring now (read in
 * one statement, or handed over by the queue's distribution, which read them with its offer) and the cells; each SIP
 * device's live bindings as INVITE targets with the mode its person is rung in.
 */
import { systemClock } from '../../../../core/clock.ts';
import { type DeviceRow, ringableDevicesOf } from '../../../../core/devices/devices.ts';
import type { RingMode, RingTarget } from '../../../../core/routing/definition.ts';
import type { RingPerson } from '../../control.ts';
import type { SipRingTarget } from './desk-phones.ts';
import type { RoundContext } from './round.ts';
import type { CallServices } from '../../services.ts';

export interface RoundTargets {
  people: RingPerson[];
  cells: string[];
  /** `browser` and `mobile` devices, offered the call. */
  devices: DeviceRow[];
  /** Each live binding of each ringable `sip` device. */
  sipTargets: SipRingTarget[];
}

/** The round's targets; see the file's comment. */
export async function roundTargets(
  services: CallServices,
  round: RoundContext,
  targets: readonly RingTarget[],
): Promise<RoundTargets> {
  const people = targets.filter((target): target is RingPerson => !('cell' in target));
  const cells = targets.flatMap((target) => ('cell' in target ? [target.cell] : []));
  const ids = {
    memberIds: people.flatMap((person) => ('memberId' in person ? [person.memberId] : [])),
    userIds: people.flatMap((person) => ('userId' in person ? [person.userId] : [])),
  };
  const found =
    round.queued?.ringable ??
    (people.length === 0
      ? { offered: [], sip: [] }
      : await ringableDevicesOf(services.pool, round.call.workspaceId, ids, (services.clock ?? systemClock).now()));
  const sipTargets = found.sip.flatMap(({ device, bindings }) =>
    bindings.map((binding) => ({ device, binding, mode: modeFor(device, people) })),
  );
  return { people, cells, devices: found.offered, sipTargets };
}

/** The `mode` of the first target naming the device's person (`ring` when none says). */
export function modeFor(device: DeviceRow, people: readonly RingPerson[]): RingMode {
  const target = people.find((person) =>
    'memberId' in person ? person.memberId === device.member_id : person.userId === device.app_user_id,
  );
  return target?.mode ?? 'ring';
}

/** The members and external users whose devices ring (`call.ringing`). */
export function ownersOf(devices: readonly (DeviceRow | undefined)[]): {
  memberIds: string[];
  externalUserIds: string[];
} {
  const memberIds = new Set<string>();
  const externalUserIds = new Set<string>();
  for (const device of devices) {
    if (device?.member_id) memberIds.add(device.member_id);
    if (device?.external_user_id) externalUserIds.add(device.external_user_id);
  }
  return { memberIds: [...memberIds], externalUserIds: [...externalUserIds] };
}
