/**
 * The error envelope of section 7: `{ error: { code, message } }` (routing plan errors add `issues`). Every failure
 * a handler or hook can meet is an ApiError by the time it is answered.
 */
export const errorStatus = {
  unauthorized: 401,
  insufficient_scope: 403,
  workspace_forbidden: 403,
  forbidden: 403,
  invalid_request: 400,
  invalid_cursor: 400,
  idempotency_key_required: 400,
  idempotency_key_reused: 422,
  idempotency_in_progress: 409,
  not_found: 404,
  in_use: 409,
  not_published: 409,
  invalid_plan: 422,
  call_ended: 409,
  target_not_found: 404,
  supervisor_unreachable: 409,
  not_implemented: 501,
  unavailable: 503,
  invalid_destination: 400,
  emergency_unavailable: 422,
  destination_blocked: 403,
  number_unavailable: 404,
  caller_id_forbidden: 403,
  self_dial: 422,
  agent_unreachable: 409,
  plan_inactive: 402,
  call_conflict: 409,
  disabled: 503,
  application_key_required: 403,
  limit_exceeded: 409,
  device_busy: 409,
  emergency_location_required: 403,
  emergency_address_invalid: 422,
  recipient_opted_out: 409,
  sender_unavailable: 422,
  message_conflict: 409,
  sender_not_eligible: 403,
  invalid_media: 422,
  message_rejected: 422,
  // Codes of ours (section 7: codes may grow).
  already_exists: 409,
  voice_lane_off: 409,
  method_not_allowed: 405,
  payload_too_large: 413,
  unsupported_media_type: 415,
  request_timeout: 408,
  headers_too_large: 431,
  rate_limited: 429,
  internal_error: 500,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown> | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: { extra?: Record<string, unknown>; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.code = code;
    this.status = errorStatus[code];
    this.extra = options.extra;
    this.headers = options.headers;
  }

  body() {
    return { error: { code: this.code, message: this.message, ...this.extra } };
  }
}

export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
