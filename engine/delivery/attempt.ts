/**
 * One delivery attempt (spec section 6): resolve the endpoint's host now (every attempt, so a name that turns to a
 * private address is caught), refuse any non-public address unless private networks are allowed, connect to the
 * checked address itself (the pinned `lookup`, with the host name as TLS server name), and POST the event's stored
 * JSON byte for byte with its signatures. Success is a 2xx status within the attempt's time limit (10 s, counted
 * from the start, DNS and connection included); a redirect is never followed and counts as a failure. At most
 * `maxAnswerBytes` of the answer body are read, for the failure message.
 */
import type { LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { refusedAddresses } from '../../core/webhooks/address.ts';
import { signatureHeader } from '../../core/webhooks/signature.ts';
import { pinnedLookup } from '../../core/webhooks/pinned-lookup.ts';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';

export const defaultAttemptTimeoutMs = 10_000;
const maxAnswerBytes = 4096;
const maxErrorLength = 500;

export interface DeliveryRequest {
  url: string;
  /** Live signing secrets in the clear: the current one first, then the previous one during a rotation overlap. */
  secrets: readonly string[];
  eventId: string;
  eventType: string;
  /** The event JSON exactly as stored; sent and signed byte for byte. */
  payload: string;
  /** Unix seconds of this attempt (x-service-timestamp). */
  timestamp: number;
}

export interface AttemptSettings {
  agent: https.Agent;
  allowPrivateNetworks: boolean;
  timeoutMs: number;
}

export type AttemptOutcome = 'success' | 'http_error' | 'redirect' | 'timeout' | 'connection_error' | 'refused';

export interface AttemptResult {
  outcome: AttemptOutcome;
  /** The HTTP status, when an answer came. */
  status?: number;
  /** Why the attempt failed (the lane's last_error); absent on success. */
  error?: string;
}

/** A keep-alive agent for the attempts of one dispatcher (TLS trusts the system store and NODE_EXTRA_CA_CERTS). */
export function deliveryAgent(): https.Agent {
  return new https.Agent({ keepAlive: true, keepAliveMsecs: 1_000, maxFreeSockets: 256, scheduling: 'lifo' });
}

function clip(text: string, length = maxErrorLength): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > length ? `${flat.slice(0, length - 1)}…` : flat;
}

function seconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/** Rejects after `ms` (the part of the attempt's time limit left), for steps that cannot be cancelled. */
function withinTime<T>(work: Promise<T>, ms: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), Math.max(0, ms));
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

function answerResult(status: number, location: string | undefined, body: string): AttemptResult {
  if (status >= 200 && status < 300) return { outcome: 'success', status };
  if (status >= 300 && status < 400) {
    const target = location === undefined ? '' : ` to ${clip(location, 200)}`;
    return { outcome: 'redirect', status, error: `redirect not followed: HTTP ${status}${target}` };
  }
  const text = clip(body, 200);
  return { outcome: 'http_error', status, error: text === '' ? `HTTP ${status}` : `HTTP ${status}: ${text}` };
}

/** Retried once at once: a kept-alive socket the receiver closed just as the request went out. */
function staleSocket(error: NodeJS.ErrnoException, request: { reusedSocket: boolean }): boolean {
  return request.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
}

export async function attemptDelivery(delivery: DeliveryRequest, settings: AttemptSettings): Promise<AttemptResult> {
  assertNotHoldingConnection('a webhook delivery attempt');
  const deadline = Date.now() + settings.timeoutMs;
  const timedOut: AttemptResult = {
    outcome: 'timeout',
    error: `timeout: no answer within ${seconds(settings.timeoutMs)}`,
  };
  let url: URL;
  try {
    url = new URL(delivery.url);
  } catch {
    return { outcome: 'refused', error: 'refused: the endpoint URL is not a valid URL' };
  }
  if (url.protocol !== 'https:') return { outcome: 'refused', error: `refused: ${url.protocol} URLs are not called` };
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;

  let addresses: LookupAddress[];
  try {
    const resolved = await withinTime(lookup(host, { all: true, verbatim: true }), deadline - Date.now());
    if (resolved === 'timeout') return timedOut;
    addresses = resolved;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return { outcome: 'connection_error', error: `dns: ${host} does not resolve (${code})` };
  }
  if (addresses.length === 0) return { outcome: 'connection_error', error: `dns: ${host} has no address` };
  const refused = settings.allowPrivateNetworks ? undefined : refusedAddresses(host, addresses);
  if (refused !== undefined) return { outcome: 'refused', error: refused };

  const body = Buffer.from(delivery.payload, 'utf8');
  const timestamp = String(delivery.timestamp);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.length),
    'user-agent': 'switchboard-webhooks',
    'x-service-timestamp': timestamp,
    'x-service-signature': signatureHeader(delivery.secrets, timestamp, delivery.payload),
    'x-service-event-id': delivery.eventId,
    'x-service-event-type': delivery.eventType,
  };

  const send = (retried: boolean): Promise<AttemptResult> =>
    new Promise((resolve) => {
      let settled = false;
      let status: number | undefined;
      let location: string | undefined;
      const chunks: Buffer[] = [];
      let received = 0;
      const answered = () => answerResult(status as number, location, Buffer.concat(chunks).toString('utf8'));
      const finish = (result: AttemptResult | 'retry') => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (result === 'retry') resolve(send(true));
        else resolve(result);
      };
      const request = https.request({
        protocol: 'https:',
        hostname: host,
        port: url.port === '' ? 443 : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers,
        agent: settings.agent,
        lookup: pinnedLookup(addresses),
        ...(isIP(host) === 0 ? { servername: host } : {}),
      });
      const timer = setTimeout(
        () => {
          // An answer whose status came in time counts by its status, however slowly its body trickles.
          finish(status === undefined ? timedOut : answered());
          request.destroy();
        },
        Math.max(0, deadline - Date.now()),
      );
      request.on('response', (response: IncomingMessage) => {
        status = response.statusCode ?? 0;
        const header = response.headers.location;
        location = Array.isArray(header) ? header[0] : header;
        response.on('data', (chunk: Buffer) => {
          if (received < maxAnswerBytes) chunks.push(chunk.subarray(0, maxAnswerBytes - received));
          received += chunk.length;
          if (received >= maxAnswerBytes) {
            // Enough to explain a failure: drop the rest (and the connection) rather than read it.
            finish(answered());
            response.destroy();
          }
        });
        response.on('end', () => finish(answered()));
        response.on('error', () => finish(answered()));
        response.on('close', () => finish(answered()));
      });
      request.on('error', (error: NodeJS.ErrnoException) => {
        if (status !== undefined) {
          finish(answered());
          return;
        }
        if (!retried && staleSocket(error, request) && Date.now() < deadline) {
          finish('retry');
          return;
        }
        finish({ outcome: 'connection_error', error: `connection failed: ${clip(error.message)}` });
      });
      request.end(body);
    });

  return send(false);
}
