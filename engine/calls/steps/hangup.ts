/** `hangup`: the message if any, then BYE (`plan_hangup`). */
import type { HangupStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

export const hangup: StepHandler<HangupStep> = async (step, call) => {
  if (step.message !== null) await call.play({ tts: step.message });
  if (!call.ended) await call.hangup('plan_hangup');
  return undefined;
};
