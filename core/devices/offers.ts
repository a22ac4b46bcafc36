/**
 * The `offers` table (docs/phones.md, "Offers"): one device asked to take one call in one round of the `ring` step,
 * with the engine's WebRTC SDP offer for that device's leg. The ring step makes them (`makeOffers`); the device reads
 * them (`waitingOffers`, the long-poll of operation 63), accepts (64) or declines (65); the engine withdraws them
 * when the caller hangs up or the round ends (`withdrawOffers`), and sweeps those past their expiry or whose device's
 * presence lapsed (`expireOffers`, `withdrawLapsedOffers`).
 *
 * Every change of a call's offers first locks the call row, so that they take turns: the first accept of a call wins
 * and no offer is made, withdrawn or declined beside it. Each change is announced on `offerChannel` in its
 * transaction (`{ deviceId, callId, offerId, state }`): the API's long-polls wake by device, the owning engine hears
 * the accept by call.
 */
import type pg from 'pg';
import { type Static, Type } from 'typebox';
import { Compile } from 'typebox/compile';
import { announce, offerChannel, parseNotice } from '../change-notices.ts';
import { inTransaction, type Queryable } from '../database.ts';
import { keysetPage, type PageWindow } from '../rows.ts';
import type { RingMode } from '../routing/definition.ts';
import { deviceById, type DeviceOwner, setDeviceBusy } from './devices.ts';

export const offerStates = ['offered', 'accepted', 'declined', 'withdrawn', 'expired'] as const;
export type OfferState = (typeof offerStates)[number];

export interface OfferRow {
  id: string;
  call_id: string;
  device_id: string;
  workspace_id: string;
  ring_seq: number;
  mode: RingMode;
  sdp_offer: string;
  state: OfferState;
  sdp_answer: string | null;
  expires_at: Date;
  created_at: Date;
  decided_at: Date | null;
  from_number: string;
  to_number: string;
  call_ended_at: Date | null;
  cursor_ts: string;
}

const offerColumns = `o.id, o.call_id, o.device_id, o.workspace_id, o.ring_seq, o.mode, o.sdp_offer, o.state,
  o.sdp_answer, o.expires_at, o.created_at, o.decided_at, c.from_number, c.to_number, c.ended_at AS call_ended_at,
  o.created_at::text AS cursor_ts`;
const offerFrom = 'FROM offers o JOIN calls c ON c.id = o.call_id';

/** The offer as the API shows it (operation 63). */
export function offerJson(row: OfferRow) {
  return {
    id: row.id,
    callId: row.call_id,
    deviceId: row.device_id,
    ringSeq: row.ring_seq,
    mode: row.mode,
    // As the call object shows them (spec section 2: 1 to 64 characters).
    from: row.from_number.slice(0, 64) || 'anonymous',
    to: row.to_number.slice(0, 64) || 'unknown',
    sdp: row.sdp_offer,
    state: row.state,
    expiresAt: row.expires_at.toISOString(),
    createdAt: row.created_at.toISOString(),
    decidedAt: row.decided_at?.toISOString() ?? null,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Announcements

/** What `offerChannel` carries: one offer of one device changed. */
const OfferNotice = Type.Object({
  deviceId: Type.String(),
  callId: Type.String(),
  offerId: Type.String(),
  state: Type.Enum([...offerStates]),
});
export type OfferNotice = Static<typeof OfferNotice>;
const offerNotice = Compile(OfferNotice);

interface Changed {
  id: string;
  device_id: string;
  call_id: string;
  state: OfferState;
}

async function announceOffer(db: Queryable, row: Changed): Promise<OfferNotice> {
  const notice = { deviceId: row.device_id, callId: row.call_id, offerId: row.id, state: row.state };
  await announce(db, offerChannel, JSON.stringify(notice));
  return notice;
}

/** Announces each changed offer, in order. The notices sent. */
async function announceOffers(db: Queryable, rows: readonly Changed[]): Promise<OfferNotice[]> {
  const notices: OfferNotice[] = [];
  for (const row of rows) notices.push(await announceOffer(db, row));
  return notices;
}

/** An announcement's payload as a notice; undefined for anything else. */
export function parseOfferNotice(payload: string): OfferNotice | undefined {
  return parseNotice(payload, offerNotice);
}

// ---------------------------------------------------------------------------------------------------------------
// Reads

async function readOffer(db: Queryable, id: string): Promise<OfferRow> {
  const result = await db.query<OfferRow>(`SELECT ${offerColumns} ${offerFrom} WHERE o.id = $1`, [id]);
  return result.rows[0] as OfferRow;
}

/**
 * A device's waiting offers (state `offered`, not past `expires_at`, of a call still live): one keyset page, newest
 * first. Read with the pool: the long-poll holds no connection between its reads.
 */
export function waitingOffers(db: Queryable, deviceId: string, window: PageWindow): Promise<OfferRow[]> {
  return keysetPage<OfferRow>(
    db,
    {
      // The joined rows as one relation, so that the page's conditions name its columns alone.
      select: `SELECT * FROM (SELECT ${offerColumns} ${offerFrom}) AS waiting`,
      where: `device_id = $1 AND state = 'offered' AND expires_at > clock_timestamp() AND call_ended_at IS NULL`,
      params: [deviceId],
    },
    window,
  );
}

/** Every offer of a call, oldest first: the engine finds the accepted one (and its SDP answer) here. */
export async function callOffers(db: Queryable, callId: string): Promise<OfferRow[]> {
  const result = await db.query<OfferRow>(
    `SELECT ${offerColumns} ${offerFrom} WHERE o.call_id = $1 ORDER BY o.created_at, o.id`,
    [callId],
  );
  return result.rows;
}

// ---------------------------------------------------------------------------------------------------------------
// The ring step's side

export interface NewOffers {
  callId: string;
  workspaceId: string;
  /** The round of the ring step (1, 2, …). */
  ringSeq: number;
  /**
   * The devices to offer the call to, each with the SDP offer of its own WebRTC leg and the `mode` of the target
   * it is rung for (`ring` when not given).
   */
  devices: readonly { deviceId: string; sdpOffer: string; mode?: RingMode }[];
  expiresAt: Date;
}

export interface MadeOffers {
  offers: OfferRow[];
  /** The devices given that were not offered: not in the workspace, no live presence lease, busy, or the call ended. */
  notOffered: string[];
}

/**
 * Offers a live call to the given devices of its workspace that have a live presence lease and are not on a call
 * (a `sip` device has no lease and is never offered: the ring step calls it by INVITE, engine/calls/ring-sip.ts). One transaction:
 * the call row locked, the devices shared-locked, the offers written and announced.
 */
export async function makeOffers(pool: pg.Pool, input: NewOffers): Promise<MadeOffers> {
  const given = [...new Map(input.devices.map((device) => [device.deviceId, device])).entries()];
  const everyDevice = given.map(([deviceId]) => deviceId);
  return inTransaction(pool, async (db) => {
    const call = await db.query<{ ended_at: Date | null }>(
      'SELECT ended_at FROM calls WHERE id = $1 AND workspace_id = $2 FOR UPDATE',
      [input.callId, input.workspaceId],
    );
    const row = call.rows[0];
    if (row === undefined) throw new Error(`no call ${input.callId} in workspace ${input.workspaceId}`);
    if (row.ended_at !== null || given.length === 0) return { offers: [], notOffered: everyDevice };
    const eligible = await db.query<{ id: string }>(
      `SELECT id FROM devices
        WHERE id = ANY($1::uuid[]) AND workspace_id = $2 AND presence_expires_at > clock_timestamp()
          AND busy_call_id IS NULL
        ORDER BY id FOR SHARE`,
      [everyDevice, input.workspaceId],
    );
    const offered = new Set(eligible.rows.map(({ id }) => id));
    const chosen = given.filter(([deviceId]) => offered.has(deviceId));
    const inserted = await db.query<Changed>(
      `INSERT INTO offers (call_id, device_id, workspace_id, ring_seq, sdp_offer, expires_at, mode)
       SELECT $1, d.device_id, $2, $3, d.sdp, $4, d.mode
         FROM unnest($5::uuid[], $6::text[], $7::text[]) AS d (device_id, sdp, mode)
       ON CONFLICT (call_id, ring_seq, device_id) DO NOTHING
       RETURNING id, device_id, call_id, state`,
      [
        input.callId,
        input.workspaceId,
        input.ringSeq,
        input.expiresAt,
        chosen.map(([deviceId]) => deviceId),
        chosen.map(([, device]) => device.sdpOffer),
        chosen.map(([, device]) => device.mode ?? 'ring'),
      ],
    );
    const offers: OfferRow[] = [];
    for (const changed of inserted.rows) {
      await announceOffer(db, changed);
      offers.push(await readOffer(db, changed.id));
    }
    const made = new Set(inserted.rows.map((changed) => changed.device_id));
    return { offers, notOffered: everyDevice.filter((deviceId) => !made.has(deviceId)) };
  });
}

/**
 * Withdraws every waiting offer of a call (of one round when `ringSeq` is given): the caller hung up, the round
 * timed out. The notices sent.
 */
export async function withdrawOffers(pool: pg.Pool, callId: string, ringSeq?: number): Promise<OfferNotice[]> {
  return inTransaction(pool, async (db) => {
    await db.query('SELECT 1 FROM calls WHERE id = $1 FOR UPDATE', [callId]);
    const withdrawn = await db.query<Changed>(
      `UPDATE offers SET state = 'withdrawn', decided_at = clock_timestamp()
        WHERE call_id = $1 AND state = 'offered' AND ($2::integer IS NULL OR ring_seq = $2)
        RETURNING id, device_id, call_id, state`,
      [callId, ringSeq ?? null],
    );
    return announceOffers(db, withdrawn.rows);
  });
}

/**
 * Moves the waiting offers that meet `condition` (over `o`, the offer, and `d`, its device) to `state`, the calls
 * they belong to locked first in id order. The notices sent.
 */
async function sweep(pool: pg.Pool, condition: string, state: OfferState): Promise<OfferNotice[]> {
  return inTransaction(pool, async (db) => {
    const found = await db.query<{ call_id: string }>(
      `SELECT DISTINCT o.call_id FROM offers o JOIN devices d ON d.id = o.device_id
        WHERE o.state = 'offered' AND ${condition}`,
    );
    if (found.rows.length === 0) return [];
    const callIds = found.rows.map((row) => row.call_id);
    await db.query('SELECT 1 FROM calls WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [callIds]);
    const changed = await db.query<Changed>(
      `UPDATE offers o SET state = $2, decided_at = clock_timestamp() FROM devices d
        WHERE d.id = o.device_id AND o.call_id = ANY($1::uuid[]) AND o.state = 'offered' AND ${condition}
        RETURNING o.id, o.device_id, o.call_id, o.state`,
      [callIds, state],
    );
    return announceOffers(db, changed.rows);
  });
}

/** Marks `expired` the waiting offers past their `expires_at`. The notices sent. */
export function expireOffers(pool: pg.Pool): Promise<OfferNotice[]> {
  return sweep(pool, 'o.expires_at <= clock_timestamp()', 'expired');
}

/** Withdraws the waiting offers whose device's presence lease lapsed (docs/phones.md, "Presence"). The notices sent. */
export function withdrawLapsedOffers(pool: pg.Pool): Promise<OfferNotice[]> {
  return sweep(pool, 'coalesce(d.presence_expires_at <= clock_timestamp(), true)', 'withdrawn');
}

// ---------------------------------------------------------------------------------------------------------------
// The device's side (operations 64 and 65), inside the request's transaction

export type OfferDecision =
  | { outcome: 'not_found' }
  | { outcome: 'call_ended'; offer: OfferRow }
  | { outcome: 'conflict'; offer: OfferRow }
  | { outcome: 'busy'; offer: OfferRow; busyCallId: string }
  | { outcome: 'done'; offer: OfferRow; withdrawn: OfferNotice[] };

/**
 * The offer of the workspace whose device is `owner`'s, re-read under the lock of its call (taken here, held to the
 * end of `db`'s transaction); undefined when there is none (another person's offer is not found either).
 */
async function lockOwnOffer(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner,
  offerId: string,
): Promise<OfferRow | undefined> {
  const found = await db.query<{ call_id: string; device_id: string }>(
    'SELECT call_id, device_id FROM offers WHERE id = $1 AND workspace_id = $2',
    [offerId, workspaceId],
  );
  const offer = found.rows[0];
  if (offer === undefined) return undefined;
  if ((await deviceById(db, workspaceId, owner, offer.device_id)) === undefined) return undefined;
  await db.query('SELECT 1 FROM calls WHERE id = $1 FOR UPDATE', [offer.call_id]);
  const locked = await db.query<OfferRow>(`SELECT ${offerColumns} ${offerFrom} WHERE o.id = $1 FOR UPDATE OF o`, [
    offerId,
  ]);
  return locked.rows[0];
}

/**
 * Accepts an offer with the device's SDP answer, in `db`'s transaction: the first accept of a call wins. Refused
 * when the call ended (`call_ended`), when the offer no longer waits (accepted, declined, withdrawn because another
 * device won, expired: `conflict`), or when its device is on another call (`busy`). Otherwise the offer is
 * accepted, every other waiting offer of the call withdrawn, the device marked on the call, and each change
 * announced (the waiting devices stop ringing, the engine that owns the call completes the leg with the answer).
 */
export async function acceptOffer(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner,
  offerId: string,
  sdpAnswer: string,
): Promise<OfferDecision> {
  const offer = await lockOwnOffer(db, workspaceId, owner, offerId);
  if (offer === undefined) return { outcome: 'not_found' };
  if (offer.call_ended_at !== null) return { outcome: 'call_ended', offer };
  const live = await db.query<{ live: boolean }>('SELECT $1::timestamptz > clock_timestamp() AS live', [
    offer.expires_at,
  ]);
  if (offer.state !== 'offered' || !(live.rows[0] as { live: boolean }).live) return { outcome: 'conflict', offer };
  const device = await db.query<{ busy_call_id: string | null }>(
    'SELECT busy_call_id FROM devices WHERE id = $1 FOR UPDATE',
    [offer.device_id],
  );
  const busyCallId = device.rows[0]?.busy_call_id ?? null;
  if (busyCallId !== null && busyCallId !== offer.call_id) return { outcome: 'busy', offer, busyCallId };

  const accepted = await db.query<Changed>(
    `UPDATE offers SET state = 'accepted', sdp_answer = $2, decided_at = clock_timestamp() WHERE id = $1
      RETURNING id, device_id, call_id, state`,
    [offerId, sdpAnswer],
  );
  const others = await db.query<Changed>(
    `UPDATE offers SET state = 'withdrawn', decided_at = clock_timestamp() WHERE call_id = $1 AND state = 'offered'
      RETURNING id, device_id, call_id, state`,
    [offer.call_id],
  );
  await setDeviceBusy(db, offer.device_id, offer.call_id);
  await announceOffer(db, accepted.rows[0] as Changed);
  const withdrawn: OfferNotice[] = [];
  for (const row of others.rows) withdrawn.push(await announceOffer(db, row));
  return { outcome: 'done', offer: await readOffer(db, offerId), withdrawn };
}

/**
 * Declines an offer, in `db`'s transaction: a waiting offer becomes `declined` (that device's alone; the others
 * ring on) and is announced. One that no longer waits (declined, withdrawn, expired) is answered as it is; an
 * accepted one is a `conflict` (the call is the device's: it hangs up instead); a call that ended is `call_ended`.
 */
export async function declineOffer(
  db: Queryable,
  workspaceId: string,
  owner: DeviceOwner,
  offerId: string,
): Promise<OfferDecision> {
  const offer = await lockOwnOffer(db, workspaceId, owner, offerId);
  if (offer === undefined) return { outcome: 'not_found' };
  if (offer.call_ended_at !== null) return { outcome: 'call_ended', offer };
  if (offer.state === 'accepted') return { outcome: 'conflict', offer };
  if (offer.state !== 'offered') return { outcome: 'done', offer, withdrawn: [] };
  const declined = await db.query<Changed>(
    `UPDATE offers SET state = 'declined', decided_at = clock_timestamp() WHERE id = $1
      RETURNING id, device_id, call_id, state`,
    [offerId],
  );
  await announceOffer(db, declined.rows[0] as Changed);
  return { outcome: 'done', offer: await readOffer(db, offerId), withdrawn: [] };
}
