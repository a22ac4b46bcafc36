/**
 * Conditions on custom resources (`Ready`, `Valid`, `Published`) as Kubernetes writes them (metav1.Condition): each
 * with the generation it describes, and a `lastTransitionTime` that moves only when its status changes. The one
 * function that builds them, for the REST API's status writes and the operator's alike.
 */

export interface ConditionInput {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

export interface Condition extends ConditionInput {
  observedGeneration: number;
  lastTransitionTime: string;
}

/**
 * The conditions `next` for `generation`, each keeping the `lastTransitionTime` of the same type in `previous` (the
 * stored `status.conditions`, of any shape) when its status is unchanged, and taking `now` otherwise.
 */
export function conditions(
  previous: unknown,
  next: readonly ConditionInput[],
  generation: number,
  now: Date,
): Condition[] {
  const before = new Map(
    (Array.isArray(previous) ? (previous as Condition[]) : []).map((condition) => [condition.type, condition]),
  );
  return next.map((condition) => {
    const old = before.get(condition.type);
    return {
      ...condition,
      observedGeneration: generation,
      lastTransitionTime:
        old !== undefined && old.status === condition.status ? old.lastTransitionTime : now.toISOString(),
    };
  });
}
