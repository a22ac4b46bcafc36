/**
 * The engine's SIP endpoint: sip.js's `UserAgentCore` on each of our transports (one core per transport, so every
 * message of a dialog stays on the transport it began on). The core runs transactions, retransmissions, dialogs,
 * CANCEL, BYE and OPTIONS (RFC 3261); the engine hears INVITEs through `onInvite`, with the source of each request
 * (`sourceOf`) and the dialed number (`dialedOf`), and the registrar hears REGISTERs through `onRegister`.
 */
import { randomBytes } from 'node:crypto';
import {
  DigestAuthentication,
  Grammar,
  type IncomingInviteRequest,
  type IncomingRegisterRequest,
  type IncomingRequestMessage,
  type IncomingResponseMessage,
  Levels,
  LoggerFactory,
  type Transport,
  UserAgentCore,
} from 'sip.js/lib/core/index.js';
import {
  dialedHeader,
  type Protocol,
  type Source,
  TcpTransport,
  type TransportEvents,
  UdpTransport,
} from './transport.ts';

/** The methods counted by name in the metrics: a peer may send any token as a method, which counts as `other`. */
const countedMethods = new Set([
  'ACK',
  'BYE',
  'CANCEL',
  'INFO',
  'INVITE',
  'MESSAGE',
  'NOTIFY',
  'OPTIONS',
  'PRACK',
  'PUBLISH',
  'REFER',
  'REGISTER',
  'SUBSCRIBE',
  'UPDATE',
]);

/** The user part of the engine's own URI (the Request-URI user every request is rewritten to). */
export const engineUser = 'switchboard';

export interface SipEndpointOptions {
  /** The address bound (may be a wildcard). */
  host: string;
  /** The address named in URIs and Via (never a wildcard). */
  advertisedHost: string;
  port: number;
  onInvite(request: IncomingInviteRequest, core: UserAgentCore, source: Source): void;
  /** A REGISTER (the registrar, registrar.ts); without it the core answers 405. */
  onRegister?(request: IncomingRegisterRequest, source: Source): void;
  /** Every message in or out, for the metrics: direction, method or status code. */
  onMessage?(direction: 'in' | 'out', kind: string): void;
  onMalformed?(reason: string, source: Source): void;
  log?: (message: string) => void;
}

/** A carrier's account, for the digest challenges (401, 407) it answers our requests with (RFC 3261 22.2). */
export interface SipCredentials {
  username: string;
  password: string;
}

function makeCore(
  transport: Transport,
  host: string,
  port: number,
  protocol: Protocol,
  onInvite: (request: IncomingInviteRequest, core: UserAgentCore) => void,
  credentials: (loggerFactory: LoggerFactory) => DigestAuthentication | undefined,
  onRegister: ((request: IncomingRegisterRequest) => void) | undefined,
): UserAgentCore {
  const uri = Grammar.URIParse(`sip:${engineUser}@${host}:${port}`);
  if (uri === undefined) throw new Error(`cannot make a SIP URI of ${host}:${port}`);
  const contactUri = Grammar.URIParse(`sip:${engineUser}@${host}:${port};transport=${protocol}`);
  if (contactUri === undefined) throw new Error(`cannot make a SIP contact of ${host}:${port}`);
  const loggerFactory = new LoggerFactory();
  loggerFactory.builtinEnabled = false;
  loggerFactory.level = Levels.error;
  const core: UserAgentCore = new UserAgentCore(
    {
      aor: uri,
      contact: {
        pubGruu: undefined,
        tempGruu: undefined,
        uri: contactUri,
        toString: () => `<${contactUri.toString()}>`,
      },
      displayName: '',
      loggerFactory,
      hackViaTcp: false,
      routeSet: [],
      sipjsId: randomBytes(5).toString('hex'),
      supportedOptionTags: [],
      supportedOptionTagsResponse: [],
      userAgentHeaderFieldValue: 'Switchboard',
      viaForceRport: true,
      viaHost: host,
      authenticationFactory: () => credentials(loggerFactory),
      transportAccessor: () => transport,
    },
    { onInvite: (request) => onInvite(request, core), ...(onRegister ? { onRegister } : {}) },
  );
  return core;
}

export class SipEndpoint {
  private readonly udp: UdpTransport;
  private readonly tcp: TcpTransport;
  private udpCore: UserAgentCore | undefined;
  private tcpCore: UserAgentCore | undefined;
  /** Where each request came from (the core hands the same message object to onInvite). */
  private readonly sources = new WeakMap<IncomingRequestMessage, Source>();
  /** Accounts for our own requests, by Call-ID, while they may be challenged. */
  private readonly accounts = new Map<string, SipCredentials>();
  /** The response the core is handling right now (it asks for credentials synchronously, while handling it). */
  private responding: IncomingResponseMessage | undefined;
  port = 0;

  /** The address the engine names in its URIs. */
  get host(): string {
    return this.options.advertisedHost;
  }

  constructor(private readonly options: SipEndpointOptions) {
    const events = (protocol: Protocol): TransportEvents => ({
      request: (message, source) => {
        this.sources.set(message, source);
        options.onMessage?.('in', countedMethods.has(message.method) ? message.method : 'other');
        const core = protocol === 'udp' ? this.udpCore : this.tcpCore;
        try {
          // sip.js's core throws on a PRACK outside a dialog, for which it has no answer: 481, no such dialog. Outside
          // a dialog is what the core takes it to be: no To tag, or one without a value (`;tag`, read as null).
          if (message.method === 'PRACK' && !message.toTag) {
            core?.replyStateless(message, { statusCode: 481 });
            return;
          }
          core?.receiveIncomingRequestFromTransport(message);
        } catch (error) {
          options.log?.(`SIP request from ${source.address}:${source.port} failed: ${String(error)}`);
        }
      },
      response: (message, source) => {
        options.onMessage?.('in', String(message.statusCode));
        const core = protocol === 'udp' ? this.udpCore : this.tcpCore;
        this.responding = message;
        try {
          core?.receiveIncomingResponseFromTransport(message);
        } catch (error) {
          options.log?.(`SIP response from ${source.address}:${source.port} failed: ${String(error)}`);
        } finally {
          this.responding = undefined;
        }
      },
      malformed: (reason, source) => options.onMalformed?.(reason, source),
      sent: (kind) => options.onMessage?.('out', kind),
    });
    this.udp = new UdpTransport(events('udp'), engineUser);
    this.tcp = new TcpTransport(events('tcp'), engineUser);
  }

  /** Listens on UDP and TCP at the same port (port 0: one the system picks for UDP, then the same for TCP). */
  async start(): Promise<number> {
    const { host } = this.options;
    for (let tries = 0; ; tries += 1) {
      const port = await this.udp.listen(host, this.options.port);
      try {
        await this.tcp.listen(host, port);
        this.port = port;
        break;
      } catch (error) {
        await this.udp.close();
        if (this.options.port !== 0 || tries >= 10) throw error;
      }
    }
    const invite = (request: IncomingInviteRequest, core: UserAgentCore) => {
      this.options.onInvite(request, core, this.sourceOf(request.message));
    };
    const advertised = this.options.advertisedHost;
    // sip.js asks its core's authenticationFactory for credentials, without saying for which request, while it
    // handles a 401 or 407: the response being handled names the call, and the call its carrier's account.
    const credentials = (loggerFactory: LoggerFactory) => {
      const callId = this.responding?.callId;
      const account = callId === undefined ? undefined : this.accounts.get(callId);
      return account === undefined
        ? undefined
        : new DigestAuthentication(loggerFactory, undefined, account.username, account.password);
    };
    const { onRegister } = this.options;
    const register =
      onRegister && ((request: IncomingRegisterRequest) => onRegister(request, this.sourceOf(request.message)));
    this.udpCore = makeCore(this.udp, advertised, this.port, 'udp', invite, credentials, register);
    this.tcpCore = makeCore(this.tcp, advertised, this.port, 'tcp', invite, credentials, register);
    return this.port;
  }

  /**
   * Answers digest challenges to the requests of call `callId` with `account` (a carrier's username and password),
   * once per challenge (sip.js gives up on a second challenge that is not `stale`). Returns the function that stops it.
   */
  signRequests(callId: string, account: SipCredentials): () => void {
    this.accounts.set(callId, account);
    return () => {
      if (this.accounts.get(callId) === account) this.accounts.delete(callId);
    };
  }

  /**
   * Sends every request of call `callId` on `source`'s transport to `source` (a registered device's flow: where its
   * REGISTER came from, never its Contact's host), whatever the Request-URI or the dialog's remote target says.
   * Returns the function that stops it.
   */
  pinFlow(callId: string, source: Source): () => void {
    const transport = source.protocol === 'udp' ? this.udp : this.tcp;
    return transport.pin(callId, { host: source.address, port: source.port });
  }

  /** Where a request came from (always known for one the transports passed on). */
  private sourceOf(message: IncomingRequestMessage): Source {
    return this.sources.get(message) ?? { protocol: 'udp', address: '', port: 0 };
  }

  /** The SIP transactions in progress, server and client, on both transports. */
  get transactions(): number {
    return [this.udpCore, this.tcpCore].reduce(
      (sum, core) => sum + (core === undefined ? 0 : core.userAgentServers.size + core.userAgentClients.size),
      0,
    );
  }

  core(protocol: Protocol): UserAgentCore {
    const core = protocol === 'udp' ? this.udpCore : this.tcpCore;
    if (core === undefined) throw new Error('the SIP endpoint is not started');
    return core;
  }

  async close(): Promise<void> {
    this.udpCore?.dispose();
    this.tcpCore?.dispose();
    await Promise.all([this.udp.close(), this.tcp.close()]);
  }
}

/** The number the caller dialed: the Request-URI user the transport moved aside, as E.164 when it is digits. */
export function dialedOf(message: IncomingRequestMessage): string {
  const dialed = message.getHeader(dialedHeader) ?? message.ruri?.user ?? '';
  let trimmed = dialed.trim();
  try {
    trimmed = decodeURIComponent(trimmed);
  } catch {
    // Not percent-encoded text: taken as it is.
  }
  return /^\d{2,15}$/.test(trimmed) ? `+${trimmed}` : trimmed;
}
