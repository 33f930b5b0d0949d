import type { Db } from '../db.js';
import type { Transition } from '../../domain/model.js';
import { NOT_STARTED } from '../../domain/attempt-errors.js';
import { statusIs, tsParam } from './columns.js';
import { TRANSITION_COLUMNS, toTransition, type TransitionRow } from './complete.js';
import { dagEventsCte } from './outbox.js';

/**
 * Start deadlines: a `pending` task whose `start_by` (its due time + `start_deadline_seconds`,
 * written at insert by the trigger of migrations/000011_deadlines.sql and by every statement
 * that moves a due time after, `dueTimeSet`) has passed ends `expired`. The claim
 * already refuses such a task (src/store/sql/claim.ts), so the sweep races nothing but a
 * cancel; whichever commits first wins the compare-and-set on `pending`.
 *
 * `$1` partitions, `$2` now, `$3` the most tasks per partition. Each partition is one ordered
 * scan of `tasks_start_by_idx` up to `now` (a LATERAL per partition, so that the scan stays in
 * index order and stops at its LIMIT, and marks dead the entries a claim left behind as it
 * passes them): a pass reads the expired entries and nothing else. The UPDATE finds its rows
 * through the primary key ({@link statusIs}) and re-checks status and `start_by` under the
 * row lock. A task that ends here with dependents writes its outbox event in the same
 * statement, so its dependents are cancelled as for a failure.
 */
const EXPIRE_UNSTARTED = `
  WITH due AS (
    SELECT x.id
    FROM unnest($1::int[]) AS p(partition)
    CROSS JOIN LATERAL (
      SELECT t.id FROM tasks t
      WHERE t.partition = p.partition AND t.status = 'pending' AND t.start_by IS NOT NULL
        AND t.start_by <= ${tsParam(2)}
      ORDER BY t.start_by
      LIMIT $3
    ) x
  ),
  done AS (
    UPDATE tasks t
    SET status = 'expired',
        version = t.version + 1,
        completed_at = ${tsParam(2)},
        last_error = '${NOT_STARTED} (' || t.start_deadline_seconds || ' s after its due time)',
        updated_at = ${tsParam(2)}
    FROM due
    WHERE t.id = due.id AND ${statusIs('t', 'pending')} AND t.start_by <= ${tsParam(2)}
    RETURNING t.id, t.status, t.version, t.task_type, t.priority, t.due_time, t.has_dependents, t.started_at,
              t.limits, t.traceparent, t.partition, t.attempts
  ),
  ${dagEventsCte(2)}
  SELECT ${TRANSITION_COLUMNS} FROM done d`;

/** See `TaskStore.expireUnstarted`. */
export async function expireUnstarted(
  db: Db,
  partitions: readonly number[],
  nowMs: number,
  limit: number,
): Promise<Transition[]> {
  if (partitions.length === 0 || limit <= 0) return [];
  const { rows } = await db.query<TransitionRow>(
    EXPIRE_UNSTARTED,
    [partitions, nowMs, Math.floor(limit)],
    'wh_expire_unstarted',
  );
  return rows.map((row) => toTransition(row, nowMs));
}
