/**
 * The keywords an inbound text answers to (docs/messaging.md, "Receiving"): the whole text, in any case, with the
 * whitespace and punctuation around it ignored ("Stop.", " stop! "), never a keyword inside a longer text ("stop
 * calling me" is a message, not an opt-out).
 */
import { splitText } from './encoding.ts';

export type Keyword = 'stop' | 'start' | 'help';

const keywords = new Map<string, Keyword>([
  ...['STOP', 'STOPALL', 'UNSUBSCRIBE', 'CANCEL', 'END', 'QUIT', 'REVOKE', 'OPTOUT'].map(
    (word) => [word, 'stop'] as const,
  ),
  ...['START', 'YES', 'UNSTOP'].map((word) => [word, 'start'] as const),
  ['HELP', 'help'],
]);

/** Whitespace, punctuation and invisible format characters (a zero-width space a phone added). */
const ignored = /^[\s\p{P}\p{Cf}]$/u;

/** `text` without what is ignored at either end (walked from each end: no regular expression backtracks on it). */
function trimmed(text: string): string {
  const chars = [...text];
  let start = 0;
  let end = chars.length;
  while (start < end && ignored.test(chars[start] as string)) start += 1;
  while (end > start && ignored.test(chars[end - 1] as string)) end -= 1;
  return chars.slice(start, end).join('');
}

/** The keyword `text` is, if it is one: its word and what it does. */
export function keywordOf(text: string): { word: string; keyword: Keyword } | undefined {
  // Far longer than any keyword with its padding: not worth walking.
  if (text.length > 1000) return undefined;
  const word = trimmed(text).toUpperCase();
  const keyword = keywords.get(word);
  return keyword === undefined ? undefined : { word, keyword };
}

/** The reply to an opt-out. */
export const stopReply = 'You have been unsubscribed and will receive no more messages. Reply START to resubscribe.';
/** The reply to an opt-in. */
export const startReply = 'You have been resubscribed.';
/** The reply to HELP while the workspace has no help text of its own. */
export const defaultHelpReply = 'Reply STOP to unsubscribe.';

/** The reply a keyword gets, `help` being the workspace's help text when it has one. */
export function replyTo(keyword: Keyword, help: string | null = null): string {
  if (keyword === 'stop') return stopReply;
  if (keyword === 'start') return startReply;
  return help ?? defaultHelpReply;
}

/**
 * Why `text` cannot be a workspace's help text, or undefined when it can: the reply must go as one SMS part (160
 * GSM characters, an extension character counting twice, or 70 UCS-2 units), hold something besides whitespace,
 * and no control characters (a handset would show them as garbage).
 */
export function helpTextProblem(text: string): string | undefined {
  if (text.trim() === '') return 'must not be empty';
  if (/[\p{Cc}]/u.test(text.replaceAll('\n', ''))) return 'must not hold control characters (a line break may)';
  if (splitText(text).parts.length > 1) {
    return 'must fit one SMS: at most 160 GSM characters, or 70 characters when it needs UCS-2';
  }
  return undefined;
}
