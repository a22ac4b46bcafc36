/**
 * Which engine process binds a carrier's SMPP session (docs/messaging.md, "Carriers speak SMPP 3.4"): the one holding
 * the carrier's PostgreSQL session-level advisory lock, taken on a connection of its own. The others try again every
 * `retryMs`. The lock lives as long as that connection: a process that dies, or whose connection is cut, lets it go,
 * and `lost` tells the leader so that it unbinds (a check every `checkMs` finds a connection that silently went).
 */
import { createHash } from 'node:crypto';
import { AdvisoryLeadership } from '../../core/leadership.ts';

/**
 * The lock's key: the first 8 bytes of SHA-256 over `smpp:<carrier>`, as a signed 64-bit integer (decimal text, the
 * way PostgreSQL's `bigint` takes it). Stable across processes and PostgreSQL versions.
 */
export function leadershipKey(carrier: string): string {
  return createHash('sha256').update(`smpp:${carrier}`).digest().readBigInt64BE(0).toString();
}

export interface LeadershipOptions {
  databaseUrl: string;
  carrier: string;
  /** How often a process that does not lead tries the lock again. */
  retryMs?: number;
  /** How often the leader checks its connection is still there. */
  checkMs?: number;
}

/** The carrier's lead: core/leadership.ts's advisory lock under the carrier's key. */
export class CarrierLeadership extends AdvisoryLeadership {
  constructor(options: LeadershipOptions) {
    super({
      databaseUrl: options.databaseUrl,
      key: leadershipKey(options.carrier),
      applicationName: 'switchboard-smpp-lead',
      retryMs: options.retryMs ?? 5_000,
      checkMs: options.checkMs ?? 10_000,
    });
  }
}
