/**
 * Setup of the end-to-end texting tests (test/engine/texting*.test.ts): a service with the API (its database, an
 * application, a workspace made through the API, a real HTTPS webhook receiver subscribed through the API), carriers
 * whose messaging settings point at test SMSCs (test/helpers/smsc.ts) with a workspace number each, and engine roles
 * started on that database the way `switchboard engine` starts one: after the carriers exist, since the engine reads
 * its links at start.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import { startRoles } from '../../app/roles.ts';
import { addCarrier } from '../../core/carriers/carriers.ts';
import { setCarrierMessaging } from '../../core/carriers/messaging.ts';
import { loadConfig } from '../../core/config.ts';
import { inTransaction } from '../../core/database.ts';
import { createOutboundMessage, type MessageRow } from '../../core/messages/messages.ts';
import type { NumberRow, NumberWorkspace } from '../../core/numbers/numbers.ts';
import { loadSigningKeys } from '../../core/service-secret.ts';
import { textingSetup } from './messages.ts';
import type { TestSmsc } from './smsc.ts';
import { startService, type TestService } from './service.ts';
import { until } from './until.ts';
import { Receiver } from './webhook-receiver.ts';

export interface TextingService {
  service: TestService;
  workspace: NumberWorkspace;
  /** Every webhook the engine delivered to the application's endpoint. */
  receiver: Receiver;
  close(): Promise<void>;
}

/** A service with the API only (the engines start later), a workspace, and a webhook endpoint on a receiver. */
export async function textingService(): Promise<TextingService> {
  const service = await startService(
    { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', LOG_LEVEL: 'warn', DATABASE_POOL_SIZE: '3' },
    ['api'],
  );
  const receiver = await Receiver.start();
  const close = async () => {
    await receiver.close();
    await service.close();
  };
  try {
    const app = await service.application();
    const externalWorkspaceId = `ws-${randomUUID()}`;
    const workspace = await service.request('POST', '/api/v1/workspaces', {
      auth: app.apiKey,
      body: { externalWorkspaceId, name: 'Acme Texting', timezone: 'UTC' },
    });
    if (workspace.status !== 201) throw new Error(`workspace: ${workspace.status} ${workspace.text}`);
    const endpoint = await service.request('POST', '/api/v1/webhooks', {
      auth: app.apiKey,
      body: { url: receiver.url() },
    });
    if (endpoint.status !== 201) throw new Error(`webhook: ${endpoint.status} ${endpoint.text}`);
    return {
      service,
      workspace: { id: workspace.body.id, applicationId: app.applicationId, externalWorkspaceId },
      receiver,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * A carrier whose messaging settings point at `smsc` (the password sealed with the service's key, as
 * `switchboard carriers messaging` seals it), and a number of it with `sms` claimed by the workspace (its texting
 * registration approved when asked, as operations 17 and 67 need).
 */
export async function smscCarrier(
  texting: Pick<TextingService, 'service' | 'workspace'>,
  smsc: TestSmsc,
  options: { approved?: boolean } = {},
): Promise<{ carrier: string; number: NumberRow }> {
  const { pool } = texting.service;
  const keys = await loadSigningKeys(pool, undefined);
  const carrier = `smsc-${randomUUID().slice(0, 8)}`;
  await addCarrier(pool, keys.carrierSecrets, { name: carrier, address: '192.0.2.10' });
  await setCarrierMessaging(pool, keys.carrierSecrets, carrier, {
    host: '127.0.0.1',
    port: smsc.port,
    systemId: 'switchboard',
    password: 'secret',
    throughput: 1_000,
  });
  const { number } = await textingSetup(pool, {
    carrier,
    messaging: false,
    workspace: texting.workspace,
    approved: options.approved === true,
  });
  return { carrier, number };
}

export interface EngineRole {
  /** The engine's HTTP server (health and metrics). */
  url: string;
  logs: string[];
  /** A sample's value on the engine's `GET /metrics` (labels matched as given), 0 when absent. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

/** The engine role on `service`'s database, in this process, as a `switchboard engine` pod would run it. */
export async function startEngineRole(service: TestService, engineId: string): Promise<EngineRole> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `${engineId}-engine-`));
  const logs: string[] = [];
  const logStream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  try {
    const running = await startRoles(
      loadConfig({
        DATABASE_URL: service.databaseUrl,
        ENGINE_HTTP_PORT: '0',
        SIP_PORT: '0',
        SWITCHBOARD_DATA_DIR: dataDir,
        ENGINE_ID: engineId,
        DATABASE_POOL_SIZE: '4',
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        LOG_LEVEL: 'info',
      }),
      new Set(['engine']),
      { logStream },
    );
    return {
      url: running.url,
      logs,
      async metric(name, labels = {}) {
        const text = await (await fetch(`${running.url}/metrics`)).text();
        const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
        const line = text
          .split('\n')
          .find((row) => row.startsWith(`${name}{`) && wanted.every((label) => row.includes(label)));
        return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
      },
      async close() {
        await running.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/** An outbound message written as operation 67 will write it: in one transaction, announced at commit. */
export function sendText(
  texting: Pick<TextingService, 'service' | 'workspace'>,
  number: NumberRow,
  to: string,
  text: string,
): Promise<MessageRow> {
  return inTransaction(texting.service.pool, (client) =>
    createOutboundMessage(client, { workspace: texting.workspace, number, to, text, actor: null }),
  );
}

/**
 * Resolves once the message is `status`; fails after 20 s naming the last status seen and where its outbound parts
 * were then (state, submissions, not before, carrier id), so that a failure says which step did not happen.
 */
export async function statusOf(service: TestService, messageId: string, status: string): Promise<void> {
  let last = 'none';
  try {
    await until(
      `message ${messageId} ${status}`,
      async () => {
        const found = await service.pool.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [
          messageId,
        ]);
        last = found.rows[0]?.status ?? 'none';
        return last === status ? true : undefined;
      },
      20_000,
    );
  } catch (error) {
    const parts = await service.pool
      .query<{ state: string; attempts: number; not_before: Date | null; carrier_message_id: string | null }>(
        `SELECT state, attempts, not_before, carrier_message_id FROM message_parts
          WHERE message_id = $1 AND direction = 'outbound' ORDER BY part_index`,
        [messageId],
      )
      .then(
        ({ rows }) => JSON.stringify(rows),
        (failed: unknown) => `unread: ${String(failed)}`,
      );
    throw new Error(`${(error as Error).message} (last seen ${last}; parts ${parts}; at ${new Date().toISOString()})`, {
      cause: error,
    });
  }
}

/** The outbound part states of a message, by part index. */
export async function partStates(service: TestService, messageId: string): Promise<string[]> {
  const found = await service.pool.query<{ state: string }>(
    'SELECT state FROM message_parts WHERE message_id = $1 ORDER BY part_index',
    [messageId],
  );
  return found.rows.map((row) => row.state);
}
