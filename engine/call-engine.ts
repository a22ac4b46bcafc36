/**
 * The call engine of the engine role (docs/calls.md): SIP on UDP and TCP, an RTP port pool, prompts, carriers and
 * the inbound call handler, plus the API's call control (a hangup asked through `switchboard_call_control`). At start
 * it ends the calls a previous run of the same engine owned; at close it hangs up its calls.
 */
import { hostname } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import type { Registry } from 'prom-client';
import { callControlChannel, ChangeListener } from '../core/change-notices.ts';
import type { Clock } from '../core/clock.ts';
import type { Config } from '../core/config.ts';
import { endOwnedCalls } from '../core/calls/calls.ts';
import type { Log } from '../core/log.ts';
import { InboundCalls } from './calls/inbound.ts';
import { CallMetrics } from './calls/metrics.ts';
import { Prompts } from './media/prompts.ts';
import { PortPool } from './media/rtp.ts';
import { CarrierDirectory } from './sip/carriers.ts';
import { SipEndpoint } from './sip/user-agent.ts';

/** How often the engine looks for hangup requests whose notice it may have missed. */
const hangupPollMs = 2_000;

export interface CallEngine {
  sipPort: number;
  owner: string;
  calls: InboundCalls;
  close(): Promise<void>;
}

export async function startCallEngine(options: {
  config: Config;
  pool: pg.Pool;
  databaseUrl: string;
  registry: Registry;
  log: Log;
  /** Opens carriers' sealed SIP passwords (SigningKeys.carrierSecrets). */
  carrierSecrets: Uint8Array;
  /** The time plan steps go by (`hours`); default the system clock. */
  clock?: Clock;
}): Promise<CallEngine> {
  const { config, pool, log } = options;
  const metrics = new CallMetrics(options.registry);
  const recordingsDir = path.join(config.dataDir, 'recordings');
  await InboundCalls.prepare(recordingsDir);
  // INVITEs can arrive once SIP listens, before the handler exists (it needs the engine's id, from the port).
  const ready: { calls?: InboundCalls } = {};
  const sip = new SipEndpoint({
    host: config.sip.host,
    advertisedHost: config.sip.advertisedHost,
    port: config.sip.port,
    onInvite: (request, core, source) => {
      if (ready.calls === undefined) request.reject({ statusCode: 503 });
      else ready.calls.onInvite(request, core, source);
    },
    onMessage: (direction, kind) => metrics.sipMessages.inc({ direction, kind }),
    onMalformed: (reason, source) => {
      metrics.sipMalformed.inc({ reason });
      log.debug({ reason, from: `${source.address}:${source.port}` }, 'SIP input dropped');
    },
    log: (message) => log.warn({}, message),
  });
  const sipPort = await sip.start();
  metrics.countTransactions(() => sip.transactions);
  const owner = config.engineId ?? `${hostname()}:${sipPort}`;
  const ended = await endOwnedCalls(pool, owner, 'engine_restarted');
  if (ended > 0) log.warn({ owner, ended }, 'ended the calls a previous run of this engine held');
  const active = new InboundCalls({
    pool,
    sip,
    carriers: new CarrierDirectory(pool),
    ports: new PortPool(config.rtp.portMin, config.rtp.portMax),
    rtpHost: config.rtp.host,
    // SDP names the RTP address itself, or the advertised one when RTP binds a wildcard.
    rtpAdvertisedHost: ['0.0.0.0', '::', '[::]'].includes(config.rtp.host)
      ? config.sip.advertisedHost
      : config.rtp.host,
    prompts: new Prompts({
      cacheDir: path.join(config.dataDir, 'prompts'),
      ttsCommand: config.ttsCommand,
      allowPrivateNetworks: config.webhookAllowPrivateNetworks,
    }),
    owner,
    recordingsDir,
    metrics,
    log,
    carrierSecrets: options.carrierSecrets,
    ...(options.clock ? { clock: options.clock } : {}),
  });
  ready.calls = active;
  // Hangups the API asked for: recorded on the call row, announced on callControlChannel. The notice wakes the
  // engine at once; a check when the listener (re)connects and a short poll find a request whose notice was missed.
  let checking: Promise<void> | undefined;
  const hangupRequested = () => {
    checking ??= pool
      .query<{ id: string }>(
        `SELECT id FROM calls WHERE engine_owner = $1 AND ended_at IS NULL AND hangup_requested_at IS NOT NULL`,
        [owner],
      )
      .then(async (result) => {
        for (const { id } of result.rows) await active.hangup(id);
      })
      .catch((error: unknown) => log.warn({ err: error }, 'hangup requests could not be read'))
      .finally(() => {
        checking = undefined;
      });
  };
  const control = new ChangeListener(
    options.databaseUrl,
    callControlChannel,
    (payload) => {
      let request: { callId?: unknown; action?: unknown };
      try {
        request = JSON.parse(payload) as typeof request;
      } catch {
        return;
      }
      if (request.action === 'hangup' && typeof request.callId === 'string') {
        active.hangup(request.callId).catch((error: unknown) => log.warn({ err: error }, 'hangup failed'));
      }
    },
    hangupRequested,
    (message) => log.warn({}, message),
  );
  await control.start();
  const hangupPoll = setInterval(hangupRequested, hangupPollMs);
  hangupPoll.unref();
  log.info(
    { sip: `${config.sip.host}:${sipPort}`, advertised: `${config.sip.advertisedHost}:${sipPort}`, owner },
    'call engine listening',
  );
  return {
    sipPort,
    owner,
    calls: active,
    async close() {
      clearInterval(hangupPoll);
      await control.close();
      await checking;
      await active.closeAll('engine_stopped');
      await sip.close();
    },
  };
}
