import { WheelhouseError } from '../../lib/errors.js';
import { isRetryableConflict } from '../db-errors.js';
import type { Db } from '../db.js';
import type { NewTask, StoredStatus, TaskRecord } from '../../domain/model.js';
import type { DagEvent, DagNodeRecord, DagOutcome } from '../dag-types.js';
import {
  dueTimeSet,
  IDEMPOTENCY_WINDOW_MS,
  msOf,
  statusIn,
  taskColumns,
  toDueEntry,
  toTaskRecord,
  tsParam,
  validIds,
  type DueRow,
  type TaskRow,
} from './columns.js';
import { dagEventsCte, isFinal } from './outbox.js';

/** SQL: the final statuses other than `succeeded`, quoted. */
const ENDED = `'failed', 'cancelled', 'expired'`;
import { hasExternalPredecessors, insertWithDependencies } from './dag-submit.js';
import { CLAIM_KEYS } from './submit.js';

/**
 * Dependencies: submitting a graph, finding a predecessor's waiting dependents, reconciling
 * a blocked task from the task table, the outbox of finished predecessors and the sweep
 * that checks nothing was left behind. See migrations/000003_dags.sql for the schema.
 */

/**
 * A graph's idempotency key lives with the tasks' keys, under a task type no task can have
 * (`@` is outside the task-type alphabet), naming the graph's id instead of a task's.
 */
const DAG_KEY_TYPE = '@dag';

const READ_DAG_KEY = `SELECT request_hash, task_id FROM idempotency_keys WHERE task_type = $1 AND key = $2`;

/** See `DagStore.submitGraph`. */
export async function submitGraph(
  db: Db,
  tasks: NewTask[],
  dag: { id: string; idempotencyKey: string | null; requestHash: string },
  nowMs: number,
): Promise<{ created: boolean; dagId: string; tasks: TaskRecord[] }> {
  // Without a key and without predecessors outside the graph, the insert is one statement:
  // no transaction around it (the common graph, one round trip).
  if (dag.idempotencyKey === null && !hasExternalPredecessors(tasks)) {
    return { created: true, dagId: dag.id, tasks: await insertWithDependencies(db, tasks, nowMs) };
  }
  return db.transaction(async (tx) => {
    const key = dag.idempotencyKey;
    if (key !== null) {
      const claimed = await tx.query(
        CLAIM_KEYS,
        [[DAG_KEY_TYPE], [key], [dag.requestHash], [dag.id], nowMs + IDEMPOTENCY_WINDOW_MS, nowMs],
        'wh_claim_keys',
      );
      if (claimed.rows.length === 0) {
        const { rows } = await tx.query<{ request_hash: string; task_id: string }>(
          READ_DAG_KEY,
          [DAG_KEY_TYPE, key],
          'wh_read_dag_key',
        );
        const row = rows[0];
        if (row === undefined)
          throw new WheelhouseError('internal', `idempotency key "${key}" vanished while it was read`);
        if (row.request_hash !== dag.requestHash) {
          throw new WheelhouseError(
            'idempotency_conflict',
            `idempotency key "${key}" was used before with a different graph`,
            {
              details: { idempotency_key: key },
            },
          );
        }
        return { created: false, dagId: row.task_id, tasks: [] };
      }
    }
    return { created: true, dagId: dag.id, tasks: await insertWithDependencies(tx, tasks, nowMs) };
  });
}

/**
 * SQL: task `t` waits on edges: `blocked` on predecessors, or `waiting` for its children (a
 * parent's unfinished children are its predecessors while it waits; src/store/sql/waiting.ts).
 * Fenced as {@link statusIs} is: the rows are found through the primary key only.
 */
function awaitsEdges(t: string): string {
  return statusIn(t, ['blocked', 'waiting']);
}

/**
 * Blocked dependents (and waiting parents) of the given predecessors, through the predecessor
 * index, and each dependent's row through the primary key. The row is read in a subquery the
 * planner may not flatten (`OFFSET 0`). As a plain join, the generic plan (a named statement,
 * from its sixth run) guessed a few matching tasks and hashed a sequential scan of the whole
 * table: 8.6 ms on 10 000 tasks, 100–230 ms a lookup in W5's chain of fans once the table held
 * its dead row versions, on every step of a DAG (issue 31, W5's edge).
 */
export const DEPENDENTS = `
  SELECT d.task_id, array_agg(d.predecessor_id) AS predecessor_ids
  FROM task_dependencies d
  CROSS JOIN LATERAL (SELECT t.status FROM tasks t WHERE t.id = d.task_id OFFSET 0) t
  WHERE d.predecessor_id = ANY($1::uuid[]) AND NOT d.satisfied AND ${awaitsEdges('t')}
  GROUP BY d.task_id`;

/** See `DagStore.dependents`. */
export async function dependents(
  db: Db,
  predecessorIds: string[],
): Promise<{ taskId: string; predecessorIds: string[] }[]> {
  const ids = validIds(predecessorIds);
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ task_id: string; predecessor_ids: string[] }>(
    DEPENDENTS,
    [ids],
    'wh_dag_dependents',
  );
  return rows.map((r) => ({ taskId: r.task_id, predecessorIds: r.predecessor_ids }));
}

/**
 * `$1` task ids, `$2` now. One statement for a batch of blocked tasks (and waiting parents),
 * each reconciled on its own from what the task table says now:
 * - `edge`: the task's unsatisfied edges with each predecessor's status; `any_end` for a
 *   parent waiting with `on_child_failure = continue`, whose edges any final state satisfies;
 * - `flipped`: edges to predecessors that succeeded (or, with `any_end`, ended at all) become
 *   satisfied. An edge already satisfied does not match, so it is counted once however often
 *   this runs; of two concurrent runs the second waits for the first's row lock and then
 *   finds it satisfied;
 * - `broken`: the first predecessor (by id) that failed, was cancelled or expired, if any
 *   (never with `any_end`);
 * - `done`: the compare-and-set on `blocked` or `waiting`. The counter is bounded by the
 *   total; a broken edge cancels a blocked task naming the predecessor, and fails a waiting
 *   parent naming the child; all satisfied makes it `pending`, due at the later of its own due
 *   time and now. Under concurrency the counter is re-read from the locked row
 *   (EvalPlanQual), so each run adds exactly the edges it flipped;
 * - the outbox event of a task ended here that has dependents, so the end goes on down the graph.
 */
const RECONCILE = `
  WITH target AS (
    SELECT DISTINCT x.id FROM unnest($1::uuid[]) AS x(id)
  ),
  edge AS (
    SELECT d.task_id, d.predecessor_id, p.status AS predecessor_status,
           (t0.status = 'waiting' AND t0.on_child_failure = 'continue') AS any_end
    FROM target x
    JOIN tasks t0 ON t0.id = x.id AND ${awaitsEdges('t0')}
    JOIN task_dependencies d ON d.task_id = x.id AND NOT d.satisfied
    JOIN tasks p ON p.id = d.predecessor_id
  ),
  flipped AS (
    UPDATE task_dependencies d SET satisfied = true
    FROM edge e
    WHERE d.task_id = e.task_id AND d.predecessor_id = e.predecessor_id AND NOT d.satisfied
      AND (e.predecessor_status = 'succeeded' OR (e.any_end AND e.predecessor_status IN (${ENDED})))
    RETURNING d.task_id
  ),
  counted AS (
    SELECT f.task_id, count(*)::int AS n FROM flipped f GROUP BY f.task_id
  ),
  broken AS (
    SELECT DISTINCT ON (e.task_id) e.task_id, e.predecessor_id, e.predecessor_status
    FROM edge e WHERE NOT e.any_end AND e.predecessor_status IN (${ENDED})
    ORDER BY e.task_id, e.predecessor_id
  ),
  change AS (
    SELECT x.id, coalesce(c.n, 0) AS n, b.predecessor_id AS broken_by, b.predecessor_status AS broken_status
    FROM target x LEFT JOIN counted c ON c.task_id = x.id LEFT JOIN broken b ON b.task_id = x.id
  ),
  done AS (
    UPDATE tasks t
    SET deps_satisfied = least(t.deps_satisfied + ch.n, t.deps_total),
        status = CASE WHEN ch.broken_by IS NOT NULL AND t.status = 'waiting' THEN 'failed'
                      WHEN ch.broken_by IS NOT NULL THEN 'cancelled'
                      WHEN t.deps_satisfied + ch.n >= t.deps_total THEN 'pending'
                      ELSE t.status END,
        ${dueTimeSet(`CASE WHEN ch.broken_by IS NULL AND t.deps_satisfied + ch.n >= t.deps_total
                           THEN greatest(t.due_time, ${tsParam(2)}) ELSE t.due_time END`)},
        completed_at = CASE WHEN ch.broken_by IS NOT NULL THEN ${tsParam(2)} ELSE t.completed_at END,
        last_error = CASE WHEN ch.broken_by IS NOT NULL
                          THEN (CASE WHEN t.status = 'waiting' THEN 'child ' ELSE 'predecessor ' END)
                               || ch.broken_by || ' ' || ch.broken_status
                          ELSE t.last_error END,
        version = t.version + 1,
        updated_at = ${tsParam(2)}
    FROM change ch
    WHERE t.id = ch.id AND ${awaitsEdges('t')}
      AND (ch.n > 0 OR ch.broken_by IS NOT NULL OR t.deps_satisfied >= t.deps_total)
    RETURNING t.id, t.status, t.task_type, t.priority, t.due_time, t.has_dependents, t.limits, t.traceparent,
              t.partition
  ),
  ${dagEventsCte(2)}
  SELECT d.id, d.status, d.task_type, d.priority, ${msOf('d.due_time')} AS due_ms, d.has_dependents, d.limits,
         d.traceparent, d.partition
  FROM done d`;

interface OutcomeRow extends DueRow {
  status: DagOutcome['status'];
  partition: number;
  has_dependents: boolean;
}

/** Tries a statement again when the database aborted it as a deadlock (two nodes reconciling one task). */
const RECONCILE_ATTEMPTS = 3;

/** See `DagStore.reconcile`. */
export async function reconcile(db: Db, taskIds: string[], nowMs: number): Promise<DagOutcome[]> {
  const ids = validIds(taskIds);
  if (ids.length === 0) return [];
  for (let attempt = 1; ; attempt++) {
    try {
      const { rows } = await db.query<OutcomeRow>(RECONCILE, [ids, nowMs], 'wh_dag_reconcile');
      return rows.map((r) => {
        const due = r.status === 'pending' ? toDueEntry(r) : null;
        return {
          taskId: r.id,
          status: r.status,
          due,
          notifyDependents: isFinal(r.status) && r.has_dependents,
          // Only the span of a traced release reads it.
          ...(due?.traceparent === undefined ? {} : { partition: r.partition }),
        };
      });
    } catch (error) {
      if (attempt >= RECONCILE_ATTEMPTS || !isRetryableConflict(error)) throw error;
    }
  }
}

const PENDING_EVENTS = `
  SELECT predecessor_id, status, ${msOf('created_at')} AS created_ms FROM dag_events
  WHERE created_at < ${tsParam(1)} ORDER BY created_at LIMIT $2`;

/** See `DagStore.pendingEvents`. */
export async function pendingEvents(db: Db, beforeMs: number, limit: number): Promise<DagEvent[]> {
  const { rows } = await db.query<{ predecessor_id: string; status: StoredStatus; created_ms: number }>(
    PENDING_EVENTS,
    [beforeMs, limit],
    'wh_dag_pending_events',
  );
  return rows.map((r) => ({ predecessorId: r.predecessor_id, status: r.status, createdMs: r.created_ms }));
}

const CLEAR_EVENTS = `DELETE FROM dag_events WHERE predecessor_id = ANY($1::uuid[])`;

/** See `DagStore.clearEvents`. */
export async function clearEvents(db: Db, predecessorIds: string[]): Promise<void> {
  const ids = validIds(predecessorIds);
  if (ids.length > 0) await db.query(CLEAR_EVENTS, [ids], 'wh_dag_clear_events');
}

/** A page of the tasks waiting on edges (blocked, or parents waiting), through the partial index (000018). */
const BLOCKED_PAGE = `
  SELECT t.id FROM tasks t
  WHERE t.status IN ('blocked', 'waiting') AND t.deps_total > 0 AND t.id > $1::uuid
  ORDER BY t.id LIMIT $2`;

/**
 * Of a page, the tasks a reconcile would change: every edge satisfied, or an unsatisfied
 * edge to a predecessor that ended before `$2` and whose outbox event is gone (one still in
 * the outbox is the replay's to deliver, not a loss).
 */
const STUCK = `
  SELECT x.id FROM tasks x
  WHERE x.id = ANY($1::uuid[]) AND ${awaitsEdges('x')}
    AND (x.deps_satisfied >= x.deps_total OR EXISTS (
      SELECT 1 FROM task_dependencies d JOIN tasks p ON p.id = d.predecessor_id
      WHERE d.task_id = x.id AND NOT d.satisfied
        AND p.status IN ('succeeded', 'failed', 'cancelled', 'expired') AND p.updated_at < ${tsParam(2)}
        AND NOT EXISTS (SELECT 1 FROM dag_events e WHERE e.predecessor_id = p.id)))
  ORDER BY x.id`;

const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** See `DagStore.stuck`. */
export async function stuckTasks(
  db: Db,
  afterId: string | null,
  limit: number,
  settledBeforeMs: number,
): Promise<{ ids: string[]; next: string | null }> {
  const page = await db.query<{ id: string }>(BLOCKED_PAGE, [afterId ?? NIL_UUID, limit], 'wh_dag_blocked_page');
  const ids = page.rows.map((r) => r.id);
  if (ids.length === 0) return { ids: [], next: null };
  const stuck = await db.query<{ id: string }>(STUCK, [ids, settledBeforeMs], 'wh_dag_stuck');
  return { ids: stuck.rows.map((r) => r.id), next: ids.length < limit ? null : ids[ids.length - 1]! };
}

const PREDECESSORS = `
  SELECT task_id, predecessor_id FROM task_dependencies WHERE task_id = ANY($1::uuid[])
  ORDER BY task_id, predecessor_id`;

/** See `DagStore.predecessors`. */
export async function predecessors(db: Db, taskIds: string[]): Promise<Map<string, string[]>> {
  const ids = validIds(taskIds);
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{ task_id: string; predecessor_id: string }>(
    PREDECESSORS,
    [ids],
    'wh_dag_predecessors',
  );
  return groupEdges(rows);
}

/** Edges → predecessor ids per task, in the rows' order. */
function groupEdges(rows: readonly { task_id: string; predecessor_id: string }[]): Map<string, string[]> {
  const byTask = new Map<string, string[]>();
  for (const e of rows) {
    const list = byTask.get(e.task_id);
    if (list) list.push(e.predecessor_id);
    else byTask.set(e.task_id, [e.predecessor_id]);
  }
  return byTask;
}

const GRAPH_TASKS = `SELECT ${taskColumns('t')} FROM tasks t WHERE t.dag_id = $1 ORDER BY t.id`;
const GRAPH_EDGES = `
  SELECT d.task_id, d.predecessor_id FROM task_dependencies d JOIN tasks t ON t.id = d.task_id
  WHERE t.dag_id = $1 ORDER BY d.task_id, d.predecessor_id`;

/** See `DagStore.graph`. */
export async function graph(db: Db, dagId: string): Promise<DagNodeRecord[] | null> {
  if (validIds([dagId]).length === 0) return null;
  const [tasks, edges] = await Promise.all([
    db.query<TaskRow>(GRAPH_TASKS, [dagId], 'wh_dag_graph_tasks'),
    db.query<{ task_id: string; predecessor_id: string }>(GRAPH_EDGES, [dagId], 'wh_dag_graph_edges'),
  ]);
  if (tasks.rows.length === 0) return null;
  const dependsOn = groupEdges(edges.rows);
  return tasks.rows.map((row) => ({ task: toTaskRecord(row), dependsOn: dependsOn.get(row.id) ?? [] }));
}
