import type { NodeEventSink } from '../domain/events.js';
import type { Clock } from '../runtime/clock.js';
import type { RetentionCursor, TaskStore } from '../store/types.js';

/**
 * Retention (docs/decisions/0015-retention.md): finished tasks leave once they have been
 * finished for `retentionMs`, expired idempotency keys as soon as they expire. Both in bounded
 * batches, each its own short statement, batch after batch until nothing is left past the
 * line, so a pass keeps up with any load the store can delete and no transaction is long.
 *
 * Who does what in a cluster: each node sweeps the wheel partitions it owns (tasks carry
 * their partition; `tasks_ended_idx` leads with it), so the nodes walk disjoint parts of
 * the index and never delete the same rows. Keys have no partition: the node that owns
 * partition 0 purges them. During a ring change two nodes may both sweep a partition for a
 * moment; a delete is idempotent and the second finds less to do.
 */
export interface RetentionSweepDeps {
  tasks: Pick<
    TaskStore,
    'removeFinished' | 'partitionsPastHorizon' | 'recordRetentionHorizon' | 'purgeExpiredIdempotencyKeys'
  >;
  clock: Clock;
  /** How long a finished task is kept, ms. */
  retentionMs: number;
  /** The wheel partitions this node owns now. */
  ownedPartitions(): number[];
  /** `retention:removed` after a pass that removed anything. */
  events: NodeEventSink;
  /** Tasks one batch looks at (and so removes) at most. @default 2000 */
  taskBatch?: number;
  /** Idempotency keys one batch deletes at most. @default 10000 */
  keyBatch?: number;
}

/** What one pass removed. */
export interface RetentionPass {
  tasks: number;
  idempotencyKeys: number;
}

/**
 * 2 000 tasks a batch: measured on Postgres 15 (0015-retention.md), a batch of 1 000 removed
 * as many rows a second as one of 5 000 while holding its row locks a fifth as long.
 */
export const TASK_BATCH = 2000;
/** Keys are one narrow row each, found through their own index: 10 000 a batch. */
export const KEY_BATCH = 10_000;

export class RetentionSweep {
  private stopped = false;

  constructor(private readonly deps: RetentionSweepDeps) {}

  /** Ends the pass under way after its current batch; later passes do nothing. */
  stop(): void {
    this.stopped = true;
  }

  /**
   * One pass: records the horizon (so a read of a task removed now is told why it is gone),
   * then empties each owned partition of what passed it, then purges the expired keys if
   * this node owns partition 0.
   */
  async sweep(): Promise<RetentionPass> {
    const { tasks, clock, retentionMs } = this.deps;
    const pass: RetentionPass = { tasks: 0, idempotencyKeys: 0 };
    const partitions = this.deps.ownedPartitions();
    if (this.stopped || partitions.length === 0) return pass;
    const now = clock.now();
    const horizonMs = now - retentionMs;
    await tasks.recordRetentionHorizon(horizonMs, retentionMs);
    const limit = this.deps.taskBatch ?? TASK_BATCH;
    for (const partition of await tasks.partitionsPastHorizon(partitions, horizonMs)) {
      let after: RetentionCursor | null = null;
      do {
        if (this.stopped) return this.report(pass);
        const batch = await tasks.removeFinished({ partition, horizonMs, nowMs: now, after, limit });
        pass.tasks += batch.removed;
        after = batch.next;
      } while (after !== null);
    }
    if (partitions.includes(0)) pass.idempotencyKeys = await this.purgeKeys(now);
    return this.report(pass);
  }

  /** Deletes expired keys batch after batch until a batch is not full. */
  private async purgeKeys(nowMs: number): Promise<number> {
    const limit = this.deps.keyBatch ?? KEY_BATCH;
    let purged = 0;
    for (;;) {
      if (this.stopped) return purged;
      const n = await this.deps.tasks.purgeExpiredIdempotencyKeys(nowMs, limit);
      purged += n;
      if (n < limit) return purged;
    }
  }

  private report(pass: RetentionPass): RetentionPass {
    if (pass.tasks + pass.idempotencyKeys > 0) this.deps.events.emit('retention:removed', pass);
    return pass;
  }
}
