/**
 * Finding a prompt in what a caller heard (test/helpers/rtp-phone.ts): the test makes the prompt's audio with the
 * engine's own prompt maker (espeak-ng, engine/media/prompts.ts), and looks for it sample by sample in the decoded
 * G.711 the caller received, so a test can tell "You are number 2 in line." from "You are number 1 in line.", and
 * the queue's hold prompt from the default music.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ExecutionContext } from 'ava';
import { Prompts } from '../../engine/media/prompts.ts';

/** A prompt maker of the test's own (a cache folder removed after the test). */
export async function testPrompts(t: ExecutionContext): Promise<Prompts> {
  const cacheDir = await mkdtemp(path.join(os.tmpdir(), 'heard-prompt-'));
  t.teardown(() => rm(cacheDir, { recursive: true, force: true }));
  return new Prompts({ cacheDir, allowPrivateNetworks: false });
}

/** Equal but for G.711's quantisation (under 1/16 of the value, plus a little near zero). */
function close(heard: number, made: number): boolean {
  return Math.abs(heard - made) <= 16 + Math.abs(made) / 12;
}

const anchorLength = 32;

/**
 * Where in `heard` (from `from` on) the whole of `pcm` was heard: the offsets at which at least `share` of its samples
 * match, found by its loudest 32 samples first.
 */
export function heardAt(heard: readonly number[], pcm: Int16Array, from = 0, share = 0.9): number[] {
  let anchor = 0;
  for (let index = 0; index + anchorLength < pcm.length; index += 1) {
    if (Math.abs(pcm[index]!) > Math.abs(pcm[anchor]!)) anchor = index;
  }
  const found: number[] = [];
  for (let at = from + anchor; at + pcm.length - anchor <= heard.length; at += 1) {
    let matches = true;
    for (let k = 0; k < anchorLength && matches; k += 1) matches = close(heard[at + k]!, pcm[anchor + k]!);
    if (!matches) continue;
    const offset = at - anchor;
    let same = 0;
    for (let k = 0; k < pcm.length; k += 1) if (close(heard[offset + k]!, pcm[k]!)) same += 1;
    if (same / pcm.length >= share) {
      found.push(offset);
      at += pcm.length - 1;
    }
  }
  return found;
}
