import type { Db } from '../db.js';
import { LEASE_DIGEST_BYTES } from '../../domain/lease-token.js';
import { isUuid } from '../../lib/ids.js';
import type { BackoffPolicy, Completion, Transition } from '../../domain/model.js';
import { dueTimeSet, msOf, statusIs, toDueEntry, tsParam, validIds, wholeMs, type DueRow } from './columns.js';
import { dagEventsCte, isFinal } from './outbox.js';
import { LEASE_EXPIRED, TIMED_OUT } from '../../domain/attempt-errors.js';

/**
 * Ending attempts: a worker's result (`complete`) or a lease that ran out (`expireLease`).
 * Each is one statement of three parts: UPDATE the tasks (the compare-and-set of an edge
 * running → succeeded | pending | failed | cancelled), INSERT an execution row for each
 * attempt that the task outlives (a retry; every expiry), and SELECT what changed. The
 * final attempt of a task that a result ended is read back from the task row itself.
 * A task the UPDATE did not match writes nothing.
 *
 * An execution row needs the attempt's due time, which a retry has already moved on the row
 * RETURNING shows: the result's execution part reads it from the table as the statement found
 * it (`o`), and only for a retry; expiry's UPDATE joins it (`o`), since every expiry writes one.
 * Values that decide the outcome (`cancel_requested`, `attempts`) are read from the locked row
 * `t`, never from `o`, so a cancel committed while the UPDATE waited for the row is honoured.
 * The status tests are fenced ({@link statusIs}): rows are found through the primary key only,
 * however stale the statistics.
 */

/**
 * SQL: the retry delay of the attempt that just ended, as an interval:
 * min(base · 2^(attempt − 1), max) scaled by `jitter` (a random factor in [0.5, 1)), rounded
 * to whole milliseconds so that due times stay whole milliseconds. `$base` and `$max` are the
 * parameter numbers of `BackoffPolicy.baseMs` and `maxMs`.
 */
function backoffSql(base: number, max: number, jitter: string): string {
  return `round(least($${base}::float8 * power(2, t.attempts - 1), $${max}::float8)
                * ${jitter}) * interval '1 millisecond'`;
}

/**
 * SQL: a retry's random factor in [0.5, 1), computed once where the statement needs it twice:
 * the new due time is written as `due_time` and inside `start_by` ({@link dueTimeSet}).
 */
const JITTER = '0.5 + random() * 0.5';

/**
 * SQL: the same factor for a result `r`, from the first two bytes of its token's digest: the
 * SHA-256 of 128 random bits, so they are as random as `random()`'s, and the expression is
 * not volatile. A volatile column would have made `r` a materialized part of its own (about
 * 1 µs of Postgres a result, measured); this one stays inlined into the UPDATE. The token is
 * spent with the attempt, so what a retry's timing shows of its digest opens nothing.
 */
const RESULT_JITTER = `(0.5 + (get_byte(r.token_hash, 0) * 256 + get_byte(r.token_hash, 1)) / 131072.0)`;

/**
 * SQL: the attempts of task `t` that count against `max_retries`: those that ended waiting for
 * the task's children (`child_waits`, src/store/sql/waiting.ts) are not failures.
 */
const COUNTED_ATTEMPTS = `(t.attempts - t.child_waits)`;

/** SQL: the lease ran out and task `t` goes back to pending. */
const RETRY_AFTER_EXPIRY = `NOT t.cancel_requested AND ${COUNTED_ATTEMPTS} <= t.max_retries`;

/** Columns of the transition a statement reports, selected from its `done` CTE. */
export const TRANSITION_COLUMNS = `d.id, d.status, d.version, d.task_type, d.priority, ${msOf('d.due_time')} AS due_ms,
  d.has_dependents, ${msOf('d.started_at')} AS started_ms, d.limits, d.traceparent,
  d.partition, d.attempts`;

/** SQL: the result `r` (`ok`: the attempt succeeded) sends task `t` back to pending. */
const RETRY_AFTER_RESULT = `NOT t.cancel_requested AND NOT r.ok AND r.retryable AND ${COUNTED_ATTEMPTS} <= t.max_retries`;

/**
 * `$1` ids, `$2` lease token digests end to end (32 bytes each, one binary parameter, as for
 * the claim), `$3` ok flags, `$4` errors, `$5` retryable flags, `$6` now, `$7`/`$8` backoff
 * base/max ms, `$9` results as JSON text (NULL: none; text like the payloads of a submission,
 * cast per row). The result is kept only when the task ends `succeeded`; a retry clears the
 * attempt's progress. The new status, in order: cancel requested
 * → cancelled; success → succeeded; retryable failure with retries left → pending after the
 * backoff (attempts counts the attempt that just ended, so `max_retries` failures may be
 * retried); otherwise failed.
 */
const COMPLETE = `
  WITH r AS (
    SELECT r.id, r.ok, r.error, r.retryable, r.result,
           substring($2::bytea FROM (r.n::int4 - 1) * ${LEASE_DIGEST_BYTES} + 1 FOR ${LEASE_DIGEST_BYTES}) AS token_hash
    FROM unnest($1::uuid[], $3::bool[], $4::text[], $5::bool[], $9::text[])
         WITH ORDINALITY AS r(id, ok, error, retryable, result, n)
  ),
  done AS (
    UPDATE tasks t
    SET status = CASE WHEN t.cancel_requested THEN 'cancelled'
                      WHEN r.ok THEN 'succeeded'
                      WHEN ${RETRY_AFTER_RESULT} THEN 'pending'
                      ELSE 'failed' END,
        version = t.version + 1,
        ${dueTimeSet(`CASE WHEN ${RETRY_AFTER_RESULT} THEN ${tsParam(6)} + ${backoffSql(7, 8, RESULT_JITTER)}
                           ELSE t.due_time END`)},
        completed_at = CASE WHEN ${RETRY_AFTER_RESULT} THEN NULL ELSE ${tsParam(6)} END,
        last_error = CASE WHEN r.ok THEN t.last_error ELSE r.error END,
        result = CASE WHEN r.ok AND NOT t.cancel_requested THEN r.result::jsonb END,
        progress = CASE WHEN ${RETRY_AFTER_RESULT} THEN NULL ELSE t.progress END,
        progress_at = CASE WHEN ${RETRY_AFTER_RESULT} THEN NULL ELSE t.progress_at END,
        lease_expires_at = NULL,
        lease_token_hash = NULL,
        updated_at = ${tsParam(6)}
    FROM r
    WHERE t.id = r.id AND ${statusIs('t', 'running')} AND t.lease_token_hash = r.token_hash
      AND t.deadline_at > ${tsParam(6)}
    RETURNING t.id, t.status, t.version, t.task_type, t.priority, t.due_time, t.limits, t.attempts,
              t.started_at, t.worker_id, t.has_dependents, r.ok, r.error, t.traceparent, t.partition
  ),
  ${dagEventsCte(6)},
  execution AS (
    INSERT INTO executions (task_id, attempt, status, due_time, started_at, completed_at,
                            worker_id, error)
    SELECT d.id, d.attempts,
           CASE WHEN d.status = 'cancelled' THEN 'cancelled'
                WHEN d.ok THEN 'succeeded' ELSE 'failed' END,
           o.due_time, d.started_at, ${tsParam(6)}, d.worker_id,
           CASE WHEN d.ok THEN NULL ELSE d.error END
    -- The attempt's due time, which a retry has moved on the new row: every part of one
    -- statement reads the table as it was when the statement began, so o is the row before
    -- this UPDATE. Read here, only for a retry, rather than joined into the UPDATE for every
    -- row; a lookup by primary key each (OFFSET 0: the planner may not make it a join).
    FROM done d, LATERAL (SELECT o.due_time FROM tasks o WHERE o.id = d.id OFFSET 0) o
    -- Only an attempt that did not end the task needs a row of its own: a final attempt is
    -- still on the task row (status, times, worker, last error) and history derives it from
    -- there. This keeps the common case — one attempt, succeeded — at one write per result.
    WHERE d.status = 'pending'
  )
  SELECT ${TRANSITION_COLUMNS} FROM done d`;

export interface TransitionRow extends DueRow {
  status: Transition['status'];
  partition: number;
  attempts: number;
  version: number;
  has_dependents: boolean;
  started_ms: number | null;
}

/**
 * The transition of a row; `limits` (and those of `requeued`) only when the task names some:
 * the node gives back the permits of these keys, and of its type's, for the attempt that ended.
 */
export function toTransition(row: TransitionRow, endedMs: number): Transition {
  const transition: Transition = {
    taskId: row.id,
    status: row.status,
    version: row.version,
    requeued: row.status === 'pending' ? toDueEntry(row) : null,
    notifyDependents: row.has_dependents && isFinal(row.status),
    taskType: row.task_type,
    startedMs: row.started_ms,
    endedMs: wholeMs(endedMs),
  };
  if (row.limits !== null && row.limits.length > 0) transition.limits = row.limits;
  if (row.traceparent != null) {
    transition.traceparent = row.traceparent;
    transition.partition = row.partition;
    transition.attempt = row.attempts;
  }
  return transition;
}

/** See `TaskStore.complete`. */
export async function completeTasks(
  db: Db,
  results: Completion[],
  nowMs: number,
  backoff: BackoffPolicy,
): Promise<Transition[]> {
  // One result per task: a second result for the same lease could only be refused.
  const seen = new Set<string>();
  const batch = results.filter((c) => {
    if (!isUuid(c.taskId) || c.tokenDigest.length !== LEASE_DIGEST_BYTES) return false;
    const id = c.taskId.toLowerCase();
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  if (batch.length === 0) return [];
  const { rows } = await db.query<TransitionRow>(
    COMPLETE,
    [
      batch.map((c) => c.taskId),
      Buffer.concat(batch.map((c) => c.tokenDigest)),
      batch.map((c) => c.outcome === 'succeeded'),
      batch.map((c) => c.error),
      batch.map((c) => c.retryable),
      nowMs,
      backoff.baseMs,
      backoff.maxMs,
      batch.map((c) => (c.outcome === 'succeeded' && c.result !== undefined ? JSON.stringify(c.result) : null)),
    ],
    'wh_complete',
  );
  return rows.map((row) => toTransition(row, nowMs));
}

/**
 * SQL: why the attempt of task `t` ends at the expiry of its lease: its deadline came (the
 * lease never runs past it), or its worker stopped heartbeating before that.
 */
const EXPIRY_ERROR = `CASE WHEN t.lease_expires_at >= t.deadline_at THEN '${TIMED_OUT}' ELSE '${LEASE_EXPIRED}' END`;

/**
 * `$1` id, `$2` version, `$3` now, `$4`/`$5` backoff base/max ms. The compare-and-set also
 * requires the lease to have run out by `now`, so a heartbeat that extended it first wins.
 * The execution row is `timed_out`, or `cancelled` when cancel had been requested; its error,
 * and the task's last error, say whether the deadline came or the lease ran out before it.
 */
const EXPIRE_LEASE = `
  WITH done AS (
    UPDATE tasks t
    SET status = CASE WHEN t.cancel_requested THEN 'cancelled'
                      WHEN ${RETRY_AFTER_EXPIRY} THEN 'pending'
                      ELSE 'failed' END,
        version = t.version + 1,
        ${dueTimeSet(`CASE WHEN ${RETRY_AFTER_EXPIRY} THEN ${tsParam(3)} + ${backoffSql(4, 5, 'j.jitter')}
                           ELSE t.due_time END`)},
        completed_at = CASE WHEN ${RETRY_AFTER_EXPIRY} THEN NULL ELSE ${tsParam(3)} END,
        last_error = ${EXPIRY_ERROR},
        progress = CASE WHEN ${RETRY_AFTER_EXPIRY} THEN NULL ELSE t.progress END,
        progress_at = CASE WHEN ${RETRY_AFTER_EXPIRY} THEN NULL ELSE t.progress_at END,
        lease_expires_at = NULL,
        lease_token_hash = NULL,
        updated_at = ${tsParam(3)}
    FROM tasks o, (SELECT ${JITTER} AS jitter) j
    WHERE o.id = $1 AND t.id = $1 AND ${statusIs('t', 'running')} AND t.version = $2
      AND t.lease_expires_at <= ${tsParam(3)}
    RETURNING t.id, t.status, t.version, t.task_type, t.priority, t.due_time, t.limits, t.attempts,
              t.started_at, t.worker_id, t.has_dependents, o.due_time AS attempt_due_time, t.last_error,
              t.traceparent, t.partition
  ),
  ${dagEventsCte(3)},
  execution AS (
    INSERT INTO executions (task_id, attempt, status, due_time, started_at, completed_at,
                            worker_id, error)
    SELECT d.id, d.attempts,
           CASE WHEN d.status = 'cancelled' THEN 'cancelled' ELSE 'timed_out' END,
           d.attempt_due_time, d.started_at, ${tsParam(3)}, d.worker_id, d.last_error
    FROM done d
  )
  SELECT ${TRANSITION_COLUMNS} FROM done d`;

/** See `TaskStore.expireLease`. */
export async function expireLease(
  db: Db,
  taskId: string,
  version: number,
  nowMs: number,
  backoff: BackoffPolicy,
): Promise<Transition | null> {
  if (validIds([taskId]).length === 0 || !Number.isSafeInteger(version)) return null;
  const { rows } = await db.query<TransitionRow>(
    EXPIRE_LEASE,
    [taskId, version, nowMs, backoff.baseMs, backoff.maxMs],
    'wh_expire_lease',
  );
  const row = rows[0];
  return row === undefined ? null : toTransition(row, nowMs);
}
