import type { Db, DbTx } from '../db.js';
import type { DueEntry } from '../../domain/model.js';
import type { RetryResult } from '../types.js';
import {
  dueTimeSet,
  statusIn,
  taskColumns,
  toDueEntry,
  toTaskRecord,
  tsParam,
  validIds,
  type DueRow,
  type TaskRow,
} from './columns.js';
import { getTask } from './read.js';

/**
 * Running a failed, cancelled or expired task again (`POST /api/tasks/{id}/retry`): one
 * statement, a compare-and-set on the status alone (the caller holds no version), of the edges
 * failed | cancelled | expired → pending, due now. `attempts` is kept, so the next claim makes attempt
 * attempts + 1; `last_error` is kept until that attempt ends; the result, the progress and a
 * cancel request are cleared.
 *
 * History: the attempt that ended the task has no execution row (completion writes rows only
 * for attempts the task outlives, and history derives the final one from the task row). The
 * task now outlives it, so the same statement writes its row from the row as it was (`o`),
 * before the UPDATE's values replace it. A task that never started (cancelled while pending)
 * has no attempt to record, nor has an expired one: its last attempt, if any, was retried and
 * so has its row already.
 *
 * Not matched: cron schedules (their instances are the tasks that run), and a task whose
 * predecessors have not all succeeded (cancelled because one failed, or while blocked): run
 * again it would skip what it waits for, and nothing would release it if it went back to
 * blocked (its predecessors' events are spent).
 */
function retryStatement(ids: string, answer = 'd.*'): string {
  return `
  WITH done AS (
    UPDATE tasks t
    SET status = 'pending',
        version = t.version + 1,
        ${dueTimeSet(tsParam(2))},
        completed_at = NULL,
        cancel_requested = false,
        result = NULL,
        progress = NULL,
        progress_at = NULL,
        lease_expires_at = NULL,
        lease_token_hash = NULL,
        updated_at = ${tsParam(2)}
    FROM tasks o
    WHERE ${ids} AND ${statusIn('t', ['failed', 'cancelled', 'expired'])}
      AND t.schedule_type <> 'cron' AND t.deps_satisfied = t.deps_total
    RETURNING ${taskColumns('t')}, o.status AS old_status, o.due_time AS old_due_time,
              o.started_at AS old_started_at, o.completed_at AS old_completed_at
  ),
  execution AS (
    INSERT INTO executions (task_id, attempt, status, due_time, started_at, completed_at,
                            worker_id, error)
    SELECT d.id, d.attempts, d.old_status, d.old_due_time, d.old_started_at,
           coalesce(d.old_completed_at, d.old_started_at), d.worker_id, d.last_error
    FROM done d
    WHERE d.attempts > 0 AND d.old_started_at IS NOT NULL AND d.old_status <> 'expired'
    ON CONFLICT (task_id, attempt) DO NOTHING
  )
  SELECT ${answer} FROM done d`;
}

const RETRY = retryStatement('o.id = $1 AND t.id = $1');
/**
 * The same edges for many tasks at once (an operation's page): `$1` their ids. It answers only
 * what the wheel needs of each (a due entry): a page of 1 000 whole rows — payloads, results,
 * errors — was read and decoded on the node's thread between the probe's submits (issue 30).
 */
export const RETRY_MANY = retryStatement(
  'o.id = t.id AND t.id = ANY($1::uuid[])',
  'd.id, d.task_type, d.priority, d.due_ms, d.limits, d.traceparent',
);

/** See `TaskStore.retry`. */
export async function retryTask(db: Db, taskId: string, nowMs: number): Promise<RetryResult> {
  if (validIds([taskId]).length === 0) return { kind: 'not_found' };
  const { rows } = await db.query<TaskRow>(RETRY, [taskId, nowMs], 'wh_retry');
  const row = rows[0];
  if (row !== undefined) return { kind: 'retried', task: toTaskRecord(row) };
  // Not matched: tell "no such task" from "not in a state that retries" (a race with another
  // retry is the latter: the task is pending again either way).
  const current = await getTask(db, taskId);
  return current === null ? { kind: 'not_found' } : { kind: 'refused', task: current };
}

/**
 * Retries the tasks of `taskIds` that are failed, cancelled or expired (and may be retried), as
 * {@link retryTask} retries one: answers the due entries of those it changed, pending and due
 * now. For an operation's page, inside its transaction; the caller places them on the wheel
 * once it commits.
 */
export async function retryMany(db: DbTx, taskIds: readonly string[], nowMs: number): Promise<DueEntry[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<DueRow>(RETRY_MANY, [taskIds, nowMs], 'wh_retry_many');
  return rows.map(toDueEntry);
}
