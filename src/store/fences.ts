/**
 * A wheel partition's fence: the highest ownership epoch that has written to its fast-index
 * state. A write carrying a lower epoch is refused (`stale_epoch`). In Redis the fence is a
 * key checked by the writing scripts; in process, {@link PartitionFences}. These are the
 * checks and errors both backends share.
 */
import { WheelhouseError } from '../lib/errors.js';

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
 * The partitions' marks in process (see {@link BucketStore}): the in-process counterpart of
 * the Redis fence keys and intact markers. Per partition, a fence (the highest ownership
 * epoch that wrote) and a stamp (a count of the writes made for it since it was last found
 * intact; absent: its data is lost). The embedded bucket store and ready queue share one
 * instance, as their Redis counterparts share the keys, so a fence raised through the
 * buckets also holds the ready queue's fenced pushes, and a fenced push bumps the stamp.
 */
export class PartitionMarks {
  private fences = new Map<number, number>();
  private stamps = new Map<number, number>();

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

  /** The partition's stamp; 0 when its data is lost. */
  stamp(partition: number): number {
    return this.stamps.get(partition) ?? 0;
  }

  /** A write for the partition: its stamp goes up by one, answered; 0 (and stays lost) when lost. */
  bump(partition: number): number {
    const stamp = this.stamps.get(partition);
    if (stamp === undefined) return 0;
    this.stamps.set(partition, stamp + 1);
    return stamp + 1;
  }

  /** Marks the partition intact at `stamp` (after it was rebuilt). */
  setStamp(partition: number, stamp: number): void {
    this.stamps.set(partition, stamp);
  }

  /** Drops every fence and stamp, as a restart (or a Redis flush) would. */
  clear(): void {
    this.fences = new Map();
    this.stamps = new Map();
  }
}
