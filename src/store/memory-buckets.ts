/**
 * Far time buckets in process, for the embedded default: the same semantics as
 * {@link RedisBucketStore} with maps and a heap of bucket minutes.
 *
 * A bucket is keyed by task id where Redis keys by id, priority and type: a task's type
 * and priority never change, so the two agree. Entries due at the same ms come out in
 * insertion order here and by member in Redis.
 *
 * The partitions' fences live here too ({@link PartitionFences}), with the helpers both
 * backends use to check them: the embedded ready queue shares the bucket store's fences.
 */
import { WheelhouseError } from '../errors.js';
import { BinaryHeap } from '../runtime/binary-heap.js';
import { assertDueEntry, minuteStart } from './entry-codec.js';
import type { BucketStore, DueEntry } from './types.js';

/**
 * Throws `internal` unless `partition` and `epoch` are non-negative safe integers: the
 * fence is compared as a number in Lua and in process alike, so it must be exact there.
 */
export function assertFenceArgs(partition: number, epoch: number): void {
  if (!Number.isSafeInteger(partition) || partition < 0 || !Number.isSafeInteger(epoch) || epoch < 0) {
    throw new WheelhouseError('internal', `Not a valid partition fence: partition ${partition}, epoch ${epoch}.`, {
      details: { partition, epoch },
    });
  }
}

/** The refusal of a write whose epoch is below its partition's fence. */
export function staleEpochError(operation: string, partition: number, epoch: number, fence: number): WheelhouseError {
  return new WheelhouseError(
    'stale_epoch',
    `Partition ${partition} is fenced at epoch ${fence}; a write at epoch ${epoch} was refused (${operation}).`,
    { details: { partition, epoch, fence, operation } },
  );
}

/**
 * The partitions' fences in process (see {@link BucketStore}): the in-process counterpart
 * of the Redis fence keys. The embedded bucket store and ready queue share one instance,
 * as their Redis counterparts share the keys, so a fence raised through the buckets also
 * holds the ready queue's fenced pushes.
 */
export class PartitionFences {
  private fences = new Map<number, number>();

  /** Raises the partition's fence to `max(current, epoch)`. Returns the fence now. */
  raise(partition: number, epoch: number): number {
    assertFenceArgs(partition, epoch);
    const fence = Math.max(this.get(partition), epoch);
    this.fences.set(partition, fence);
    return fence;
  }

  /** The partition's fence; 0 when none was raised. */
  get(partition: number): number {
    return this.fences.get(partition) ?? 0;
  }

  /**
   * Throws `stale_epoch` when `epoch` is given and the partition's fence is above it, and
   * raises a fence below it (as the Redis scripts do: after a flush, the owner's first write
   * fences again). Does nothing for an unfenced write (`epoch` undefined).
   */
  check(operation: string, partition: number, epoch: number | undefined): void {
    if (epoch === undefined) return;
    assertFenceArgs(partition, epoch);
    const fence = this.get(partition);
    if (fence > epoch) throw staleEpochError(operation, partition, epoch, fence);
    if (fence < epoch) this.fences.set(partition, epoch);
  }

  /** Drops every fence, as a restart (or a Redis flush) would. */
  clear(): void {
    this.fences = new Map();
  }
}

interface PartitionBuckets {
  /** Minute start → (task id → entry). */
  buckets: Map<number, Map<string, DueEntry>>;
  /** The keys of `buckets`, smallest first. */
  minutes: BinaryHeap<number>;
}

/** The embedded {@link BucketStore}: far time buckets in process memory. */
export class MemoryBucketStore implements BucketStore {
  private partitions = new Map<number, PartitionBuckets>();
  /** Marks live as long as the process: a restart loses them, as it loses the buckets. */
  private intact = new Set<number>();
  private readonly fences: PartitionFences;

  /**
   * @param fences the partitions' fences; pass the instance the ready queue has (see
   *   {@link PartitionFences}). @default a private one
   */
  constructor(fences: PartitionFences = new PartitionFences()) {
    this.fences = fences;
  }

  async fence(partition: number, epoch: number): Promise<void> {
    this.fences.raise(partition, epoch);
  }

  async add(partition: number, entries: DueEntry[], epoch?: number): Promise<void> {
    for (const entry of entries) assertDueEntry(entry);
    this.fences.check('buckets.add', partition, epoch);
    const state = this.partition(partition);
    for (const entry of entries) {
      const minute = minuteStart(entry.dueMs);
      let bucket = state.buckets.get(minute);
      if (bucket === undefined) {
        state.buckets.set(minute, (bucket = new Map()));
        state.minutes.push(minute);
      }
      // Same task, same bucket: one entry, the latest due time (as ZADD does).
      bucket.set(entry.taskId, { ...entry });
    }
  }

  async takeUntil(partition: number, untilMs: number, epoch?: number): Promise<DueEntry[]> {
    this.fences.check('buckets.takeUntil', partition, epoch);
    const state = this.partitions.get(partition);
    if (state === undefined) return [];
    const taken: DueEntry[] = [];
    for (;;) {
      const minute = state.minutes.peek();
      if (minute === undefined || minute >= untilMs) break;
      state.minutes.pop();
      const bucket = state.buckets.get(minute);
      state.buckets.delete(minute);
      if (bucket === undefined) continue;
      // Due order; a stable sort keeps insertion order among equal due times.
      const entries = [...bucket.values()].sort((a, b) => a.dueMs - b.dueMs);
      for (const entry of entries) taken.push(entry);
    }
    return taken;
  }

  async setIntact(partition: number): Promise<void> {
    this.intact.add(partition);
  }

  async lostPartitions(partitions: number[]): Promise<number[]> {
    return partitions.filter((p) => !this.intact.has(p));
  }

  /** Drops every bucket, mark and fence (shared ones too), as a restart would. */
  clear(): void {
    this.partitions = new Map();
    this.intact = new Set();
    this.fences.clear();
  }

  private partition(partition: number): PartitionBuckets {
    let state = this.partitions.get(partition);
    if (state === undefined) {
      state = { buckets: new Map(), minutes: new BinaryHeap<number>((a, b) => a - b) };
      this.partitions.set(partition, state);
    }
    return state;
  }
}
