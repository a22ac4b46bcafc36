/**
 * The softphone page (docs/phones.md, "The phone in the browser"): `GET /phone` is a plain page, and
 * `GET /phone/phone.js` and `GET /phone/softphone.js` are the browser library (`switchboard/phone`, client/phone.ts)
 * and the page's script (client/softphone.ts). No authentication: they are static; the page signs in to the API with
 * a token pasted into it.
 *
 * The scripts are the compiled ones beside the build (dist/client/*.js, from `npm run build`) when the service runs
 * from dist/. Only when it runs from the sources (tsx: this module is a .ts file) is the TypeScript of client/*.ts
 * transpiled, once, on the first request, with the `typescript` development dependency: a production build never
 * reaches for it.
 */
import { readFile } from 'node:fs/promises';
import type { FastifyInstance } from 'fastify';

const scripts = ['phone', 'softphone'] as const;
const clientFolder = new URL('../../client/', import.meta.url);

const page = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Switchboard softphone</title>
    <style>
      body { font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; }
      textarea, input { width: 100%; box-sizing: border-box; font-family: monospace; }
      li { margin: 0.4rem 0; }
      #call { border: 1px solid #888; border-radius: 0.5rem; padding: 0.5rem 1rem; }
      #log { color: #555; font-size: 0.9em; }
    </style>
  </head>
  <body>
    <h1>Softphone</h1>
    <form id="sign-in">
      <label>Token (a user or member token with <code>devices:*</code>)<br /><textarea id="token" rows="3" required></textarea></label>
      <label>Service<br /><input id="base-url" type="url" required /></label>
      <p><button type="submit" id="start">Sign in</button> <span id="status">Signed out</span></p>
    </form>
    <h2>Incoming calls</h2>
    <ul id="incoming"></ul>
    <section id="call" hidden>
      <p><strong id="call-party"></strong>: <span id="call-state"></span></p>
      <button id="mute" type="button">Mute</button> <button id="hang-up" type="button">Hang up</button>
    </section>
    <audio id="remote-audio" autoplay></audio>
    <h2>Log</h2>
    <ol id="log" reversed></ol>
    <script type="module" src="/phone/softphone.js"></script>
  </body>
</html>
`;

const compiled = new Map<string, Promise<string>>();

/** Running from the sources (tsx), where client/ holds TypeScript only, rather than from the build (dist/). */
const fromSources = import.meta.url.endsWith('.ts');

async function transpiled(name: string): Promise<string> {
  const typescript = (await import('typescript')).default;
  const text = await readFile(new URL(`${name}.ts`, clientFolder), 'utf8');
  const options = { target: typescript.ScriptTarget.ES2022, module: typescript.ModuleKind.ES2022 };
  return typescript.transpileModule(text, { compilerOptions: options }).outputText;
}

/** The script's JavaScript: the build's, or (from the sources) the TypeScript transpiled; either once. */
function script(name: (typeof scripts)[number]): Promise<string> {
  let source = compiled.get(name);
  if (source === undefined) {
    source = fromSources ? transpiled(name) : readFile(new URL(`${name}.js`, clientFolder), 'utf8');
    // A failure is not kept: the next request tries again.
    source.catch(() => compiled.delete(name));
    compiled.set(name, source);
  }
  return source;
}

/** `frameAncestors`: origins that may frame the page (PHONE_FRAME_ANCESTORS, checked by core/config.ts); none: no page. */
export function phoneRoutes(app: FastifyInstance, frameAncestors: readonly string[]): void {
  const ancestors = frameAncestors.length === 0 ? "'none'" : frameAncestors.join(' ');
  const policy = `default-src 'self'; style-src 'unsafe-inline'; connect-src *; frame-ancestors ${ancestors}`;
  app.get('/phone', async (_request, reply) => {
    reply.header('content-type', 'text/html; charset=utf-8').header('content-security-policy', policy);
    if (frameAncestors.length === 0) reply.header('x-frame-options', 'DENY');
    return reply.send(page);
  });
  for (const name of scripts) {
    app.get(`/phone/${name}.js`, async (_request, reply) =>
      reply
        .header('content-type', 'text/javascript; charset=utf-8')
        .header('cache-control', 'no-cache')
        .send(await script(name)),
    );
  }
}
