/**
 * The service's phone numbers: the inventory an admin imports (`switchboard numbers import`), claimed into
 * workspaces, assigned to routing plans. Every change of a claimed number is a `number.updated` event in the
 * number's stream, written in the same transaction.
 */
import libphonenumber from 'google-libphonenumber';
import type { Queryable } from '../database.ts';
import type { RoutingPlanDefinition } from '../routing/definition.ts';
import { appendEvent } from '../events/outbox.ts';
import { e164Pattern, isUuid } from '../ids.ts';
import { keysetPage, type PageWindow, workspaceRow } from '../rows.ts';

export const capabilities = ['voice', 'sms', 'mms'] as const;
export type Capability = (typeof capabilities)[number];

export interface EmergencyAddress {
  name?: string;
  street: string;
  unit?: string;
  city: string;
  region: string;
  postalCode: string;
  country: string;
}

export interface NumberRow {
  id: string;
  e164: string;
  carrier: string;
  capabilities: Capability[];
  region: string | null;
  national_number: string;
  workspace_id: string | null;
  name: string | null;
  voice_lane: 'service' | 'off';
  texting_campaign_id: string | null;
  texting_registration: TextingRegistration;
  emergency_address: EmergencyAddress | null;
  routing_plan_id: string | null;
  assigned_at: Date | null;
  claimed_at: Date | null;
  updated_at: Date;
}

export const numberColumns = `id, e164, carrier, capabilities, region, national_number, workspace_id, name, voice_lane,
  texting_campaign_id, texting_registration, emergency_address, routing_plan_id, assigned_at, claimed_at, updated_at`;

/**
 * A number's texting registration (docs/messaging.md): `pending` once a campaign is named (operation 23),
 * `approved` or `rejected` by the admin (`switchboard numbers texting`), `unregistered` without a campaign.
 */
export const textingRegistrations = ['unregistered', 'pending', 'approved', 'rejected'] as const;
export type TextingRegistration = (typeof textingRegistrations)[number];

/** The number as the API shows it. */
export function numberJson(row: NumberRow) {
  return {
    id: row.id,
    e164: row.e164,
    name: row.name,
    status: row.workspace_id === null ? 'available' : 'active',
    region: row.region,
    capabilities: row.capabilities,
    voiceLane: row.voice_lane,
    textingRegistration: { status: row.texting_registration, campaignId: row.texting_campaign_id },
    emergencyAddress: row.emergency_address,
    routingPlanId: row.routing_plan_id,
    assignedAt: row.assigned_at?.toISOString() ?? null,
    claimedAt: row.claimed_at?.toISOString() ?? null,
    updatedAt: row.updated_at.toISOString(),
  };
}

export interface NumberWorkspace {
  id: string;
  applicationId: string;
  externalWorkspaceId: string;
}

/**
 * Records `number.updated` for a change of `row` (as it is after the change) in `workspace` (for a release: the
 * workspace it left), naming the fields that changed.
 */
export async function numberUpdated(
  db: Queryable,
  workspace: NumberWorkspace,
  row: NumberRow,
  changes: string[],
): Promise<void> {
  await appendEvent(db, {
    type: 'number.updated',
    streamId: row.id,
    applicationId: workspace.applicationId,
    workspaceId: workspace.id,
    externalWorkspaceId: workspace.externalWorkspaceId,
    fields: {
      number: {
        id: row.id,
        e164: row.e164,
        status: row.workspace_id === null ? 'available' : 'active',
        voiceLane: row.voice_lane,
        textingRegistration: row.texting_registration,
        workspaceId: row.workspace_id,
        routingPlanId: row.routing_plan_id,
        changes,
      },
    },
  });
}

/** What a search of the inventory asks for; `after` is the last number of the page before. */
export interface NumberSearch {
  region?: string;
  areaCode?: string;
  contains?: string;
  capabilities?: string[];
  after?: string;
  limit: number;
}

/** Numbers of the inventory (claimed by no workspace) in E.164 order: up to `limit + 1`. */
export async function searchInventory(db: Queryable, search: NumberSearch): Promise<NumberRow[]> {
  const params: unknown[] = [];
  const where = ['workspace_id IS NULL'];
  const add = (condition: (n: number) => string, value: unknown) => {
    params.push(value);
    where.push(condition(params.length));
  };
  if (search.region !== undefined) add((n) => `region = $${n}`, search.region);
  if (search.areaCode !== undefined) add((n) => `starts_with(national_number, $${n})`, search.areaCode);
  if (search.contains !== undefined) add((n) => `strpos(e164, $${n}) > 0`, search.contains);
  if (search.capabilities !== undefined) add((n) => `capabilities @> $${n}::text[]`, search.capabilities);
  if (search.after !== undefined) add((n) => `e164 > $${n}`, search.after);
  params.push(search.limit + 1);
  const result = await db.query<NumberRow>(
    `SELECT ${numberColumns} FROM phone_numbers WHERE ${where.join(' AND ')} ORDER BY e164 LIMIT $${params.length}`,
    params,
  );
  return result.rows;
}

/** Takes a number of the inventory into the workspace; undefined when it is not there or already taken. */
export async function claimNumber(
  db: Queryable,
  workspaceId: string,
  e164: string,
  name: string | null,
): Promise<NumberRow | undefined> {
  const result = await db.query<NumberRow>(
    `UPDATE phone_numbers SET workspace_id = $2, name = $3, claimed_at = clock_timestamp(),
                updated_at = clock_timestamp()
          WHERE e164 = $1 AND workspace_id IS NULL RETURNING ${numberColumns}`,
    [e164, workspaceId, name],
  );
  return result.rows[0];
}

/** The workspace's numbers, newest claim first. */
export function listNumbers(
  db: Queryable,
  workspaceId: string,
  window: PageWindow,
): Promise<(NumberRow & { cursor_ts: string })[]> {
  return keysetPage<NumberRow & { cursor_ts: string }>(
    db,
    {
      select: `SELECT ${numberColumns}, claimed_at::text AS cursor_ts FROM phone_numbers`,
      where: 'workspace_id = $1',
      params: [workspaceId],
      orderBy: 'claimed_at',
    },
    window,
  );
}

const numberTable = { table: 'phone_numbers', columns: numberColumns, name: 'number' };

/** The workspace's number, or 404; with `lock`, locked until commit (FOR UPDATE). */
export function numberById(db: Queryable, workspaceId: string, id: string, lock = false): Promise<NumberRow> {
  return workspaceRow<NumberRow>(db, numberTable, id, workspaceId, lock);
}

/** Writes what a workspace may change of its number (unassigning the plan clears `assigned_at`). */
export async function updateNumber(
  db: Queryable,
  id: string,
  next: {
    name: string | null;
    voiceLane: NumberRow['voice_lane'];
    campaignId: string | null;
    textingRegistration: TextingRegistration;
    emergencyAddress: EmergencyAddress | null;
    routingPlanId: string | null;
  },
): Promise<NumberRow> {
  const result = await db.query<NumberRow>(
    `UPDATE phone_numbers SET name = $2, voice_lane = $3, texting_campaign_id = $4, emergency_address = $5,
                routing_plan_id = $6, assigned_at = CASE WHEN $6::uuid IS NULL THEN NULL ELSE assigned_at END,
                texting_registration = $7, updated_at = clock_timestamp()
          WHERE id = $1 RETURNING ${numberColumns}`,
    [
      id,
      next.name,
      next.voiceLane,
      next.campaignId,
      next.emergencyAddress === null ? null : JSON.stringify(next.emergencyAddress),
      next.routingPlanId,
      next.textingRegistration,
    ],
  );
  return result.rows[0] as NumberRow;
}

/** Back to the inventory as it came: nothing of the workspace stays on it. */
export async function releaseNumber(db: Queryable, id: string): Promise<NumberRow> {
  const result = await db.query<NumberRow>(
    `UPDATE phone_numbers SET workspace_id = NULL, name = NULL, voice_lane = 'service', texting_campaign_id = NULL,
                texting_registration = 'unregistered', emergency_address = NULL, claimed_at = NULL,
                updated_at = clock_timestamp()
          WHERE id = $1 RETURNING ${numberColumns}`,
    [id],
  );
  return result.rows[0] as NumberRow;
}

/** The workspace's number, locked until commit (FOR UPDATE), if it has it. */
export async function lockWorkspaceNumber(
  db: Queryable,
  workspaceId: string,
  id: string,
): Promise<NumberRow | undefined> {
  const locked = await db.query<NumberRow>(
    `SELECT ${numberColumns} FROM phone_numbers WHERE id = $1 AND workspace_id = $2 FOR UPDATE`,
    [id, workspaceId],
  );
  return locked.rows[0];
}

/** Assigns the number to a routing plan (calls to it run the plan's published version). */
export async function assignNumber(db: Queryable, id: string, planId: string): Promise<NumberRow> {
  const updated = await db.query<NumberRow>(
    `UPDATE phone_numbers SET routing_plan_id = $2, assigned_at = clock_timestamp(), updated_at = clock_timestamp()
            WHERE id = $1 RETURNING ${numberColumns}`,
    [id, planId],
  );
  return updated.rows[0] as NumberRow;
}

const phoneNumbers = libphonenumber.PhoneNumberUtil.getInstance();
const e164Regex = new RegExp(e164Pattern);

/** The ISO region (null for non-geographic calling codes) and national digits of a number. */
export function numberParts(e164: string): { region: string | null; nationalNumber: string } {
  const parsed = phoneNumbers.parse(e164);
  // A number libphonenumber cannot place (unassigned or fictional ranges) takes its calling code's main region.
  const callingCode = parsed.getCountryCode() ?? 0;
  const region: string | null =
    phoneNumbers.getRegionCodeForNumber(parsed) ?? phoneNumbers.getRegionCodeForCountryCode(callingCode);
  const countryCode = String(callingCode);
  return { region: region === 'ZZ' ? null : region, nationalNumber: e164.slice(1 + countryCode.length) };
}

/** Input an import refuses (a number not in E.164 form, a bad carrier name); nothing is imported then. */
export class InventoryInputError extends Error {}

export interface ImportResult {
  added: string[];
  alreadyPresent: string[];
}

/** Adds numbers to the inventory (the admin command). Numbers already present are left as they are. */
export async function importNumbers(
  db: Queryable,
  carrier: string,
  numbers: readonly string[],
  numberCapabilities: readonly Capability[],
): Promise<ImportResult> {
  const bad = numbers.filter((number) => !e164Regex.test(number));
  if (bad.length > 0) throw new InventoryInputError(`not E.164 numbers (like +14155550100): ${bad.join(', ')}`);
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/.test(carrier)) {
    throw new InventoryInputError(`carrier "${carrier}" must be 1-63 letters, digits, '.', '_' or '-'`);
  }
  const added: string[] = [];
  for (const number of new Set(numbers)) {
    const parts = numberParts(number);
    const result = await db.query(
      `INSERT INTO phone_numbers (e164, carrier, capabilities, region, national_number) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (e164) DO NOTHING`,
      [number, carrier, [...numberCapabilities], parts.region, parts.nationalNumber],
    );
    if (result.rowCount === 1) added.push(number);
  }
  return { added, alreadyPresent: [...new Set(numbers)].filter((number) => !added.includes(number)) };
}

/** What an inbound call to a number runs: the number's carrier, workspace and the published plan version. */
export interface PublishedPlan {
  carrier: string;
  application_id: string;
  workspace_id: string;
  phone_number_id: string;
  e164: string;
  routing_plan_id: string;
  published_version: number;
  definition: RoutingPlanDefinition;
}

/** The number dialed, if it is ours, claimed, on the voice lane and running a published plan: that version. */
export async function publishedPlanFor(db: Queryable, e164: string): Promise<PublishedPlan | undefined> {
  const result = await db.query<PublishedPlan>(
    `SELECT n.carrier, w.application_id, n.workspace_id, n.id AS phone_number_id, n.e164, p.id AS routing_plan_id,
            p.published_version, v.definition
       FROM phone_numbers n
       JOIN workspaces w ON w.id = n.workspace_id
       JOIN routing_plans p ON p.id = n.routing_plan_id AND p.archived_at IS NULL AND p.published_version IS NOT NULL
       JOIN routing_plan_versions v ON v.plan_id = p.id AND v.version = p.published_version
      WHERE n.e164 = $1 AND n.voice_lane = 'service'`,
    [e164],
  );
  return result.rows[0];
}

/** A number as texting sees it (docs/messaging.md): the number, its workspace, and whether it can text. */
export interface TextingNumber {
  number: NumberRow;
  workspace: NumberWorkspace;
  /** Its carrier has messaging settings (core/carriers/messaging.ts) and the number takes SMS. */
  canText: boolean;
  /** Only `approved` numbers send what a credential asks (operation 67); replies to keywords go out whatever. */
  registration: TextingRegistration;
}

type TextingRow = NumberRow & { application_id: string; external_workspace_id: string; can_text: boolean };

async function textingNumber(db: Queryable, where: string, params: unknown[]): Promise<TextingNumber | undefined> {
  const result = await db.query<TextingRow>(
    `SELECT n.*, w.application_id, w.external_workspace_id,
            (c.messaging IS NOT NULL AND 'sms' = ANY (n.capabilities)) AS can_text
       FROM (SELECT ${numberColumns} FROM phone_numbers WHERE ${where}) n
       JOIN workspaces w ON w.id = n.workspace_id
       LEFT JOIN carriers c ON c.name = n.carrier`,
    params,
  );
  const row = result.rows[0];
  if (row === undefined) return undefined;
  const {
    application_id: applicationId,
    external_workspace_id: externalWorkspaceId,
    can_text: canText,
    ...number
  } = row;
  const workspace = { id: number.workspace_id as string, applicationId, externalWorkspaceId };
  return { number, workspace, canText, registration: number.texting_registration };
}

/**
 * The workspace's number a message is sent from (operation 67's `from`: its id or its E.164), and whether it can
 * text; undefined when the workspace has no such number.
 */
export function senderOf(
  db: Queryable,
  workspaceId: string,
  ref: { phoneNumberId: string } | { e164: string },
): Promise<TextingNumber | undefined> {
  if ('phoneNumberId' in ref) {
    if (!isUuid(ref.phoneNumberId)) return Promise.resolve(undefined);
    return textingNumber(db, 'id = $1 AND workspace_id = $2', [ref.phoneNumberId, workspaceId]);
  }
  return textingNumber(db, 'e164 = $1 AND workspace_id = $2', [ref.e164, workspaceId]);
}

/** The claimed number a carrier delivers a message to: only its own numbers (another carrier's are not its to feed). */
export function inboundNumberOf(db: Queryable, carrier: string, e164: string): Promise<TextingNumber | undefined> {
  return textingNumber(db, 'e164 = $1 AND carrier = $2 AND workspace_id IS NOT NULL', [e164, carrier]);
}

/** Why `switchboard numbers texting` refused a decision (a usage error). */
export class TextingRegistrationError extends Error {}

/**
 * The admin's decision (`switchboard numbers texting`) on the campaign a workspace named for its claimed number, with
 * `number.updated` when it changes anything. A number without a campaign has nothing to decide on. In a transaction.
 */
export async function decideTextingRegistration(db: Queryable, e164: string, decision: 'approved' | 'rejected') {
  const found = await textingNumber(db, 'e164 = $1 AND workspace_id IS NOT NULL FOR UPDATE', [e164]);
  if (found === undefined) throw new TextingRegistrationError(`no workspace has claimed ${e164}`);
  if (found.number.texting_campaign_id === null) {
    throw new TextingRegistrationError(`${e164} names no texting campaign: its workspace sets one (PATCH /numbers)`);
  }
  if (found.registration === decision) return found.number;
  const updated = await db.query<NumberRow>(
    `UPDATE phone_numbers SET texting_registration = $2, updated_at = clock_timestamp() WHERE id = $1
     RETURNING ${numberColumns}`,
    [found.number.id, decision],
  );
  const row = updated.rows[0] as NumberRow;
  await numberUpdated(db, found.workspace, row, ['textingRegistration']);
  return row;
}
