/**
 * The emergency address of a number (where responders go when it dials an emergency number). The request schema
 * checks shapes (400); these checks are about the address itself (422 `emergency_address_invalid`): a real country
 * (ISO 3166-1 alpha-2), the same country as the number, and a postal code of that country's format.
 */
import { Type } from 'typebox';
import { postcodeValidator, postcodeValidatorExistsForCountry } from 'postcode-validator';
import type { EmergencyAddress } from './numbers.ts';

const Line = (max: number) => Type.String({ minLength: 1, maxLength: max, pattern: '\\S' });

export const EmergencyAddressSchema = Type.Object(
  {
    name: Type.Optional(Line(200)),
    street: Line(200),
    unit: Type.Optional(Line(100)),
    city: Line(100),
    region: Type.String({ minLength: 1, maxLength: 100, description: 'State, province or county' }),
    postalCode: Line(20),
    country: Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2 country code, e.g. US' }),
  },
  { additionalProperties: false, description: 'Where responders go when this number dials an emergency number' },
);

const regionNames = new Intl.DisplayNames(['en'], { type: 'region' });

function isCountry(code: string): boolean {
  try {
    return regionNames.of(code) !== code && code !== 'ZZ';
  } catch {
    return false;
  }
}

/** What is wrong with the address for a number of `numberRegion` (empty when nothing is). */
export function emergencyAddressProblems(address: EmergencyAddress, numberRegion: string | null): string[] {
  const problems: string[] = [];
  if (!isCountry(address.country)) {
    problems.push(`country "${address.country}" is not an ISO 3166-1 country code`);
    return problems;
  }
  if (numberRegion !== null && numberRegion !== address.country) {
    problems.push(`the address is in ${address.country} but the number is a ${numberRegion} number`);
  }
  if (postcodeValidatorExistsForCountry(address.country) && !postcodeValidator(address.postalCode, address.country)) {
    problems.push(`postal code "${address.postalCode}" is not a valid ${address.country} postal code`);
  }
  return problems;
}
