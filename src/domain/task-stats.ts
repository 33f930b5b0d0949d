/**
 * Task activity by minute and task type: the counts a node keeps (`task_stats`, migration
 * 000020) and what is read from them. Pure: no I/O (docs/decisions/0034-task-stats-rollup.md).
 */

/**
 * Upper bounds of the start-lag histogram's buckets, ms; one more bucket counts what is above
 * the last. Fixed for the life of the table: every row's `lag_buckets` is aligned with them,
 * so any range of rows sums bucket by bucket. From a quiet cluster's few ms to a backlog's
 * minutes, about three per decade (a p99 read from them is within a bucket's width).
 */
export const START_LAG_BOUNDS_MS: readonly number[] = [
  5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000,
];
/** How many buckets a row holds: one per bound and the overflow. */
export const START_LAG_BUCKETS = START_LAG_BOUNDS_MS.length + 1;

/** What happened to tasks of one type in one minute (on one node, or summed). */
export interface ActivityCounts {
  /** Tasks written by submissions. */
  submitted: number;
  /** Attempts started (claimed by a worker). */
  started: number;
  /** Tasks that ended succeeded. (An attempt that ends waiting for its children counts nothing: the task runs again.) */
  succeeded: number;
  /** Tasks that ended failed, their retries spent. */
  failed: number;
  /** Attempts that failed (or whose lease ran out) and went back to pending for another. */
  retried: number;
  /** Tasks that ended cancelled: a running one when its attempt ends, others when cancelled. */
  cancelled: number;
  /** Tasks that did not start within their start deadline. */
  expired: number;
  /** Sum of the start lags of `started`, ms. */
  lagSumMs: number;
  /** The longest start lag, ms. */
  lagMaxMs: number;
  /** Started attempts by start lag, aligned with START_LAG_BOUNDS_MS (+ the overflow). */
  lagBuckets: number[];
}

export const COUNTED = ['submitted', 'started', 'succeeded', 'failed', 'retried', 'cancelled', 'expired'] as const;
export type Counted = (typeof COUNTED)[number];

export function emptyCounts(): ActivityCounts {
  return {
    submitted: 0,
    started: 0,
    succeeded: 0,
    failed: 0,
    retried: 0,
    cancelled: 0,
    expired: 0,
    lagSumMs: 0,
    lagMaxMs: 0,
    lagBuckets: new Array<number>(START_LAG_BUCKETS).fill(0),
  };
}

/** The bucket a start lag of `lagMs` falls in. */
export function lagBucket(lagMs: number): number {
  for (let i = 0; i < START_LAG_BOUNDS_MS.length; i++) if (lagMs <= (START_LAG_BOUNDS_MS[i] as number)) return i;
  return START_LAG_BOUNDS_MS.length;
}

/** Counts one started attempt that started `lagMs` after it was due. */
export function addStart(counts: ActivityCounts, lagMs: number): void {
  const lag = Math.max(0, Math.round(lagMs));
  counts.started++;
  counts.lagSumMs += lag;
  if (lag > counts.lagMaxMs) counts.lagMaxMs = lag;
  const i = lagBucket(lag);
  counts.lagBuckets[i] = (counts.lagBuckets[i] ?? 0) + 1;
}

/** Adds `from` into `into`. */
export function addCounts(into: ActivityCounts, from: ActivityCounts): void {
  for (const name of COUNTED) into[name] += from[name];
  into.lagSumMs += from.lagSumMs;
  into.lagMaxMs = Math.max(into.lagMaxMs, from.lagMaxMs);
  for (let i = 0; i < START_LAG_BUCKETS; i++)
    into.lagBuckets[i] = (into.lagBuckets[i] ?? 0) + (from.lagBuckets[i] ?? 0);
}

/**
 * The `q` quantile (0…1) of the start lags a histogram counts, ms, or null when it counts none:
 * interpolated inside the bucket the rank falls in, the overflow bucket reaching up to `maxMs`
 * (the longest lag seen), and never above it.
 */
export function lagQuantileMs(buckets: readonly number[], q: number, maxMs: number): number | null {
  const total = buckets.reduce((n, c) => n + c, 0);
  if (total === 0) return null;
  const rank = q * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    const count = buckets[i] ?? 0;
    if (count > 0 && below + count >= rank) {
      const low = i === 0 ? 0 : (START_LAG_BOUNDS_MS[i - 1] as number);
      const high = START_LAG_BOUNDS_MS[i] ?? Math.max(low, maxMs);
      const at = low + ((rank - below) / count) * (high - low);
      return Math.round(Math.min(at, maxMs));
    }
    below += count;
  }
  return maxMs;
}

/** Tasks that failed among those that ended for good (succeeded or failed), or null when none ended. */
export function failureRate(counts: Pick<ActivityCounts, 'succeeded' | 'failed'>): number | null {
  const ended = counts.succeeded + counts.failed;
  return ended === 0 ? null : counts.failed / ended;
}

/** The start of the minute `ms` (Unix ms) falls in. */
export function minuteOf(ms: number): number {
  return Math.floor(ms / 60_000) * 60_000;
}
