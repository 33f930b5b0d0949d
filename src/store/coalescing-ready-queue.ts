import type { DueEntry, QueueDepth, ReadyQueue } from './types.js';

/**
 * A ReadyQueue that merges the pushes made in the same turn of the event loop into one.
 * Sixty-four wheel partitions firing at the same instant — a herd, or one batch submit
 * spread over every partition — then cost one Redis pipeline instead of sixty-four. Each
 * caller's promise settles with the merged push, so a failure reaches every caller.
 */
/** Pushes at least this large skip the merging. */
const DIRECT_PUSH_ENTRIES = 256;

export class CoalescingReadyQueue implements ReadyQueue {
  private pending: DueEntry[] = [];
  private flush: Promise<void> | null = null;

  constructor(private readonly inner: ReadyQueue) {}

  push(entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    // A large push is its own batch already; holding it back for the others of this turn
    // would only delay the first claims of a herd until the whole herd is written.
    if (entries.length >= DIRECT_PUSH_ENTRIES) return this.inner.push(entries);
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
