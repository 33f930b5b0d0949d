/**
 * The one catalogue of coded errors. Every error a client can see is one of these codes;
 * the HTTP layer maps a code to its status in one place (`src/http/errors.ts`).
 */
export const ERROR_CATALOGUE = {
  validation_failed: { status: 400, message: 'The request is not valid.' },
  malformed_json: { status: 400, message: 'The request body is not valid JSON.' },
  invalid_cron: { status: 400, message: 'The cron expression is not valid.' },
  unknown_timezone: { status: 400, message: 'The time zone is not a known IANA name.' },
  dependency_cycle: { status: 400, message: 'The dependencies form a cycle.' },
  unknown_dependency: { status: 400, message: 'A dependency names a task that does not exist.' },
  unknown_limit: { status: 400, message: 'A limit is neither declared nor covered by a declared family.' },
  payload_too_large: { status: 413, message: 'The request body is larger than the configured limit.' },
  unauthorized: { status: 401, message: 'A bearer token is required.' },
  forbidden: { status: 403, message: 'This token may not use this route.' },
  host_not_allowed: {
    status: 403,
    message: 'This node asks for no API key and answers only requests to its own host names.',
  },
  origin_not_allowed: { status: 403, message: 'A web page of another origin may not open this WebSocket.' },
  not_found: { status: 404, message: 'No such resource.' },
  task_not_found: { status: 404, message: 'No task has this id.' },
  route_not_found: { status: 404, message: 'No such route.' },
  method_not_allowed: { status: 405, message: 'This route does not take that method.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  idempotency_conflict: {
    status: 409,
    message: 'The idempotency key was used before with a different request.',
  },
  lease_not_held: { status: 409, message: 'The lease is no longer held by this worker.' },
  task_finished: { status: 409, message: 'The task has already finished.' },
  invalid_transition: { status: 409, message: 'The task cannot make that transition.' },
  limit_in_use: { status: 409, message: 'Tasks waiting to start take part in this limit.' },
  backlog_full: { status: 429, message: 'The ready backlog is past its limit; retry later.' },
  too_many_polls: { status: 429, message: 'This node holds as many long-polls as it allows; retry later.' },
  too_many_sockets: {
    status: 429,
    message: 'This node holds as many worker sockets as it allows; connect later or elsewhere.',
  },
  store_unavailable: { status: 503, message: 'The node cannot reach its store right now.' },
  not_ready: { status: 503, message: 'The node has not finished starting.' },
  ask_timeout: { status: 503, message: 'An actor did not answer in time.' },
  mailbox_full: { status: 503, message: 'An actor mailbox is full.' },
  stale_epoch: { status: 503, message: 'This node no longer owns the actor.' },
  internal: { status: 500, message: 'An unexpected error happened.' },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** Every code in the catalogue, in catalogue order: what the contract's error list must match. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze(Object.keys(ERROR_CATALOGUE) as ErrorCode[]);

export interface ErrorOptions {
  /** Extra facts for the client: the failing field, the batch index, … */
  details?: Record<string, unknown>;
  /** The error that caused this one. */
  cause?: unknown;
  /** For 429 and 503: seconds the client should wait. */
  retryAfterSeconds?: number;
}

/** An error from the catalogue. `message` says what went wrong in this instance. */
export class WheelhouseError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown>;
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message?: string, options: ErrorOptions = {}) {
    super(message ?? ERROR_CATALOGUE[code].message, { cause: options.cause });
    this.name = 'WheelhouseError';
    this.code = code;
    this.status = ERROR_CATALOGUE[code].status;
    this.details = options.details ?? {};
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

export function isWheelhouseError(error: unknown, code?: ErrorCode): error is WheelhouseError {
  return error instanceof WheelhouseError && (code === undefined || error.code === code);
}
