/**
 * The service the engine tests with sipp callers share: the API and the engine in this process, the sipp carrier
 * added; and what those tests measure of what a caller hears (the hold music's share).
 */
import type { Clock } from '../../core/clock.ts';
import { holdMusicNotes } from '../../engine/media/hold-music.ts';
import { addSippCarrier } from './phone-lines.ts';
import { startService } from './service.ts';
import type { SippRun } from './sipp.ts';
import { tonePower } from './webrtc-browser.ts';

/**
 * The binding's exit crash (engine/media/webrtc.ts): a worker whose engine or stand-in browser made `@roamhq/wrtc`
 * objects ends the way `process.exit` does, not through the binding's N-API cleanup.
 */
export function exitPastWrtc(): void {
  process.once('exit', (code) => (process as unknown as { reallyExit(code: number): never }).reallyExit(code));
}

/** A service with the API and the engine, the sipp carrier added (test/helpers/phone-lines.ts). */
export async function startEngineService(options: { clock?: Clock } = {}) {
  const service = await startService({}, ['api', 'engine'], options);
  await addSippCarrier(service);
  return { service, sipPort: service.sipPort as number };
}

/** What to show when a sipp run failed. */
export const sippFailed = (run: SippRun) => `${run.stderr}\n${run.errors}`;

const musicFrequencies = [...new Set(holdMusicNotes.flatMap((note) => [note, 2 * note]).map((f) => f.toFixed(1)))];

/**
 * The share of the last half second's power in the hold music's notes and their octaves: at least 0.33 for every
 * half second of the loop as made, under 0.1 for speech (measured on the callback prompt).
 */
export function musicShare(heard: readonly number[]): number {
  const recent = heard.slice(-4000);
  return musicFrequencies.reduce((sum, frequency) => sum + tonePower(recent, Number(frequency), 8000), 0);
}
