import type { DueEntry, StoredStatus, TaskRecord, NewTask } from '../domain/model.js';

/**
 * Dependencies (DAGs) in the system of record: the store the resolver and the DAG-node
 * actors use, and what it answers. The task-level interfaces are in `types.ts`.
 */

/** What reconciling a blocked task did to it. Only tasks that changed are reported. */
export interface DagOutcome {
  taskId: string;
  /**
   * `pending` (all predecessors succeeded), `cancelled` (one failed or was cancelled) or still
   * `blocked` (counted more); for a parent waiting for its children, `pending` (all ended),
   * `failed` (one did not succeed, with `on_child_failure: fail`) or still `waiting`.
   */
  status: 'pending' | 'cancelled' | 'blocked' | 'failed' | 'waiting';
  /** Set when the task became pending: its due entry (due at the later of its own due time and now), for the wheel. */
  due: DueEntry | null;
  /** The task was cancelled (or failed) and tasks depend on it: its event is in the outbox. */
  notifyDependents: boolean;
  /** The task's partition, for the span of its release: set only when `due` carries a `traceparent`. */
  partition?: number;
}

/** A finished predecessor whose dependents have not all taken it in yet (the outbox). */
export interface DagEvent {
  predecessorId: string;
  status: StoredStatus;
  createdMs: number;
}

/** One task of a graph, as `GET /api/dags/{id}` shows it. */
export interface DagNodeRecord {
  task: TaskRecord;
  /** Predecessor ids, in id order. */
  dependsOn: string[];
}

/** Dependencies in the system of record (Postgres or PGlite). */
export interface DagStore {
  /**
   * Submits a graph (see `NewTask.dependsOn`; any order), in one transaction, all or nothing:
   * an id of no task is `unknown_dependency`, a cron schedule as predecessor `validation_failed`.
   * With a key: an earlier identical graph is answered with `created: false` and its id; the
   * key with a different request throws `idempotency_conflict`; nothing is written.
   */
  submitGraph(
    tasks: NewTask[],
    dag: { id: string; idempotencyKey: string | null; requestHash: string },
    nowMs: number,
  ): Promise<{ created: boolean; dagId: string; tasks: TaskRecord[] }>;
  /** The blocked dependents of these predecessors: each with the predecessors (of these) it waits on. */
  dependents(predecessorIds: string[]): Promise<{ taskId: string; predecessorIds: string[] }[]>;
  /**
   * Reconciles blocked tasks from the task table, each on its own: edges to predecessors that
   * succeeded are marked satisfied and counted (an edge counts once, however often this
   * runs); all satisfied → `pending`, due at the later of its due time and `nowMs`; a
   * predecessor failed or cancelled → `cancelled`, `last_error` naming it. One statement.
   */
  reconcile(taskIds: string[], nowMs: number): Promise<DagOutcome[]>;
  /** Outbox events written before `beforeMs`, oldest first, at most `limit`. */
  pendingEvents(beforeMs: number, limit: number): Promise<DagEvent[]>;
  /** Deletes outbox events once every dependent has taken them in. */
  clearEvents(predecessorIds: string[]): Promise<void>;
  /**
   * The safety net: blocked tasks (id order, after `afterId`, a page of `limit`) that a
   * reconcile would change — all edges satisfied, or an unsatisfied edge to a predecessor
   * that ended before `settledBeforeMs` and has no outbox event left. `next` is the cursor
   * for the next page, null after the last.
   */
  stuck(
    afterId: string | null,
    limit: number,
    settledBeforeMs: number,
  ): Promise<{ ids: string[]; next: string | null }>;
  /** Predecessor ids of each task that has any, in id order. */
  predecessors(taskIds: string[]): Promise<Map<string, string[]>>;
  /** A graph's tasks in id order (submission order), or null when there is no such graph. */
  graph(dagId: string): Promise<DagNodeRecord[] | null>;
}
