/**
 * What a waiting caller is told about their wait (a queue's `announcePosition` and `announceExpectedWait`;
 * docs/contact-center.md, "Queue entries and distribution"): the sentences, made from the entry's place in line
 * (core/queues/figures.ts, `entryPlace` and `expectedWaitSecs`). wait.ts speaks them between offers.
 */
import { expectedWaitSecs } from '../../../../core/queues/figures.ts';

/**
 * How soon after entering a caller hears the first announcement: long enough for a free agent's offer to come first
 * (distribution runs as the entry is made), so that an announcement never delays it.
 */
export const firstAnnouncementMs = 2_000;

export interface AnnouncementSettings {
  announce_position: boolean;
  announce_expected_wait: boolean;
}

/** "You are number N in line." */
export function positionSentence(position: number): string {
  return `You are number ${position} in line.`;
}

/** "Your expected wait is about M minutes." (whole minutes, rounded up), or "less than a minute". */
export function expectedWaitSentence(seconds: number): string {
  if (seconds < 60) return 'Your expected wait is less than a minute.';
  const minutes = Math.ceil(seconds / 60);
  return `Your expected wait is about ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}.`;
}

/**
 * The announcement for the entry at `position`, as the queue asks for it; undefined when there is nothing to say
 * (neither asked for, or only the expected wait with no answered call to go by).
 */
export function announcementText(
  queue: AnnouncementSettings,
  position: number,
  answeredRecently: number,
): string | undefined {
  const sentences: string[] = [];
  if (queue.announce_position) sentences.push(positionSentence(position));
  if (queue.announce_expected_wait) {
    const seconds = expectedWaitSecs(position, answeredRecently);
    if (seconds !== undefined) sentences.push(expectedWaitSentence(seconds));
  }
  return sentences.length === 0 ? undefined : sentences.join(' ');
}
