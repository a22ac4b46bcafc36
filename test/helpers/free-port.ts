import dgram from 'node:dgram';
import { createServer } from 'node:net';

/** A TCP port free on loopback right now (bound on port 0, then released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A UDP port free on loopback right now, with the next two free too (sipp's media uses the port and the two above
 * it). Ports come from the system's ephemeral range, so tests running at once rarely meet; they still may.
 */
export async function freeUdpPort(): Promise<number> {
  for (let tries = 0; tries < 50; tries += 1) {
    const first = dgram.createSocket('udp4');
    const port = await new Promise<number>((resolve, reject) => {
      first.once('error', reject);
      first.bind(0, '127.0.0.1', () => resolve(first.address().port));
    });
    const others = [dgram.createSocket('udp4'), dgram.createSocket('udp4')];
    const free = await Promise.all(
      others.map(
        (socket, index) =>
          new Promise<boolean>((resolve) => {
            socket.once('error', () => resolve(false));
            socket.bind(port + index + 1, '127.0.0.1', () => resolve(true));
          }),
      ),
    );
    await Promise.all(
      [first, ...others]
        .map((socket) => new Promise<void>((resolve) => socket.close(() => resolve())))
        .map((closing) => closing.catch(() => {})),
    );
    if (free.every(Boolean)) return port;
  }
  throw new Error('no three free UDP ports in a row');
}
