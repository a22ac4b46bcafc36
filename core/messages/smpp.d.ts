/** The part of the `smpp` package's API the service uses (the package ships no types). */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { AddressInfo, Socket } from 'node:net';

  /** A PDU: `command`, the header fields and the body's fields by their SMPP names. */
  export interface PDU {
    command: string;
    command_id: number;
    command_status: number;
    sequence_number: number;
    [field: string]: unknown;
    response(fields?: Record<string, unknown>): PDU;
    isResponse(): boolean;
    /** The PDU's bytes, header included. */
    toBuffer(): Buffer;
  }

  /** A PDU to send (`command` with `fields`), or one decoded from its bytes (throws when they do not decode). */
  export const PDU: new (command: string | Buffer, fields?: Record<string, unknown>) => PDU;

  export interface Session extends EventEmitter {
    /** Sends `command` with `fields`; `callback` gets its response. */
    send(pdu: PDU, responseCallback?: (response: PDU) => void, sendCallback?: () => void): boolean;
    bind_transceiver(fields: Record<string, unknown>, callback?: (response: PDU) => void): boolean;
    submit_sm(fields: Record<string, unknown>, callback?: (response: PDU) => void): boolean;
    deliver_sm(fields: Record<string, unknown>, callback?: (response: PDU) => void): boolean;
    enquire_link(fields?: Record<string, unknown>, callback?: (response: PDU) => void): boolean;
    unbind(fields?: Record<string, unknown>, callback?: (response: PDU) => void): boolean;
    pause(): void;
    resume(): void;
    close(callback?: () => void): void;
    destroy(callback?: () => void): void;
    readonly socket: Socket;
  }

  export interface SessionOptions {
    host?: string;
    port?: number;
    tls?: boolean;
    url?: string;
    auto_enquire_link_period?: number;
    connectTimeout?: number;
    rejectUnauthorized?: boolean;
    ca?: string | Buffer;
    servername?: string;
  }

  export function connect(options: SessionOptions, listener?: () => void): Session;

  export interface Server extends EventEmitter {
    listen(port?: number, host?: string, callback?: () => void): Server;
    close(callback?: () => void): void;
    address(): AddressInfo | string | null;
  }

  export function createServer(
    options: { key?: string | Buffer; cert?: string | Buffer; debug?: boolean },
    listener: (session: Session) => void,
  ): Server;

  export const gsmCoder: {
    GSM: { chars: string; extChars: string; charRegex: RegExp };
    encode(text: string, shift: number): Buffer;
    decode(bytes: Buffer, shift: number): string;
  };

  export const encodings: Record<
    'ASCII' | 'LATIN1' | 'UCS2',
    { encode(text: string): Buffer; decode(bytes: Buffer): string }
  >;

  export const errors: Record<string, number>;
  export const consts: { ESM_CLASS: Record<string, number>; ENCODING: Record<string, number> };

  const smpp: {
    connect: typeof connect;
    createServer: typeof createServer;
    PDU: typeof PDU;
    gsmCoder: typeof gsmCoder;
    encodings: typeof encodings;
    errors: typeof errors;
    consts: typeof consts;
  };
  export default smpp;
}
