/**
 * A double of the message records' interface to the SMPP link (core/messages/link-store.ts), in memory: parts move
 * through the states the records give them (waiting, submitted, acknowledged, failed), a throttled part waits until
 * its time and then wakes the link, and every call is recorded in order for the tests to check.
 */
import { EventEmitter } from 'node:events';
import type {
  CarrierError,
  DeliveryReceipt,
  InboundOutcome,
  InboundPart,
  MessageLinkStore,
  OutboundPart,
} from '../../core/messages/link-store.ts';
import { encodeText } from '../../core/messages/encoding.ts';

type State = 'waiting' | 'submitted' | 'acknowledged' | 'failed';

interface StoredPart {
  part: OutboundPart;
  carrier: string;
  state: State;
  notBefore: number;
  carrierMessageId?: string;
  error?: CarrierError;
}

export type StoreCall =
  | { call: 'acknowledged'; partId: string; carrierMessageId: string }
  | { call: 'refused'; partId: string; error: CarrierError }
  | { call: 'retryLater'; partId: string; notBefore: Date }
  | { call: 'requeueSubmitted'; count: number }
  | { call: 'receipt'; receipt: DeliveryReceipt }
  | { call: 'inbound'; part: InboundPart };

export class MemoryLinkStore extends EventEmitter<{ call: [StoreCall] }> implements MessageLinkStore {
  readonly parts = new Map<string, StoredPart>();
  readonly calls: StoreCall[] = [];
  /** The workspace numbers inbound parts may go to. */
  readonly numbers = new Set<string>();
  /** How many of the next inbound or receipt calls throw (the database away). */
  failDeliveries = 0;
  private readonly waiters = new Map<string, Set<() => void>>();
  private nextId = 1;

  /** Adds `count` one-part messages from `from` to `to`, waiting; wakes the carrier's link. */
  add(carrier: string, count: number, text = 'Hello'): OutboundPart[] {
    const added: OutboundPart[] = [];
    for (let index = 0; index < count; index += 1) {
      const id = `p${this.nextId++}`;
      const [encoded] = encodeText(`${text} ${id}`, 0);
      const part = {
        id,
        messageId: `m-${id}`,
        from: '+15557650000',
        to: '+15551230000',
        bytes: encoded!.bytes,
        esmClass: encoded!.esmClass,
        dataCoding: encoded!.dataCoding,
        attempts: 0,
      };
      this.parts.set(id, { part, carrier, state: 'waiting', notBefore: 0 });
      added.push(part);
    }
    this.wake(carrier);
    return added;
  }

  state(partId: string): State | undefined {
    return this.parts.get(partId)?.state;
  }

  /** Resolves with the first call (from now) that `match` takes. */
  next<T extends StoreCall>(match: (call: StoreCall) => call is T): Promise<T>;
  next(match: (call: StoreCall) => boolean): Promise<StoreCall>;
  next(match: (call: StoreCall) => boolean): Promise<StoreCall> {
    return new Promise((resolve) => {
      const listener = (call: StoreCall) => {
        if (!match(call)) return;
        this.off('call', listener);
        resolve(call);
      };
      this.on('call', listener);
    });
  }

  /** Resolves once every part of `carrier` is acknowledged or failed. */
  settled(carrier: string): Promise<void> {
    const done = () =>
      [...this.parts.values()].every(
        (p) => p.carrier !== carrier || p.state === 'acknowledged' || p.state === 'failed',
      );
    return new Promise((resolve) => {
      if (done()) return resolve();
      const listener = () => {
        if (!done()) return;
        this.off('call', listener);
        resolve();
      };
      this.on('call', listener);
    });
  }

  private record(call: StoreCall): void {
    this.calls.push(call);
    this.emit('call', call);
  }

  private wake(carrier: string): void {
    for (const wake of this.waiters.get(carrier) ?? []) wake();
  }

  async takeParts(carrier: string, limit: number): Promise<OutboundPart[]> {
    const now = Date.now();
    const taken: OutboundPart[] = [];
    for (const stored of this.parts.values()) {
      if (taken.length >= limit) break;
      if (stored.carrier !== carrier || stored.state !== 'waiting' || stored.notBefore > now) continue;
      stored.state = 'submitted';
      taken.push({ ...stored.part });
      stored.part.attempts += 1;
    }
    return taken;
  }

  async acknowledged(partId: string, carrierMessageId: string): Promise<void> {
    const stored = this.parts.get(partId);
    if (stored !== undefined && stored.state !== 'failed') {
      stored.state = 'acknowledged';
      stored.carrierMessageId = carrierMessageId;
    }
    this.record({ call: 'acknowledged', partId, carrierMessageId });
  }

  async refused(partId: string, error: CarrierError): Promise<void> {
    const stored = this.parts.get(partId);
    if (stored !== undefined) {
      stored.state = 'failed';
      stored.error = error;
    }
    this.record({ call: 'refused', partId, error });
  }

  async retryLater(partId: string, notBefore: Date): Promise<void> {
    const stored = this.parts.get(partId);
    if (stored !== undefined) {
      stored.state = 'waiting';
      stored.notBefore = notBefore.getTime();
      setTimeout(() => this.wake(stored.carrier), Math.max(0, notBefore.getTime() - Date.now()) + 1);
    }
    this.record({ call: 'retryLater', partId, notBefore });
  }

  async requeueSubmitted(carrier: string): Promise<number> {
    let count = 0;
    for (const stored of this.parts.values()) {
      if (stored.carrier === carrier && stored.state === 'submitted') {
        stored.state = 'waiting';
        count += 1;
      }
    }
    this.record({ call: 'requeueSubmitted', count });
    return count;
  }

  async receipt(_carrier: string, receipt: DeliveryReceipt): Promise<void> {
    if (this.failDeliveries > 0) {
      this.failDeliveries -= 1;
      throw new Error('the database is away');
    }
    this.record({ call: 'receipt', receipt });
  }

  async inbound(_carrier: string, part: InboundPart): Promise<InboundOutcome> {
    if (this.failDeliveries > 0) {
      this.failDeliveries -= 1;
      throw new Error('the database is away');
    }
    if (!this.numbers.has(part.to)) return 'unknown_number';
    this.record({ call: 'inbound', part });
    return 'accepted';
  }

  onWaiting(carrier: string, wake: () => void): () => void {
    const waiting = this.waiters.get(carrier) ?? new Set();
    this.waiters.set(carrier, waiting);
    waiting.add(wake);
    return () => waiting.delete(wake);
  }
}
