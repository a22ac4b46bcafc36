/**
 * The validating admission webhook (docs/kubernetes.md): `POST /validate` takes an `admission.k8s.io/v1`
 * AdmissionReview and answers it. A `RoutingPlan` created or updated with an invalid spec is refused at
 * `kubectl apply` with the issues the REST API's 422 `invalid_plan` lists (the same validator, against the same
 * workspace facts); a `Queue` that a routing plan uses cannot be deleted. Everything else is allowed. A body that is
 * not an AdmissionReview gets 400 in the service's error envelope.
 */
import type { FastifyInstance } from 'fastify';
import type pg from 'pg';
import { RoutingPlanSpec } from '../core/resources/kinds.ts';
import { workspaceFacts } from '../core/routing/facts.ts';
import { plansUsing } from '../core/routing/usage.ts';
import { type PlanIssue, referencesOf, validateDefinition } from '../core/routing/validate.ts';
import { compileStrict } from '../core/validation.ts';

interface AdmissionRequest {
  uid: string;
  kind: { group: string; version: string; kind: string };
  operation: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  object?: { metadata?: { uid?: string }; spec?: unknown } | null;
  oldObject?: { metadata?: { uid?: string }; spec?: { id?: string } } | null;
}

export interface AdmissionVerdict {
  allowed: boolean;
  status?: {
    code: number;
    reason: string;
    message: string;
    details?: { causes: Array<{ field: string; message: string }> };
  };
}

const checkPlanSpec = compileStrict(RoutingPlanSpec);

function denied(code: number, reason: string, message: string, causes: Array<{ field: string; message: string }> = []) {
  return { allowed: false, status: { code, reason, message, ...(causes.length > 0 ? { details: { causes } } : {}) } };
}

function issueCauses(issues: readonly PlanIssue[]) {
  return issues
    .filter((issue) => issue.severity === 'error')
    .map((issue) => ({
      field: issue.stepId === null ? 'spec.definition' : `spec.definition.steps.${issue.stepId}`,
      message: `${issue.code}: ${issue.message}`,
    }));
}

/** The verdict on one admission request. */
export async function review(pool: pg.Pool, request: AdmissionRequest): Promise<AdmissionVerdict> {
  if (request.kind.group !== 'switchboard.dev') return { allowed: true };
  if (request.kind.kind === 'RoutingPlan' && (request.operation === 'CREATE' || request.operation === 'UPDATE')) {
    const spec = request.object?.spec;
    if (!checkPlanSpec(spec)) {
      const causes = (checkPlanSpec.errors ?? []).slice(0, 20).map((error) => ({
        field: `spec${error.instancePath.replaceAll('/', '.')}`,
        message: error.message ?? 'invalid',
      }));
      return denied(422, 'Invalid', 'the RoutingPlan spec does not match its schema', causes);
    }
    const plan = spec as RoutingPlanSpec;
    const workspace = await pool.query('SELECT 1 FROM workspaces WHERE id = $1 AND application_id = $2', [
      plan.workspaceId,
      plan.applicationId,
    ]);
    if (workspace.rowCount === 0) {
      return denied(422, 'Invalid', `spec.workspaceId: no workspace ${plan.workspaceId} in ${plan.applicationId}`, [
        { field: 'spec.workspaceId', message: 'not a workspace of the application' },
      ]);
    }
    const facts = await workspaceFacts(pool, plan.workspaceId, referencesOf(plan.definition), false);
    const result = validateDefinition(plan.definition, facts);
    if (result.valid) return { allowed: true };
    const causes = issueCauses(result.issues);
    return denied(
      422,
      'Invalid',
      `invalid_plan: the definition has ${causes.length} problem${causes.length === 1 ? '' : 's'}: ${causes
        .slice(0, 5)
        .map((cause) => `${cause.field}: ${cause.message}`)
        .join('; ')}`,
      causes,
    );
  }
  if (request.kind.kind === 'Queue' && request.operation === 'DELETE') {
    const old = request.oldObject;
    const queueId = old?.spec?.id ?? old?.metadata?.uid;
    if (queueId === undefined) return { allowed: true };
    const plans = await plansUsing(pool, 'queue', queueId);
    if (plans.length === 0) return { allowed: true };
    const names = plans.map((plan) => `"${plan.name}" (${plan.id})`).join(', ');
    return denied(409, 'Conflict', `in_use: this queue is used by routing plan ${names}`);
  }
  return { allowed: true };
}

function isReview(body: unknown): body is { apiVersion: string; kind: string; request: AdmissionRequest } {
  const review = body as { apiVersion?: unknown; kind?: unknown; request?: Partial<AdmissionRequest> } | null;
  const request = review?.request;
  return (
    review?.apiVersion === 'admission.k8s.io/v1' &&
    review.kind === 'AdmissionReview' &&
    typeof request?.uid === 'string' &&
    typeof request.operation === 'string' &&
    typeof request.kind?.group === 'string' &&
    typeof request.kind.kind === 'string'
  );
}

export function registerAdmissionRoutes(app: FastifyInstance, pool: pg.Pool): void {
  app.post('/validate', async (request, reply) => {
    if (!isReview(request.body)) {
      return reply.code(400).send({
        error: {
          code: 'invalid_request',
          message: 'the body must be an admission.k8s.io/v1 AdmissionReview with a request (uid, kind, operation)',
        },
      });
    }
    const verdict = await review(pool, request.body.request);
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: request.body.request.uid, ...verdict },
    };
  });
}
