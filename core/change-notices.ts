/**
 * Change notices between processes: writers `pg_notify` inside the transaction of their change (PostgreSQL delivers
 * it on commit, never for a rollback), and readers hear them through a `ChangeListener` on a channel. Every listener
 * of one process on one database shares one connection (`NoticeConnection`), which LISTENs on each channel some
 * listener wants: a process holds one LISTEN connection however many parts wait for changes.
 *
 * Caches built on it are only trusted while the connection is up: a listener's `onReset` runs whenever the connection
 * drops (notices may have been missed) and again once it is back and listening, and `listening` says whether to
 * cache at all.
 */
import pg from 'pg';
import type { Queryable } from './database.ts';

export const credentialChannel = 'switchboard_credentials';
/** The API asks the engine that holds a call to act on it: `{ callId, action: 'hangup' }` (docs/calls.md). */
export const callControlChannel = 'switchboard_call_control';
/** A call whose hangup the API asked for has ended: the call id. The API's waiting hangups wake on it (docs/calls.md). */
export const callEndedChannel = 'switchboard_call_ended';
/**
 * A device's offer was made or changed (offered, accepted, declined, withdrawn, expired): `{ deviceId, callId,
 * offerId, state }` as JSON (core/devices/offers.ts). The API's waiting long-polls wake on the device id; the engine
 * that owns the call hears its accept by the call id.
 */
export const offerChannel = 'switchboard_offers';
/**
 * A queue's line or agents changed: `{ queueId, entryId?, kind }` as JSON, kind `entered`, `offered`, `released`,
 * `left` or `agent` (an agent of the queue may be offered a call now). Engines distribute on it and the engine that
 * holds an offered entry rings the agent (core/queues/entries.ts, docs/contact-center.md).
 */
export const queueChannel = 'switchboard_queue';
/**
 * Outbound message parts are waiting for a carrier: the carrier's name. The engine that holds the carrier's SMPP
 * session wakes on it and takes them (core/messages/parts.ts, docs/messaging.md).
 */
export const messagesChannel = 'switchboard_messages';
/**
 * An outbound MMS is waiting for its carrier's media interface: the carrier's name. Every engine's MMS sender wakes on
 * it (engine/messaging/mms.ts); the SMPP links do not.
 */
export const mmsChannel = 'switchboard_mms';
/**
 * Outbound messages left `queued`/`sending` (sent, delivered or failed): their ids, comma-separated (up to 150, one
 * notice per settling group). A send's answer waits on it for the carrier's first word (operation 67's
 * `message_rejected`, docs/messaging.md).
 */
export const messageSettledChannel = 'switchboard_message_settled';

/**
 * A carrier's messaging settings were set, changed or removed (`switchboard carriers messaging`): the carrier's name.
 * Every engine reads the settings again and starts, replaces or closes its SMPP links (engine/messaging/links.ts).
 */
export const carrierMessagingChannel = 'switchboard_carrier_messaging';

/**
 * A voice verification waits for its call: the verification's id. Engines wake on it and one of them takes the call
 * (core/verifications/verifications.ts, engine/verifications/voice.ts).
 */
export const verificationsChannel = 'switchboard_verifications';

/**
 * An event was appended (core/events/outbox.ts): the webhook dispatchers claim its deliveries
 * (engine/delivery/dispatcher.ts). An append skips it while a dispatcher is awake anyway.
 */
export const eventsChannel = 'switchboard_events';

/**
 * A custom resource changed in the PostgreSQL store (core/resources/postgres-store.ts, without a cluster): its
 * watches read what changed.
 */
export const resourcesChannel = 'switchboard_resources';

/**
 * A notice's JSON payload when `schema` (a compiled TypeBox schema) accepts it; undefined for anything else
 * (unreadable JSON, another shape): payloads come from other processes and are checked before use.
 */
export function parseNotice<T>(payload: string, schema: { Check(value: unknown): value is T }): T | undefined {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return undefined;
  }
  return schema.Check(value) ? value : undefined;
}

export async function announce(db: Queryable, channel: string, payload: string): Promise<void> {
  await db.query({ name: 'sb-notify', text: 'SELECT pg_notify($1, $2)', values: [channel, payload] });
}

/** What a listener is told: its channel's notices and its resets. */
interface Subscriber {
  readonly channel: string;
  notice(payload: string): void;
  /** The connection dropped (listening false) or listens on the channel again (listening true). */
  reset(listening: boolean): void;
}

/** Backoff between attempts to reconnect a lost LISTEN connection. */
const firstRetryMs = 500;
const lastRetryMs = 30_000;

/**
 * The one LISTEN connection of this process to one database: it LISTENs on every channel its subscribers want and
 * hands each notice to that channel's subscribers. Lost, it tells every subscriber, reconnects with a backoff and
 * LISTENs again. It ends once its last subscriber leaves (`connections` forgets it then).
 */
class NoticeConnection {
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  /** The channels the current client LISTENs on. */
  private readonly listened = new Set<string>();
  /** The last LISTEN or UNLISTEN sent: the next waits for it. */
  private commands: Promise<void> = Promise.resolve();
  private retryDelay = firstRetryMs;
  private retryTimer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly url: string,
    private readonly log: (message: string) => void,
    private readonly onEmpty: () => void,
  ) {}

  /** Adds a subscriber; resolves once its channel is listened on, or once the first attempt to connect failed. */
  async add(subscriber: Subscriber): Promise<void> {
    let group = this.subscribers.get(subscriber.channel);
    if (group === undefined) {
      group = new Set();
      this.subscribers.set(subscriber.channel, group);
    }
    group.add(subscriber);
    if (this.client === undefined) {
      if (this.retryTimer === undefined) await this.connectOnce();
      // A reconnect already waiting tells this subscriber with the others.
      return;
    }
    const client = this.client;
    try {
      await this.listenOn(client, subscriber.channel);
    } catch (error) {
      // The connection is failing: its `lost` tells every subscriber, this one included, and reconnects.
      this.log(`change notices on ${subscriber.channel} unavailable: ${String(error)}`);
      return;
    }
    if (this.client === client && group.has(subscriber)) subscriber.reset(true);
  }

  async remove(subscriber: Subscriber): Promise<void> {
    const group = this.subscribers.get(subscriber.channel);
    group?.delete(subscriber);
    if (group !== undefined && group.size === 0) {
      this.subscribers.delete(subscriber.channel);
      const client = this.client;
      if (client !== undefined && this.listened.delete(subscriber.channel)) {
        await this.command(client, `UNLISTEN ${client.escapeIdentifier(subscriber.channel)}`).catch(() => {});
      }
    }
    if (this.subscribers.size > 0) return;
    this.ended = true;
    this.onEmpty();
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private connectOnce(): Promise<void> {
    this.connecting ??= this.connect()
      .catch((error: unknown) => this.retry(error))
      .finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: 'switchboard-listener' });
    client.on('notification', (message) => this.deliver(message.channel, message.payload ?? ''));
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    try {
      await client.connect();
      this.listened.clear();
      // Subscribers may come while it LISTENs: it is ready once no channel wanted is left out.
      for (;;) {
        const missing = [...this.subscribers.keys()].filter((channel) => !this.listened.has(channel));
        if (missing.length === 0) break;
        for (const channel of missing) await this.listenOn(client, channel);
      }
    } catch (error) {
      client.end().catch(() => {});
      throw error;
    }
    if (this.ended) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryDelay = firstRetryMs;
    for (const subscriber of this.all()) subscriber.reset(true);
  }

  private async listenOn(client: pg.Client, channel: string): Promise<void> {
    if (this.listened.has(channel)) return;
    await this.command(client, `LISTEN ${client.escapeIdentifier(channel)}`);
    this.listened.add(channel);
  }

  /** Runs LISTEN and UNLISTEN one at a time on the connection (pg's client takes one query at a time). */
  private command(client: pg.Client, text: string): Promise<void> {
    const run = this.commands.then(async () => {
      await client.query(text);
    });
    this.commands = run.catch(() => {});
    return run;
  }

  private deliver(channel: string, payload: string): void {
    for (const subscriber of [...(this.subscribers.get(channel) ?? [])]) {
      try {
        subscriber.notice(payload);
      } catch (error) {
        // One listener's failure neither stops the others nor the connection.
        this.log(`a change notice on ${channel} could not be taken: ${String(error)}`);
      }
    }
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listened.clear();
    client.end().catch(() => {});
    for (const subscriber of this.all()) subscriber.reset(false);
    this.retry(error);
  }

  private retry(error: unknown): void {
    if (this.ended || this.retryTimer !== undefined) return;
    this.log(`change notices on ${[...this.subscribers.keys()].join(', ')} unavailable, retrying: ${String(error)}`);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connectOnce();
    }, this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(this.retryDelay * 2, lastRetryMs);
  }

  private all(): Subscriber[] {
    return [...this.subscribers.values()].flatMap((group) => [...group]);
  }
}

/** This process's LISTEN connections, one per database. */
const connections = new Map<string, NoticeConnection>();

/**
 * Hears one channel's notices on this process's LISTEN connection to `url`. `onReset` runs when the connection drops
 * and again once it listens on the channel (at start too): whatever was read from the notices may be stale then.
 */
export class ChangeListener implements Subscriber {
  private connection: NoticeConnection | undefined;
  private closed = false;
  listening = false;

  constructor(
    private readonly url: string,
    readonly channel: string,
    private readonly onNotice: (payload: string) => void,
    private readonly onReset: () => void,
    private readonly log: (message: string) => void,
  ) {}

  /** Resolves once the channel is listened on, or once a first attempt failed (it goes on retrying). */
  async start(): Promise<void> {
    if (this.closed || this.connection !== undefined) return;
    let connection = connections.get(this.url);
    if (connection === undefined) {
      const made = new NoticeConnection(this.url, this.log, () => {
        if (connections.get(this.url) === made) connections.delete(this.url);
      });
      connection = made;
      connections.set(this.url, made);
    }
    this.connection = connection;
    await connection.add(this);
  }

  notice(payload: string): void {
    if (!this.closed) this.onNotice(payload);
  }

  reset(listening: boolean): void {
    if (this.closed) return;
    if (!listening) this.listening = false;
    this.onReset();
    if (listening) this.listening = true;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.listening = false;
    const connection = this.connection;
    this.connection = undefined;
    await connection?.remove(this);
  }
}
