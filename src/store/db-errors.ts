import { WheelhouseError } from '../lib/errors.js';

/**
 * What a failure of the database means, for both drivers (`pg` and PGlite): the server cannot
 * be reached (a lost connection, or a pool that cannot hand one out), a conflict worth
 * retrying, a statement past its time limit — and the `store_unavailable` error the stores
 * throw for each.
 */

/** Node socket errors that mean the server cannot be reached. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs that mean the server is going away or refusing connections — or takes no writes
 * (`25006`): a standby, or a primary being demoted or promoted, which a failover makes of the
 * server a connection was opened on (docs/decisions/0025-postgres-failover.md).
 */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300', '25006']);

/** Messages of errors raised by `pg`, `pg-pool` and PGlite themselves, which carry no code. */
const UNAVAILABLE_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Connection terminated',
  'is not queryable',
  'Cannot use a pool after calling end on the pool',
  'PGlite is closed',
  // A statement past the client's own bound (`queryTimeoutMs`): the server did not answer.
  'Query read timeout',
];

/**
 * Unavailable, but not a lost connection: a pool whose connections are all busy for longer
 * than the connect timeout (the server answers; the node is saturated), or a pool this node
 * closed.
 */
const NOT_CONNECTION_LOSS = [
  'timeout exceeded when trying to connect',
  'Query read timeout',
  'Cannot use a pool after calling end on the pool',
];

/** True when `error` means a connection to the server failed or could not be made. */
export function isConnectionLoss(error: unknown): boolean {
  if (!isUnavailableError(error)) return false;
  const message = error instanceof Error ? error.message : '';
  return !NOT_CONNECTION_LOSS.some((m) => message.includes(m));
}

/** True when `error` means the database cannot be reached (rather than a bad statement). */
export function isUnavailableError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  if (UNAVAILABLE_MESSAGES.some((m) => error.message.includes(m))) return true;
  // Node reports a refused dual-stack connect as an AggregateError of the attempts.
  if (error instanceof AggregateError) return error.errors.some((e) => isUnavailableError(e));
  return false;
}

/** `query_canceled`: here, a statement past the pool's `statement_timeout`. */
const STATEMENT_TIMEOUT_SQLSTATE = '57014';

/** SQLSTATEs of a transaction Postgres aborted to resolve a conflict: trying again may succeed. */
const CONFLICT_SQLSTATES = new Set(['40P01', '40001']);

/** A deadlock or serialization failure (raw, or already mapped by {@link toStoreError}). */
export function isRetryableConflict(error: unknown): boolean {
  const cause = error instanceof WheelhouseError ? error.cause : error;
  const code = (cause as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONFLICT_SQLSTATES.has(code);
}

/**
 * Maps a driver error to what the stores throw: `store_unavailable` (HTTP 503 with
 * Retry-After) when the database cannot be reached, aborted the statement as a conflict
 * (a deadlock: retrying is the answer, not a 500) or cancelled it at the pool's statement
 * timeout, the error itself otherwise.
 */
export function toStoreError(error: unknown, opening = false): unknown {
  if (error instanceof WheelhouseError) return error;
  if ((error as { code?: unknown } | null)?.code === STATEMENT_TIMEOUT_SQLSTATE) {
    return new WheelhouseError(
      'store_unavailable',
      'the statement ran past its time limit and was cancelled; retry later, or narrow the request',
      { cause: error, retryAfterSeconds: 1 },
    );
  }
  if (isRetryableConflict(error)) {
    return new WheelhouseError(
      'store_unavailable',
      `the database aborted the statement as a conflict; retry: ${(error as Error).message}`,
      {
        cause: error,
        retryAfterSeconds: 1,
      },
    );
  }
  if (opening || isUnavailableError(error)) {
    const reason = error instanceof Error ? error.message : String(error);
    return new WheelhouseError('store_unavailable', `the database cannot be reached: ${reason}`, {
      cause: error,
      retryAfterSeconds: 1,
    });
  }
  return error;
}
