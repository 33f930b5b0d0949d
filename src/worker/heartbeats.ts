import { backoffMs } from './backoff.js';
import { NodeAnswerError, type NodeClient } from './http.js';
import { readHeartbeat } from './wire.js';

/**
 * Keeps the leases of running tasks alive: one timer per task, each heartbeat scheduled
 * when the previous one is answered (never two for a task at once). A 409 (or 404) means
 * the task is no longer this worker's: the lease is marked lost and heartbeats stop.
 * `cancel_requested` is passed on once; heartbeats go on so the lease does not run out
 * while the handler winds down.
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

/** Shortest interval derived from a lease, so clock skew cannot turn heartbeats into a flood. */
const MIN_DERIVED_INTERVAL_MS = 250;

/** Starts heartbeating `lease`; returns the function that stops it. */
export function keepLeaseAlive(lease: TrackedLease, deps: HeartbeatDeps): () => void {
  let stopped = false;
  let failures = 0;
  let cancelSeen = false;
  let timer: NodeJS.Timeout | undefined;

  const intervalMs = (): number =>
    deps.everyMs ?? Math.max(MIN_DERIVED_INTERVAL_MS, (lease.leaseExpiresMs - Date.now()) / 3);
  const schedule = (delayMs: number): void => {
    if (!stopped) timer = setTimeout(() => void beat(), Math.min(delayMs, 2 ** 31 - 1));
  };

  const beat = async (): Promise<void> => {
    const path = `/api/tasks/${encodeURIComponent(lease.taskId)}/heartbeat`;
    let nextMs: number;
    try {
      const answer = await deps.client.post(path, { lease_token: lease.leaseToken });
      if (stopped) return;
      if (answer.status === 409 || answer.status === 404) {
        lease.lost = true;
        deps.onLost(lease);
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
      deps.onError(error, `heartbeat of task ${lease.taskId}`);
      // Try again soon, but no sooner than the node asked and no later than the usual beat.
      const waitMs =
        error instanceof NodeAnswerError && error.retryAfterMs !== null ? error.retryAfterMs : backoffMs(failures++);
      nextMs = Math.min(intervalMs(), waitMs);
    }
    schedule(nextMs);
  };

  schedule(intervalMs());
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
