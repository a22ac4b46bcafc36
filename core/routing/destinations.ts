/**
 * Where a plan may send a call outside the service (forward steps, cell targets of ring steps): an E.164 number of
 * an assigned country calling code, never an emergency number, within the workspace's destination policy.
 *
 * Emergency numbers come from libphonenumber's short number metadata, checked for every region sharing the number's
 * country calling code (+1 covers the United States, Canada and the Caribbean; +44 Great Britain, Guernsey, Jersey
 * and the Isle of Man). Its full validity check is deliberately not used: fictional and test numbers such as
 * +15550100000 are fine destinations for the service.
 */
import libphonenumber, { type RegionCode } from 'google-libphonenumber';
import { e164Pattern } from '../ids.ts';

export type DestinationCheck = 'ok' | 'invalid_number' | 'emergency_number' | 'destination_blocked';

export interface DestinationPolicy {
  /** Prefixes such as `+1` or `+4420` calls may reach; empty means every destination. */
  allowedPrefixes: string[];
  /** Prefixes refused even when allowed. */
  blockedPrefixes: string[];
}

const e164Regex = new RegExp(e164Pattern);
const phoneNumbers = libphonenumber.PhoneNumberUtil.getInstance();
const shortNumbers = libphonenumber.ShortNumberInfo.getInstance();

/** The regions of each country calling code: +1 is shared by 25, +44 by 4, +7 by 2. */
const regionsByCode = new Map<number, RegionCode[]>();
for (const region of phoneNumbers.getSupportedRegions()) {
  const code = phoneNumbers.getCountryCodeForRegion(region);
  regionsByCode.set(code, [...(regionsByCode.get(code) ?? []), region]);
}

/**
 * The country calling code's regions (none for a non-geographic code such as +800) and the digits after the code,
 * or null when no code is a prefix of the digits (codes are 1 to 3 digits, and none is a prefix of another).
 */
function splitCountryCode(digits: string): { regions: RegionCode[]; national: string } | null {
  for (let length = 1; length <= 3 && length < digits.length; length += 1) {
    const code = Number(digits.slice(0, length));
    if (phoneNumbers.getRegionCodeForCountryCode(code) === 'ZZ') continue;
    return { regions: regionsByCode.get(code) ?? [], national: digits.slice(length) };
  }
  return null;
}

interface ShortNumberMetadata {
  hasEmergency(): boolean;
  getEmergency(): { possibleLengthArray(): number[] };
}

/**
 * The most digits an emergency number has in any region (5 in the metadata of 2025), so that ordinary numbers skip
 * asking every region of their code (25 for +1). libphonenumber keeps these lengths in its short number metadata,
 * reachable only through a private method: when it is missing or answers oddly, there is no bound and every number
 * is checked (still correct, only slower).
 */
function longestEmergencyNumber(): number {
  const lookup = (shortNumbers as unknown as { getMetadataForRegion_?: unknown }).getMetadataForRegion_;
  if (typeof lookup !== 'function') return Infinity;
  try {
    let longest = 0;
    for (const region of phoneNumbers.getSupportedRegions()) {
      const metadata = lookup.call(shortNumbers, region) as ShortNumberMetadata | null | undefined;
      if (!metadata?.hasEmergency()) continue;
      for (const length of metadata.getEmergency().possibleLengthArray()) longest = Math.max(longest, length);
    }
    return longest >= 2 ? longest : Infinity;
  } catch {
    return Infinity;
  }
}

export const emergencyDigitsBound = longestEmergencyNumber();

/** Whether the digits after the country code are an emergency number in any region of that code. */
function isEmergency(regions: RegionCode[], national: string): boolean {
  if (national.length > emergencyDigitsBound) return false;
  return regions.some((region) => shortNumbers.isEmergencyNumber(national, region));
}

/**
 * `invalid_number` when `e164` is not E.164 or no country has its calling code; `emergency_number` when it is an
 * emergency number anywhere its country code is used; `destination_blocked` when the policy refuses it (it starts
 * with no allowed prefix while some are listed, or with a blocked one); otherwise `ok`.
 */
export function checkDestination(e164: string, policy: DestinationPolicy): DestinationCheck {
  if (typeof e164 !== 'string' || !e164Regex.test(e164)) return 'invalid_number';
  const split = splitCountryCode(e164.slice(1));
  if (split === null) return 'invalid_number';
  if (isEmergency(split.regions, split.national)) return 'emergency_number';
  const { allowedPrefixes, blockedPrefixes } = policy;
  if (allowedPrefixes.length > 0 && !allowedPrefixes.some((prefix) => e164.startsWith(prefix))) {
    return 'destination_blocked';
  }
  if (blockedPrefixes.some((prefix) => e164.startsWith(prefix))) return 'destination_blocked';
  return 'ok';
}
