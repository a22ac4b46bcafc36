/**
 * The RTP port range (`RTP_PORT_MIN`-`RTP_PORT_MAX`): UDP sockets bound on even ports (RFC 3550 section 11: RTP on
 * an even port, RTCP on the odd one above it, which the pool never hands out).
 *
 * Each allocation takes an even port at random from the free ones, so that a call's port cannot be guessed from the
 * last one (docs/calls.md, Media addresses). The ports released most recently are taken only when no other is free:
 * stray packets of the call that had one would otherwise land in the next. A port that another process holds
 * (EADDRINUSE) is skipped. When every even port is taken the allocation fails with `PortPoolExhaustedError`.
 */
import { randomInt } from 'node:crypto';
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

/** Random picks tried before the pool looks at every port in turn. */
const randomTries = 32;
/** How many of the ports released last wait before being handed out again (at most half the range). */
const restingPorts = 64;

export class PortPool {
  readonly min: number;
  readonly max: number;
  private readonly taken = new Map<number, dgram.Socket | null>();
  private readonly byPort = new Map<dgram.Socket, number>();
  /** The ports released last, oldest first. */
  private readonly resting = new Set<number>();
  private readonly restingMax: number;

  /** `random(n)` is an integer in [0, n): crypto's by default; tests give their own sequence. */
  constructor(
    min: number,
    max: number,
    private readonly random: (n: number) => number = randomInt,
  ) {
    if (!Number.isInteger(min) || !Number.isInteger(max) || min < 1 || max > 65535 || min > max) {
      throw new RangeError(`invalid RTP port range ${min}-${max}`);
    }
    const first = min % 2 === 0 ? min : min + 1;
    if (first > max) throw new RangeError(`the RTP port range ${min}-${max} holds no even port`);
    this.min = first;
    this.max = max;
    this.restingMax = Math.min(restingPorts, Math.floor(this.size / 2));
  }

  /** How many even ports the range holds. */
  get size(): number {
    return Math.floor((this.max - this.min) / 2) + 1;
  }

  /** Sockets handed out and not yet released. */
  get inUse(): number {
    return this.taken.size;
  }

  /** A UDP socket bound on `host` at a free even port of the range, chosen at random. */
  async allocate(host: string): Promise<dgram.Socket> {
    const refused = new Set<number>();
    for (let port = this.choose(refused); port !== undefined; port = this.choose(refused)) {
      this.taken.set(port, null); // reserved while binding, so a concurrent allocation skips it
      try {
        const socket = await bind(host, port);
        this.taken.set(port, socket);
        this.byPort.set(socket, port);
        this.resting.delete(port);
        return socket;
      } catch (error) {
        this.taken.delete(port);
        if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
        refused.add(port);
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
    if (this.restingMax > 0) {
      this.resting.add(port);
      if (this.resting.size > this.restingMax) this.resting.delete(this.resting.values().next().value as number);
    }
    try {
      socket.close();
    } catch {
      // Already closed by its owner.
    }
  }

  /**
   * A free port: a random one of the range that is neither taken, resting nor `refused` (another process holds it);
   * after `randomTries` misses the first such port from a random place on; then a resting one; undefined when none.
   */
  private choose(refused: ReadonlySet<number>): number | undefined {
    const portAt = (index: number) => this.min + 2 * (index % this.size);
    const usable = (port: number) => !this.taken.has(port) && !refused.has(port);
    for (let tried = 0; tried < randomTries; tried += 1) {
      const port = portAt(this.random(this.size));
      if (usable(port) && !this.resting.has(port)) return port;
    }
    const start = this.random(this.size);
    let resting: number | undefined;
    for (let offset = 0; offset < this.size; offset += 1) {
      const port = portAt(start + offset);
      if (!usable(port)) continue;
      if (!this.resting.has(port)) return port;
      resting ??= port;
    }
    return resting;
  }
}
