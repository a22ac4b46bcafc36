/**
 * A real HTTPS webhook receiver for tests: a server with a certificate of the test CA (test/fixtures/tls, trusted
 * through NODE_EXTRA_CA_CERTS set by test/run.ts) that records every request, tells the stream of each event (the
 * agent's member id or the call id), notes requests of one stream that overlapped and keeps the requests still waiting
 * for their answer. `handler` decides the answer.
 */
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const tlsDir = new URL('../fixtures/tls/', import.meta.url);
const tls = {
  key: readFileSync(new URL('localhost-key.pem', tlsDir)),
  cert: readFileSync(new URL('localhost.pem', tlsDir)),
};

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body as received. */
  body: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the event JSON, checked by the tests
  event: any;
  /** The event's stream subject (the agent's member id in these tests). */
  stream: string;
  sequence: number;
  at: number;
}

/** What the receiver answers: a status, or a status and headers (a redirect). */
export type Answer = number | { status: number; headers: Record<string, string> };

export class Receiver {
  readonly received: Received[] = [];
  /** Requests of one stream that overlapped another of the same stream (must stay empty). */
  readonly overlaps: string[] = [];
  /** Requests not answered yet whose connection is still open (the sender is still waiting for them). */
  readonly waiting = new Set<Received>();
  private readonly inFlight = new Map<string, number>();
  handler: (request: Received) => Answer | Promise<Answer> = () => 200;

  private constructor(readonly server: https.Server) {}

  static async start(port = 0): Promise<Receiver> {
    const server = https.createServer(tls);
    const receiver = new Receiver(server);
    server.on('request', (request: IncomingMessage, response: ServerResponse) => receiver.serve(request, response));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook', host = 'localhost'): string {
    return `https://${host}:${this.port}${path}`;
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let event: Received['event'] = undefined;
    try {
      event = JSON.parse(body);
    } catch {
      // kept as received
    }
    const stream = String(event?.agent?.memberId ?? event?.callId ?? '');
    const received: Received = {
      path: request.url ?? '',
      headers: request.headers,
      body,
      event,
      stream,
      sequence: Number(event?.sequence),
      at: Date.now(),
    };
    this.received.push(received);
    this.waiting.add(received);
    response.once('close', () => this.waiting.delete(received));
    const running = (this.inFlight.get(stream) ?? 0) + 1;
    this.inFlight.set(stream, running);
    if (running > 1) this.overlaps.push(`${stream} #${received.sequence}`);
    let answer: Answer;
    try {
      answer = await this.handler(received);
    } catch {
      answer = 500;
    } finally {
      this.inFlight.set(stream, (this.inFlight.get(stream) ?? 1) - 1);
    }
    if (response.destroyed) return;
    if (typeof answer === 'number') response.writeHead(answer, { 'content-type': 'text/plain' });
    else response.writeHead(answer.status, answer.headers);
    response.end(typeof answer === 'number' && answer >= 400 ? 'boom' : '');
  }

  /** The sequences received for `stream`, in arrival order. */
  sequences(stream: string): number[] {
    return this.received.filter((request) => request.stream === stream).map((request) => request.sequence);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
