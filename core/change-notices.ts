/**
 * Change notices between processes: a dedicated connection LISTENs on a channel, and writers `pg_notify` inside the
 * transaction of their change (PostgreSQL delivers it on commit, never for a rollback). Caches built on it are only
 * trusted while the connection is up: `onReset` runs whenever it drops (notices may have been missed) and again
 * once it is back, and `listening` says whether to cache at all.
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

export class ChangeListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retryDelay = 500;
  private retryTimer: NodeJS.Timeout | undefined;
  listening = false;

  constructor(
    private readonly url: string,
    private readonly channel: string,
    private readonly onNotice: (payload: string) => void,
    private readonly onReset: () => void,
    private readonly log: (message: string) => void,
  ) {}

  async start(): Promise<void> {
    await this.connect().catch((error: unknown) => this.retry(error));
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: 'switchboard-listener' });
    client.on('notification', (message) => {
      if (message.channel === this.channel) this.onNotice(message.payload ?? '');
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    await client.connect();
    await client.query(`LISTEN ${this.channel}`);
    if (this.closed) {
      await client.end();
      return;
    }
    this.client = client;
    this.retryDelay = 500;
    this.onReset();
    this.listening = true;
  }

  private lost(client: pg.Client, error: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listening = false;
    this.onReset();
    client.end().catch(() => {});
    if (!this.closed) this.retry(error);
  }

  private retry(error: unknown): void {
    if (this.closed) return;
    this.log(`change notices on ${this.channel} unavailable, retrying: ${String(error)}`);
    this.retryTimer = setTimeout(() => {
      this.connect().catch((next: unknown) => this.retry(next));
    }, this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(this.retryDelay * 2, 30_000);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listening = false;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
