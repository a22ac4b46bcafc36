/**
 * Sending MMS through carriers' HTTP media interfaces (docs/messaging.md, "MMS"). Every engine runs one sender: it
 * takes due MMS from the records (FOR UPDATE SKIP LOCKED, so engines never take the same one at once; a lease brings
 * one back if its engine stopped mid-POST: at least once, nothing lost on a restart) and POSTs
 * `{ from, to, text, media: [{ url, contentType }] }` to the carrier's MMS URL with its SMPP system id and password as
 * HTTP Basic. A 2xx answer is `sent` (with the carrier's `id` from its JSON, which receipts and status callbacks name);
 * 408, 429, 5xx, a timeout or no connection is tried again after 2 s doubling to 5 min, and after `maxAttempts`
 * tries it is `failed` (`mms_unreachable`); any other answer (4xx, a redirect) is the carrier's refusal, `failed`
 * with its error. Woken by the send's notice (`switchboard_messages`) and by a poll (retries coming due, leases run
 * out).
 */
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import type { MmsAccount } from '../../core/carriers/messaging.ts';
import { ChangeListener, mmsChannel } from '../../core/change-notices.ts';
import type { CarrierError } from '../../core/messages/link-store.ts';
import type { MmsPart, MmsQueue } from '../../core/messages/mms.ts';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';

export interface MmsSenderOptions {
  queue: MmsQueue;
  /** The carrier's MMS URL and account, or undefined when it has none (now). */
  account: (carrier: string) => Promise<MmsAccount | undefined>;
  /** For the send's notices; without it only the poll wakes the sender. */
  databaseUrl?: string;
  log: (message: string) => void;
  /** Each POST's limit (15 s). */
  timeoutMs?: number;
  pollMs?: number;
  /** POSTs at once. */
  concurrency?: number;
  maxAttempts?: number;
}

/** What the carrier's answer means for the MMS. */
export type MmsOutcome =
  | { kind: 'sent'; carrierMessageId: string | null }
  | { kind: 'refused'; error: CarrierError }
  | { kind: 'retry'; reason: string };

/** The carrier's id as receipts can name it (SMPP's message_id: 1 to 64 printable ASCII characters). */
const carrierIdPattern = /^[\x20-\x7e]{1,64}$/;
const maxAnswerBytes = 64 * 1024;

export function retryDelayMs(attempts: number): number {
  return Math.min(2_000 * 2 ** Math.min(attempts, 20), 300_000);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the carrier's JSON, read field by field
function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The carrier's error from its answer: `{ error: { code, message } }`, `{ error }`, `{ message }` or its text. */
function carrierError(status: number, text: string): CarrierError {
  const body = parse(text);
  const error = body?.error;
  const code = typeof error?.code === 'string' && error.code !== '' ? error.code : `HTTP_${status}`;
  const message =
    typeof error?.message === 'string'
      ? error.message
      : typeof error === 'string'
        ? error
        : typeof body?.message === 'string'
          ? body.message
          : text.trim() || `HTTP ${status}`;
  return { code: code.slice(0, 100), message: message.slice(0, 500) };
}

export function outcomeOf(status: number, text: string): MmsOutcome {
  if (status >= 200 && status < 300) {
    const id = parse(text)?.id;
    const carrierMessageId = typeof id === 'number' ? String(id) : id;
    return {
      kind: 'sent',
      carrierMessageId:
        typeof carrierMessageId === 'string' && carrierIdPattern.test(carrierMessageId) ? carrierMessageId : null,
    };
  }
  if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', reason: `HTTP ${status}` };
  return { kind: 'refused', error: carrierError(status, text) };
}

/** POSTs one MMS to the carrier's media interface; never throws. */
export function postMms(account: MmsAccount, part: MmsPart, timeoutMs: number): Promise<MmsOutcome> {
  assertNotHoldingConnection("a post to the carrier's MMS interface");
  const body = Buffer.from(JSON.stringify({ from: part.from, to: part.to, text: part.text, media: part.media }));
  const credentials = Buffer.from(`${account.systemId}:${account.password}`).toString('base64');
  return new Promise((resolve) => {
    let settled = false;
    const finish = (outcome: MmsOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request.destroy();
      resolve(outcome);
    };
    let request: ReturnType<typeof https.request>;
    try {
      request = https.request(account.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': String(body.length),
          authorization: `Basic ${credentials}`,
          'user-agent': 'switchboard-mms',
        },
        agent: false,
      });
    } catch (error) {
      resolve({ kind: 'retry', reason: `the MMS URL cannot be called: ${(error as Error).message}` });
      return;
    }
    const timer = setTimeout(() => finish({ kind: 'retry', reason: `no answer within ${timeoutMs} ms` }), timeoutMs);
    request.on('response', (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let received = 0;
      const answered = () =>
        finish(outcomeOf(response.statusCode ?? 0, Buffer.concat(chunks).toString('utf8').slice(0, maxAnswerBytes)));
      response.on('data', (chunk: Buffer) => {
        if (received < maxAnswerBytes) chunks.push(chunk);
        received += chunk.length;
      });
      response.on('end', answered);
      response.on('error', answered);
      response.on('close', answered);
    });
    request.on('error', (error) => finish({ kind: 'retry', reason: `connection failed: ${error.message}` }));
    request.end(body);
  });
}

export class MmsSender {
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly maxAttempts: number;
  private listener: ChangeListener | undefined;
  private poll: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(private readonly options: MmsSenderOptions) {
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.concurrency = options.concurrency ?? 4;
    this.maxAttempts = options.maxAttempts ?? 8;
  }

  async start(): Promise<void> {
    if (this.options.databaseUrl !== undefined) {
      const wake = () => this.wake();
      this.listener = new ChangeListener(this.options.databaseUrl, mmsChannel, wake, wake, this.options.log);
      await this.listener.start();
    }
    this.poll = setInterval(() => this.wake(), this.options.pollMs ?? 2_000);
    this.poll.unref();
    this.wake();
  }

  /** Takes and sends what is due, until nothing is; a wake while it runs makes it look once more. */
  wake(): void {
    if (this.closed) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.drain()
      .catch((error: unknown) => this.options.log(`MMS sending stopped for now: ${String(error)}`))
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  private async drain(): Promise<void> {
    for (;;) {
      this.again = false;
      if (this.closed) return;
      const parts = await this.options.queue.take(this.concurrency);
      if (parts.length === 0) return;
      await Promise.all(parts.map((part) => this.send(part)));
    }
  }

  private async send(part: MmsPart): Promise<void> {
    try {
      const account = await this.options.account(part.carrier);
      if (account === undefined) {
        await this.options.queue.refused(part.id, {
          code: 'mms_unavailable',
          message: `carrier ${part.carrier} takes no MMS (it has no MMS URL)`,
        });
        return;
      }
      const outcome = await postMms(account, part, this.timeoutMs);
      if (outcome.kind === 'sent') await this.options.queue.sent(part.id, outcome.carrierMessageId);
      else if (outcome.kind === 'refused') await this.options.queue.refused(part.id, outcome.error);
      else if (part.attempts + 1 >= this.maxAttempts) {
        await this.options.queue.refused(part.id, {
          code: 'mms_unreachable',
          message: `the carrier's MMS interface did not take it in ${this.maxAttempts} tries: ${outcome.reason}`,
        });
      } else {
        this.options.log(`MMS ${part.messageId} to carrier ${part.carrier} will be tried again: ${outcome.reason}`);
        await this.options.queue.retryLater(part.id, new Date(Date.now() + retryDelayMs(part.attempts)));
      }
    } catch (error) {
      // The records failed: the MMS stays submitted and is taken again when its lease runs out.
      this.options.log(`MMS ${part.messageId} could not be recorded: ${String(error)}`);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.poll);
    await this.running;
    await this.listener?.close();
  }
}
