/**
 * A carrier's SMPP link (docs/messaging.md, "Carriers speak SMPP 3.4", "Receiving"): every engine process runs one
 * per carrier with messaging settings; the one that leads (leadership.ts) connects (TLS when set), binds a
 * transceiver, and keeps it: it answers `enquire_link` and sends its own (a session whose answer does not come in
 * time is dead), sends parts (sender.ts) and takes deliveries (inbound.ts). A connection or bind that fails, or a
 * session that ends, is made again after a backoff (backoff.ts); every session's end puts the parts it left
 * submitted back to waiting (`requeueSubmitted`), and so does every bind (a leader that died left them so). A leader
 * that loses the lead, or a link closed, stops sending and unbinds.
 */
import { EventEmitter } from 'node:events';
import smpp from 'smpp';
import type { MessagingSettings } from '../../core/carriers/messaging.ts';
import type { Log } from '../../core/log.ts';
import type { MessageLinkStore } from '../../core/messages/link-store.ts';
import { type BackoffSettings, reconnectBackoff, reconnectDelayMs } from './backoff.ts';
import { deliver } from './inbound.ts';
import { wait } from '../media/player.ts';
import { CarrierLeadership } from './leadership.ts';
import type { MessagingMetrics } from './metrics.ts';
import { Pacing } from './pacing.ts';
import { Sender, statusName } from './sender.ts';
import { type Header, SmppSession } from './session.ts';

/** The link's times and sizes; tests shorten them. */
export interface LinkTiming {
  backoff: BackoffSettings;
  /** How often the leader sends `enquire_link`. */
  enquireLinkMs: number;
  /** How long any of our requests may go unanswered before the session is dead. */
  responseTimeoutMs: number;
  connectTimeoutMs: number;
  /** How long a throttling answer halves the pace. */
  throttleMs: number;
  /** How long a throttled part waits before it is taken again. */
  retryAfterThrottleMs: number;
  /** Unanswered `submit_sm` at most. */
  window: number;
  leadershipRetryMs: number;
  leadershipCheckMs: number;
}

export const defaultTiming: LinkTiming = {
  backoff: reconnectBackoff,
  enquireLinkMs: 30_000,
  responseTimeoutMs: 10_000,
  connectTimeoutMs: 10_000,
  throttleMs: 10_000,
  retryAfterThrottleMs: 1_000,
  window: 10,
  leadershipRetryMs: 5_000,
  leadershipCheckMs: 10_000,
};

export interface MessagingLinkOptions {
  carrier: string;
  settings: MessagingSettings & { password: string };
  /** Where the leadership lock's connection goes. */
  databaseUrl: string;
  store: MessageLinkStore;
  metrics: MessagingMetrics;
  log: Pick<Log, 'info' | 'warn'>;
  timing?: Partial<LinkTiming>;
  /** In [0, 1): the backoff's jitter. */
  random?: () => number;
  /** Milliseconds: the pace and the throttled parts' retry times. */
  now?: () => number;
}

export interface LinkEvents {
  leading: [];
  /** A transceiver session is bound. */
  bound: [];
  /** The bound session ended (its parts left submitted are requeued by then). */
  unbound: [];
  /** A connection or bind failed; the link tries again after `delayMs`. */
  retrying: [delayMs: number];
}

export class MessagingLink extends EventEmitter<LinkEvents> {
  private readonly timing: LinkTiming;
  private readonly leadership: CarrierLeadership;
  private readonly stopping = new AbortController();
  private running: Promise<void> | undefined;
  private sender: Sender | undefined;
  private readonly random: () => number;
  private readonly now: () => number;

  constructor(private readonly options: MessagingLinkOptions) {
    super();
    this.timing = { ...defaultTiming, ...options.timing };
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
    this.leadership = new CarrierLeadership({
      databaseUrl: options.databaseUrl,
      carrier: options.carrier,
      retryMs: this.timing.leadershipRetryMs,
      checkMs: this.timing.leadershipCheckMs,
    });
  }

  get carrier(): string {
    return this.options.carrier;
  }

  /** Parts sent or about to be and not answered yet, in the bound session (0 without one). */
  get unanswered(): number {
    return this.sender?.unanswered ?? 0;
  }

  start(): void {
    this.running ??= this.run().catch((error: unknown) => {
      this.options.log.warn({ err: error, carrier: this.carrier }, 'the SMPP link stopped');
    });
  }

  /** Stops sending, unbinds, and lets go of the lead. */
  async close(): Promise<void> {
    this.stopping.abort();
    await this.running;
    await this.leadership.release();
  }

  /** Terms of leadership until closed: wait for the lead, keep a session while leading, step down. */
  private async run(): Promise<void> {
    const { metrics, log, carrier } = this.options;
    while (!this.stopping.signal.aborted) {
      if (!(await this.leadership.acquire(this.stopping.signal))) break;
      const term = AbortSignal.any([this.stopping.signal, abortedWhen(this.leadership.lost)]);
      metrics.leader.set({ carrier }, 1);
      log.info({ carrier }, 'this engine leads the carrier’s SMPP link');
      this.emit('leading');
      await this.lead(term);
      metrics.leader.set({ carrier }, 0);
      await this.leadership.release();
      if (this.stopping.signal.aborted) break;
      log.warn({ carrier }, 'the SMPP link’s lead was lost; unbound');
      // A process whose lock connection failed is the least fit to lead: the others, trying every retry period,
      // get two periods to take the lead before it is a candidate again.
      await wait(2 * this.timing.leadershipRetryMs, this.stopping.signal);
    }
  }

  /** Sessions one after the other while `term` lasts, with a backoff between failures. */
  private async lead(term: AbortSignal): Promise<void> {
    let failures = 0;
    while (!term.aborted) {
      const bound = await this.session(term);
      if (term.aborted) break;
      failures = bound ? 1 : failures + 1;
      this.options.metrics.reconnects.inc({ carrier: this.carrier });
      const delayMs = reconnectDelayMs(failures, this.random, this.timing.backoff);
      this.emit('retrying', delayMs);
      await wait(delayMs, term);
    }
  }

  /** One connection: bound and kept until it ends or `term` does. Resolves whether it was bound. */
  private async session(term: AbortSignal): Promise<boolean> {
    const { settings, log, carrier, store, metrics } = this.options;
    let session: SmppSession;
    try {
      session = await SmppSession.connect(settings, this.timing);
    } catch (error) {
      log.warn({ err: error, carrier, host: settings.host, port: settings.port }, 'could not connect to the SMSC');
      return false;
    }
    const ended = new Promise<void>((resolve) => session.once('close', resolve));
    session.on('fault', (fault) => metrics.refused(fault));
    session.on('request', (header, frame, pdu) => this.request(session, header, frame, pdu.command));
    try {
      const answer = await session.request('bind_transceiver', {
        system_id: settings.systemId,
        password: settings.password,
        system_type: settings.systemType,
        interface_version: 0x34,
      });
      if (answer.command_status !== 0) {
        log.warn({ carrier, status: statusName(answer.command_status) }, 'the SMSC refused the bind');
        session.close();
        await ended;
        return false;
      }
    } catch (error) {
      log.warn({ err: error, carrier }, 'the bind was not answered');
      session.destroy();
      await ended;
      return false;
    }
    metrics.sessions.inc({ carrier });
    log.info({ carrier }, 'SMPP transceiver bound');
    const sender = new Sender({
      session,
      carrier,
      store,
      metrics,
      pacing: new Pacing(settings.throughput, this.timing.throttleMs, this.now),
      window: this.timing.window,
      retryAfterMs: this.timing.retryAfterThrottleMs,
      now: this.now,
      log,
      fail: (reason) => {
        log.warn({ carrier, reason }, 'the SMPP session is dropped and made again');
        session.destroy();
      },
    });
    this.sender = sender;
    const enquiring = setInterval(() => {
      // No answer in time: the session is dead whatever the socket says.
      session.request('enquire_link').catch(() => session.destroy());
    }, this.timing.enquireLinkMs);
    const unbind = () => {
      sender.stop();
      void session
        .request('unbind')
        .catch(() => {})
        .finally(() => session.close());
    };
    term.addEventListener('abort', unbind);
    let stopWaiting = () => {};
    this.emit('bound');
    if (term.aborted) unbind();
    else if (!(await this.requeue())) session.destroy();
    else if (!session.closed) {
      stopWaiting = store.onWaiting(carrier, () => sender.wake());
      sender.wake();
    }
    await ended;
    clearInterval(enquiring);
    term.removeEventListener('abort', unbind);
    stopWaiting();
    sender.stop();
    this.sender = undefined;
    metrics.sessions.dec({ carrier });
    await this.requeue();
    log.info({ carrier }, 'SMPP session ended');
    this.emit('unbound');
    return true;
  }

  /** Puts the parts left submitted back to waiting; false when the records could not be reached. */
  private async requeue(): Promise<boolean> {
    try {
      const count = await this.options.store.requeueSubmitted(this.carrier);
      if (count > 0) this.options.log.info({ carrier: this.carrier, count }, 'unanswered parts wait to be sent again');
      return true;
    } catch (error) {
      this.options.log.warn({ err: error, carrier: this.carrier }, 'unanswered parts could not be put back');
      return false;
    }
  }

  /** The carrier's requests: enquire_link, unbind, deliver_sm; anything else is not ours to take. */
  private request(session: SmppSession, header: Header, frame: Buffer, command: string): void {
    const { store, metrics, log, carrier } = this.options;
    switch (command) {
      case 'enquire_link':
        session.respond('enquire_link_resp', header.sequence, 0);
        return;
      case 'unbind':
        session.respond('unbind_resp', header.sequence, 0);
        session.close();
        return;
      case 'deliver_sm':
        void deliver(frame, { carrier, store, metrics, log }).then((status) =>
          session.respond('deliver_sm_resp', header.sequence, status, { message_id: '' }),
        );
        return;
      case 'alert_notification':
        // SMPP 3.4 section 4.12: no response.
        return;
      default:
        metrics.refused('unexpected_command');
        session.respond('generic_nack', header.sequence, smpp.errors.ESME_RINVCMDID ?? 0x03);
    }
  }
}

/** A signal aborted once `promise` settles. */
function abortedWhen(promise: Promise<void>): AbortSignal {
  const controller = new AbortController();
  void promise.finally(() => controller.abort());
  return controller.signal;
}
