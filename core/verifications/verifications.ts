/**
 * One-time codes (docs/messaging.md, "One-time codes"): `verifications`. A code is kept only as an HMAC over the
 * verification's id and the code, keyed by the service secret's verification key (six digits are too few for a bare
 * hash); a voice verification also keeps it sealed until an engine takes its call, which clears it in the statement
 * that takes it. Sends are limited per recipient and workspace; checks per verification.
 */
import { createHmac, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import { announce, verificationsChannel } from '../change-notices.ts';
import type { Queryable } from '../database.ts';
import type { NumberWorkspace } from '../numbers/numbers.ts';
import { sealSecret } from '../sealing.ts';

export type VerificationChannel = 'sms' | 'call';
export type VerificationStatus = 'pending' | 'approved' | 'expired' | 'spent';
export type CallState = 'waiting' | 'placing' | 'answered' | 'unanswered' | 'failed';

/** How long a code can be checked. */
export const verificationLifetimeMs = 10 * 60_000;
/** Wrong codes a verification takes; the last of them spends it. */
export const maxChecks = 5;
/** Verifications a workspace may send one recipient within `sendWindowMs`. */
export const sendLimit = 5;
export const sendWindowMs = 60 * 60_000;

export interface VerificationRow {
  id: string;
  application_id: string;
  workspace_id: string;
  to_number: string;
  channel: VerificationChannel;
  status: VerificationStatus;
  checks: number;
  expires_at: Date;
  message_id: string | null;
  call_state: CallState | null;
  created_at: Date;
}

const columns = `id, application_id, workspace_id, to_number, channel, status, checks, expires_at, message_id,
  call_state, created_at`;

/** The verification as operation 17 answers it. */
export function verificationJson(row: VerificationRow) {
  return {
    id: row.id,
    to: row.to_number,
    channel: row.channel,
    status: row.status,
    expiresAt: row.expires_at.toISOString(),
  };
}

/** A random 6-digit code, leading zeros kept. */
export function newCode(): string {
  return String(randomInt(0, 1_000_000)).padStart(6, '0');
}

/** HMAC-SHA256 over the id and the code: what `code_hash` keeps. */
export function codeHash(key: Uint8Array, id: string, code: string): string {
  return createHmac('sha256', key).update(`${id}:${code}`).digest('hex');
}

/** The associated data a voice verification's code is sealed with: its row, so it opens nowhere else. */
export const sealedCodeData = (id: string) => `verification:${id}`;

export interface NewVerification {
  workspace: NumberWorkspace;
  to: string;
  channel: VerificationChannel;
  code: string;
  keys: { verificationHashes: Uint8Array; verificationCodes: Uint8Array };
}

/**
 * Writes a pending verification, or answers `limit_exceeded` when the workspace sent the recipient `sendLimit` in the
 * last `sendWindowMs` (counted under a lock on the pair, so two sends at once cannot both pass the last place). A
 * voice verification is announced to the engines at commit.
 */
export async function createVerification(
  db: Queryable,
  input: NewVerification,
): Promise<VerificationRow | 'limit_exceeded'> {
  await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
    `verification:${input.workspace.id}:${input.to}`,
  ]);
  const recent = await db.query<{ sent: number }>(
    `SELECT count(*)::int AS sent FROM verifications
      WHERE workspace_id = $1 AND to_number = $2 AND created_at > clock_timestamp() - $3 * interval '1 millisecond'`,
    [input.workspace.id, input.to, sendWindowMs],
  );
  if ((recent.rows[0]?.sent ?? 0) >= sendLimit) return 'limit_exceeded';
  const id = randomUUID();
  const call = input.channel === 'call';
  const inserted = await db.query<VerificationRow>(
    `INSERT INTO verifications (id, application_id, workspace_id, to_number, channel, code_hash, status, expires_at,
                                sealed_code, call_state)
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', clock_timestamp() + $7 * interval '1 millisecond', $8, $9)
     RETURNING ${columns}`,
    [
      id,
      input.workspace.applicationId,
      input.workspace.id,
      input.to,
      input.channel,
      codeHash(input.keys.verificationHashes, id, input.code),
      verificationLifetimeMs,
      call ? sealSecret(input.keys.verificationCodes, input.code, sealedCodeData(id)) : null,
      call ? 'waiting' : null,
    ],
  );
  if (call) await announce(db, verificationsChannel, id);
  return inserted.rows[0] as VerificationRow;
}

/** Notes the message that carries an SMS verification's code. */
export async function noteVerificationMessage(db: Queryable, id: string, messageId: string): Promise<void> {
  await db.query('UPDATE verifications SET message_id = $2 WHERE id = $1', [id, messageId]);
}

/**
 * Checks a code against the workspace's verification; undefined when the workspace has no such verification. A
 * pending, unexpired one with the code is `approved`; a wrong code counts, and the `maxChecks`-th spends it; past
 * its expiry it is `expired` (and no code counts). One no longer pending answers `expired` past its expiry, else
 * `spent` (an approved code approves once; the retry of the approving request replays its stored answer).
 */
export async function checkVerification(
  db: Queryable,
  input: { workspaceId: string; id: string; code: string; hashKey: Uint8Array },
): Promise<VerificationStatus | undefined> {
  const found = await db.query<{ status: VerificationStatus; checks: number; code_hash: string; expired: boolean }>(
    `SELECT status, checks, code_hash, expires_at <= clock_timestamp() AS expired FROM verifications
      WHERE id = $1 AND workspace_id = $2 FOR UPDATE`,
    [input.id, input.workspaceId],
  );
  const row = found.rows[0];
  if (row === undefined) return undefined;
  if (row.status !== 'pending') return row.expired || row.status === 'expired' ? 'expired' : 'spent';
  if (row.expired) {
    await setStatus(db, input.id, 'expired');
    return 'expired';
  }
  const expected = Buffer.from(row.code_hash, 'hex');
  const given = Buffer.from(codeHash(input.hashKey, input.id, input.code), 'hex');
  if (expected.length === given.length && timingSafeEqual(expected, given)) {
    await setStatus(db, input.id, 'approved');
    return 'approved';
  }
  const checks = row.checks + 1;
  const status: VerificationStatus = checks >= maxChecks ? 'spent' : 'pending';
  await db.query(
    `UPDATE verifications SET checks = $2, status = $3, updated_at = clock_timestamp(),
            sealed_code = CASE WHEN $3 = 'pending' THEN sealed_code END
      WHERE id = $1`,
    [input.id, checks, status],
  );
  return status;
}

/** A verification no longer pending needs its sealed code no more either. */
async function setStatus(db: Queryable, id: string, status: VerificationStatus): Promise<void> {
  await db.query(
    `UPDATE verifications SET status = $2, sealed_code = NULL, updated_at = clock_timestamp() WHERE id = $1`,
    [id, status],
  );
}

/** The number a voice verification calls from: the workspace's first claimed voice number (with its carrier). */
const callerNumber = `SELECT n.e164, n.carrier FROM phone_numbers n
  WHERE n.workspace_id = v.workspace_id AND 'voice' = ANY (n.capabilities)
  ORDER BY n.claimed_at, n.id LIMIT 1`;

/** Whether the workspace has a number a voice verification can call from. */
export async function hasVoiceCaller(db: Queryable, workspaceId: string): Promise<boolean> {
  const found = await db.query(`SELECT 1 FROM (SELECT $1::uuid AS workspace_id) v, LATERAL (${callerNumber}) n`, [
    workspaceId,
  ]);
  return found.rows.length > 0;
}

/**
 * The workspace's first claimed number that can text: its carrier has messaging settings and it takes SMS (as
 * core/numbers/numbers.ts `senderOf` says `canText`); the caller reads it with `senderOf`.
 */
export async function firstTextingNumberId(db: Queryable, workspaceId: string): Promise<string | undefined> {
  const found = await db.query<{ id: string }>(
    `SELECT n.id FROM phone_numbers n JOIN carriers c ON c.name = n.carrier
      WHERE n.workspace_id = $1 AND c.messaging IS NOT NULL AND 'sms' = ANY (n.capabilities)
        AND n.texting_registration = 'approved'
      ORDER BY n.claimed_at, n.id LIMIT 1`,
    [workspaceId],
  );
  return found.rows[0]?.id;
}

/** A voice verification an engine took: where to call, from which number and carrier, and the sealed code. */
export interface TakenCall {
  id: string;
  workspaceId: string;
  to: string;
  sealedCode: string;
  /** The workspace's number to call from; undefined when it has none left. */
  caller: { e164: string; carrier: string } | undefined;
}

/**
 * Takes one voice verification waiting for its call (`placing`, owned by `owner`), clearing its sealed code in the
 * same statement: exactly one engine gets the code, and the row keeps it no longer. Undefined when none waits.
 */
export async function takeVerificationCall(db: Queryable, owner: string): Promise<TakenCall | undefined> {
  const taken = await db.query<{ id: string; to_number: string; sealed_code: string; workspace_id: string }>(
    `WITH picked AS (
       SELECT v.id, v.sealed_code FROM verifications v
        WHERE v.call_state = 'waiting' AND v.status = 'pending' AND v.expires_at > clock_timestamp()
        ORDER BY v.created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
     UPDATE verifications v SET call_state = 'placing', call_owner = $1, sealed_code = NULL,
                                updated_at = clock_timestamp()
       FROM picked
      WHERE v.id = picked.id
     RETURNING v.id, v.to_number, picked.sealed_code, v.workspace_id`,
    [owner],
  );
  const row = taken.rows[0];
  if (row === undefined) return undefined;
  const caller = await db.query<{ e164: string; carrier: string }>(
    `SELECT n.e164, n.carrier FROM (SELECT $1::uuid AS workspace_id) v, LATERAL (${callerNumber}) n`,
    [row.workspace_id],
  );
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    to: row.to_number,
    sealedCode: row.sealed_code,
    caller: caller.rows[0],
  };
}

/** How a taken call went. */
export async function callPlaced(db: Queryable, id: string, state: 'answered' | 'unanswered' | 'failed') {
  await db.query(`UPDATE verifications SET call_state = $2, updated_at = clock_timestamp() WHERE id = $1`, [id, state]);
}

/**
 * Voice verifications whose code expired before any engine took them: their sealed code is cleared and their call
 * `failed` (nobody can use the code any more). Returns how many.
 */
export async function dropExpiredCalls(db: Queryable): Promise<number> {
  const dropped = await db.query(
    `UPDATE verifications SET call_state = 'failed', sealed_code = NULL, updated_at = clock_timestamp()
      WHERE call_state = 'waiting' AND (expires_at <= clock_timestamp() OR status <> 'pending')`,
  );
  return dropped.rowCount ?? 0;
}
