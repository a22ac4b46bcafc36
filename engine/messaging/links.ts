/**
 * The engine's messaging work (docs/messaging.md): one `MessagingLink` per carrier with messaging settings, and the
 * message records' sweep (sweep.ts). The carriers' settings (`messagingCarriers`, passwords opened with the carrier
 * secrets key) are read at start and again whenever `switchboard carriers messaging` announces a change on
 * `switchboard_carrier_messaging`, whenever that LISTEN connection is lost or regained (a notice may have been
 * missed), and every `rereadMs` in any case (a command run against another database URL, or a notice lost for good):
 * a carrier that gained settings gets a link, one whose settings changed gets its link closed (unbound, its lead let
 * go) and a new one started with the new settings, one that lost them gets its link closed. Re-reads run one at a
 * time; one that fails is logged and the links stay as they are.
 */
import { EventEmitter } from 'node:events';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { type MessagingSettings, messagingCarriers } from '../../core/carriers/messaging.ts';
import { carrierMessagingChannel, ChangeListener } from '../../core/change-notices.ts';
import type { Log } from '../../core/log.ts';
import type { MessageLinkStore } from '../../core/messages/link-store.ts';
import { type LinkTiming, MessagingLink } from './link.ts';
import { MessagingMetrics } from './metrics.ts';
import { MessagingSweep } from './sweep.ts';

export interface MessagingLinksOptions {
  pool: pg.Pool;
  /** Each link's leadership lock takes a connection of its own here, and so does the settings' LISTEN. */
  databaseUrl: string;
  /** The key carriers' secrets are sealed with (`context.keys.carrierSecrets`). */
  carrierSecrets: Uint8Array;
  store: MessageLinkStore;
  log: Pick<Log, 'info' | 'warn'>;
  /** Where the links' metrics are registered; or the metrics themselves, when several starts share a registry. */
  metrics: Registry | MessagingMetrics;
  timing?: Partial<LinkTiming>;
  /** How often the settings are read again without a notice (default 5 minutes). */
  rereadMs?: number;
  /** How often the records are swept (default a minute); null: not here (tests of the links alone). */
  sweepEveryMs?: number | null;
}

/** What a re-read changed, by carrier name. */
export interface LinksChange {
  started: string[];
  replaced: string[];
  closed: string[];
}

export interface MessagingLinks extends EventEmitter<{ changed: [LinksChange] }> {
  /** The running links, by carrier name order. */
  readonly links: readonly MessagingLink[];
  /** Reads the settings again and starts, replaces or closes links to match (one re-read at a time). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

type Settings = MessagingSettings & { password: string };

/** Settings compared by value, whatever order their fields were stored in. */
function sameSettings(a: Settings, b: Settings): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof Settings>;
  return [...keys].every((key) => JSON.stringify(a[key]) === JSON.stringify(b[key]));
}

class Links extends EventEmitter<{ changed: [LinksChange] }> implements MessagingLinks {
  private readonly running = new Map<string, { link: MessagingLink; settings: Settings }>();
  private readonly metrics: MessagingMetrics;
  private chain: Promise<void> = Promise.resolve();
  private closed = false;
  private listener: ChangeListener | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweep: MessagingSweep | undefined;

  constructor(private readonly options: MessagingLinksOptions) {
    super();
    this.metrics =
      options.metrics instanceof MessagingMetrics ? options.metrics : new MessagingMetrics(options.metrics);
  }

  get links(): readonly MessagingLink[] {
    return [...this.running.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, { link }]) => link);
  }

  async start(): Promise<void> {
    // The first read's failure fails the start, as it did when links were read once.
    await this.apply(await messagingCarriers(this.options.pool, this.options.carrierSecrets));
    const refreshSoon = () => void this.refresh();
    this.listener = new ChangeListener(
      this.options.databaseUrl,
      carrierMessagingChannel,
      refreshSoon,
      refreshSoon,
      (m) => this.options.log.warn({}, m),
    );
    await this.listener.start();
    this.timer = setInterval(refreshSoon, this.options.rereadMs ?? 300_000);
    this.timer.unref();
    if (this.options.sweepEveryMs !== null) {
      this.sweep = new MessagingSweep({
        pool: this.options.pool,
        log: this.options.log,
        ...(this.options.sweepEveryMs === undefined ? {} : { everyMs: this.options.sweepEveryMs }),
      });
      this.sweep.start();
    }
  }

  refresh(): Promise<void> {
    const next = this.chain.then(async () => {
      if (this.closed) return;
      try {
        await this.apply(await messagingCarriers(this.options.pool, this.options.carrierSecrets));
      } catch (error) {
        this.options.log.warn({ err: error }, 'carriers’ messaging settings could not be read again; links unchanged');
      }
    });
    this.chain = next;
    return next;
  }

  /** Starts, replaces and closes links so that they match `carriers`. */
  private async apply(carriers: Array<{ name: string; settings: Settings }>): Promise<void> {
    const wanted = new Map(carriers.map(({ name, settings }) => [name, settings]));
    const change: LinksChange = { started: [], replaced: [], closed: [] };
    for (const [name, { link, settings }] of [...this.running]) {
      const now = wanted.get(name);
      if (now !== undefined && sameSettings(now, settings)) continue;
      this.running.delete(name);
      // Closed before its successor starts: it unbinds and lets go of the lead the new one takes.
      await link.close();
      (now === undefined ? change.closed : change.replaced).push(name);
    }
    for (const [name, settings] of wanted) {
      if (this.running.has(name) || this.closed) continue;
      const link = new MessagingLink({
        carrier: name,
        settings,
        databaseUrl: this.options.databaseUrl,
        store: this.options.store,
        metrics: this.metrics,
        log: this.options.log,
        ...(this.options.timing === undefined ? {} : { timing: this.options.timing }),
      });
      this.running.set(name, { link, settings });
      link.start();
      if (!change.replaced.includes(name)) change.started.push(name);
    }
    if (change.started.length + change.replaced.length + change.closed.length === 0) return;
    this.options.log.info({ ...change }, 'SMPP links changed to match the carriers’ messaging settings');
    this.emit('changed', change);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.listener?.close();
    await this.chain;
    await this.sweep?.close();
    const links = [...this.running.values()].map(({ link }) => link);
    this.running.clear();
    await Promise.all(links.map((link) => link.close()));
  }
}

export async function startMessagingLinks(options: MessagingLinksOptions): Promise<MessagingLinks> {
  const links = new Links(options);
  try {
    await links.start();
  } catch (error) {
    await links.close();
    throw error;
  }
  return links;
}
