/**
 * The call engine of the engine role (docs/calls.md), wired together here: SIP on UDP and TCP, an RTP port pool,
 * prompts, carriers and the admission of inbound calls, the registrar of SIP devices (sip/registrar.ts), the API's
 * call commands (calls/commands.ts), the offers of ringing calls (calls/offer-watch.ts) and the queue distributor
 * (calls/steps/queue/distributor.ts, docs/contact-center.md). At start it ends the calls (and their queue entries) a previous run
 * of the same engine owned; at close it hangs up its calls.
 */
import { hostname } from 'node:os';
import path from 'node:path';
import type pg from 'pg';
import { openPool } from '../core/database.ts';
import type { Registry } from 'prom-client';
import type { Clock } from '../core/clock.ts';
import type { Config } from '../core/config.ts';
import { endOwnedCalls } from '../core/calls/calls.ts';
import type { Log } from '../core/log.ts';
import { ActiveCalls } from './calls/active-calls.ts';
import { Admission } from './calls/admission.ts';
import { CallCommandWatch } from './calls/commands.ts';
import { CallMetrics } from './calls/metrics.ts';
import { OfferWatch } from './calls/offer-watch.ts';
import type { CallServices } from './calls/services.ts';
import { prepareRecordings } from './calls/voicemail-recording.ts';
import { Prompts } from './media/prompts.ts';
import type { WebRtcMediaFactory } from './media/webrtc-endpoint.ts';
import { G711WebRtcEndpoint } from './media/webrtc-g711.ts';
import { PortPool } from './media/rtp.ts';
import { CarrierDirectory } from './sip/carriers.ts';
import { Registrar, type RegistrarOptions } from './sip/registrar.ts';
import { SipEndpoint } from './sip/sip-endpoint.ts';
import { QueueDistributor } from './calls/steps/queue/distributor.ts';

export interface CallEngine {
  sipPort: number;
  owner: string;
  calls: ActiveCalls;
  /** What its calls share, for the engine's other callers (engine/verifications/voice.ts). */
  services: CallServices;
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
  /** Opens SIP devices' sealed passwords for the registrar (SigningKeys.sipPasswords). */
  sipPasswords: Uint8Array;
  /** The time plan steps go by (`hours`) and registrations expire by; default the system clock. */
  clock?: Clock;
  /** The registrar's limits and challenges, when not its defaults (registrar.ts). */
  registrar?: Pick<RegistrarOptions, 'algorithms' | 'minExpires' | 'maxExpires' | 'failureLimit' | 'failureWindowMs'>;
}): Promise<CallEngine> {
  const { config, pool, log } = options;
  const metrics = new CallMetrics(options.registry);
  const recordingsDir = path.join(config.dataDir, 'recordings');
  await prepareRecordings(recordingsDir);
  // INVITEs can arrive once SIP listens, before admission exists (it needs the engine's id, from the port).
  const ready: { admission?: Admission; registrar?: Registrar } = {};
  const sip = new SipEndpoint({
    host: config.sip.host,
    advertisedHost: config.sip.advertisedHost,
    port: config.sip.port,
    onInvite: (request, core, source) => {
      if (ready.admission === undefined) request.reject({ statusCode: 503 });
      else ready.admission.onInvite(request, core, source);
    },
    onRegister: (request, source) => {
      if (ready.registrar === undefined) request.reject({ statusCode: 503 });
      else ready.registrar.onRegister(request, source);
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
  // Their queue entries leave first (`queue.left` before `call.ended`), then the calls end.
  // Distribution, the reads that hand its offers over and the agents' queue calls' ends have connections of their
  // own: an agent freed in a burst of ending calls is free and offered a caller without queueing behind those calls'
  // other writes on the engine's pool.
  const distributionPool = openPool(options.databaseUrl, { max: distributionConnections }, (error) =>
    log.warn({ err: error }, 'distribution database connection lost'),
  );
  const queues = new QueueDistributor({
    pool: distributionPool,
    databaseUrl: options.databaseUrl,
    owner,
    log,
    ...(options.clock ? { clock: options.clock } : {}),
  });
  await queues.start().catch(async (error: unknown) => {
    await distributionPool.end();
    throw error;
  });
  const ended = await endOwnedCalls(pool, owner, 'engine_restarted');
  if (ended > 0) log.warn({ owner, ended }, 'ended the calls a previous run of this engine held');
  const active = new ActiveCalls(metrics);
  const services: CallServices = {
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
    queues,
    recordingsDir,
    metrics,
    log,
    carrierSecrets: options.carrierSecrets,
    iceServers: config.iceServers,
    webrtcMedia: await webrtcMediaFactory(config),
    ...(options.clock ? { clock: options.clock } : {}),
  };
  const admission = new Admission(services, active);
  ready.admission = admission;
  const registrar = new Registrar({
    pool,
    sipPasswords: options.sipPasswords,
    owner,
    registry: options.registry,
    log,
    ...(options.clock ? { clock: options.clock } : {}),
    ...options.registrar,
  });
  ready.registrar = registrar;
  // The API's commands for this engine's calls, and the offers of its ringing calls.
  const commands = new CallCommandWatch({ pool, databaseUrl: options.databaseUrl, owner, calls: active, log });
  await commands.start();
  const offers = new OfferWatch({ pool, databaseUrl: options.databaseUrl, calls: active, log });
  await offers.start();
  log.info(
    { sip: `${config.sip.host}:${sipPort}`, advertised: `${config.sip.advertisedHost}:${sipPort}`, owner },
    'call engine listening',
  );
  return {
    sipPort,
    owner,
    calls: active,
    services,
    async close() {
      await queues.close();
      await offers.close();
      await commands.close();
      await active.closeAll('engine_stopped');
      registrar.close();
      await sip.close();
      // The calls' ends free their agents and devices on the distribution's connections. A queue call's device end
      // is asked for by the call's run once its connection ends, which may come after `closeAll` recorded the end
      // of the call: these connections close last.
      await queues.endingsWritten();
      await distributionPool.end();
    },
  };
}

/** The queue distributor's own connections (see `startCallEngine`): distribution, handovers, calls' ends. */
const distributionConnections = 3;

/**
 * The browser legs' media stack WEBRTC_MEDIA names, offering the addresses of WEBRTC_ADDRESSES. The libwebrtc binding
 * is loaded only when chosen: it is native, starts threads of its own, and a process that loaded it must end by
 * `process.exit` (engine/media/webrtc.ts).
 */
async function webrtcMediaFactory(config: Config): Promise<WebRtcMediaFactory> {
  const hostAddresses = config.webrtcAddresses;
  if (config.webrtcMedia === 'libwebrtc') {
    const { WebRtcEndpoint } = await import('./media/webrtc.ts');
    return (options) => new WebRtcEndpoint({ hostAddresses, ...options });
  }
  return (options) => new G711WebRtcEndpoint({ hostAddresses, ...options });
}
