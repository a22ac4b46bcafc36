/**
 * The statuses of a message (docs/messaging.md, "Records"): outbound `queued` → `sending` → `sent` → `delivered`, or
 * `failed`; inbound `received`. Which of them are events, and the steps a message passes when its parts move on.
 */
import type { CarrierError } from './link-store.ts';
import type { PartsSummary } from './parts.ts';

export type MessageStatus = 'queued' | 'sending' | 'sent' | 'delivered' | 'failed' | 'received';

/**
 * The statuses `message.status` reports (spec section 6: sent, delivered, failed); `queued` and `sending` are in the
 * message's history only. An inbound message is `message.received`.
 */
export const reportedStatuses: ReadonlySet<MessageStatus> = new Set(['sent', 'delivered', 'failed', 'received']);

/** The outbound statuses in the order a message goes through them (`failed` can come after any but `delivered`). */
const progress = ['queued', 'sending', 'sent', 'delivered'] as const;

export interface StatusStep {
  status: MessageStatus;
  error: CarrierError | null;
}

export function lastStep(steps: readonly StatusStep[]): StatusStep {
  return steps[steps.length - 1] as StatusStep;
}

/** The statuses an outbound message passes from `status` to where its parts put it (none when it stays). */
export function statusSteps(status: MessageStatus, parts: PartsSummary): StatusStep[] {
  if (parts.error !== null) return [{ status: 'failed', error: parts.error }];
  const target =
    parts.acknowledged === parts.total
      ? parts.delivered === parts.total
        ? 'delivered'
        : 'sent'
      : parts.taken > 0
        ? 'sending'
        : 'queued';
  const steps: StatusStep[] = [];
  const from = progress.indexOf(status as (typeof progress)[number]);
  for (let at = from + 1; at <= progress.indexOf(target); at += 1) {
    steps.push({ status: progress[at] as MessageStatus, error: null });
  }
  return steps;
}

/** A message a settling group moved out of `queued`/`sending`, as its notice names it: its status then, and when. */
export interface SettledMessage {
  id: string;
  status: MessageStatus;
  /** Its `updated_at`, in milliseconds since the epoch. */
  at: number;
}

/** The most messages one settled notice names (a notice's payload holds fewer than 8,000 bytes). */
const settledPerNotice = 100;
const settledEntry = /^([0-9a-f-]{36}) (sent|delivered|failed) (\d{1,15})$/;

/** The payloads of the notices naming `settled`: `<id> <status> <ms>` entries, comma-separated. */
export function settledNotices(settled: readonly SettledMessage[]): string[] {
  const payloads: string[] = [];
  for (let at = 0; at < settled.length; at += settledPerNotice) {
    payloads.push(
      settled
        .slice(at, at + settledPerNotice)
        .map((message) => `${message.id} ${message.status} ${message.at}`)
        .join(','),
    );
  }
  return payloads;
}

/** The messages a settled notice names; entries that are not well formed are left out. */
export function parseSettledNotice(payload: string): SettledMessage[] {
  return payload.split(',').flatMap((entry) => {
    const match = settledEntry.exec(entry);
    return match === null ? [] : [{ id: match[1] as string, status: match[2] as MessageStatus, at: Number(match[3]) }];
  });
}
