/**
 * A carrier's SMSC for the SMPP link's tests: the `smpp` package's server on a free loopback port (TLS with the test
 * CA's localhost certificate when asked). It checks bind credentials, records what the link sends, answers
 * `submit_sm` as the test says (by default at once, with message ids c1, c2, …), and sends `deliver_sm` and raw bytes
 * to the bound session.
 */
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { Registry } from 'prom-client';
import smpp, { type PDU, type Server, type Session } from 'smpp';
import type { MessagingSettings } from '../../core/carriers/messaging.ts';
import { type LinkTiming, MessagingLink } from '../../engine/messaging/link.ts';
import { MessagingMetrics } from '../../engine/messaging/metrics.ts';
import type { MemoryLinkStore } from './message-link-store.ts';

export interface Submitted {
  pdu: PDU;
  session: Session;
  /** Answers it (once): status 0 with a message id unless told otherwise. */
  answer(fields?: { command_status?: number; message_id?: string }): void;
}

export interface SmscOptions {
  systemId?: string;
  password?: string;
  tls?: boolean;
  /** How many binds to refuse first (ESME_RBINDFAIL). */
  refuseBinds?: number;
}

type SmscEvents = {
  bind: [PDU];
  submit: [Submitted];
  unbind: [];
  enquireLink: [];
  closed: [];
};

export class TestSmsc extends EventEmitter<SmscEvents> {
  readonly binds: PDU[] = [];
  readonly submits: PDU[] = [];
  /** Bound sessions, latest last. */
  readonly sessions: Session[] = [];
  /** Submit_sm not answered yet, and the most there ever were. */
  outstanding = 0;
  mostOutstanding = 0;
  /** Whether `submit_sm` is answered at once (else a `submit` listener answers). */
  answerAtOnce = true;
  /** Whether `enquire_link` is answered. */
  answerEnquireLink = true;
  private ids = 0;
  private readonly accepted = new Set<Session>();
  private refuseBinds: number;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    options: SmscOptions,
  ) {
    super();
    this.refuseBinds = options.refuseBinds ?? 0;
  }

  static async start(options: SmscOptions = {}): Promise<TestSmsc> {
    const tlsOptions =
      options.tls === true
        ? {
            key: readFileSync('test/fixtures/tls/localhost-key.pem'),
            cert: readFileSync('test/fixtures/tls/localhost.pem'),
          }
        : {};
    // Sessions come only once it listens, by which time the SMSC is made.
    const made: { smsc?: TestSmsc } = {};
    const server = smpp.createServer(tlsOptions, (session) => made.smsc?.accept(session, options));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('the SMSC has no port');
    made.smsc = new TestSmsc(server, address.port, options);
    return made.smsc;
  }

  get session(): Session {
    const session = this.sessions.at(-1);
    if (session === undefined) throw new Error('no bound session');
    return session;
  }

  private accept(session: Session, options: SmscOptions): void {
    session.on('error', () => {});
    this.accepted.add(session);
    session.on('close', () => {
      this.accepted.delete(session);
      const index = this.sessions.indexOf(session);
      if (index !== -1) this.sessions.splice(index, 1);
      this.outstanding = 0;
      this.emit('closed');
    });
    session.on('bind_transceiver', (pdu: PDU) => {
      this.binds.push(pdu);
      const wrong =
        pdu.system_id !== (options.systemId ?? 'switchboard') || pdu.password !== (options.password ?? 'secret');
      if (wrong || this.refuseBinds > 0) {
        this.refuseBinds = Math.max(0, this.refuseBinds - 1);
        session.send(pdu.response({ command_status: smpp.errors.ESME_RBINDFAIL }));
      } else {
        session.send(pdu.response({ system_id: 'TESTSMSC' }));
        this.sessions.push(session);
      }
      this.emit('bind', pdu);
    });
    session.on('submit_sm', (pdu: PDU) => {
      this.submits.push(pdu);
      this.outstanding += 1;
      this.mostOutstanding = Math.max(this.mostOutstanding, this.outstanding);
      let answered = false;
      const submitted: Submitted = {
        pdu,
        session,
        answer: (fields = {}) => {
          if (answered) return;
          answered = true;
          this.outstanding -= 1;
          const status = fields.command_status ?? 0;
          this.ids += 1;
          session.send(pdu.response(status === 0 ? { message_id: fields.message_id ?? `c${this.ids}` } : fields));
        },
      };
      if (this.answerAtOnce) submitted.answer();
      this.emit('submit', submitted);
    });
    session.on('enquire_link', (pdu: PDU) => {
      if (this.answerEnquireLink) session.send(pdu.response());
      this.emit('enquireLink');
    });
    session.on('unbind', (pdu: PDU) => {
      session.send(pdu.response());
      this.emit('unbind');
      session.close();
    });
  }

  /** Sends a request to the bound session; resolves with its answer (a `_resp` or `generic_nack`). */
  request(command: string, fields: Record<string, unknown> = {}): Promise<PDU> {
    const session = this.session;
    return new Promise((resolve) => {
      session.send(new smpp.PDU(command, fields), resolve);
    });
  }

  /** Writes raw bytes as a PDU with `sequence`; resolves with the answer to that sequence. */
  raw(bytes: Buffer, sequence: number): Promise<PDU> {
    const session = this.session;
    return new Promise((resolve) => {
      const listener = (pdu: PDU) => {
        if (!pdu.isResponse() || pdu.sequence_number !== sequence) return;
        session.off('pdu', listener);
        resolve(pdu);
      };
      session.on('pdu', listener);
      session.socket.write(bytes);
    });
  }

  async close(): Promise<void> {
    for (const session of [...this.accepted]) session.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A PDU's bytes: the header (`length` counted here) then `body`. */
export function rawPdu(commandId: number, sequence: number, body: Buffer): Buffer {
  const header = Buffer.alloc(16);
  header.writeUInt32BE(16 + body.length, 0);
  header.writeUInt32BE(commandId, 4);
  header.writeUInt32BE(0, 8);
  header.writeUInt32BE(sequence, 12);
  return Buffer.concat([header, body]);
}

/** A link to `smsc` for `carrier` with the test's short times, its metrics in a registry of its own. */
export function linkTo(
  smsc: TestSmsc,
  options: {
    carrier: string;
    databaseUrl: string;
    store: MemoryLinkStore;
    registry?: Registry;
    metrics?: MessagingMetrics;
    settings?: Partial<MessagingSettings & { password: string }>;
    timing?: Partial<LinkTiming>;
  },
): { link: MessagingLink; metrics: MessagingMetrics; registry: Registry } {
  const registry = options.registry ?? new Registry();
  const metrics = options.metrics ?? new MessagingMetrics(registry);
  const link = new MessagingLink({
    carrier: options.carrier,
    settings: {
      host: '127.0.0.1',
      port: smsc.port,
      systemId: 'switchboard',
      password: 'secret',
      systemType: 'sb',
      tls: false,
      throughput: 1_000,
      ...options.settings,
    },
    databaseUrl: options.databaseUrl,
    store: options.store,
    metrics,
    log: { info: () => {}, warn: () => {} },
    timing: {
      backoff: { firstMs: 20, maxMs: 100 },
      responseTimeoutMs: 2_000,
      leadershipRetryMs: 50,
      throttleMs: 300,
      retryAfterThrottleMs: 50,
      ...options.timing,
    },
    random: () => 0.5,
  });
  return { link, metrics, registry };
}

/** A counter's or gauge's value with `labels`, 0 when never set. */
export async function metricValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  const metric = registry.getSingleMetric(name);
  if (metric === undefined) return 0;
  const { values } = await metric.get();
  const found = values.find((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted));
  return found?.value ?? 0;
}
