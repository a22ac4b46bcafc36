/**
 * Setup of the message records' tests (test/core/messages-*.test.ts): a database of the file's own, an application
 * with a workspace, a carrier with messaging settings and numbers claimed by the workspace, written through the
 * modules that own those tables (no service started: the records need none).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { addCarrier } from '../../core/carriers/carriers.ts';
import { setCarrierMessaging } from '../../core/carriers/messaging.ts';
import { createApplication } from '../../core/identity/applications.ts';
import { createWorkspace } from '../../core/identity/workspaces.ts';
import {
  type Capability,
  claimNumber,
  decideTextingRegistration,
  importNumbers,
  type NumberRow,
  updateNumber,
} from '../../core/numbers/numbers.ts';
import type { NumberWorkspace } from '../../core/numbers/numbers.ts';
import { freshDatabase, type TestDatabase } from './database.ts';

const secretsKey = randomBytes(32);

export interface MessagesDatabase {
  database: TestDatabase;
  pool: pg.Pool;
  close(): Promise<void>;
}

export async function messagesDatabase(): Promise<MessagesDatabase> {
  const database = await freshDatabase();
  const pool = new pg.Pool({ connectionString: database.url, max: 10 });
  pool.on('error', () => {});
  return {
    database,
    pool,
    async close() {
      await pool.end();
      await database.drop();
    },
  };
}

let numbers = 0;

/** A new E.164 number no other test of the file uses. */
export function newNumber(): string {
  numbers += 1;
  return `+3319${String(process.pid % 1000).padStart(3, '0')}${String(numbers).padStart(4, '0')}`;
}

export interface TextingSetup {
  workspace: NumberWorkspace;
  carrier: string;
  number: NumberRow;
}

/**
 * A carrier (with messaging settings unless `messaging` is false) and one of its numbers claimed by a new workspace,
 * or by `workspace`.
 */
export async function textingSetup(
  pool: pg.Pool,
  options: {
    messaging?: boolean;
    capabilities?: Capability[];
    carrier?: string;
    workspace?: NumberWorkspace;
    /** The number's texting registration approved (a campaign named, then decided as the admin command does). */
    approved?: boolean;
    /** The carrier's HTTP media interface (its MMS URL). */
    mmsUrl?: string;
  } = {},
): Promise<TextingSetup> {
  const carrier = options.carrier ?? `carrier-${randomUUID().slice(0, 8)}`;
  // Adding a carrier again (a setup of the same file naming it) changes nothing.
  await addCarrier(pool, secretsKey, { name: carrier, address: '192.0.2.10' });
  if (options.messaging !== false) {
    await setCarrierMessaging(pool, secretsKey, carrier, {
      host: '192.0.2.10',
      systemId: 'switchboard',
      password: 'pw',
      ...(options.mmsUrl === undefined ? {} : { mmsUrl: options.mmsUrl }),
    });
  }
  const workspace = options.workspace ?? (await newWorkspace(pool));
  const e164 = newNumber();
  await importNumbers(pool, carrier, [e164], options.capabilities ?? ['voice', 'sms']);
  const claimed = await claimNumber(pool, workspace.id, e164, 'Front desk');
  if (claimed === undefined) throw new Error('number not claimed');
  if (options.approved !== true) return { workspace, carrier, number: claimed };
  await updateNumber(pool, claimed.id, {
    name: claimed.name,
    voiceLane: claimed.voice_lane,
    campaignId: 'C1234567',
    textingRegistration: 'pending',
    emergencyAddress: null,
    routingPlanId: null,
  });
  const number = await decideTextingRegistration(pool, e164, 'approved');
  return { workspace, carrier, number };
}

async function newWorkspace(pool: pg.Pool): Promise<NumberWorkspace> {
  const applicationId = `app-${randomUUID().slice(0, 8)}`;
  await createApplication(pool, applicationId, []);
  const externalWorkspaceId = `ws-${randomUUID()}`;
  const workspace = await createWorkspace(pool, applicationId, {
    externalWorkspaceId,
    name: 'Acme',
    timezone: 'UTC',
    destinationPolicy: { allowedPrefixes: [], blockedPrefixes: [] },
    limits: { concurrentCalls: 10, devicesPerUser: 5 },
  });
  if (workspace === undefined) throw new Error('workspace not created');
  return { id: workspace.id, applicationId, externalWorkspaceId };
}

/** The events of the number's stream, in sequence order. */
export async function numberEvents(pool: pg.Pool, numberId: string) {
  const result = await pool.query<{ type: string; sequence: string; payload: string }>(
    'SELECT type, sequence, payload FROM events WHERE stream_key = $1 ORDER BY sequence',
    [`number:${numberId}`],
  );
  return result.rows.map((row) => {
    const event = JSON.parse(row.payload) as {
      type: string;
      sequence: number;
      message: { id: string; status: string; text: string; error: unknown; segments: number; direction: string };
    };
    return event;
  });
}
