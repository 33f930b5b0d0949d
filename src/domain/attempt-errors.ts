/**
 * What a task's `last_error` (and its history's `error`) says when an attempt ends without a
 * result from its worker. Written by the store's statements, read by `explain`.
 */

/** The attempt reached its execution deadline (`timeout_seconds`, or as far as it was extended). */
export const TIMED_OUT = 'timed out: the attempt reached its deadline';

/** The worker stopped heartbeating (or its socket went away) and its lease ran out before the deadline. */
export const LEASE_EXPIRED = 'lease expired';

/** The task did not start within `start_deadline_seconds` of its due time. */
export const NOT_STARTED = 'expired: not started within its start deadline';
