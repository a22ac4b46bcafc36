/**
 * The events bench's webhook receiver, in a process of its own so it never competes with the dispatcher for an
 * event loop: an HTTPS server (the test certificate for localhost) that answers 204, checks that every stream
 * arrives in strictly increasing `sequence` with one request in flight at a time, and reports to its parent.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';

const tls = new URL('../test/fixtures/tls/', import.meta.url);
const lastSequence = new Map<string, number>();
const inFlight = new Set<string>();
const firstSeen = new Set<string>();
let received = 0;
let outOfOrder = 0;
let overlapping = 0;
let latencies: number[] = [];

const server = https.createServer(
  { key: readFileSync(new URL('localhost-key.pem', tls)), cert: readFileSync(new URL('localhost.pem', tls)) },
  (request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const arrived = Date.now();
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        id: string;
        callId: string;
        sequence: number;
        occurredAt: string;
      };
      const stream = event.callId;
      if (inFlight.has(stream)) overlapping += 1;
      inFlight.add(stream);
      if (!firstSeen.has(event.id)) {
        firstSeen.add(event.id);
        latencies.push(arrived - Date.parse(event.occurredAt));
        received += 1;
        if ((lastSequence.get(stream) ?? 0) >= event.sequence) outOfOrder += 1;
        lastSequence.set(stream, event.sequence);
      }
      response.writeHead(204);
      response.end(() => inFlight.delete(stream));
    });
  },
);

process.on('message', (message: { type: string }) => {
  if (message.type === 'report') {
    process.send?.({ type: 'report', received, outOfOrder, overlapping, latencies });
    latencies = [];
  }
  if (message.type === 'stop') server.close(() => process.exit(0));
});

server.listen(0, '127.0.0.1', () => {
  const address = server.address() as { port: number };
  process.send?.({ type: 'listening', port: address.port });
});
