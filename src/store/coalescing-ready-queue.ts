import { WheelhouseError } from '../lib/errors.js';
import type { DueEntry } from '../domain/model.js';
import type { QueueDepth, ReadyQueue } from './fast-index-types.js';

/** A push's fence: the partition whose fence must not stand above `epoch` (see `ReadyQueue.push`). */
export interface PushFence {
  partition: number;
  epoch: number;
}

/** One caller's push, as a part of a merged one. */
export interface PushGroup {
  entries: DueEntry[];
  fence?: PushFence;
}

/**
 * A ready queue that can write the pushes of several callers at once, each on its own
 * terms: a fenced group is refused alone, and the others are written all the same.
 */
export interface GroupingReadyQueue extends ReadyQueue {
  /**
   * Writes the groups in as few round trips as it can; listeners hear of the groups
   * written, once. Resolves with one result per group, in order: when written, the fenced
   * partition's stamp after the write (0 for an unfenced group, or a lost partition); or
   * the error that kept it out (`stale_epoch` for a fenced group, `internal` for a malformed
   * entry, a store error, or a listener's error for a group that was written).
   */
  pushGroups(groups: readonly PushGroup[]): Promise<(Error | number)[]>;
}

/** A push waiting for the end of the event-loop turn. */
interface Waiting {
  group: PushGroup;
  resolve: (stamp: number) => void;
  reject: (error: unknown) => void;
}

/** Pushes at least this large skip the merging. */
const DIRECT_PUSH_ENTRIES = 256;

/**
 * A ReadyQueue that merges the pushes made in the same turn of the event loop into one.
 * Sixty-four wheel partitions firing at the same instant — a herd, or one batch submit
 * spread over every partition — then cost one Redis round trip instead of sixty-four. Each
 * push stays a group of its own in the merged one, so a fenced push whose partition has a
 * newer owner is refused alone: its caller's promise rejects with `stale_epoch` while the
 * others resolve. A failure of the whole round trip reaches every caller of the turn.
 */
export class CoalescingReadyQueue implements ReadyQueue {
  private pending: Waiting[] = [];
  private flush: Promise<void> | null = null;

  constructor(private readonly inner: GroupingReadyQueue) {}

  push(entries: DueEntry[], fence?: PushFence): Promise<number> {
    if (entries.length === 0) return Promise.resolve(0);
    // A large push is its own batch already; holding it back for the others of this turn
    // would only delay the first claims of a herd until the whole herd is written.
    if (entries.length >= DIRECT_PUSH_ENTRIES) return this.inner.push(entries, fence);
    const group: PushGroup = fence === undefined ? { entries } : { entries, fence: { ...fence } };
    const settled = new Promise<number>((resolve, reject) => this.pending.push({ group, resolve, reject }));
    this.flush ??= new Promise<void>((resolve) => setImmediate(resolve)).then(() => this.pushPending());
    return settled;
  }

  take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    return this.inner.take(taskTypes, max, nowMs);
  }

  ack(entries: DueEntry[]): Promise<void> {
    return this.inner.ack(entries);
  }

  held(entries: readonly DueEntry[]): Promise<Set<string>> {
    return this.inner.held(entries);
  }

  ahead(entry: DueEntry): Promise<number | null> {
    return this.inner.ahead(entry);
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

  /** Writes the pushes of this turn that are still waiting, then closes the inner queue. */
  async close(): Promise<void> {
    await this.flush;
    await this.inner.close();
  }

  /** Settles every waiting push; never rejects. */
  private async pushPending(): Promise<void> {
    const batch = this.pending;
    this.pending = [];
    this.flush = null;
    let results: (Error | number)[];
    try {
      results = await this.inner.pushGroups(batch.map((waiting) => waiting.group));
    } catch (error) {
      for (const waiting of batch) waiting.reject(error);
      return;
    }
    batch.forEach((waiting, i) => {
      const result = results[i];
      if (typeof result === 'number') waiting.resolve(result);
      else waiting.reject(result ?? new WheelhouseError('internal', 'A grouped ready-queue push gave no result.'));
    });
  }
}
