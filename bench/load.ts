/**
 * The load generator of `npm run bench`, run as a child process so that it never shares the server's event loop:
 * reads one measurement (JSON) from argv, drives it with autocannon (warm-up first, then the measured run) and writes
 * the figures as one JSON line on stdout.
 */
import { randomUUID } from 'node:crypto';
import autocannon, { type Request } from 'autocannon';

export interface Measurement {
  url: string;
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
  /** Each request gets an idempotency-key header of its own. */
  uniqueIdempotencyKey?: boolean;
  connections: number;
  warmupSeconds: number;
  seconds: number;
}

export interface Figures {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  completed: number;
  non2xx: number;
  errors: number;
  statusCodes: Record<string, number>;
}

const measurement = JSON.parse(process.argv[2] ?? '') as Measurement;
const request: Request = {
  method: measurement.method,
  path: measurement.path,
  headers: measurement.headers,
  ...(measurement.body !== undefined ? { body: measurement.body } : {}),
};

const result = await autocannon({
  url: measurement.url,
  connections: measurement.connections,
  duration: measurement.seconds,
  warmup: { connections: measurement.connections, duration: measurement.warmupSeconds },
  requests: [
    {
      ...request,
      ...(measurement.uniqueIdempotencyKey
        ? {
            setupRequest: (next: Request) => ({
              ...next,
              headers: { ...next.headers, 'idempotency-key': randomUUID() },
            }),
          }
        : {}),
    },
  ],
});

const figures: Figures = {
  requestsPerSecond: result.requests.average,
  p50: result.latency.p50,
  p99: result.latency.p99,
  completed: result.requests.total,
  non2xx: result.non2xx,
  errors: result.errors,
  statusCodes: Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, stat]) => [code, stat.count])),
};
process.stdout.write(`${JSON.stringify(figures)}\n`);
