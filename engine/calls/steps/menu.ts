/**
 * `menu`: play the prompt, wait `timeoutSecs` for one key; a listed key goes to its step, an unlisted key or no key
 * counts a retry (the prompt plays again), and after `maxRetries` retries `noInput` follows.
 */
import type { MenuStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

export const menu: StepHandler<MenuStep> = async (step, call) => {
  for (let attempt = 0; attempt <= step.maxRetries; attempt += 1) {
    if (call.ended) return undefined;
    const played = await call.play(step.prompt, { stopOnKey: true });
    const key = played.key ?? (await call.key(step.timeoutSecs * 1000));
    if (key !== undefined) {
      const next = (step.options as Record<string, string | undefined>)[key];
      if (next !== undefined) return next;
    }
  }
  return step.noInput;
};
