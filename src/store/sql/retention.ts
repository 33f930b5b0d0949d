import type { Db } from '../db.js';
import type { AppliedRetention, FinishedBatch, RemoveFinished } from '../types.js';
import { msOf, tsParam } from './columns.js';

/**
 * Retention: finished tasks leave once they have been finished longer than the retention,
 * in bounded batches (see migrations/000008_retention.sql and
 * docs/decisions/0015-retention.md for why deletes and not dropped partitions).
 */

/** The statuses a task ends in, written as the partial index's predicate is, so it is used. */
const FINISHED = `('succeeded', 'failed', 'cancelled', 'expired')`;

/**
 * SQL: a timestamptz as whole microseconds since the epoch, the column's own resolution, so
 * that a cursor taken from a row compares exactly with it (the store writes whole
 * milliseconds, but a cursor must not skip rows that something else wrote finer). Travels as
 * float8, exact for integers below 2^53 (the year 2255 in microseconds).
 */
function microsOf(expression: string): string {
  return `(extract(epoch FROM ${expression}) * 1000000)::float8`;
}

/** SQL: parameter `$n` (whole microseconds since the epoch) as a timestamptz, exactly. */
function fromMicros(n: number): string {
  return `(timestamptz 'epoch' + $${n}::bigint * interval '1 microsecond')`;
}

/** The lowest UUID, for a cursor that starts before every task. */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/**
 * `$1` partition, `$2` horizon, `$3` now, `$4`/`$5` cursor (completed at, id; exclusive), `$6`
 * limit. One statement, so one short transaction per batch:
 *
 * - `candidate`: the next `$6` finished tasks of the partition that ended before the horizon,
 *   in (completed_at, id) order after the cursor: a walk of `tasks_ended_idx`, never of
 *   the table.
 * - `held_graph`: graphs of candidates that still have a task that is not finished, or
 *   finished after the horizon. A graph leaves whole or not at all, so `GET /api/dags/{id}`
 *   never shows half a graph; each graph is looked at once per batch, through
 *   `tasks_dag_idx` (materialized: inlined, the check ran once per candidate, reading a
 *   finished graph whole for each of its tasks).
 * - `doomed`: the candidates that may go. Besides its graph, a task with dependents stays
 *   while any dependent is unfinished or within retention (a blocked dependent reconciles by
 *   reading its predecessors' rows, which must still be there), or while its outbox event is
 *   undelivered. A task whose idempotency key is still live stays until the key expires, so
 *   a replay of its submission within the key's 24 h still answers with the task. The key
 *   and the outbox event are looked up as scalar subqueries, one primary-key probe per
 *   candidate: an EXISTS here may be planned as a hash of the whole table (every live key),
 *   which the planner picks when its statistics say the table is small.
 * - `removed`: the DELETE re-tests the status and the completion time on the row it locks,
 *   so a task retried between the walk and the delete (it is pending again) stays.
 * - then the task's executions and its own dependency edges (both keyed by task id).
 *
 * Answers how many went, how many were looked at, and the last one looked at: the cursor of
 * the next batch, so tasks that must stay are passed over, not read again by every batch.
 */
const REMOVE_FINISHED = `
  WITH candidate AS MATERIALIZED (
    SELECT t.id, t.completed_at, t.dag_id, t.has_dependents, t.task_type, t.idempotency_key, t.deps_total
    FROM tasks t
    WHERE t.partition = $1 AND t.status IN ${FINISHED} AND t.completed_at < ${tsParam(2)}
      AND (t.completed_at, t.id) > (${fromMicros(4)}, $5::uuid)
    ORDER BY t.completed_at, t.id
    LIMIT $6
  ),
  held_graph AS MATERIALIZED (
    SELECT g.dag_id FROM (SELECT DISTINCT c.dag_id FROM candidate c WHERE c.dag_id IS NOT NULL) g
    WHERE EXISTS (
      SELECT 1 FROM tasks x
      WHERE x.dag_id = g.dag_id AND NOT (x.status IN ${FINISHED} AND x.completed_at < ${tsParam(2)}))
  ),
  doomed AS (
    SELECT c.id FROM candidate c
    WHERE (c.dag_id IS NULL OR NOT EXISTS (SELECT 1 FROM held_graph h WHERE h.dag_id = c.dag_id))
      AND (NOT c.has_dependents OR (
        (SELECT true FROM dag_events e WHERE e.predecessor_id = c.id) IS NULL
        AND NOT EXISTS (
          SELECT 1 FROM task_dependencies d JOIN tasks x ON x.id = d.task_id
          WHERE d.predecessor_id = c.id
            AND NOT (x.status IN ${FINISHED} AND x.completed_at < ${tsParam(2)}))))
      AND (c.idempotency_key IS NULL OR NOT coalesce((
        SELECT k.expires_at > ${tsParam(3)} FROM idempotency_keys k
        WHERE k.task_type = c.task_type AND k.key = c.idempotency_key AND k.task_id = c.id), false))
  ),
  removed AS (
    DELETE FROM tasks t USING doomed d
    WHERE t.id = d.id AND t.status IN ${FINISHED} AND t.completed_at < ${tsParam(2)}
    RETURNING t.id, t.deps_total
  ),
  edges AS (
    DELETE FROM task_dependencies d USING removed r WHERE r.deps_total > 0 AND d.task_id = r.id
  ),
  attempts AS (
    DELETE FROM executions e USING removed r WHERE e.task_id = r.id
  ),
  last AS (
    SELECT c.id, ${microsOf('c.completed_at')} AS completed_us FROM candidate c
    ORDER BY c.completed_at DESC, c.id DESC LIMIT 1
  )
  SELECT (SELECT count(*) FROM removed)::int AS removed, (SELECT count(*) FROM candidate)::int AS examined,
         (SELECT l.id FROM last l) AS last_id, (SELECT l.completed_us FROM last l) AS last_us`;

/** `$1` partitions, `$2` horizon: one probe of `tasks_ended_idx` a partition. */
const PARTITIONS_PAST_HORIZON = `
  SELECT p.partition FROM unnest($1::int4[]) AS p(partition)
  WHERE EXISTS (SELECT 1 FROM tasks t
                 WHERE t.partition = p.partition AND t.status IN ${FINISHED} AND t.completed_at < ${tsParam(2)})
  ORDER BY p.partition`;

/** See `TaskStore.partitionsPastHorizon`. */
export async function partitionsPastHorizon(
  db: Db,
  partitions: readonly number[],
  horizonMs: number,
): Promise<number[]> {
  if (partitions.length === 0) return [];
  const { rows } = await db.query<{ partition: number }>(
    PARTITIONS_PAST_HORIZON,
    [partitions, horizonMs],
    'wh_partitions_past_horizon',
  );
  return rows.map((r) => r.partition);
}

/** See `TaskStore.removeFinished`. */
export async function removeFinished(db: Db, batch: RemoveFinished): Promise<FinishedBatch> {
  const limit = Math.floor(batch.limit);
  if (limit < 1) return { removed: 0, examined: 0, next: null };
  const { rows } = await db.query<{
    removed: number;
    examined: number;
    last_id: string | null;
    last_us: number | null;
  }>(
    REMOVE_FINISHED,
    [
      batch.partition,
      batch.horizonMs,
      batch.nowMs,
      batch.after?.completedUs ?? 0,
      batch.after?.taskId ?? NIL_UUID,
      limit,
    ],
    'wh_remove_finished',
  );
  const row = rows[0]!;
  return {
    removed: row.removed,
    examined: row.examined,
    // A batch that was not full reached the end of what has passed the horizon.
    next:
      row.examined < limit || row.last_id === null || row.last_us === null
        ? null
        : { completedUs: row.last_us, taskId: row.last_id },
  };
}

/** Keeps the later horizon: two nodes' sweeps (or a node whose clock ran behind) never move it back. */
const RECORD_HORIZON = `
  INSERT INTO retention_horizon AS r (singleton, horizon, retention_ms)
  VALUES (true, ${tsParam(1)}, $2)
  ON CONFLICT (singleton) DO UPDATE SET horizon = excluded.horizon, retention_ms = excluded.retention_ms
    WHERE r.horizon < excluded.horizon`;

/** See `TaskStore.recordRetentionHorizon`. */
export async function recordRetentionHorizon(db: Db, horizonMs: number, retentionMs: number): Promise<void> {
  await db.query(RECORD_HORIZON, [horizonMs, Math.round(retentionMs)], 'wh_record_retention_horizon');
}

const READ_HORIZON = `SELECT ${msOf('horizon')} AS horizon_ms, retention_ms::float8 AS retention_ms FROM retention_horizon`;

/** See `TaskStore.retentionHorizon`. */
export async function retentionHorizon(db: Db): Promise<AppliedRetention | null> {
  const { rows } = await db.query<{ horizon_ms: number; retention_ms: number }>(
    READ_HORIZON,
    [],
    'wh_read_retention_horizon',
  );
  const row = rows[0];
  return row === undefined ? null : { horizonMs: row.horizon_ms, retentionMs: row.retention_ms };
}
