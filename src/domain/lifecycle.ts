import { WheelhouseError } from '../lib/errors.js';
import type { StoredStatus, TaskStatus } from './model.js';

/**
 * The task state machine, written down once. Every transition the stores make is a
 * compare-and-set on `version` that encodes one of these edges; anything else is illegal.
 *
 * ```
 * blocked ──deps done──► pending ──due──► ready ──claim──► running ──► succeeded
 *                           ▲                                 │
 *                           └──── retry (backoff) ◄── failed / lease expired
 *                          │                                  └──► failed (retries spent)
 *                          └── not started by its start deadline ──► expired
 * any non-final ──cancel──► cancelled     predecessor failed or expired ──► cancelled
 * running ──waiting_children──► waiting ──children ended──► pending (attempt + 1, no retry used)
 *                                  └── a child failed (on_child_failure: fail) ──► failed
 * failed | cancelled | expired ──retry (POST …/retry)──► pending, due now: a new attempt
 * ```
 *
 * An attempt ends at its execution deadline as a timeout (running → pending after a backoff,
 * or → failed), like a lease that ran out.
 *
 * `ready` is derived (`pending` and due), so pending → ready is not a stored transition.
 * Cron schedules move between `active` and `paused`, and end `cancelled` (deleted) or
 * `succeeded` (no fire time left: `end_time` passed, or an expression such as `0 0 30 2 *`).
 */
export const TRANSITIONS: Readonly<Record<StoredStatus, readonly StoredStatus[]>> = {
  blocked: ['pending', 'cancelled'],
  pending: ['running', 'cancelled', 'expired'],
  running: ['succeeded', 'pending', 'failed', 'cancelled', 'waiting'],
  succeeded: [],
  failed: ['pending'],
  cancelled: ['pending'],
  expired: ['pending'],
  active: ['paused', 'cancelled', 'succeeded'],
  paused: ['active', 'cancelled'],
  waiting: ['pending', 'failed', 'cancelled'],
};

/**
 * Statuses in which a task has ended: nothing moves it on by itself. Only an explicit retry
 * takes a failed, cancelled or expired task back to pending.
 */
export const FINAL_STATUSES: readonly StoredStatus[] = ['succeeded', 'failed', 'cancelled', 'expired'];

export function canTransition(from: StoredStatus, to: StoredStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Throws `invalid_transition` unless `from → to` is an edge of the state machine. */
export function assertTransition(from: StoredStatus, to: StoredStatus): void {
  if (!canTransition(from, to)) {
    throw new WheelhouseError('invalid_transition', `a ${from} task cannot become ${to}`, {
      details: { from, to },
    });
  }
}

/** The status a client sees: a stored `pending` task whose due time has come is `ready`. */
export function visibleStatus(status: StoredStatus, dueMs: number, nowMs: number): TaskStatus {
  return status === 'pending' && dueMs <= nowMs ? 'ready' : status;
}
