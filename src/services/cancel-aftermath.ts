import type { DagResolver } from '../actors/dag-resolver.js';
import { WORKER } from '../actors/worker.js';
import type { NodeEventSink } from '../domain/events.js';
import type { TaskRecord } from '../domain/model.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import type { TaskStore } from '../store/types.js';

export interface CancelAftermathDeps {
  tasks: Pick<TaskStore, 'cancelChildren'>;
  resolver: Pick<DagResolver, 'finished'>;
  clock: Clock;
  /** Reaches the worker actors, for a running task's cancel. @default nobody is told */
  system?: Pick<ActorSystemApi, 'ref'>;
  /** Told of the tasks cancelled at once (`task:cancelled`), which no attempt's end counts. @default nobody */
  events?: Pick<NodeEventSink, 'emit'>;
}

/**
 * What follows a cancel, wherever it came from (`DELETE /api/tasks/{id}`, an operation's page,
 * an attempt that ended cancelled): a cancelled task's dependents hear of it, a running task's
 * worker is told to stop, and a cancelled parent's unfinished children are cancelled with it
 * (and theirs; src/store/sql/cancel.ts `cancelChildren`). If the node dies before this runs,
 * the nets catch what it would have done: the outbox replay tells the dependents, the worker
 * hears of the cancel at its next heartbeat — but the children of a parent cancelled then are
 * left to run.
 */
export class CancelAftermath {
  constructor(private readonly deps: CancelAftermathDeps) {}

  /**
   * Dependents and workers of the tasks a cancel changed (no children: see {@link parentsCancelled}),
   * and the event of those it ended. Every cancel path hands its changed rows on here once, so
   * a task cancelled at once is told of once; a running one stays running here and is counted
   * when its attempt ends.
   */
  handOn(changed: readonly TaskRecord[]): void {
    const cancelled = changed.filter((t) => t.status === 'cancelled');
    if (cancelled.length > 0) {
      const nowMs = this.deps.clock.now();
      this.deps.events?.emit('task:cancelled', {
        tasks: cancelled.map((t) => ({ taskId: t.id, taskType: t.taskType, endedMs: t.completedMs ?? nowMs })),
      });
    }
    const finished = cancelled.filter((t) => t.hasDependents);
    if (finished.length > 0)
      this.deps.resolver.finished(finished.map((t) => ({ predecessorId: t.id, status: 'cancelled' as const })));
    const byWorker = new Map<string, string[]>();
    for (const t of changed) {
      if (t.status !== 'running' || t.workerId === null) continue;
      const ids = byWorker.get(t.workerId);
      if (ids === undefined) byWorker.set(t.workerId, [t.id]);
      else ids.push(t.id);
    }
    for (const [workerId, taskIds] of byWorker) this.tellWorker(workerId, taskIds);
  }

  /** Cancels the unfinished descendants of tasks that ended cancelled, and hands on what that changed. */
  async parentsCancelled(parentIds: readonly string[]): Promise<void> {
    if (parentIds.length === 0) return;
    this.handOn(await this.deps.tasks.cancelChildren(parentIds, this.deps.clock.now()));
  }

  /**
   * Tells the worker running the tasks, through its actor, wherever its socket is. A worker on
   * the HTTP routes (or one whose socket is gone) has no socket: it hears of the cancel from
   * its next heartbeat, as every worker also does.
   */
  private tellWorker(workerId: string, taskIds: string[]): void {
    if (this.deps.system === undefined) return;
    try {
      this.deps.system.ref(WORKER, workerId).tell({ type: 'push', push: { type: 'cancel', taskIds } });
    } catch {
      // A full mailbox or a node shutting down: the heartbeat still answers cancel_requested.
    }
  }
}
