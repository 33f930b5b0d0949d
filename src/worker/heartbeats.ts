import { backoffMs } from './backoff.js';
import { LeaseLostError } from './errors.js';
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
 *
 * Deadlines: every answer names the attempt's deadline (`deadline_at`). An extension
 * (`extend_seconds`) goes out in a heartbeat at once, or as soon as the one in flight is
 * answered, and that answer's deadline settles it. No heartbeat is scheduled past the deadline,
 * nor within `DEADLINE_MARGIN_MS` of it unless it carries an extension: the node ends the
 * attempt there, and a heartbeat that reached it later would only be answered 409. A lease that
 * already runs to the deadline needs no keeping: the heartbeats (for cancel and progress) keep
 * the pace they had rather than crowd towards the deadline as its remaining third shrinks.
 */

/** A running task's lease, as the worker tracks it. Heartbeats update `leaseExpiresMs` and `deadlineMs`. */
export interface TrackedLease {
  readonly taskId: string;
  readonly leaseToken: string;
  leaseExpiresMs: number;
  /** The attempt's deadline (Unix ms); null while the node names none (a node older than deadlines). */
  deadlineMs: number | null;
  /** Set when the node said the lease is no longer held. */
  lost: boolean;
}

export interface HeartbeatDeps {
  client: NodeClient;
  /** Fixed interval, ms; null: a third of the time left on the lease. */
  everyMs: number | null;
  onLost(lease: TrackedLease): void;
  onCancelRequested(lease: TrackedLease): void;
  /** An answer named the deadline (each does; it moves when an extension is granted). */
  onDeadline(lease: TrackedLease): void;
  onError(error: unknown, context: string): void;
}

/** Shortest interval derived from a lease, so clock skew cannot turn heartbeats into a flood. */
const MIN_DERIVED_INTERVAL_MS = 250;
/** A new progress value is sent within this long, ms (sooner when a heartbeat is due anyway). */
const PROGRESS_DELAY_MS = 1_000;
/** A heartbeat due this close to the deadline is not sent (save with an extension), ms. */
const DEADLINE_MARGIN_MS = 250;

/** One `extendDeadline` waiting for its heartbeat's answer. */
interface Extension {
  readonly seconds: number;
  resolve(deadlineMs: number): void;
  reject(error: Error): void;
}

/** Starts heartbeating `lease`. */
export function keepLeaseAlive(lease: TrackedLease, deps: HeartbeatDeps): LeaseKeeper {
  return new LeaseKeeper(lease, deps);
}

/** What runs a lease's heartbeats. */
export class LeaseKeeper {
  private stopped = false;
  private failures = 0;
  private cancelSeen = false;
  private timer: NodeJS.Timeout | undefined;
  /** When the scheduled heartbeat fires (Unix ms); null while none is scheduled. */
  private nextBeatMs: number | null = null;
  private inFlight = false;
  /** The latest progress not yet sent. */
  private unsent: { value: unknown } | null = null;
  /** Extensions not sent yet, and those the heartbeat in flight carries. */
  private wanted: Extension[] = [];
  private carried: Extension[] = [];
  /** The derived interval, as it was while the lease ended before the deadline, ms. */
  private paceMs: number;
  /** Set by `stop`: how extensions asked for afterwards settle. */
  private end: Error | number | null = null;

  constructor(
    private readonly lease: TrackedLease,
    private readonly deps: HeartbeatDeps,
  ) {
    this.paceMs = Math.max(MIN_DERIVED_INTERVAL_MS, (lease.leaseExpiresMs - Date.now()) / 3);
    this.schedule(this.intervalMs());
  }

  /** Sends `value` (JSON-safe, already checked) with the next heartbeat, brought forward; replaces one not yet sent. */
  progress(value: unknown): void {
    if (this.stopped || this.lease.lost) return;
    this.unsent = { value };
    // A heartbeat in flight takes it up when it is answered; a later one is brought forward.
    if (this.inFlight) return;
    if (this.nextBeatMs === null || this.nextBeatMs - Date.now() > PROGRESS_DELAY_MS) {
      clearTimeout(this.timer);
      this.schedule(PROGRESS_DELAY_MS);
    }
  }

  /** Asks for the deadline to become at least now + `seconds`; resolves with the deadline granted, Unix ms. */
  extend(seconds: number): Promise<number> {
    if (this.lease.lost) return Promise.reject(new LeaseLostError(this.lease.taskId));
    return new Promise((resolve, reject) => {
      const extension = { seconds, resolve, reject };
      if (this.end !== null) return this.settle([extension], this.end);
      this.wanted.push(extension);
      if (this.inFlight) return; // the answer in flight sends it on
      clearTimeout(this.timer);
      void this.beat();
    });
  }

  /** Stops the heartbeats; progress not yet sent is dropped, extensions unanswered reject with `end` or resolve with it. */
  stop(end: Error | number = Date.now()): void {
    this.stopped = true;
    this.end = end;
    clearTimeout(this.timer);
    this.settle([...this.carried, ...this.wanted], end);
    this.carried = [];
    this.wanted = [];
  }

  private intervalMs(): number {
    if (this.deps.everyMs !== null) return this.deps.everyMs;
    const { leaseExpiresMs, deadlineMs } = this.lease;
    if (deadlineMs === null || leaseExpiresMs < deadlineMs)
      this.paceMs = Math.max(MIN_DERIVED_INTERVAL_MS, (leaseExpiresMs - Date.now()) / 3);
    return this.paceMs;
  }

  /** Schedules the next heartbeat; sooner when progress waits, unless `exact` (a retry after a failure). */
  private schedule(delayMs: number, exact = false): void {
    this.nextBeatMs = null;
    if (this.stopped) return;
    const waitMs = Math.min(delayMs, this.unsent === null || exact ? Infinity : PROGRESS_DELAY_MS, 2 ** 31 - 1);
    const { deadlineMs } = this.lease;
    const latestMs = deadlineMs === null ? Infinity : deadlineMs - (this.wanted.length > 0 ? 0 : DEADLINE_MARGIN_MS);
    if (Date.now() + waitMs >= latestMs) return;
    this.nextBeatMs = Date.now() + waitMs;
    this.timer = setTimeout(() => void this.beat(), waitMs);
  }

  private async beat(): Promise<void> {
    const { lease, deps } = this;
    this.nextBeatMs = null;
    this.inFlight = true;
    const path = `/api/tasks/${encodeURIComponent(lease.taskId)}/heartbeat`;
    const sending = this.unsent;
    this.unsent = null;
    const carried = (this.carried = this.wanted);
    this.wanted = [];
    const extendSeconds = carried.length === 0 ? undefined : Math.max(...carried.map((x) => x.seconds));
    let nextMs: number;
    try {
      const answer = await deps.client.post(path, {
        lease_token: lease.leaseToken,
        ...(sending === null ? {} : { progress: sending.value }),
        ...(extendSeconds === undefined ? {} : { extend_seconds: extendSeconds }),
      });
      if (this.stopped) return;
      if (answer.status === 409 || answer.status === 404) {
        lease.lost = true;
        this.stop(new LeaseLostError(lease.taskId));
        deps.onLost(lease);
        return;
      }
      if (answer.status === 400 && (sending !== null || carried.length > 0)) {
        // The node refused the progress (a lower `maxResultBytes` than this worker's, say) or the
        // extension, and with it the heartbeat: drop them and beat again at once without them.
        const error = NodeAnswerError.from(path, answer);
        deps.onError(error, `progress or extension of task ${lease.taskId}, dropped`);
        this.settle(carried, error);
        this.carried = [];
        this.inFlight = false;
        this.schedule(0);
        return;
      }
      if (answer.status < 200 || answer.status >= 300) throw NodeAnswerError.from(path, answer);
      const { leaseExpiresMs, deadlineMs, cancelRequested } = readHeartbeat(answer.body);
      lease.leaseExpiresMs = leaseExpiresMs;
      if (deadlineMs !== null) {
        lease.deadlineMs = deadlineMs;
        deps.onDeadline(lease);
      }
      this.settle(
        carried,
        deadlineMs ?? new Error(`the node answered the heartbeat of task ${lease.taskId} without a deadline_at`),
      );
      this.carried = [];
      this.failures = 0;
      if (cancelRequested && !this.cancelSeen) {
        this.cancelSeen = true;
        deps.onCancelRequested(lease);
      }
      nextMs = this.wanted.length > 0 ? 0 : this.intervalMs();
    } catch (error) {
      if (this.stopped) return;
      // Not delivered: send it with the next attempt, unless a newer value came meanwhile.
      this.unsent ??= sending;
      this.wanted = [...carried, ...this.wanted];
      this.carried = [];
      deps.onError(error, `heartbeat of task ${lease.taskId}`);
      // Try again soon, but no sooner than the node asked and no later than the usual beat.
      const waitMs =
        error instanceof NodeAnswerError && error.retryAfterMs !== null
          ? error.retryAfterMs
          : backoffMs(this.failures++);
      this.inFlight = false;
      this.schedule(Math.min(this.intervalMs(), waitMs), true);
      return;
    }
    this.inFlight = false;
    this.schedule(nextMs);
  }

  private settle(extensions: readonly Extension[], end: Error | number): void {
    for (const x of extensions) {
      if (typeof end === 'number') x.resolve(end);
      else x.reject(end);
    }
  }
}
