/** Identifier formats of section 2. */
export const uuidPattern =
  '^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|[fF]{8}-[fF]{4}-[fF]{4}-[fF]{4}-[fF]{12})$';
const uuidRegex = new RegExp(uuidPattern);

export function isUuid(value: string): boolean {
  return uuidRegex.test(value);
}

export const applicationIdPattern = '^[a-z][a-z0-9_-]{1,63}$';
const applicationIdRegex = new RegExp(applicationIdPattern);

export function isApplicationId(value: string): boolean {
  return applicationIdRegex.test(value);
}

export const e164Pattern = '^\\+[1-9][0-9]{1,14}$';
