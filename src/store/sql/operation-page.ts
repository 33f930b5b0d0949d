import type { DueEntry, TaskRecord } from '../../domain/model.js';
import { FINAL_STATUSES } from '../../domain/lifecycle.js';
import { matchedStatuses, type OperationFilter, type OperationRecord } from '../../domain/operations.js';
import type { Db, DbTx } from '../db.js';
import type { OperationPage } from '../operation-types.js';
import { cancelChildren, cancelMany } from './cancel.js';
import { statusIn, tsParam } from './columns.js';
import { ERROR_KEY_CHARS } from './failures.js';
import { OPERATION_COLUMNS, toOperationRecord, type OperationRow } from './operations.js';
import { retryMany } from './retry.js';

/**
 * One page of an operation on many tasks, in one short transaction:
 *
 * 1. the operation's row, locked (`FOR UPDATE`): a page of another node (two owners for a
 *    moment around a ring change, or a node that resumes one whose owner died mid-page)
 *    waits here, then reads the cursor this page wrote. Not `running` (done, cancelled): no page.
 * 2. the walk: the next `walk` tasks by id after the cursor, below `walk_before`, filtered
 *    (see {@link walkStatement}); an index range of the primary key, whatever the filter.
 * 3. the action on the tasks that matched, by the statements the single-task routes use
 *    (`cancelMany`, `retryMany`) or retention's rules for deleting (`DELETE_MANY`).
 * 4. the progress: the cursor, the counts, and `done` once the walk reached the end.
 *
 * So the action and the progress commit together: a node killed mid-page leaves neither, and
 * the page runs again whole; a committed page is never run again.
 */

/** The lowest UUID: the cursor of an operation that has walked nothing yet. */
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

const LOCK = `SELECT ${OPERATION_COLUMNS}, o.walk_before::text AS walk_before, o.cursor::text AS cursor
  FROM operations o WHERE o.id = $1 FOR UPDATE`;

interface LockedRow extends OperationRow {
  walk_before: string;
  cursor: string | null;
}

/**
 * The walk's statement for a filter: `$1` cursor (exclusive), `$2` walk_before (exclusive),
 * `$3` how many ids to walk; the filter's values follow. The walk reads the primary key in
 * order and only the columns the filter needs (never a payload); `hits` are the ids that match.
 * With `parentId` the walk itself is narrowed to the parent's children, through
 * `tasks_parent_idx` (000017_children): it reads those, not the whole table.
 */
function walkStatement(filter: OperationFilter, statuses: readonly string[]): { text: string; params: unknown[] } {
  const params: unknown[] = [];
  const param = (value: unknown): number => params.push(value) + 3;
  const where = [`w.status = ANY($${param(statuses)}::text[])`];
  if (filter.taskType !== undefined) where.push(`w.task_type = $${param(filter.taskType)}`);
  if (filter.createdAfterMs !== undefined) where.push(`w.created_at > ${tsParam(param(filter.createdAfterMs))}`);
  if (filter.createdBeforeMs !== undefined) where.push(`w.created_at < ${tsParam(param(filter.createdBeforeMs))}`);
  if (filter.dueAfterMs !== undefined) where.push(`w.due_time > ${tsParam(param(filter.dueAfterMs))}`);
  if (filter.dueBeforeMs !== undefined) where.push(`w.due_time < ${tsParam(param(filter.dueBeforeMs))}`);
  if (filter.limit !== undefined) where.push(`w.limits @> ARRAY[$${param(filter.limit)}::text]`);
  if (filter.errorContains !== undefined)
    where.push(`strpos(lower(coalesce(w.last_error, '')), lower($${param(filter.errorContains)})) > 0`);
  // The failed view's group key, computed as it computes it: a group's retry matches that group alone.
  if (filter.errorEquals !== undefined)
    where.push(`left(coalesce(w.last_error, ''), ${ERROR_KEY_CHARS}) = $${param(filter.errorEquals)}::text`);
  const children = filter.parentId === undefined ? '' : `AND t.parent_id = $${param(filter.parentId)}::uuid`;
  const text = `
    WITH walk AS MATERIALIZED (
      SELECT t.id, t.status, t.task_type, t.created_at, t.due_time, t.limits, t.last_error
      FROM tasks t WHERE t.id > $1::uuid AND t.id < $2::uuid ${children} ORDER BY t.id LIMIT $3
    )
    SELECT (SELECT count(*) FROM walk)::int AS walked,
           (SELECT w.id::text FROM walk w ORDER BY w.id DESC LIMIT 1) AS last_id,
           coalesce((SELECT array_agg(w.id::text ORDER BY w.id) FROM walk w WHERE ${where.join(' AND ')}),
                    '{}'::text[]) AS hits`;
  return { text, params };
}

/** The statuses a task ends in. */
const FINISHED = `(${FINAL_STATUSES.map((status) => `'${status}'`).join(', ')})`;

/**
 * Deleting finished tasks as retention does (src/store/sql/retention.ts), without its horizon:
 * the task, its executions, its own dependency edges, and its idempotency key (a replay of its
 * submission after an operator deleted it submits again, rather than naming a task that is
 * gone). A task stays, and counts as failed, while others still need its row: a dependent that
 * has not finished, an outbox event not yet delivered, or a graph with a task not finished
 * (`GET /api/dags/{id}` never shows half a graph). The DELETE re-tests the status on the row
 * it locks.
 */
export const DELETE_MANY = `
  WITH removed AS (
    DELETE FROM tasks t
    WHERE t.id = ANY($1::uuid[]) AND ${statusIn('t', FINAL_STATUSES)}
      AND (NOT t.has_dependents OR (
        NOT EXISTS (SELECT 1 FROM dag_events e WHERE e.predecessor_id = t.id)
        AND NOT EXISTS (
          SELECT 1 FROM task_dependencies d JOIN tasks x ON x.id = d.task_id
          WHERE d.predecessor_id = t.id AND x.status NOT IN ${FINISHED})))
      AND (t.dag_id IS NULL OR NOT EXISTS (
        SELECT 1 FROM tasks x WHERE x.dag_id = t.dag_id AND x.status NOT IN ${FINISHED}))
    RETURNING t.id, t.deps_total, t.task_type, t.idempotency_key
  ),
  edges AS (
    DELETE FROM task_dependencies d USING removed r WHERE r.deps_total > 0 AND d.task_id = r.id
  ),
  attempts AS (
    DELETE FROM executions e USING removed r WHERE e.task_id = r.id
  ),
  idempotency AS (
    DELETE FROM idempotency_keys k USING removed r
    WHERE r.idempotency_key IS NOT NULL AND k.task_type = r.task_type AND k.key = r.idempotency_key
      AND k.task_id = r.id
  )
  SELECT count(*)::int AS removed FROM removed`;

const PROGRESS = `
  UPDATE operations o
  SET cursor = coalesce($2::uuid, cursor), pages = pages + 1,
      matched = matched + $3, done = done + $4, failed = failed + $5,
      state = CASE WHEN $6 THEN 'done' ELSE state END,
      finished_at = CASE WHEN $6 THEN ${tsParam(7)} ELSE finished_at END,
      updated_at = ${tsParam(7)}
  WHERE id = $1
  RETURNING ${OPERATION_COLUMNS}`;

/** See `OperationStore.runPage`. */
export async function runOperationPage(
  db: Db,
  operationId: string,
  walk: number,
  nowMs: number,
): Promise<OperationPage> {
  return db.transaction(async (tx) => {
    const locked = (await tx.query<LockedRow>(LOCK, [operationId], 'wh_operation_lock')).rows[0];
    if (locked === undefined) return { kind: 'stopped', operation: null };
    const operation = toOperationRecord(locked);
    if (operation.state !== 'running') return { kind: 'stopped', operation };
    const statement = walkStatement(operation.filter, matchedStatuses(operation.action, operation.filter));
    const found = (
      await tx.query<{ walked: number; last_id: string | null; hits: string[] }>(statement.text, [
        locked.cursor ?? NIL_UUID,
        locked.walk_before,
        walk,
        ...statement.params,
      ])
    ).rows[0]!;
    const acted = await act(tx, operation, found.hits, nowMs);
    const done = acted.count;
    const finished = found.walked < walk;
    const row = (
      await tx.query<OperationRow>(
        PROGRESS,
        [operationId, found.last_id, found.hits.length, done, found.hits.length - done, finished, nowMs],
        'wh_operation_progress',
      )
    ).rows[0]!;
    return { kind: 'page', operation: toOperationRecord(row), changed: acted.changed, retried: acted.retried };
  });
}

/** Applies the operation's action to the matched tasks: how many it changed, and the rows of those it can tell. */
async function act(
  tx: DbTx,
  operation: OperationRecord,
  taskIds: readonly string[],
  nowMs: number,
): Promise<{ count: number; changed: TaskRecord[]; retried: DueEntry[] }> {
  if (taskIds.length === 0) return { count: 0, changed: [], retried: [] };
  switch (operation.action) {
    case 'cancel': {
      // A cancelled parent takes its unfinished children with it, in this same transaction; the
      // count is of the matched tasks alone.
      const changed = await cancelMany(tx, taskIds, nowMs);
      const parents = changed.filter((t) => t.status === 'cancelled').map((t) => t.id);
      const children = await cancelChildren(tx, parents, nowMs);
      return { count: changed.length, changed: [...changed, ...children], retried: [] };
    }
    case 'retry': {
      const retried = await retryMany(tx, taskIds, nowMs);
      return { count: retried.length, changed: [], retried };
    }
    case 'delete': {
      const { rows } = await tx.query<{ removed: number }>(DELETE_MANY, [taskIds], 'wh_delete_finished_many');
      return { count: rows[0]?.removed ?? 0, changed: [], retried: [] };
    }
  }
}
