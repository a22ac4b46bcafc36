/**
 * The engine as a SIP registrar (RFC 3261 section 10.3; docs/phones.md, "SIP devices and the registrar"). sip.js's
 * core hands each REGISTER to its delegate's `onRegister`; this answers it:
 *
 * - a source address or username with too many failed attempts in the window: 503 with Retry-After, before any work;
 * - no credentials for our realm (or an algorithm we did not offer): 401 with one challenge per algorithm, SHA-256
 *   first (RFC 8760), a stateless nonce (digest.ts) and qop=auth;
 * - credentials that do not parse, or whose digest `uri` is not the Request-URI: 400; a nonce not ours, an unknown
 *   username or a wrong response: 403, counted as a failure; a right response on a stale nonce: 401 with
 *   `stale=true`; a nonce count already seen: 401;
 * - then the contacts: `*` with `Expires: 0` removes every binding; each contact's `expires` parameter, else the
 *   Expires header, else the maximum; 0 removes it, below the minimum is 423 with Min-Expires, above the maximum is
 *   cut to it; 200 lists the device's contacts with the seconds each has left.
 *
 * The binding records the packet's source (INVITEs go there, never to the Contact's host). Failures are counted per
 * source address and per username in a fixed window; a success clears both counts.
 */
import { createHash, hkdfSync } from 'node:crypto';
import type pg from 'pg';
import { Counter, type Registry } from 'prom-client';
import { Grammar, type IncomingRegisterRequest, type URI } from 'sip.js/lib/core/index.js';
import { NameAddrHeader } from 'sip.js/lib/grammar/index.js';
import { type Clock, systemClock } from '../../core/clock.ts';
import { FailureLimiter } from '../../core/failure-limiter.ts';
import type { Log } from '../../core/log.ts';
import { applyRegistration, sweepExpiredSipBindings } from '../../core/devices/sip-bindings.ts';
import { sipCredentialsOf } from '../../core/devices/sip-credentials.ts';
import { contactWildcardHeader, dialedHeader, type Source } from './addressing.ts';
import { engineUser } from './sip-endpoint.ts';
import {
  challengeHeaders,
  checkNonce,
  type DigestAlgorithm,
  digestAlgorithms,
  digestMatches,
  makeNonce,
  parseDigestCredentials,
} from './digest.ts';

/**
 * The limiter's key for a username as sent: a hash, so that 100,000 made-up usernames of a few kilobytes each (a
 * storm from spoofed sources) keep the limiter's memory at a few megabytes.
 */
const usernameKey = (username: string) => `username:${createHash('sha256').update(username).digest('base64url')}`;

export interface RegistrarOptions {
  pool: pg.Pool;
  /** SigningKeys.sipPasswords: opens the devices' sealed passwords; the nonce key is derived from it. */
  sipPasswords: Uint8Array;
  /** This engine's id (the bindings' engine_owner). */
  owner: string;
  registry: Registry;
  log: Pick<Log, 'info' | 'warn'>;
  clock?: Clock;
  /** The challenges offered, in order of preference (default SHA-256, then MD5). */
  algorithms?: readonly DigestAlgorithm[];
  /** Shortest registration taken (423 below), seconds. Default 60. */
  minExpires?: number;
  /** Longest registration kept, and the one given when none is asked, seconds. Default 3600. */
  maxExpires?: number;
  /** Failed attempts per source address and per username in a window before 503. Default 10 a minute. */
  failureLimit?: number;
  failureWindowMs?: number;
}

/** The realm of every challenge: one name for the whole service, whatever host a phone registers at. */
export const registrarRealm = 'switchboard';
/** An Authorization value with our realm (others, a proxy's or another realm's, are not ours to check). */
const ourRealm = new RegExp(`realm\\s*=\\s*"?${registrarRealm}"?\\s*(,|$)`, 'i');
/** How long a nonce may be answered before it is stale. */
const nonceLifetimeMs = 300_000;
/** Contacts one device may keep. */
const maxContacts = 10;
const sweepEveryMs = 60_000;

type Outcome = 'registered' | 'removed' | 'challenged' | 'failed' | 'limited' | 'invalid' | 'error';

export class Registrar {
  private readonly nonceKey: Uint8Array;
  private readonly clock: Clock;
  private readonly algorithms: readonly DigestAlgorithm[];
  private readonly minExpires: number;
  private readonly maxExpires: number;
  private readonly limiter: FailureLimiter;
  private readonly outcomes: Counter<'outcome'>;
  /** The highest nonce count seen per nonce, while the nonce lives (this process only). */
  private readonly nonceCounts = new Map<string, { nc: number; seenAt: number }>();
  private readonly sweep: NodeJS.Timeout;

  constructor(private readonly options: RegistrarOptions) {
    this.nonceKey = new Uint8Array(hkdfSync('sha256', options.sipPasswords, 'switchboard', 'SIP registrar nonces', 32));
    this.clock = options.clock ?? systemClock;
    this.algorithms = options.algorithms ?? digestAlgorithms;
    this.minExpires = options.minExpires ?? 60;
    this.maxExpires = options.maxExpires ?? 3600;
    this.limiter = new FailureLimiter(options.failureLimit ?? 10, options.failureWindowMs ?? 60_000);
    this.outcomes = new Counter({
      name: 'switchboard_sip_registers_total',
      help: 'REGISTER requests answered, by outcome (failed: wrong credentials; limited: refused for too many failures)',
      labelNames: ['outcome'],
      registers: [options.registry],
    });
    this.sweep = setInterval(() => {
      sweepExpiredSipBindings(options.pool, this.clock.now()).catch((error: unknown) =>
        options.log.warn({ err: error }, 'expired SIP bindings could not be swept'),
      );
    }, sweepEveryMs);
    this.sweep.unref();
  }

  onRegister(request: IncomingRegisterRequest, source: Source): void {
    this.handle(request, source).catch((error: unknown) => {
      this.options.log.warn({ err: error, from: source.address }, 'REGISTER failed');
      this.answer(request, 'error', { statusCode: 500 });
    });
  }

  close(): void {
    clearInterval(this.sweep);
  }

  private answer(
    request: IncomingRegisterRequest,
    outcome: Outcome,
    response: { statusCode: number; reasonPhrase?: string; extraHeaders?: string[] },
  ): void {
    this.outcomes.inc({ outcome });
    try {
      if (response.statusCode === 200) request.accept(response);
      else request.reject(response);
    } catch {
      // The transaction is gone (it timed out while the database answered): nothing to answer.
    }
  }

  private challenge(request: IncomingRegisterRequest, source: Source, now: Date, stale = false): void {
    const nonce = makeNonce(this.nonceKey, now, source.address);
    this.answer(request, 'challenged', {
      statusCode: 401,
      extraHeaders: challengeHeaders(registrarRealm, nonce, this.algorithms, stale),
    });
  }

  private limited(request: IncomingRegisterRequest, retryAfter: number): void {
    this.answer(request, 'limited', {
      statusCode: 503,
      reasonPhrase: 'Too Many Failed Attempts',
      extraHeaders: [`Retry-After: ${retryAfter}`],
    });
  }

  private failed(request: IncomingRegisterRequest, source: Source, username: string, now: Date): void {
    this.limiter.fail(`address:${source.address}`, now.getTime());
    this.limiter.fail(usernameKey(username), now.getTime());
    this.answer(request, 'failed', { statusCode: 403 });
  }

  private async handle(request: IncomingRegisterRequest, source: Source): Promise<void> {
    const now = this.clock.now();
    const message = request.message;
    const byAddress = this.limiter.blocked(`address:${source.address}`, now.getTime());
    if (byAddress !== undefined) return this.limited(request, byAddress);
    const ours = message.getHeaders('authorization').find((value) => ourRealm.test(value));
    if (ours === undefined) return this.challenge(request, source, now);
    const credentials = parseDigestCredentials(ours);
    if (credentials === undefined) {
      return this.answer(request, 'invalid', { statusCode: 400, reasonPhrase: 'Malformed Authorization' });
    }
    if (credentials.realm !== registrarRealm || !this.algorithms.includes(credentials.algorithm)) {
      return this.challenge(request, source, now);
    }
    // The response signs `uri`: it must name the resource of the Request-Line (RFC 7616 section 3.4.6), or the
    // credentials were made for another request.
    if (!sameResource(credentials.uri, message.ruri, message.getHeader(dialedHeader))) {
      return this.answer(request, 'invalid', { statusCode: 400, reasonPhrase: 'Digest URI Mismatch' });
    }
    const byUsername = this.limiter.blocked(usernameKey(credentials.username), now.getTime());
    if (byUsername !== undefined) return this.limited(request, byUsername);
    const nonce = checkNonce(this.nonceKey, credentials.nonce, now, source.address, nonceLifetimeMs);
    if (nonce === 'invalid') return this.failed(request, source, credentials.username, now);
    const account = await sipCredentialsOf(this.options.pool, this.options.sipPasswords, credentials.username);
    if (account === undefined || !digestMatches(credentials, 'REGISTER', account.password)) {
      return this.failed(request, source, credentials.username, now);
    }
    this.limiter.reset(`address:${source.address}`);
    this.limiter.reset(usernameKey(credentials.username));
    if (nonce === 'stale' || !this.freshCount(credentials.nonce, credentials.nc, now)) {
      return this.challenge(request, source, now, nonce === 'stale');
    }
    const contacts = this.contactsOf(request);
    if (contacts === 'bad') return this.answer(request, 'invalid', { statusCode: 400, reasonPhrase: 'Bad Contact' });
    if (contacts === 'too_brief') {
      return this.answer(request, 'invalid', { statusCode: 423, extraHeaders: [`Min-Expires: ${this.minExpires}`] });
    }
    // A query (no contact) lists the bindings; removing is when every contact named goes.
    const removing =
      contacts === 'all' || (contacts !== 'query' && contacts.every((contact) => contact.expiresSecs === 0));
    const outcome = removing ? 'removed' : 'registered';
    const named = contacts === 'query' ? [] : contacts;
    return this.bound(request, credentials.username, account.deviceId, source, now, outcome, named);
  }

  private async bound(
    request: IncomingRegisterRequest,
    username: string,
    deviceId: string,
    source: Source,
    now: Date,
    outcome: Outcome,
    contacts: { uri: string; expiresSecs: number }[] | 'all',
  ): Promise<void> {
    const message = request.message;
    const result = await applyRegistration(this.options.pool, {
      deviceId,
      username,
      callId: message.callId,
      cseq: message.cseq,
      source,
      engineOwner: this.options.owner,
      now,
      contacts,
      maxBindings: maxContacts,
    });
    if (result.outcome === 'no_credentials') return this.answer(request, 'failed', { statusCode: 403 });
    if (result.outcome === 'out_of_order') {
      return this.answer(request, 'invalid', { statusCode: 500, reasonPhrase: 'Out Of Order REGISTER' });
    }
    this.answer(request, outcome, {
      statusCode: 200,
      extraHeaders: [
        ...result.bindings.map(
          (binding) =>
            `Contact: <${binding.contactUri}>;expires=${Math.max(
              1,
              Math.ceil((binding.expiresAt.getTime() - now.getTime()) / 1000),
            )}`,
        ),
        `Date: ${now.toUTCString()}`,
      ],
    });
  }

  /**
   * The contacts of a REGISTER and their expiry, `query` when it names none (RFC 3261 10.2.3: the answer lists the
   * bindings), `all` for `*` with Expires 0, `bad` for a malformed one, `too_brief` below the minimum.
   */
  private contactsOf(
    request: IncomingRegisterRequest,
  ): { uri: string; expiresSecs: number }[] | 'all' | 'query' | 'bad' | 'too_brief' {
    const message = request.message;
    const expiresHeader = message.getHeader('expires');
    if (expiresHeader !== undefined && !/^\d{1,10}$/.test(expiresHeader.trim())) return 'bad';
    const general = expiresHeader === undefined ? undefined : Number(expiresHeader.trim());
    const wildcard = message.hasHeader(contactWildcardHeader);
    const count = message.getHeaders('contact').length;
    if (wildcard) return count === 0 && general === 0 ? 'all' : 'bad';
    if (count === 0) return 'query';
    if (count > maxContacts) return 'bad';
    const contacts: { uri: string; expiresSecs: number }[] = [];
    for (let index = 0; index < count; index += 1) {
      const parsed: unknown = message.parseHeader('contact', index);
      if (!(parsed instanceof NameAddrHeader)) return 'bad';
      const uri = parsed.uri.toString();
      const param: unknown = parsed.getParam('expires');
      if (uri.length > 1024 || (param !== undefined && !(typeof param === 'string' && /^\d{1,10}$/.test(param)))) {
        return 'bad';
      }
      const asked = param !== undefined ? Number(param) : (general ?? this.maxExpires);
      if (asked > 0 && asked < this.minExpires) return 'too_brief';
      contacts.push({ uri, expiresSecs: Math.min(asked, this.maxExpires) });
    }
    return contacts;
  }

  /** Whether `nc` is above every count seen with this nonce here (RFC 2617: a replay reuses a count). */
  private freshCount(nonce: string, nc: number, now: Date): boolean {
    const seen = this.nonceCounts.get(nonce);
    if (seen !== undefined && nc <= seen.nc) return false;
    this.nonceCounts.delete(nonce);
    this.nonceCounts.set(nonce, { nc, seenAt: now.getTime() });
    // Oldest first (insertion order): drop the counts of nonces past their life.
    for (const [key, entry] of this.nonceCounts) {
      if (entry.seenAt > now.getTime() - nonceLifetimeMs - 30_000 && this.nonceCounts.size <= 100_000) break;
      this.nonceCounts.delete(key);
    }
    return true;
  }
}

/**
 * Whether the digest's `uri` names the same resource as the Request-URI: scheme, host and port alike (scheme and host
 * in any case, RFC 3261 section 19.1.4) and the same user part; parameters are not compared. The transport gave the
 * Request-URI the engine's own user (addressing.ts): the user the phone wrote is `dialed` when it wrote another one,
 * and none or the engine's own otherwise, which are taken as the same.
 */
function sameResource(digestUri: string, requestUri: URI | undefined, dialed: string | undefined): boolean {
  const named = Grammar.URIParse(digestUri);
  if (named === undefined || requestUri === undefined) return false;
  const user = (value: string | undefined) => (value === undefined || value === engineUser ? '' : value);
  return (
    named.scheme.toLowerCase() === requestUri.scheme.toLowerCase() &&
    named.host.toLowerCase() === requestUri.host.toLowerCase() &&
    named.port === requestUri.port &&
    user(named.user) === user(dialed ?? requestUri.user)
  );
}
