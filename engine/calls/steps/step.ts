/** The shape of a routing step's code: one file per step type in this folder, found through `index.ts`. */
import type { Step } from '../../../core/routing/definition.ts';
import type { CallControl, StepContext } from '../control.ts';

/** Runs one step of type S on the call; returns the id of the next step, or undefined when the call is over. */
export type StepHandler<S extends Step> = (
  step: S,
  call: CallControl,
  context: StepContext,
) => Promise<string | undefined> | string | undefined;
