import type { Db } from '../db.js';
import type { ChildWait, Transition } from '../../domain/model.js';
import { LEASE_DIGEST_BYTES } from '../../domain/lease-token.js';
import { FINAL_STATUSES } from '../../domain/lifecycle.js';
import { dueTimeSet, tsParam, validIds } from './columns.js';
import { TRANSITION_COLUMNS, toTransition, type TransitionRow } from './complete.js';
import { MARK_HAS_DEPENDENTS } from './dag-submit.js';
import { dagEventsCte } from './outbox.js';

/**
 * An attempt that ends waiting for its children (docs/decisions/0033-waiting-for-children.md):
 * the parent's unfinished children become its predecessors on the dependency machinery of
 * decision 0006, in one transaction:
 * 1. the parent's row locked and its lease checked as for any result (running, this token's
 *    digest, deadline not passed) — a spawn of the same parent takes turns with it, so no child
 *    is added once the attempt has ended;
 * 2. its children locked `FOR NO KEY UPDATE` in id order, exactly as a submission locks
 *    existing predecessors: a child finishing concurrently either committed first (its
 *    re-checked status is final) or waits for this commit, then sees `has_dependents` and
 *    writes its outbox event once the edges are visible;
 * 3. an edge to every child (one left from an earlier wait is set again): unsatisfied to each
 *    unfinished one, which is marked `has_dependents`; to one that has ended already (it ran
 *    while the parent's attempt went on), satisfied as the reconcile would find it — by a
 *    success, or by any end with `on_child_failure = continue`. So a resumed parent's edges
 *    name all its children (its `inputs`), and with `fail` a child that failed, was cancelled
 *    or expired before the wait fails the parent at once, naming the first of them by id, as
 *    one that ends so later does;
 * 4. the parent's lease ended (so its worker slot and limit permits go back, as after any
 *    result) and its status `waiting` with the edges counted; with no unfinished child, `pending`
 *    and due now; `failed` for a broken edge (3); with a cancel requested meanwhile,
 *    `cancelled`, as a result would make it. The attempt keeps an execution row of its own
 *    (status `waiting`).
 */

/** `$1` parent, `$2` the token's digest, `$3` now. */
const LOCK_WAITER = `
  SELECT t.status = 'running' AND t.deadline_at > ${tsParam(3)} AND t.lease_token_hash = $2::bytea AS held,
         t.cancel_requested
  FROM tasks t WHERE t.id = $1::uuid FOR NO KEY UPDATE`;

const FINAL = FINAL_STATUSES.map((s) => `'${s}'`).join(', ');

/** `$1` parent: its children, whether each has ended, locked in id order (through `tasks_parent_idx`). */
const LOCK_CHILDREN = `
  SELECT c.id, c.status, c.status IN (${FINAL}) AS ended FROM tasks c WHERE c.parent_id = $1::uuid
  ORDER BY c.id FOR NO KEY UPDATE`;

/** `$1` parent, `$2` children, `$3` whether each edge is satisfied, aligned. */
const ADD_EDGES = `
  INSERT INTO task_dependencies (task_id, predecessor_id, satisfied)
  SELECT $1::uuid, c.id, c.satisfied FROM unnest($2::uuid[], $3::bool[]) AS c(id, satisfied)
  ON CONFLICT (task_id, predecessor_id) DO UPDATE SET satisfied = excluded.satisfied`;

/**
 * `$1` parent, `$2` its new status, `$3` now, `$4` on_child_failure, `$5` the error of a
 * parent failed by a child that had already failed. The counters are those of every edge of
 * the parent: a task of a graph keeps its (satisfied) edges to its predecessors.
 */
const END_ATTEMPT = `
  WITH edges AS (
    SELECT count(*)::int AS total, (count(*) FILTER (WHERE e.satisfied))::int AS satisfied
    FROM task_dependencies e WHERE e.task_id = $1::uuid
  ),
  done AS (
    UPDATE tasks t
    SET status = $2::text,
        version = t.version + 1,
        ${dueTimeSet(`CASE WHEN $2::text = 'pending' THEN ${tsParam(3)} ELSE t.due_time END`)},
        completed_at = CASE WHEN $2::text IN ('cancelled', 'failed') THEN ${tsParam(3)} END,
        last_error = CASE WHEN $2::text = 'failed' THEN $5::text ELSE t.last_error END,
        child_waits = t.child_waits + 1,
        on_child_failure = $4::text,
        deps_total = e.total,
        deps_satisfied = e.satisfied,
        lease_expires_at = NULL,
        lease_token_hash = NULL,
        updated_at = ${tsParam(3)}
    FROM edges e, tasks o
    WHERE t.id = $1::uuid AND o.id = $1::uuid
    RETURNING t.id, t.status, t.version, t.task_type, t.priority, t.due_time, t.limits, t.attempts,
              t.started_at, t.worker_id, t.has_dependents, o.due_time AS attempt_due_time, t.traceparent, t.partition
  ),
  ${dagEventsCte(3)},
  execution AS (
    INSERT INTO executions (task_id, attempt, status, due_time, started_at, completed_at, worker_id, error)
    SELECT d.id, d.attempts, 'waiting', d.attempt_due_time, d.started_at, ${tsParam(3)}, d.worker_id, NULL
    FROM done d WHERE d.status <> 'cancelled'
  )
  SELECT ${TRANSITION_COLUMNS} FROM done d`;

/** See `TaskStore.waitForChildren`: the transition, or null when the lease is not held. */
export async function waitForChildren(db: Db, wait: ChildWait, nowMs: number): Promise<Transition | null> {
  const [id] = validIds([wait.taskId]);
  if (id === undefined || wait.tokenDigest.length !== LEASE_DIGEST_BYTES) return null;
  const digest = Buffer.from(wait.tokenDigest);
  return db.transaction(async (tx) => {
    const parent = (
      await tx.query<{ held: boolean; cancel_requested: boolean }>(LOCK_WAITER, [id, digest, nowMs], 'wh_lock_waiter')
    ).rows[0];
    if (parent?.held !== true) return null;
    let status: 'waiting' | 'pending' | 'cancelled' | 'failed' = 'cancelled';
    let error: string | null = null;
    if (!parent.cancel_requested) {
      const { rows } = await tx.query<{ id: string; status: string; ended: boolean }>(
        LOCK_CHILDREN,
        [id],
        'wh_lock_children',
      );
      const unfinished = rows.filter((r) => !r.ended).map((r) => r.id);
      const satisfied = rows.map((r) => r.status === 'succeeded' || (r.ended && wait.onChildFailure === 'continue'));
      const broken = rows.find((r, i) => r.ended && !satisfied[i]);
      if (unfinished.length > 0) await tx.query(MARK_HAS_DEPENDENTS, [unfinished], 'wh_mark_has_dependents');
      if (rows.length > 0) {
        await tx.query(ADD_EDGES, [id, rows.map((r) => r.id), satisfied], 'wh_add_child_edges');
      }
      if (broken !== undefined) {
        status = 'failed';
        error = `child ${broken.id} ${broken.status}`;
      } else status = unfinished.length > 0 ? 'waiting' : 'pending';
    }
    const { rows } = await tx.query<TransitionRow>(
      END_ATTEMPT,
      [id, status, nowMs, wait.onChildFailure, error],
      'wh_end_attempt_waiting',
    );
    const row = rows[0];
    if (row === undefined) return null;
    const transition = toTransition(row, nowMs);
    // What counts attempts must tell this `pending` from a retry's.
    if (status === 'waiting' || status === 'pending') transition.childWait = true;
    return transition;
  });
}
