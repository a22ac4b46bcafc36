/**
 * An HTTPS server on loopback for tests, with a certificate of the test CA (test/fixtures/tls, trusted through
 * NODE_EXTRA_CA_CERTS set by test/run.ts): `serve` answers each request, given its whole body.
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const tlsDir = new URL('../fixtures/tls/', import.meta.url);
const tls = {
  key: readFileSync(new URL('localhost-key.pem', tlsDir)),
  cert: readFileSync(new URL('localhost.pem', tlsDir)),
};

export const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(500, 7)]);

export interface Posted {
  path: string;
  authorization: string | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the JSON posted, checked by the tests
  body: any;
}

/** An HTTPS server on loopback with the test CA's certificate; `serve` answers each request. */
export async function httpsServer(serve: (request: IncomingMessage, body: Buffer, response: ServerResponse) => void) {
  const server = https.createServer(tls, async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    serve(request, Buffer.concat(chunks), response);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: (path: string) => `https://localhost:${(server.address() as AddressInfo).port}${path}`,
    port: () => (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The MMS tests' media host: a good PNG and vCard, a page, bytes that lie about their type, too large by
 * Content-Length or without one (endless), a redirect; every path asked noted in `requests`.
 */
export function serveMedia(
  requests: string[],
  self: { url: (path: string) => string },
  request: IncomingMessage,
  response: ServerResponse,
) {
  requests.push(request.url ?? '');
  switch (request.url) {
    case '/cat.png':
      response.writeHead(200, { 'content-type': 'image/png' }).end(png);
      return;
    case '/card.vcf':
      response.writeHead(200, { 'content-type': 'text/vcard; charset=utf-8' }).end('BEGIN:VCARD\r\nEND:VCARD\r\n');
      return;
    case '/page.html':
      response.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
      return;
    case '/fake.png':
      response.writeHead(200, { 'content-type': 'image/png' }).end('<html>not an image</html>');
      return;
    case '/declared-big.jpg':
      response.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(6 * 1024 * 1024) });
      response.write(Buffer.from([0xff, 0xd8, 0xff]));
      return; // never finished: the check must not wait for it
    case '/endless.jpg': {
      // No Content-Length: bytes keep coming until the reader stops reading.
      response.writeHead(200, { 'content-type': 'image/jpeg' });
      response.write(Buffer.from([0xff, 0xd8, 0xff]));
      const chunk = Buffer.alloc(64 * 1024, 1);
      const more = () => {
        while (!response.destroyed && response.write(chunk));
        if (!response.destroyed) response.once('drain', more);
      };
      response.on('close', () => requests.push('/endless.jpg closed'));
      more();
      return;
    }
    case '/moved':
      response.writeHead(302, { location: self.url('/cat.png') }).end();
      return;
    default:
      response.writeHead(404).end();
  }
}
