/**
 * `voicemail`: the greeting (or a default one), then record until the caller hangs up or 5 minutes pass; a caller
 * who stays to the end is hung up on (`voicemail_complete`).
 */
import type { VoicemailStep } from '../../../core/routing/definition.ts';
import type { Prompt } from '../control.ts';
import type { StepHandler } from './step.ts';

export const voicemailMaxMs = 5 * 60_000;
export const defaultGreeting: Prompt = { tts: 'Please leave a message after the tone.' };

export const voicemail: StepHandler<VoicemailStep> = async (step, call) => {
  await call.enter('voicemail');
  await call.play(step.greeting ?? defaultGreeting);
  if (call.ended) return undefined;
  await call.voicemail(voicemailMaxMs);
  if (!call.ended) await call.hangup('voicemail_complete');
  return undefined;
};
