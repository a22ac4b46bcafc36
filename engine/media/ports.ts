/**
 * The RTP port range (`RTP_PORT_MIN`-`RTP_PORT_MAX`): UDP sockets bound on even ports (RFC 3550 section 11: RTP on
 * an even port, RTCP on the odd one above it, which the pool never hands out).
 *
 * Allocation goes round the range from where the last one stopped rather than from the bottom, so a port just
 * released is not reused at once (stray packets of the call that had it would land in the next one). A port that
 * another process holds (EADDRINUSE) is skipped. When every even port is taken the allocation fails with
 * `PortPoolExhaustedError`.
 */
import dgram from 'node:dgram';
import { isIP } from 'node:net';

export class PortPoolExhaustedError extends Error {
  constructor(min: number, max: number) {
    super(`no free RTP port in ${min}-${max}`);
    this.name = 'PortPoolExhaustedError';
  }
}

function bind(host: string, port: number): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket({ type: isIP(host) === 6 ? 'udp6' : 'udp4' });
    const failed = (error: Error) => {
      socket.close();
      reject(error);
    };
    socket.once('error', failed);
    socket.bind({ address: host, port, exclusive: true }, () => {
      socket.off('error', failed);
      resolve(socket);
    });
  });
}

export class PortPool {
  readonly min: number;
  readonly max: number;
  private readonly taken = new Map<number, dgram.Socket | null>();
  private readonly byPort = new Map<dgram.Socket, number>();
  private next: number;

  constructor(min: number, max: number) {
    if (!Number.isInteger(min) || !Number.isInteger(max) || min < 1 || max > 65535 || min > max) {
      throw new RangeError(`invalid RTP port range ${min}-${max}`);
    }
    const first = min % 2 === 0 ? min : min + 1;
    if (first > max) throw new RangeError(`the RTP port range ${min}-${max} holds no even port`);
    this.min = first;
    this.max = max;
    this.next = first;
  }

  /** How many even ports the range holds. */
  get size(): number {
    return Math.floor((this.max - this.min) / 2) + 1;
  }

  /** Sockets handed out and not yet released. */
  get inUse(): number {
    return this.taken.size;
  }

  /** A UDP socket bound on `host` at a free even port of the range. */
  async allocate(host: string): Promise<dgram.Socket> {
    for (let tried = 0; tried < this.size; tried += 1) {
      const port = this.next;
      this.next = port + 2 > this.max ? this.min : port + 2;
      if (this.taken.has(port)) continue;
      this.taken.set(port, null); // reserved while binding, so a concurrent allocation skips it
      try {
        const socket = await bind(host, port);
        this.taken.set(port, socket);
        this.byPort.set(socket, port);
        return socket;
      } catch (error) {
        this.taken.delete(port);
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      }
    }
    throw new PortPoolExhaustedError(this.min, this.max);
  }

  /** Closes `socket` and gives its port back; releasing twice, or a socket of another pool, does nothing. */
  release(socket: dgram.Socket): void {
    const port = this.byPort.get(socket);
    if (port === undefined) return;
    this.byPort.delete(socket);
    this.taken.delete(port);
    try {
      socket.close();
    } catch {
      // Already closed by its owner.
    }
  }
}
