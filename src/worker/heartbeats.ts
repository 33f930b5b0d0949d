import { backoffMs } from './backoff.js';
import { NodeAnswerError, type NodeClient } from './http.js';
import { readHeartbeat } from './wire.js';

/**
 * Keeps the leases of running tasks alive: one timer per task, each heartbeat scheduled
 * when the previous one is answered (never two for a task at once). A 409 (or 404) means
 * the task is no longer this worker's: the lease is marked lost and heartbeats stop.
 * `cancel_requested` is passed on once; heartbeats go on so the lease does not run out
 * while the handler winds down.
 *
 * Progress rides on the heartbeats (`progress` in the body): a new value brings the next
 * heartbeat forward to within `PROGRESS_DELAY_MS`, and only the latest value is sent, so a
 * handler that reports progress in a tight loop costs at most one request a second.
 */

/** A running task's lease, as the worker tracks it. Heartbeats update `leaseExpiresMs`. */
export interface TrackedLease {
  readonly taskId: string;
  readonly leaseToken: string;
  leaseExpiresMs: number;
  /** Set when the node said the lease is no longer held. */
  lost: boolean;
}

export interface HeartbeatDeps {
  client: NodeClient;
  /** Fixed interval, ms; null: a third of the time left on the lease. */
  everyMs: number | null;
  onLost(lease: TrackedLease): void;
  onCancelRequested(lease: TrackedLease): void;
  onError(error: unknown, context: string): void;
}

/** What runs a lease's heartbeats. */
export interface LeaseKeeper {
  /** Sends `value` (JSON-safe, already checked) with the next heartbeat, brought forward; replaces one not yet sent. */
  progress(value: unknown): void;
  /** Stops the heartbeats; a progress value not yet sent is dropped. */
  stop(): void;
}

/** Shortest interval derived from a lease, so clock skew cannot turn heartbeats into a flood. */
const MIN_DERIVED_INTERVAL_MS = 250;
/** A new progress value is sent within this long, ms (sooner when a heartbeat is due anyway). */
const PROGRESS_DELAY_MS = 1_000;

/** Starts heartbeating `lease`. */
export function keepLeaseAlive(lease: TrackedLease, deps: HeartbeatDeps): LeaseKeeper {
  let stopped = false;
  let failures = 0;
  let cancelSeen = false;
  let timer: NodeJS.Timeout | undefined;
  /** When the scheduled heartbeat fires (Unix ms); null while one is in flight. */
  let nextBeatMs: number | null = null;
  /** The latest progress not yet sent. */
  let unsent: { value: unknown } | null = null;

  const intervalMs = (): number =>
    deps.everyMs ?? Math.max(MIN_DERIVED_INTERVAL_MS, (lease.leaseExpiresMs - Date.now()) / 3);
  /** Schedules the next heartbeat; sooner when progress waits, unless `exact` (a retry after a failure). */
  const schedule = (delayMs: number, exact = false): void => {
    if (stopped) return;
    const waitMs = Math.min(delayMs, unsent === null || exact ? Infinity : PROGRESS_DELAY_MS, 2 ** 31 - 1);
    nextBeatMs = Date.now() + waitMs;
    timer = setTimeout(() => void beat(), waitMs);
  };

  const beat = async (): Promise<void> => {
    nextBeatMs = null;
    const path = `/api/tasks/${encodeURIComponent(lease.taskId)}/heartbeat`;
    const sending = unsent;
    unsent = null;
    let nextMs: number;
    try {
      const body =
        sending === null
          ? { lease_token: lease.leaseToken }
          : { lease_token: lease.leaseToken, progress: sending.value };
      const answer = await deps.client.post(path, body);
      if (stopped) return;
      if (answer.status === 409 || answer.status === 404) {
        lease.lost = true;
        deps.onLost(lease);
        return;
      }
      if (answer.status === 400 && sending !== null) {
        // The node refused the progress (a lower `maxResultBytes` than this worker's, say), and
        // with it the heartbeat: drop the progress and beat again at once without it.
        deps.onError(NodeAnswerError.from(path, answer), `progress of task ${lease.taskId}, dropped`);
        schedule(0);
        return;
      }
      if (answer.status < 200 || answer.status >= 300) throw NodeAnswerError.from(path, answer);
      const { leaseExpiresMs, cancelRequested } = readHeartbeat(answer.body);
      lease.leaseExpiresMs = leaseExpiresMs;
      failures = 0;
      if (cancelRequested && !cancelSeen) {
        cancelSeen = true;
        deps.onCancelRequested(lease);
      }
      nextMs = intervalMs();
    } catch (error) {
      if (stopped) return;
      // Not delivered: send it with the next attempt, unless a newer value came meanwhile.
      unsent ??= sending;
      deps.onError(error, `heartbeat of task ${lease.taskId}`);
      // Try again soon, but no sooner than the node asked and no later than the usual beat.
      const waitMs =
        error instanceof NodeAnswerError && error.retryAfterMs !== null ? error.retryAfterMs : backoffMs(failures++);
      nextMs = Math.min(intervalMs(), waitMs);
      schedule(nextMs, true);
      return;
    }
    schedule(nextMs);
  };

  schedule(intervalMs());
  return {
    progress(value) {
      if (stopped || lease.lost) return;
      unsent = { value };
      // A heartbeat in flight takes it up when it is answered; a later one is brought forward.
      if (nextBeatMs !== null && nextBeatMs - Date.now() > PROGRESS_DELAY_MS) {
        clearTimeout(timer);
        schedule(PROGRESS_DELAY_MS);
      }
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
