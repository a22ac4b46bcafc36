/**
 * The engine role's start (`switchboard engine`, and under `all`): webhook deliveries (docs/events.md), the call
 * engine (docs/calls.md) and the calls of voice verifications, then the SMPP links of the carriers that carry texts
 * (docs/messaging.md; one leader per carrier across engines, following the carriers' settings as they change), the
 * message records' sweep and the MMS sender (every engine takes MMS from the records and posts them to their
 * carriers' media interfaces). Stopping ends the calls first, with a BYE, before the
 * HTTP server drains; deliveries in flight finish while it drains, and the links unbind.
 */
import { openPool } from '../core/database.ts';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { type CallEngine, startCallEngine } from './call-engine.ts';
import { openLinkStore } from '../core/messages/store.ts';
import { Dispatcher } from './delivery/dispatcher.ts';
import { type MessagingLinks, startMessagingLinks } from './messaging/links.ts';
import { MmsSender } from './messaging/mms.ts';
import { mmsAccount } from '../core/carriers/messaging.ts';
import { openMmsQueue } from '../core/messages/mms.ts';
import { VoiceVerifications } from './verifications/voice.ts';

export interface RunningEngine extends RunningRole {
  /** The SIP port (UDP and TCP). */
  sipPort: number;
}

export async function startEngine(context: RoleContext): Promise<RunningEngine> {
  const { config, log } = context;
  // The dispatcher's own writes (leases, acknowledgements) commit without waiting for the disk: a server crash can
  // only lose acknowledgements, and a lost one means the event is delivered again, which at-least-once allows.
  const deliveryPool = openPool(
    context.databaseUrl,
    { max: config.poolSize, applicationName: 'switchboard-delivery', options: '-c synchronous_commit=off' },
    (error) => log.warn({ err: error }, 'delivery database connection lost'),
  );
  const delivery = new Dispatcher({
    pool: deliveryPool,
    databaseUrl: context.databaseUrl,
    secretsKey: context.keys.webhookSecrets,
    allowPrivateNetworks: config.webhookAllowPrivateNetworks,
    concurrency: config.webhookConcurrency,
    applicationConcurrency: config.webhookShares.application,
    endpointConcurrency: config.webhookShares.endpoint,
    registry: context.registry,
    log: log.child({ component: 'webhooks' }),
  });
  await delivery.start();
  const closeDelivery = async () => {
    await delivery.close();
    await deliveryPool.end();
  };
  let calls: CallEngine;
  try {
    calls = await startCallEngine({
      config,
      pool: context.pool,
      databaseUrl: context.databaseUrl,
      registry: context.registry,
      log: log.child({ component: 'calls' }),
      carrierSecrets: context.keys.carrierSecrets,
      sipPasswords: context.keys.sipPasswords,
      ...(context.clock ? { clock: context.clock } : {}),
    });
  } catch (error) {
    await closeDelivery();
    throw error;
  }
  // Voice verifications place their calls with the call engine's SIP, media and prompts (docs/messaging.md).
  const verifications = new VoiceVerifications({
    services: calls.services,
    databaseUrl: context.databaseUrl,
    codesKey: context.keys.verificationCodes,
    log: log.child({ component: 'verifications' }),
  });
  const messagingLog = log.child({ component: 'messaging' });
  const store = openLinkStore(context.pool, {
    databaseUrl: context.databaseUrl,
    log: (message) => messagingLog.warn({}, message),
  });
  const mms = new MmsSender({
    queue: openMmsQueue(context.pool),
    account: (carrier) => mmsAccount(context.pool, context.keys.carrierSecrets, carrier),
    databaseUrl: context.databaseUrl,
    log: (message) => messagingLog.warn({}, message),
  });
  let messaging: MessagingLinks;
  try {
    await verifications.start();
    await mms.start();
    messaging = await startMessagingLinks({
      pool: context.pool,
      databaseUrl: context.databaseUrl,
      carrierSecrets: context.keys.carrierSecrets,
      store,
      log: messagingLog,
      metrics: context.registry,
    });
  } catch (error) {
    await mms.close();
    await store.close();
    await verifications.close();
    await calls.close();
    await closeDelivery();
    throw error;
  }
  return {
    sipPort: calls.sipPort,
    stop: async () => {
      await verifications.close();
      await calls.close();
      await messaging.close();
      await mms.close();
      await store.close();
    },
    close: closeDelivery,
  };
}
