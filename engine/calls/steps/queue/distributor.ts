/**
 * The engine's queue distributor (docs/contact-center.md, "Queue entries and distribution"). Distribution itself is
 * decided in PostgreSQL under locks (`distributeMany`, core/queues/distribution.ts), so any number of engines may run it for
 * one queue; this file decides when this engine runs it, and tells this engine's waiting callers
 * (wait.ts) when their entry may have changed.
 *
 * - It listens on `switchboard_queue`. A notice naming an entry this engine holds wakes that entry's wait (it reads
 *   the entry again: an offer to ring, or an offer withdrawn). A notice `entered`, `released`, `left` or `agent` for a
 *   queue where this engine holds entries distributes that queue: an entry came or went back in line, or an agent
 *   may be free. Each run offers entries until nothing more can be offered; runs of one queue do not overlap (a
 *   notice during a run asks for one more).
 * - An offer this engine's run made for an entry this engine holds is handed to its wait at once, with the offered
 *   agents' ringable devices (read in one statement for the commit's offers), so the ring round reads nothing before
 *   its INVITEs; the offer's own `offered` notice is dropped (held while the run's transaction is in flight, since it
 *   may come before the commit returns), as it would only have the wait read the entry again, on connections busy
 *   with other calls. Distribution has connections of its own (call-engine.ts) for the same reason.
 * - Every second, as a safety net: the queues where this engine's entries wait are distributed (read only while its
 *   calls watch entries), and wrap-ups that are over end (`endWrapUps`).
 * - When the listening connection drops or comes back, every watched entry reads itself again.
 * - Agents' queue calls that end are written on the same connections, in batches (`callEnded`): one transaction
 *   frees the devices and agents of every call that ended while the one before was in flight and, in the same
 *   commit, offers the freed agents' queues' callers (`endCallsAndOffer`); its offers are handed over as a run's
 *   are. A burst of calls ending together frees and offers their agents in a few commits, none of them waiting
 *   behind the calls' other writes, a notice, or a run of their queue.
 * - At start, the entries of calls a previous run of this engine held leave `abandoned`, as its calls end.
 */
import type pg from 'pg';
import { endWrapUps, missedOffersLimit } from '../../../../core/agents/agent-states.ts';
import { ChangeListener, queueChannel } from '../../../../core/change-notices.ts';
import type { Log } from '../../../../core/log.ts';
import {
  abandonOwnedEntries,
  type EndedQueueCall,
  parseQueueNotice,
  type QueueNotice,
  queuesWithWaitingEntries,
} from '../../../../core/queues/entries.ts';
import { type Distributed, distributeMany, endCallsAndOffer } from '../../../../core/queues/distribution.ts';
import { systemClock, type Clock } from '../../../../core/clock.ts';
import { ringableDevicesOf, type RingableDevices } from '../../../../core/devices/devices.ts';
import type { EntryOffer, QueueWatch } from '../../services.ts';

/** How often the safety net runs (distribution of this engine's queues, the end of wrap-ups). */
export const distributeEveryMs = 1_000;
/** Offers one run makes at most before it yields (another run follows if asked for). */
const offersPerRun = 100;
/** At most this many offers are decided in one transaction (agents freed together are offered in one commit). */
const offersPerCommit = 10;
/** At most this many queue calls' ends are written in one transaction. */
const endingsPerCommit = 50;

interface Ending {
  end: EndedQueueCall;
  written: () => void;
  failed: (error: unknown) => void;
}

interface Watcher {
  queueId: string;
  onChange: (offered?: EntryOffer) => void;
}

export class QueueDistributor implements QueueWatch {
  private readonly watchers = new Map<string, Watcher>();
  /** How many of the watched entries are in each queue: a notice asks it once instead of scanning every watcher. */
  private readonly perQueue = new Map<string, number>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly again = new Set<string>();
  /** Entries this engine offered whose `offered` notice has not come yet: it is dropped when it does. */
  private readonly handing = new Set<string>();
  /**
   * The offers this engine is deciding (a transaction in flight): a queue's run (`queueId`), or a batch of calls' ends
   * (any queue), each with the `offered` notices of this engine's entries held meanwhile.
   */
  private readonly deciding = new Set<{ queueId: string | undefined; held: Set<string> }>();
  /** Handovers whose devices are being read. */
  private readonly handovers = new Set<Promise<void>>();
  /** Queue calls' ends waiting for the transaction in flight (`writing`) to be over. */
  private endings: Ending[] = [];
  private writing: Promise<void> | undefined;
  private listener: ChangeListener | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly options: {
      pool: pg.Pool;
      databaseUrl: string;
      /** This engine's id (calls.engine_owner, queue_entries.engine_owner). */
      owner: string;
      log: Pick<Log, 'info' | 'warn'>;
      /** The engine's time, by which SIP bindings expire (default the system clock). */
      clock?: Clock;
    },
  ) {}

  async start(): Promise<void> {
    const { pool, owner, log } = this.options;
    const left = await abandonOwnedEntries(pool, owner, missedOffersLimit);
    if (left > 0) log.warn({ owner, left }, 'queue entries of calls a previous run of this engine held left the queue');
    this.listener = new ChangeListener(
      this.options.databaseUrl,
      queueChannel,
      (payload) => this.onNotice(payload),
      () => this.onReset(),
      (message) => log.warn({}, message),
    );
    await this.listener.start();
    this.timer = setInterval(() => this.sweep(), distributeEveryMs);
    this.timer.unref();
  }

  watch(entryId: string, queueId: string, onChange: (offered?: EntryOffer) => void): () => void {
    const watcher = { queueId, onChange };
    const replaced = this.watchers.get(entryId);
    if (replaced !== undefined) this.count(replaced.queueId, -1);
    this.watchers.set(entryId, watcher);
    this.count(queueId, 1);
    this.distribute(queueId);
    return () => {
      if (this.watchers.get(entryId) !== watcher) return;
      this.watchers.delete(entryId);
      this.handing.delete(entryId);
      this.count(queueId, -1);
    };
  }

  callEnded(end: EndedQueueCall): Promise<void> {
    return new Promise((written, failed) => {
      this.endings.push({ end, written, failed });
      this.writing ??= this.writeEndings();
    });
  }

  /**
   * Writes the ends waiting, a batch per transaction with the offers it makes, until none waits. A batch that fails
   * (a deadlock broken, a connection lost) is written again one end at a time: an end that fails alone fails alone,
   * to its call.
   */
  private async writeEndings(): Promise<void> {
    const { pool } = this.options;
    const write = async (batch: readonly Ending[]) => {
      const ends = batch.map(({ end }) => end);
      // Up to one offer per agent freed, at least a run's worth (agents already free may take callers too).
      const offered = await this.decided(undefined, () =>
        endCallsAndOffer(pool, ends, Math.max(ends.length, offersPerCommit)),
      );
      for (const { written } of batch) written();
      this.handOver(offered);
    };
    try {
      while (this.endings.length > 0) {
        const batch = this.endings.splice(0, endingsPerCommit);
        try {
          await write(batch);
        } catch {
          for (const ending of batch) await write([ending]).catch(ending.failed);
        }
      }
    } finally {
      this.writing = undefined;
    }
  }

  /** Once the queue calls' ends asked for so far are written (or failed): before the connections close. */
  async endingsWritten(): Promise<void> {
    while (this.writing !== undefined) await this.writing;
  }

  /** How many entries this engine's calls hold now (waiting or offered). */
  get watching(): number {
    return this.watchers.size;
  }

  private onNotice(payload: string): void {
    const notice = parseQueueNotice(payload);
    if (notice === undefined) return;
    const { entryId, queueId, kind } = notice;
    if (entryId !== undefined && this.watchers.has(entryId) && !this.ownOffer(kind, queueId, entryId)) {
      this.watchers.get(entryId)?.onChange();
    }
    if (kind !== 'offered' && this.holdsEntriesIn(queueId)) this.distribute(queueId);
  }

  /**
   * Whether an `offered` notice is of an offer this engine made, handed over (`handOver`) instead: dropped, as it
   * would only have the wait read the entry again. One that comes while this engine decides offers of its queue may
   * be: it is held until the transaction returns (`decide`).
   */
  private ownOffer(kind: QueueNotice['kind'], queueId: string, entryId: string): boolean {
    if (kind !== 'offered') return false;
    if (this.handing.delete(entryId)) return true;
    let held = false;
    for (const decision of this.deciding) {
      if (decision.queueId !== undefined && decision.queueId !== queueId) continue;
      decision.held.add(entryId);
      held = true;
    }
    return held;
  }

  private holdsEntriesIn(queueId: string): boolean {
    return (this.perQueue.get(queueId) ?? 0) > 0;
  }

  private count(queueId: string, change: number): void {
    const count = (this.perQueue.get(queueId) ?? 0) + change;
    if (count > 0) this.perQueue.set(queueId, count);
    else this.perQueue.delete(queueId);
  }

  /** Notices may have been missed: every watched entry reads itself again, and the safety net runs. */
  private onReset(): void {
    this.handing.clear();
    for (const watcher of this.watchers.values()) watcher.onChange();
    this.sweep();
  }

  /** Distributes the queue now, or once more after the run in progress. */
  private distribute(queueId: string): void {
    if (this.closed) return;
    if (this.running.has(queueId)) {
      this.again.add(queueId);
      return;
    }
    const run = (async () => {
      do {
        this.again.delete(queueId);
        for (let offers = 0; offers < offersPerRun && !this.closed;) {
          const offered = await this.decide(queueId);
          this.handOver(offered);
          if (offered.length < offersPerCommit) break;
          offers += offered.length;
        }
      } while (this.again.has(queueId) && !this.closed);
    })()
      .catch((error: unknown) => this.options.log.warn({ err: error, queueId }, 'queue distribution failed'))
      .finally(() => this.running.delete(queueId));
    this.running.set(queueId, run);
  }

  /** One distribution transaction of the queue. */
  private decide(queueId: string): Promise<Distributed[]> {
    return this.decided(queueId, () => distributeMany(this.options.pool, queueId, offersPerCommit));
  }

  /**
   * Runs a transaction that decides offers (of `queueId`, or of any queue). The `offered` notices of this engine's
   * entries that come meanwhile are held until it returns: those of its own offers are dropped (they are handed
   * over), the others passed on, unless another decision still in flight holds them too (it passes them on).
   */
  private async decided(queueId: string | undefined, decide: () => Promise<Distributed[]>): Promise<Distributed[]> {
    const decision = { queueId, held: new Set<string>() };
    this.deciding.add(decision);
    let offered: Distributed[] = [];
    try {
      offered = await decide();
      return offered;
    } finally {
      this.deciding.delete(decision);
      for (const { entry } of offered) {
        if (!this.watchers.has(entry.id)) continue;
        let heard = decision.held.delete(entry.id);
        for (const other of this.deciding) heard = other.held.delete(entry.id) || heard;
        // Its notice came already (dropped), or will come (dropped then).
        if (!heard) this.handing.add(entry.id);
      }
      for (const entryId of decision.held) {
        if (![...this.deciding].some((other) => other.held.has(entryId))) this.watchers.get(entryId)?.onChange();
      }
    }
  }

  /**
   * This engine's entries among the offers: their waits ring the agents without waiting for the notices, and with
   * the agents' devices read here in one statement for all of them (the ring round then reads nothing before its
   * INVITEs; when this read fails, each round reads its own).
   */
  private handOver(offered: readonly Distributed[]): void {
    const mine = offered.filter(({ entry }) => entry.offered_at !== null && this.watchers.has(entry.id));
    // A batch of calls' ends may offer the callers of queues of several workspaces: one read per workspace.
    for (const workspaceId of new Set(mine.map(({ entry }) => entry.workspace_id))) {
      this.handOverIn(
        workspaceId,
        mine.filter(({ entry }) => entry.workspace_id === workspaceId),
      );
    }
  }

  private handOverIn(workspaceId: string, mine: readonly Distributed[]): void {
    const { pool, clock = systemClock } = this.options;
    const memberIds = mine.flatMap((offer) => offer.memberIds);
    const handover = ringableDevicesOf(pool, workspaceId, { memberIds, userIds: [] }, clock.now())
      .catch((error: unknown) => {
        this.options.log.warn({ err: error }, "the offered agents' devices could not be read");
        return undefined;
      })
      .then((ringable) => {
        for (const { entry, memberIds: members } of mine) {
          const offer = { offeredAt: entry.offered_at as Date, memberIds: members };
          const theirs = ringable === undefined ? undefined : devicesOf(ringable, members);
          this.watchers.get(entry.id)?.onChange(theirs === undefined ? offer : { ...offer, ringable: theirs });
        }
      })
      .finally(() => this.handovers.delete(handover));
    this.handovers.add(handover);
  }

  private sweep(): void {
    if (this.closed) return;
    this.sweeping ??= (async () => {
      await endWrapUps(this.options.pool);
      // This engine's entries are those its calls watch: with none, there is no queue of its own to distribute.
      if (this.watchers.size === 0) return;
      for (const queueId of await queuesWithWaitingEntries(this.options.pool, this.options.owner)) {
        this.distribute(queueId);
      }
    })()
      .catch((error: unknown) => this.options.log.warn({ err: error }, 'queue sweep failed'))
      .finally(() => (this.sweeping = undefined));
  }

  /**
   * Stops distributing and listening. Queue calls' ends are still written after it (the calls end after the
   * distributor): `endingsWritten` says when they are.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.listener?.close();
    await this.sweeping;
    await Promise.all(this.running.values());
    await Promise.all(this.handovers);
  }
}

/** The devices of `memberIds` among those read. */
function devicesOf(ringable: RingableDevices, memberIds: readonly string[]): RingableDevices {
  const theirs = (device: { member_id: string | null }) =>
    device.member_id !== null && memberIds.includes(device.member_id);
  return { offered: ringable.offered.filter(theirs), sip: ringable.sip.filter(({ device }) => theirs(device)) };
}
