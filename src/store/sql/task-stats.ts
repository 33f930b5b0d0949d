import { START_LAG_BUCKETS, type ActivityCounts } from '../../domain/task-stats.js';
import type { Db } from '../db.js';
import type { StatsRow, StatsSlot } from '../task-stats-types.js';
import { msOf, tsParam } from './columns.js';

/**
 * The task activity rollup (`task_stats`, migration 000020;
 * docs/decisions/0034-task-stats-rollup.md): a node's flush, the trim, and the reads of
 * `GET /admin/stats`.
 */

/**
 * `$1` node id, then one array per column, aligned: minute (Unix ms), task type, the seven
 * counts, lag sum and max, and each row's buckets as an array literal (`{1,0,…}`; UNNEST would
 * flatten a two-dimensional array). One statement for every row a flush touched, whatever the
 * task rate: a row met again adds to what it holds. The buckets add element by element, in
 * their order (WITH ORDINALITY), a missing element counting 0.
 */
const UPSERT = `
  INSERT INTO task_stats AS s (minute, task_type, node_id, submitted, started, succeeded, failed,
                               retried, cancelled, expired, lag_sum_ms, lag_max_ms, lag_buckets)
  SELECT to_timestamp(u.m / 1000), u.t, $1, u.sub, u.sta, u.suc, u.fai, u.ret, u.can, u.exp,
         u.lsum, u.lmax, u.b::integer[]
    FROM unnest($2::float8[], $3::text[], $4::integer[], $5::integer[], $6::integer[],
                $7::integer[], $8::integer[], $9::integer[], $10::integer[], $11::bigint[],
                $12::integer[], $13::text[])
         AS u(m, t, sub, sta, suc, fai, ret, can, exp, lsum, lmax, b)
  ON CONFLICT (minute, task_type, node_id) DO UPDATE SET
    submitted  = s.submitted + EXCLUDED.submitted,
    started    = s.started + EXCLUDED.started,
    succeeded  = s.succeeded + EXCLUDED.succeeded,
    failed     = s.failed + EXCLUDED.failed,
    retried    = s.retried + EXCLUDED.retried,
    cancelled  = s.cancelled + EXCLUDED.cancelled,
    expired    = s.expired + EXCLUDED.expired,
    lag_sum_ms = s.lag_sum_ms + EXCLUDED.lag_sum_ms,
    lag_max_ms = GREATEST(s.lag_max_ms, EXCLUDED.lag_max_ms),
    lag_buckets = ARRAY(
      SELECT coalesce(x, 0) + coalesce(y, 0)
        FROM unnest(s.lag_buckets, EXCLUDED.lag_buckets) WITH ORDINALITY AS z(x, y, i)
       ORDER BY i)`;

/** Adds `rows` (counted by node `nodeId`) to the table in one statement. */
export async function upsertStats(db: Db, nodeId: string, rows: readonly StatsRow[]): Promise<void> {
  if (rows.length === 0) return;
  const col = (pick: (c: ActivityCounts) => number) => rows.map((r) => pick(r.counts));
  await db.query(
    UPSERT,
    [
      nodeId,
      rows.map((r) => r.minuteMs),
      rows.map((r) => r.taskType),
      col((c) => c.submitted),
      col((c) => c.started),
      col((c) => c.succeeded),
      col((c) => c.failed),
      col((c) => c.retried),
      col((c) => c.cancelled),
      col((c) => c.expired),
      col((c) => c.lagSumMs),
      col((c) => c.lagMaxMs),
      rows.map((r) => `{${r.counts.lagBuckets.join(',')}}`),
    ],
    'task_stats_upsert',
  );
}

/** Rows whose minute is before `$1` (Unix ms) go: a prefix of the primary key. */
const TRIM = `DELETE FROM task_stats WHERE minute < ${tsParam(1)}`;

/** Deletes the rows of minutes before `beforeMs`; answers how many went. */
export async function trimStats(db: Db, beforeMs: number): Promise<number> {
  const { rowCount } = await db.query(TRIM, [beforeMs], 'task_stats_trim');
  return rowCount;
}

/** The slot of a row: `$3`-ms steps counted from the epoch (whole minutes, so rows never straddle two). */
const SLOT = `floor(${msOf('minute')} / $3::float8)`;
/** The rows of `[$1, $2)` (Unix ms), of task type `$4` or of every type when it is null. */
const RANGE = `minute >= ${tsParam(1)} AND minute < ${tsParam(2)} AND ($4::text IS NULL OR task_type = $4)`;

/** The counts per slot, summed over task types and nodes: a range scan of the primary key. */
const SLOT_COUNTS = `
  SELECT ${SLOT}::float8 AS slot,
         sum(submitted)::float8 AS submitted, sum(started)::float8 AS started,
         sum(succeeded)::float8 AS succeeded, sum(failed)::float8 AS failed,
         sum(retried)::float8 AS retried, sum(cancelled)::float8 AS cancelled,
         sum(expired)::float8 AS expired, sum(lag_sum_ms)::float8 AS lag_sum_ms,
         max(lag_max_ms)::float8 AS lag_max_ms
    FROM task_stats
   WHERE ${RANGE}
   GROUP BY 1`;

/**
 * The histograms per slot, bucket by bucket. Apart from the counts: Postgres has no sum of
 * arrays, so the buckets are unnested (16 per row) and summed by position.
 */
const SLOT_BUCKETS = `
  SELECT ${SLOT}::float8 AS slot, b.i::integer AS i, sum(b.x)::float8 AS n
    FROM task_stats, unnest(lag_buckets) WITH ORDINALITY AS b(x, i)
   WHERE ${RANGE}
   GROUP BY 1, 2`;

type CountRow = { slot: number; lag_max_ms: number; lag_sum_ms: number } & Record<
  'submitted' | 'started' | 'succeeded' | 'failed' | 'retried' | 'cancelled' | 'expired',
  number
>;

/**
 * The activity of `[fromMs, toMs)` in `stepMs` slots (a whole number of minutes), of one task
 * type or all: only the slots that have rows, each with its start in Unix ms.
 */
export async function readStats(
  db: Db,
  fromMs: number,
  toMs: number,
  stepMs: number,
  taskType: string | null,
): Promise<StatsSlot[]> {
  const params = [fromMs, toMs, stepMs, taskType];
  const [counts, buckets] = await Promise.all([
    db.query<CountRow>(SLOT_COUNTS, params, 'task_stats_slot_counts'),
    db.query<{ slot: number; i: number; n: number }>(SLOT_BUCKETS, params, 'task_stats_slot_buckets'),
  ]);
  const slots = new Map<number, StatsSlot>();
  for (const r of counts.rows) {
    slots.set(r.slot, {
      startMs: r.slot * stepMs,
      counts: {
        submitted: r.submitted,
        started: r.started,
        succeeded: r.succeeded,
        failed: r.failed,
        retried: r.retried,
        cancelled: r.cancelled,
        expired: r.expired,
        lagSumMs: r.lag_sum_ms,
        lagMaxMs: r.lag_max_ms,
        lagBuckets: new Array<number>(START_LAG_BUCKETS).fill(0),
      },
    });
  }
  for (const b of buckets.rows) {
    const slot = slots.get(b.slot);
    if (slot !== undefined && b.i >= 1 && b.i <= START_LAG_BUCKETS) slot.counts.lagBuckets[b.i - 1] = b.n;
  }
  return [...slots.values()].sort((a, b) => a.startMs - b.startMs);
}

/** The task types with rows since `$1`, for a selector: the newest minutes' walk of the key. */
const TASK_TYPES = `
  SELECT DISTINCT task_type FROM task_stats WHERE minute >= ${tsParam(1)} ORDER BY task_type LIMIT $2`;

/** The task types that have activity since `sinceMs`, at most `limit`, in name order. */
export async function statsTaskTypes(db: Db, sinceMs: number, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ task_type: string }>(TASK_TYPES, [sinceMs, limit], 'task_stats_types');
  return rows.map((r) => r.task_type);
}

/**
 * The running tasks (of type `$1`, or all), counted up to `$2` + 1: the partial index of
 * running tasks (000010) holds only them (and the versions claims left until VACUUM), so this
 * reads the running set, never the table; the bound keeps a page's poll short whatever it is.
 */
const RUNNING = `
  SELECT count(*)::integer AS n FROM (
    SELECT 1 FROM tasks WHERE status = 'running' AND ($1::text IS NULL OR task_type = $1) LIMIT $2 + 1
  ) r`;

/** How many tasks run now (of `taskType`, or all), or `limit + 1` when more than `limit`. */
export async function countRunning(db: Db, taskType: string | null, limit: number): Promise<number> {
  const { rows } = await db.query<{ n: number }>(RUNNING, [taskType, limit], 'task_stats_running');
  return rows[0]?.n ?? 0;
}
