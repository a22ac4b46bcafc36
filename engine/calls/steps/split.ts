/** `split`: `a` when hash(callId) mod 100 < `percentToA`, else `b` (deterministic per call). */
import { createHash } from 'node:crypto';
import type { SplitStep } from '../../../core/routing/definition.ts';
import type { StepHandler } from './step.ts';

/** `a` or `b` for this call, the same every time for one call id. */
export function splitBranch(callId: string, percentToA: number): 'a' | 'b' {
  const bucket = createHash('sha256').update(callId).digest().readUInt32BE(0) % 100;
  return bucket < percentToA ? 'a' : 'b';
}

export const split: StepHandler<SplitStep> = (step, _call, context) =>
  splitBranch(context.callId, step.percentToA) === 'a' ? step.a : step.b;
