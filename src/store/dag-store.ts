import type { Db } from './db.js';
import {
  clearEvents,
  dependents,
  graph,
  pendingEvents,
  predecessors,
  reconcile,
  stuckTasks,
  submitGraph,
} from './sql/dag.js';
import type { NewTask, TaskRecord } from '../domain/model.js';
import type { DagEvent, DagNodeRecord, DagOutcome, DagStore } from './dag-types.js';

/**
 * Dependencies over SQL, on Postgres and PGlite alike; the statements are in `sql/dag.ts`.
 *
 * Submitting a graph is durable before it answers (`db`). Everything the resolver and the DAG
 * actors write — reconciles, outbox deletes — goes through `progress`, the pool that commits
 * asynchronously, like claims and results (docs/decisions/0003): it is progress derived from
 * durable facts, not a fact of its own. A reconcile lost to a crash lost its outbox delete too
 * (the delete is issued after the reconcile commits, so it is later in the WAL), and the event
 * is delivered again. On its own pool it also does not queue behind submissions.
 */
export class SqlDagStore implements DagStore {
  constructor(
    private readonly db: Db,
    private readonly progress: Db = db,
  ) {}

  submitGraph(
    tasks: NewTask[],
    dag: { id: string; idempotencyKey: string | null; requestHash: string },
    nowMs: number,
  ): Promise<{ created: boolean; dagId: string; tasks: TaskRecord[] }> {
    return submitGraph(this.db, tasks, dag, nowMs);
  }

  dependents(predecessorIds: string[]): Promise<{ taskId: string; predecessorIds: string[] }[]> {
    return dependents(this.progress, predecessorIds);
  }

  reconcile(taskIds: string[], nowMs: number): Promise<DagOutcome[]> {
    return reconcile(this.progress, taskIds, nowMs);
  }

  pendingEvents(beforeMs: number, limit: number): Promise<DagEvent[]> {
    return pendingEvents(this.db, beforeMs, limit);
  }

  clearEvents(predecessorIds: string[]): Promise<void> {
    return clearEvents(this.progress, predecessorIds);
  }

  stuck(
    afterId: string | null,
    limit: number,
    settledBeforeMs: number,
  ): Promise<{ ids: string[]; next: string | null }> {
    return stuckTasks(this.db, afterId, limit, settledBeforeMs);
  }

  predecessors(taskIds: string[]): Promise<Map<string, string[]>> {
    return predecessors(this.db, taskIds);
  }

  graph(dagId: string): Promise<DagNodeRecord[] | null> {
    return graph(this.db, dagId);
  }
}
