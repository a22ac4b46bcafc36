/**
 * One SMPP 3.4 connection to a carrier's SMSC: the byte stream cut into PDUs, our requests numbered and matched with
 * their responses (or timed out), the carrier's requests handed up with their raw bytes. PDUs are encoded and decoded
 * by the `smpp` package's codec (`smpp.PDU`); its `Session` is not used because one undecodable PDU stops it reading
 * for good (its `_busy` flag is never reset after the error) and it decodes `short_message` into text, losing the
 * bytes a concatenated inbound part is reassembled from. Here a PDU that does not decode is answered `generic_nack`
 * and the stream goes on with the next one; only a length no PDU can have ends the connection (the framing is lost).
 */
import { EventEmitter } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import smpp, { type PDU } from 'smpp';
import { assertNotHoldingConnection } from '../../core/held-connections.ts';

/** SMPP 3.4 section 3.1: a header is 16 octets; the package refuses more than this. */
const headerLength = 16;
const maxLength = 16_384;

export const commandIds = { generic_nack: 0x80000000, deliver_sm: 0x00000005, alert_notification: 0x00000102 };

/** A PDU's header as it came, before any decoding. */
export interface Header {
  length: number;
  commandId: number;
  status: number;
  sequence: number;
}

/** Why a frame from the carrier was not taken (`switchboard_sms_refused_total{reason}`). */
export type FrameFault = 'bad_length' | 'undecodable_pdu' | 'unknown_command' | 'unexpected_response';

export interface SessionEvents {
  /** A request from the carrier: its header, its bytes, and the package's decoding of it. */
  request: [header: Header, frame: Buffer, pdu: PDU];
  /** A frame that was not taken; the session answered it (or closes, for `bad_length`). */
  fault: [fault: FrameFault, header: Header | undefined];
  /** The connection ended (once). */
  close: [];
}

export class SmppError extends Error {}

interface Pending {
  resolve(pdu: PDU): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
}

export class SmppSession extends EventEmitter<SessionEvents> {
  private buffered: Buffer = Buffer.alloc(0);
  private sequence = 0;
  private readonly pending = new Map<number, Pending>();
  private ended = false;

  private constructor(
    private readonly socket: net.Socket,
    private readonly responseTimeoutMs: number,
  ) {
    super();
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    // An error is always followed by 'close': the session ends there.
    socket.on('error', () => {});
    socket.on('close', () => this.end());
  }

  /** Connects (TLS when asked, the host's name checked against its certificate); rejects when that fails. */
  static connect(
    target: { host: string; port: number; tls: boolean },
    options: { connectTimeoutMs: number; responseTimeoutMs: number },
  ): Promise<SmppSession> {
    assertNotHoldingConnection('an SMPP connection');
    return new Promise((resolve, reject) => {
      const socket = target.tls
        ? tls.connect({
            host: target.host,
            port: target.port,
            ...(net.isIP(target.host) === 0 ? { servername: target.host } : {}),
          })
        : net.connect({ host: target.host, port: target.port });
      const ready = target.tls ? 'secureConnect' : 'connect';
      const timer = setTimeout(() => socket.destroy(new SmppError('connect timed out')), options.connectTimeoutMs);
      const failed = (error: Error) => {
        clearTimeout(timer);
        socket.destroy();
        reject(error);
      };
      socket.once('error', failed);
      socket.once(ready, () => {
        clearTimeout(timer);
        socket.off('error', failed);
        socket.setNoDelay(true);
        resolve(new SmppSession(socket, options.responseTimeoutMs));
      });
    });
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Sends a request; resolves with its response (any status), rejects when unanswered in time or the session ends. */
  request(command: string, fields: Record<string, unknown> = {}): Promise<PDU> {
    assertNotHoldingConnection(`an SMPP ${command}`);
    if (this.ended) return Promise.reject(new SmppError('session closed'));
    this.sequence = this.sequence >= 0x7fffffff ? 1 : this.sequence + 1;
    const sequence = this.sequence;
    const pdu = new smpp.PDU(command, { ...fields, sequence_number: sequence });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(sequence);
        reject(new SmppError(`${command} unanswered`));
      }, this.responseTimeoutMs);
      this.pending.set(sequence, { resolve, reject, timer });
      this.socket.write(pdu.toBuffer());
    });
  }

  /** Answers the carrier's request `sequence` with `command` (a `_resp` or `generic_nack`). */
  respond(command: string, sequence: number, status: number, fields: Record<string, unknown> = {}): void {
    if (this.ended) return;
    this.socket.write(
      new smpp.PDU(command, { ...fields, sequence_number: sequence, command_status: status }).toBuffer(),
    );
  }

  /** Ends the connection after what was written is sent. */
  close(): void {
    this.socket.end();
    // A peer that never closes its side must not hold the session open.
    setTimeout(() => this.socket.destroy(), this.responseTimeoutMs).unref();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const [sequence, waiting] of this.pending) {
      clearTimeout(waiting.timer);
      waiting.reject(new SmppError('session closed'));
      this.pending.delete(sequence);
    }
    this.emit('close');
  }

  private receive(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    while (this.buffered.length >= 4 && !this.ended) {
      const length = this.buffered.readUInt32BE(0);
      if (length < headerLength || length > maxLength) {
        // Nothing after this can be framed: the connection is closed and made again.
        this.emit('fault', 'bad_length', undefined);
        this.socket.destroy();
        return;
      }
      if (this.buffered.length < length) return;
      const frame = this.buffered.subarray(0, length);
      this.buffered = this.buffered.subarray(length);
      this.frame(frame);
    }
  }

  private frame(frame: Buffer): void {
    const header: Header = {
      length: frame.readUInt32BE(0),
      commandId: frame.readUInt32BE(4),
      status: frame.readUInt32BE(8),
      sequence: frame.readUInt32BE(12),
    };
    let pdu: PDU;
    try {
      pdu = new smpp.PDU(frame);
    } catch {
      this.emit('fault', 'undecodable_pdu', header);
      if ((header.commandId & 0x80000000) === 0) {
        this.respond('generic_nack', header.sequence, smpp.errors.ESME_RINVCMDLEN ?? 0x02);
      }
      return;
    }
    if ((header.commandId & 0x80000000) !== 0) {
      const waiting = this.pending.get(header.sequence);
      if (waiting === undefined) {
        this.emit('fault', 'unexpected_response', header);
        return;
      }
      this.pending.delete(header.sequence);
      clearTimeout(waiting.timer);
      waiting.resolve(pdu);
      return;
    }
    if (pdu.command === 'unknown') {
      this.emit('fault', 'unknown_command', header);
      this.respond('generic_nack', header.sequence, smpp.errors.ESME_RINVCMDID ?? 0x03);
      return;
    }
    this.emit('request', header, frame, pdu);
  }
}
