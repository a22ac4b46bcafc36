/**
 * The validating admission webhook (docs/kubernetes.md): `POST /validate` takes an `admission.k8s.io/v1`
 * AdmissionReview and answers it. A `RoutingPlan` created or updated with an invalid spec is refused at
 * `kubectl apply` with the issues the REST API's 422 `invalid_plan` lists (the same validator, against the same
 * workspace facts; a definition over its size is one, `definition_too_large`), and one past the limits on plans per
 * workspace or versions per plan with the REST API's 409 `limit_exceeded` message (core/routing/limits.ts); a `Queue` that a routing plan uses cannot be deleted. Everything else is allowed. A body that is
 * not an AdmissionReview gets 400 in the service's error envelope.
 *
 * It is served only by `admissionServer`, a listener of its own over HTTPS (ADMISSION_TLS_DIR, ADMISSION_PORT), which
 * only the Kubernetes API server needs to reach: it takes no credential and answers about any workspace (whether a
 * queue is in use, whether the queues and schedules a plan names exist), so it is never served beside the API.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { ApiError } from '../core/errors.ts';
import { toApiError } from '../core/http.ts';
import type pg from 'pg';
import { RoutingPlanSpec } from '../core/resources/kinds.ts';
import { workspaceFacts } from '../core/routing/facts.ts';
import { planLimitProblem } from '../core/routing/limits.ts';
import { planLimitFacts } from '../core/routing/plans.ts';
import { plansUsing, usedBy } from '../core/routing/usage.ts';
import { isUuid } from '../core/ids.ts';
import { describeIssues, type PlanIssue, referencesOf, validateDefinition } from '../core/routing/validate.ts';
import { compileStrict } from '../core/validation.ts';
import { workspaceOfApplication } from '../core/identity/workspaces.ts';

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
    if (!(await workspaceOfApplication(pool, plan.workspaceId, plan.applicationId))) {
      return denied(422, 'Invalid', `spec.workspaceId: no workspace ${plan.workspaceId} in ${plan.applicationId}`, [
        { field: 'spec.workspaceId', message: 'not a workspace of the application' },
      ]);
    }
    const facts = await workspaceFacts(pool, plan.workspaceId, referencesOf(plan.definition), false);
    const result = validateDefinition(plan.definition, facts);
    if (!result.valid) {
      return denied(422, 'Invalid', `invalid_plan: ${describeIssues(result.issues)}`, issueCauses(result.issues));
    }
    // The limits on plans and versions, as the API and the reconciler judge them (again, under their locks).
    const planId = plan.id ?? request.object?.metadata?.uid;
    const limit = planLimitProblem(
      await planLimitFacts(pool, plan.workspaceId, isUuid(planId ?? '') ? planId : undefined, plan.definition),
    );
    if (limit === undefined) return { allowed: true };
    return denied(409, 'Conflict', `limit_exceeded: ${limit}`, [{ field: 'spec.definition', message: limit }]);
  }
  if (request.kind.kind === 'Queue' && request.operation === 'DELETE') {
    const old = request.oldObject;
    const queueId = old?.spec?.id ?? old?.metadata?.uid;
    // Plans name queues by UUID: anything else names no queue a plan could use.
    if (typeof queueId !== 'string' || !isUuid(queueId)) return { allowed: true };
    const plans = await plansUsing(pool, 'queue', queueId);
    if (plans.length === 0) return { allowed: true };
    return denied(409, 'Conflict', `in_use: this queue is ${usedBy(plans)}`);
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

function registerAdmissionRoutes(app: FastifyInstance, pool: pg.Pool): void {
  app.post('/validate', async (request) => {
    if (!isReview(request.body)) {
      throw new ApiError(
        'invalid_request',
        'the body must be an admission.k8s.io/v1 AdmissionReview with a request (uid, kind, operation)',
      );
    }
    const verdict = await review(pool, request.body.request);
    return {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid: request.body.request.uid, ...verdict },
    };
  });
}

/**
 * The largest review the webhook reads: an update's carries the object and the old one, each up to the 1.5 MB etcd
 * stores (a plan at its 256 KiB holds it twice, in its spec and in kubectl's last-applied annotation), within the
 * 3 MiB the Kubernetes API server takes in a request. A review refused for its size would fail the write it reviews.
 */
export const admissionBodyLimit = 4 * 1024 * 1024;

/**
 * The admission webhook's own HTTPS server (Kubernetes calls webhooks over TLS only): `POST /validate`, with every
 * error (an unreadable body, a failure) in the service's envelope, as on the main server. Its body limit is the
 * larger of BODY_LIMIT and `admissionBodyLimit`.
 */
export function admissionServer(pool: pg.Pool, tls: { cert: Buffer; key: Buffer }, bodyLimit: number): FastifyInstance {
  const app = Fastify({ https: tls, bodyLimit: Math.max(bodyLimit, admissionBodyLimit), logger: false });
  app.setErrorHandler(async (error, _request, reply) => {
    const apiError = toApiError(error);
    return reply.code(apiError.status).send(apiError.body());
  });
  app.setNotFoundHandler(async (request, reply) => {
    const error = new ApiError('not_found', `no such path: ${request.method} ${request.url.split('?')[0]}`);
    return reply.code(error.status).send(error.body());
  });
  registerAdmissionRoutes(app, pool);
  return app;
}
