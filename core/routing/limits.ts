/**
 * What one workspace may store of routing plans (docs/routing-plans.md, "Limits"): the same whether a plan comes
 * from the REST API or a `RoutingPlan` resource, with the same messages (the API's 413 and 409 `limit_exceeded`, the
 * admission webhook's refusal, the resource's `Valid=False` condition).
 *
 * - A definition is at most `maxDefinitionBytes` as JSON: well inside the 1.5 MB an object of Kubernetes may hold
 *   (etcd's limit), since a resource carries its definition once in its spec and, applied by `kubectl apply`, once
 *   more in its last-applied annotation, beside its status and managed fields. Steps: `maxSteps` (definition.ts).
 * - A plan keeps at most `maxVersionsPerPlan` versions (they are immutable and never deleted).
 * - A workspace has at most `maxPlansPerWorkspace` plans that are not archived.
 *
 * Counting is race-safe where it is enforced: versions under the plan row's lock, plans under the workspace's
 * plan-count lock (core/routing/plans.ts, `lockWorkspacePlans`), so two saves at once cannot both take the last place.
 */

/** 256 KiB. */
export const maxDefinitionBytes = 262_144;
export const maxVersionsPerPlan = 1000;
export const maxPlansPerWorkspace = 500;

/** The definition's size as the service stores it: its JSON, in UTF-8 bytes. */
export function definitionBytes(definition: unknown): number {
  return Buffer.byteLength(JSON.stringify(definition) ?? '', 'utf8');
}

/** Why the definition is too large to store, or undefined. */
export function definitionSizeProblem(definition: unknown): string | undefined {
  const bytes = definitionBytes(definition);
  if (bytes <= maxDefinitionBytes) return undefined;
  return `the definition is ${bytes} bytes as JSON, over the ${maxDefinitionBytes} bytes (256 KiB) a routing plan definition may have`;
}

/** Why a workspace with `plans` plans (not archived) cannot have one more, or undefined. */
export function plansLimitProblem(plans: number): string | undefined {
  if (plans < maxPlansPerWorkspace) return undefined;
  return `the workspace has ${plans} routing plans, the most it may have (${maxPlansPerWorkspace}): archive one before creating another`;
}

/** Why a plan whose newest version is `newestVersion` cannot save another, or undefined. */
export function versionsLimitProblem(newestVersion: number): string | undefined {
  if (newestVersion < maxVersionsPerPlan) return undefined;
  return `the routing plan has ${newestVersion} versions, the most one may keep (${maxVersionsPerPlan}): create a new plan with this definition and assign its numbers to it`;
}

/** What the limits are judged on when a definition is written to a plan: the workspace's plans, and the plan if recorded. */
export interface PlanLimitFacts {
  plans: number;
  plan?: { newestVersion: number; newestMatches: boolean };
}

/** Why writing a definition would pass a limit on plans or versions, or undefined (a new plan, or a new version). */
export function planLimitProblem(facts: PlanLimitFacts): string | undefined {
  if (facts.plan === undefined) return plansLimitProblem(facts.plans);
  return facts.plan.newestMatches ? undefined : versionsLimitProblem(facts.plan.newestVersion);
}
