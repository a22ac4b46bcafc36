/**
 * Whether a phone number the API is given is valid, by libphonenumber's full metadata (google-libphonenumber, the
 * one phone number library of the service). The recipients of messages and one-time codes are checked with this;
 * a routing plan's destinations are not (core/routing/destinations.ts lets fictional and test numbers through).
 */
import libphonenumber from 'google-libphonenumber';
import { e164Pattern } from '../ids.ts';

const phoneNumbers = libphonenumber.PhoneNumberUtil.getInstance();
const e164Regex = new RegExp(e164Pattern);

/**
 * `text` written in E.164 when it is `+` and digits (e164Pattern) and libphonenumber takes it for a valid number (in
 * a range its metadata assigns); undefined otherwise. The E.164 answered can differ from `text` (a national prefix
 * after the country code, as in +4402..., is dropped): a caller that wants `text` written in E.164 already compares.
 */
export function validE164(text: string): string | undefined {
  if (!e164Regex.test(text)) return undefined;
  let parsed: libphonenumber.PhoneNumber;
  try {
    parsed = phoneNumbers.parse(text);
  } catch {
    return undefined;
  }
  if (!phoneNumbers.isValidNumber(parsed)) return undefined;
  return phoneNumbers.format(parsed, libphonenumber.PhoneNumberFormat.E164);
}
