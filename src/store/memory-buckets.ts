/**
 * Far time buckets in process, for the embedded default: the same semantics as
 * {@link RedisBucketStore} with maps and a heap of bucket minutes.
 *
 * A bucket is keyed by task id where Redis keys by id, priority and type: a task's type
 * and priority never change, so the two agree. Entries due at the same ms come out in
 * insertion order here and by member in Redis.
 */
import { BinaryHeap } from '../lib/binary-heap.js';
import { assertDueEntry, minuteStart } from './entry-codec.js';
import { PartitionMarks } from './fences.js';
import type { DueEntry } from '../domain/model.js';
import type { BucketStore } from './fast-index-types.js';

interface PartitionBuckets {
  /** Minute start → (task id → entry). */
  buckets: Map<number, Map<string, DueEntry>>;
  /** The keys of `buckets`, smallest first. */
  minutes: BinaryHeap<number>;
}

/** The embedded {@link BucketStore}: far time buckets in process memory. */
export class MemoryBucketStore implements BucketStore {
  private partitions = new Map<number, PartitionBuckets>();
  /** Fences and stamps live as long as the process: a restart loses them with the buckets. */
  private readonly marks: PartitionMarks;

  /**
   * @param marks the partitions' fences and stamps; pass the instance the ready queue has
   *   (see {@link PartitionMarks}). @default a private one
   */
  constructor(marks: PartitionMarks = new PartitionMarks()) {
    this.marks = marks;
  }

  async fence(partition: number, epoch: number): Promise<void> {
    this.marks.raise(partition, epoch);
  }

  async add(partition: number, entries: DueEntry[], epoch?: number): Promise<number> {
    for (const entry of entries) assertDueEntry(entry);
    this.marks.check('buckets.add', partition, epoch);
    if (entries.length === 0) return this.marks.stamp(partition);
    const state = this.partition(partition);
    for (const entry of entries) {
      const minute = minuteStart(entry.dueMs);
      let bucket = state.buckets.get(minute);
      if (bucket === undefined) {
        state.buckets.set(minute, (bucket = new Map<string, DueEntry>()));
        state.minutes.push(minute);
      }
      // Same task, same bucket: one entry, the latest due time (as ZADD does).
      bucket.set(entry.taskId, { ...entry });
    }
    // An unfenced add leaves the stamp alone (see BucketStore: the stamp counts the owner's writes).
    return epoch === undefined ? this.marks.stamp(partition) : this.marks.bump(partition);
  }

  async takeUntil(partition: number, untilMs: number, epoch?: number): Promise<{ entries: DueEntry[]; stamp: number }> {
    this.marks.check('buckets.takeUntil', partition, epoch);
    const state = this.partitions.get(partition);
    if (state === undefined) return { entries: [], stamp: this.marks.stamp(partition) };
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
    return { entries: taken, stamp: taken.length > 0 ? this.marks.bump(partition) : this.marks.stamp(partition) };
  }

  async setIntact(partition: number, stamp: number): Promise<void> {
    this.marks.setStamp(partition, stamp);
  }

  async stamps(partitions: readonly number[]): Promise<number[]> {
    return partitions.map((p) => this.marks.stamp(p));
  }

  /** Drops every bucket, fence and stamp (shared ones too), as a restart would. */
  clear(): void {
    this.partitions = new Map();
    this.marks.clear();
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
