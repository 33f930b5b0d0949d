import type { DueEntry, QueueDepth, ReadyQueue } from './types.js';

/**
 * A ReadyQueue that merges the pushes made in the same turn of the event loop into one.
 * Sixty-four wheel partitions firing at the same instant — a herd, or one batch submit
 * spread over every partition — then cost one Redis pipeline instead of sixty-four. Each
 * caller's promise settles with the merged push, so a failure reaches every caller.
 */
export class CoalescingReadyQueue implements ReadyQueue {
  private pending: DueEntry[] = [];
  private flush: Promise<void> | null = null;

  constructor(private readonly inner: ReadyQueue) {}

  push(entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    for (const entry of entries) this.pending.push(entry);
    this.flush ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => {
      const batch = this.pending;
      this.pending = [];
      this.flush = null;
      return this.inner.push(batch);
    });
    return this.flush;
  }

  take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    return this.inner.take(taskTypes, max, nowMs);
  }

  ack(entries: DueEntry[]): Promise<void> {
    return this.inner.ack(entries);
  }

  requeueStale(olderThanMs: number): Promise<number> {
    return this.inner.requeueStale(olderThanMs);
  }

  depths(nowMs: number): Promise<QueueDepth[]> {
    return this.inner.depths(nowMs);
  }

  backlog(): Promise<number> {
    return this.inner.backlog();
  }

  onPush(listener: (taskTypes: Set<string>) => void): () => void {
    return this.inner.onPush(listener);
  }
}
