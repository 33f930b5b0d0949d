/**
 * What the client throws. A node's error answer (`{error: {code, message, details}}`) is a
 * `WheelhouseApiError`, or the subclass of its family (`ValidationError`, `TaskNotFoundError`,
 * `BacklogFullError`, …), so callers can `instanceof` or switch on `code`. A request that got
 * no answer is a `WheelhouseNetworkError`; `waitFor` running out of time is a
 * `WheelhouseTimeoutError`.
 */

import { UNAVAILABLE_CODES } from '../lib/unavailable-codes.js';

/**
 * The error codes a node answers with, as in its error catalogue (API.md, `/docs`). The
 * client keeps its own copy so it imports nothing of the server; a test holds the two equal.
 */
export const API_ERROR_CODES = [
  'validation_failed',
  'malformed_json',
  'invalid_cron',
  'unknown_timezone',
  'dependency_cycle',
  'unknown_dependency',
  'unknown_limit',
  'payload_too_large',
  'unauthorized',
  'forbidden',
  'host_not_allowed',
  'origin_not_allowed',
  'not_found',
  'task_not_found',
  'route_not_found',
  'method_not_allowed',
  'unsupported_media_type',
  'idempotency_conflict',
  'lease_not_held',
  'task_finished',
  'invalid_transition',
  'limit_in_use',
  'backlog_full',
  'too_many_polls',
  'too_many_sockets',
  'store_unavailable',
  'not_ready',
  'ask_timeout',
  'mailbox_full',
  'stale_epoch',
  'internal',
] as const;

export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

const KNOWN_CODES: ReadonlySet<string> = new Set(API_ERROR_CODES);

export function isApiErrorCode(value: unknown): value is ApiErrorCode {
  return typeof value === 'string' && KNOWN_CODES.has(value);
}

/** Where the failed request went, for messages. */
export interface RequestInfo {
  method: string;
  path: string;
}

/** A node answered with an error status. */
export class WheelhouseApiError extends Error {
  /**
   * The catalogue code. When the answer carried none the client knows (a proxy's 502, a newer
   * node's new code), it is the code of the status's family (`internal` for other 5xx) and
   * `rawCode` holds what was sent.
   */
  readonly code: ApiErrorCode;
  readonly rawCode: string | null;
  readonly status: number;
  readonly details: Record<string, unknown>;
  /** From `Retry-After`, ms; null when the node sent none. */
  readonly retryAfterMs: number | null;
  readonly method: string;
  readonly path: string;

  constructor(init: {
    status: number;
    code: ApiErrorCode;
    rawCode: string | null;
    message: string;
    details: Record<string, unknown>;
    retryAfterMs: number | null;
    request: RequestInfo;
  }) {
    super(`${init.request.method} ${init.request.path} answered ${init.status} ${init.code}: ${init.message}`);
    this.name = 'WheelhouseApiError';
    this.status = init.status;
    this.code = init.code;
    this.rawCode = init.rawCode;
    this.details = init.details;
    this.retryAfterMs = init.retryAfterMs;
    this.method = init.request.method;
    this.path = init.request.path;
  }
}

type ApiErrorInit = ConstructorParameters<typeof WheelhouseApiError>[0];

/** A 400: the request is not valid. `field` names the failing field (`tasks[3].schedule.cron_expression`). */
export class ValidationError extends WheelhouseApiError {
  readonly field: string | null;
  /** In a batch or a graph: the position of the failing task. */
  readonly index: number | null;
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'ValidationError';
    this.field = typeof init.details.field === 'string' ? init.details.field : null;
    this.index = typeof init.details.index === 'number' ? init.details.index : null;
  }
}

/** A 413: the body is larger than the node's limit (`limitBytes`). */
export class PayloadTooLargeError extends WheelhouseApiError {
  readonly limitBytes: number | null;
  readonly field: string | null;
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'PayloadTooLargeError';
    this.limitBytes = typeof init.details.limit_bytes === 'number' ? init.details.limit_bytes : null;
    this.field = typeof init.details.field === 'string' ? init.details.field : null;
  }
}

/** A 401 (no token) or 403 (a wrong one). */
export class AuthError extends WheelhouseApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'AuthError';
  }
}

/** A 404 other than an unknown task: an unknown graph, route or resource. */
export class NotFoundError extends WheelhouseApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'NotFoundError';
  }
}

/** A 404 `task_not_found`: no task has this id. */
export class TaskNotFoundError extends NotFoundError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'TaskNotFoundError';
  }
}

/**
 * A 409: idempotency key reused with another body, a task that already finished, a lost lease,
 * a limit that waiting tasks still take part in.
 */
export class ConflictError extends WheelhouseApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'ConflictError';
  }
}

/** A 429 `backlog_full` after the retries ran out: the node's ready backlog is past its limit. */
export class BacklogFullError extends WheelhouseApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'BacklogFullError';
  }
}

/** A 503 after the retries ran out: the node cannot reach its store, or is starting. Nothing was written. */
export class UnavailableError extends WheelhouseApiError {
  constructor(init: ApiErrorInit) {
    super(init);
    this.name = 'UnavailableError';
  }
}

/** The request got no answer: connection refused or reset, DNS, the attempt's time limit. */
export class WheelhouseNetworkError extends Error {
  readonly method: string;
  readonly path: string;
  /** The attempt ran past the client's `timeoutMs`. */
  readonly timedOut: boolean;
  /** An answer came but could not be read (a 2xx whose body is not JSON): never retried. */
  readonly protocol: boolean;
  constructor(
    request: RequestInfo,
    message: string,
    options: { cause?: unknown; timedOut?: boolean; protocol?: boolean } = {},
  ) {
    super(`${request.method} ${request.path}: ${message}`, { cause: options.cause });
    this.name = 'WheelhouseNetworkError';
    this.method = request.method;
    this.path = request.path;
    this.timedOut = options.timedOut ?? false;
    this.protocol = options.protocol ?? false;
  }
}

/** `waitFor` ran out of time before the task reached one of the statuses. */
export class WheelhouseTimeoutError extends Error {
  constructor(
    readonly taskId: string,
    readonly statuses: readonly string[],
    /** The last status seen, or null if none was read. */
    readonly lastStatus: string | null,
    readonly timeoutMs: number,
  ) {
    super(
      `task ${taskId} did not reach ${statuses.join(' or ')} within ${timeoutMs} ms (last status: ${lastStatus ?? 'unknown'})`,
    );
    this.name = 'WheelhouseTimeoutError';
  }
}

/** The code a status stands for when the answer names no code the client knows. */
function codeForStatus(status: number): ApiErrorCode {
  switch (status) {
    case 400:
      return 'validation_failed';
    case 401:
      return 'unauthorized';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 405:
      return 'method_not_allowed';
    case 409:
      return 'invalid_transition';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'backlog_full';
    case 503:
      return 'store_unavailable';
    default:
      return status >= 400 && status < 500 ? 'validation_failed' : 'internal';
  }
}

/** The error for a non-2xx answer: its family's class, with the body's code, message and details. */
export function apiErrorFrom(
  status: number,
  body: unknown,
  retryAfterMs: number | null,
  request: RequestInfo,
): WheelhouseApiError {
  const error = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)?.error;
  const rawCode = typeof error?.code === 'string' ? error.code : null;
  const code = isApiErrorCode(rawCode) ? rawCode : codeForStatus(status);
  const details =
    typeof error?.details === 'object' && error.details !== null && !Array.isArray(error.details)
      ? (error.details as Record<string, unknown>)
      : {};
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
  const init: ApiErrorInit = { status, code, rawCode, message, details, retryAfterMs, request };
  if (UNAVAILABLE_CODES.has(code)) return new UnavailableError(init);
  switch (code) {
    case 'validation_failed':
    case 'malformed_json':
    case 'invalid_cron':
    case 'unknown_timezone':
    case 'dependency_cycle':
    case 'unknown_dependency':
    case 'unknown_limit':
      return new ValidationError(init);
    case 'payload_too_large':
      return new PayloadTooLargeError(init);
    case 'unauthorized':
    case 'forbidden':
      return new AuthError(init);
    case 'task_not_found':
      return new TaskNotFoundError(init);
    case 'not_found':
    case 'route_not_found':
      return new NotFoundError(init);
    case 'idempotency_conflict':
    case 'lease_not_held':
    case 'task_finished':
    case 'invalid_transition':
    case 'limit_in_use':
      return new ConflictError(init);
    case 'backlog_full':
      return new BacklogFullError(init);
    default:
      return new WheelhouseApiError(init);
  }
}
