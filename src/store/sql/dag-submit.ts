import { WheelhouseError } from '../../lib/errors.js';
import type { DbTx } from '../db.js';
import type { NewTask, StoredStatus, TaskRecord } from '../../domain/model.js';
import { insertTasks, type GraphColumns, type GraphEdges } from './insert.js';

/**
 * Submitting tasks that wait on predecessors, inside the submission's transaction:
 * 1. lock the existing predecessors (id order, so two submissions naming the same ones
 *    cannot deadlock) and read their status. The lock is held to the commit, so a
 *    predecessor finishing meanwhile waits for it, then sees `has_dependents` and writes its
 *    outbox event — by then these edges are committed and the resolver finds them;
 * 2. mark them `has_dependents`;
 * 3. decide each new task's status in dependency order: `cancelled` when a predecessor
 *    failed or was cancelled (or is a task of this submission cancelled so), `pending` when
 *    all have succeeded already, `blocked` otherwise;
 * 4. insert the tasks and their edges in one statement (an edge to a predecessor that
 *    already succeeded is born satisfied).
 * An id that names no task, or a cron schedule (it never succeeds as a task does), rejects
 * the whole submission.
 */

const LOCK_PREDECESSORS = `
  SELECT id, status, schedule_type FROM tasks WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`;

export const MARK_HAS_DEPENDENTS = `UPDATE tasks SET has_dependents = true WHERE id = ANY($1::uuid[]) AND NOT has_dependents`;

/** A task that takes the dependency path: it has predecessors or belongs to a graph. */
export function hasDependencies(task: NewTask): boolean {
  return (task.dependsOn?.length ?? 0) > 0 || (task.dagId ?? null) !== null;
}

interface Predecessor {
  status: StoredStatus;
  scheduleType: string;
}

/** Inserts `tasks` (any order; predecessors in the same submission are found by id). */
export async function insertWithDependencies(tx: DbTx, tasks: NewTask[], nowMs: number): Promise<TaskRecord[]> {
  const indexOf = new Map<string, number>();
  tasks.forEach((t, i) => indexOf.set(t.id.toLowerCase(), i));
  const predecessorsOf = tasks.map((t) => [...new Set((t.dependsOn ?? []).map((id) => id.toLowerCase()))]);

  const external = [...new Set(predecessorsOf.flat().filter((id) => !indexOf.has(id)))].sort();
  const existing = new Map<string, Predecessor>();
  if (external.length > 0) {
    const { rows } = await tx.query<{ id: string; status: StoredStatus; schedule_type: string }>(
      LOCK_PREDECESSORS,
      [external],
      'wh_lock_predecessors',
    );
    for (const r of rows) existing.set(r.id, { status: r.status, scheduleType: r.schedule_type });
    predecessorsOf.forEach((ids, index) => {
      for (const id of ids) {
        if (indexOf.has(id)) continue;
        const p = existing.get(id);
        if (p === undefined) {
          throw new WheelhouseError(
            'unknown_dependency',
            `no task has id ${id} (a dependency of the task at index ${index})`,
            {
              details: { index, dependency: id },
            },
          );
        }
        if (p.scheduleType === 'cron') {
          throw new WheelhouseError(
            'validation_failed',
            `${id} is a cron schedule, which cannot be a dependency; depend on one of its instances instead`,
            {
              details: { index, dependency: id },
            },
          );
        }
      }
    });
    await tx.query(MARK_HAS_DEPENDENTS, [external], 'wh_mark_has_dependents');
  }

  const columns = decide(tasks, predecessorsOf, indexOf, existing);
  const edges: GraphEdges = { taskIds: [], predecessorIds: [], satisfied: [] };
  predecessorsOf.forEach((ids, i) => {
    for (const id of ids) {
      edges.taskIds.push(tasks[i]!.id);
      edges.predecessorIds.push(id);
      edges.satisfied.push(existing.get(id)?.status === 'succeeded');
    }
  });
  return insertTasks(tx, tasks, nowMs, { columns, edges });
}

/** Some task names a predecessor outside the submission: it must be locked, so the insert needs a transaction. */
export function hasExternalPredecessors(tasks: readonly NewTask[]): boolean {
  const ids = new Set(tasks.map((t) => t.id.toLowerCase()));
  return tasks.some((t) => (t.dependsOn ?? []).some((id) => !ids.has(id.toLowerCase())));
}

/** Each task's status and counters, decided in dependency order (Kahn's algorithm on the local edges). */
function decide(
  tasks: readonly NewTask[],
  predecessorsOf: readonly string[][],
  indexOf: ReadonlyMap<string, number>,
  existing: ReadonlyMap<string, Predecessor>,
): GraphColumns[] {
  const n = tasks.length;
  const waiting = new Array<number>(n).fill(0);
  const dependentsOf: number[][] = Array.from({ length: n }, () => []);
  const columns = new Array<GraphColumns>(n);
  predecessorsOf.forEach((ids, i) => {
    for (const id of ids) {
      const j = indexOf.get(id);
      if (j === undefined) continue;
      if (j === i)
        throw new WheelhouseError('dependency_cycle', `the task at index ${i} depends on itself`, {
          details: { index: i },
        });
      waiting[i]!++;
      dependentsOf[j]!.push(i);
    }
  });
  const queue: number[] = [];
  for (let i = 0; i < n; i++) if (waiting[i] === 0) queue.push(i);
  for (let head = 0; head < queue.length; head++) {
    const i = queue[head]!;
    const ids = predecessorsOf[i]!;
    let satisfied = 0;
    let lastError: string | null = null;
    for (const id of ids) {
      const j = indexOf.get(id);
      const status = j === undefined ? existing.get(id)!.status : columns[j]!.status;
      if (status === 'succeeded') satisfied++;
      else if (lastError === null && (status === 'failed' || status === 'cancelled' || status === 'expired'))
        lastError = `predecessor ${id} ${status}`;
    }
    columns[i] = {
      status: lastError !== null ? 'cancelled' : satisfied === ids.length ? tasks[i]!.status : 'blocked',
      depsTotal: ids.length,
      depsSatisfied: satisfied,
      hasDependents: dependentsOf[i]!.length > 0,
      lastError,
    };
    for (const k of dependentsOf[i]!) if (--waiting[k]! === 0) queue.push(k);
  }
  if (queue.length < n) {
    // The planner refuses cycles before anything is written; this guards the store's own contract.
    throw new WheelhouseError('dependency_cycle', 'the tasks of this submission depend on each other in a cycle');
  }
  return columns;
}
