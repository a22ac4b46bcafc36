/** A prompt's audio for a call (docs/calls.md): one that cannot be produced is a second of silence, and the call goes on. */
import type { Prompt } from './control.ts';
import type { CallServices } from './services.ts';

export async function promptAudio(services: CallServices, callId: string, prompt: Prompt): Promise<Int16Array> {
  try {
    return await services.prompts.pcm(prompt);
  } catch (error) {
    services.metrics.promptFailures.inc();
    services.log.warn({ callId, err: error }, 'prompt could not be produced; silence');
    return new Int16Array(8000);
  }
}
