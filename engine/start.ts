/**
 * The engine role's start (`switchboard engine`, and under `all`): webhook deliveries (docs/events.md), then the call
 * engine (docs/calls.md). Stopping ends the calls first, with a BYE, before the HTTP server drains; deliveries in
 * flight finish while it drains.
 */
import pg from 'pg';
import type { RoleContext, RunningRole } from '../core/role-context.ts';
import { type CallEngine, startCallEngine } from './call-engine.ts';
import { Dispatcher } from './delivery/dispatcher.ts';

export interface RunningEngine extends RunningRole {
  /** The SIP port (UDP and TCP). */
  sipPort: number;
}

export async function startEngine(context: RoleContext): Promise<RunningEngine> {
  const { config, log } = context;
  // The dispatcher's own writes (leases, acknowledgements) commit without waiting for the disk: a server crash can
  // only lose acknowledgements, and a lost one means the event is delivered again, which at-least-once allows.
  const deliveryPool = new pg.Pool({
    connectionString: context.databaseUrl,
    max: config.poolSize,
    application_name: 'switchboard-delivery',
    options: '-c synchronous_commit=off',
  });
  deliveryPool.on('error', (error) => log.warn({ err: error }, 'delivery database connection lost'));
  const delivery = new Dispatcher({
    pool: deliveryPool,
    databaseUrl: context.databaseUrl,
    secretsKey: context.keys.webhookSecrets,
    allowPrivateNetworks: config.webhookAllowPrivateNetworks,
    concurrency: config.webhookConcurrency,
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
  return { sipPort: calls.sipPort, stop: () => calls.close(), close: closeDelivery };
}
