/**
 * The fast index's storage interfaces: the far time buckets and the ready queues. Each has two
 * real implementations, Redis for production and in-process structures for the embedded
 * default; one conformance suite runs against both (`test/store/bucket-store`,
 * `ready-queue` and `fencing` conformance tests).
 */
import type { DueEntry } from '../domain/model.js';

/**
 * Far time buckets: one per partition per minute (Redis ZSETs, or an in-process map).
 *
 * Fencing: each partition has a fence, the highest ownership epoch any activation of its
 * wheel has claimed (`fence`). A write that carries an epoch (`add`, `takeUntil`, and the
 * ready queue's fenced `push`) is refused with `stale_epoch`, changing nothing, while the
 * fence is above that epoch: a node that was paused past the failure timeout and still
 * believes it owns the partition cannot touch its successor's buckets or fire its slots. The
 * check and the write are one atomic step. A write without an epoch is never refused.
 *
 * Stamps: each partition also has a stamp, a counter that every write its owner makes for it
 * (a fenced `add`, a `takeUntil` that takes something, a fenced `push`) raises by one and
 * answers, in the same atomic step. An unfenced `add` (a submit placing a task while the
 * partition did not answer) leaves it as it is: writes the owner never saw must not lift a
 * stamp that a failover to a replica behind has put back, which would hide that loss. A partition whose stamp is gone (0) was never rebuilt, or the store lost
 * its data (a flush, a restart empty, an evicted key). A stamp lower than one a write has
 * already answered means the store went back in time (a restart from an older snapshot, a
 * failover to a replica that had not seen the latest writes) and lost those writes. Either
 * way the partition's buckets and ready entries may be incomplete, and its wheel rebuilds
 * them from the system of record (`setIntact` then gives it a new stamp).
 *
 * A partition without a fence counts as fenced at 0. The fence lives with the buckets, so a
 * store that loses its data loses the fences too, and every epoch is allowed until the owner
 * fences again — which it does when it rebuilds the partition it finds lost.
 */
export interface BucketStore {
  /**
   * Raises the partition's fence to `max(current, epoch)`; it is never lowered. Call it on
   * activation, before the first fenced write, and again after rebuilding a lost partition.
   */
  fence(partition: number, epoch: number): Promise<void>;
  /**
   * Adds entries to the minute buckets their due times fall in. Idempotent. With `epoch`,
   * rejects with `stale_epoch` and adds nothing while the partition's fence is above it.
   * Resolves with the partition's stamp after the write (0: lost); only a fenced add raises it.
   */
  add(partition: number, entries: DueEntry[], epoch?: number): Promise<number>;
  /**
   * Reads and removes every bucket of the partition whose minute starts before `untilMs`.
   * With `epoch`, rejects with `stale_epoch` and takes nothing while the fence is above it.
   * `stamp` is the partition's stamp after the call (0: lost — also when a bucket the
   * partition's index names was missing). A call that rejects may have taken entries; the
   * partition then shows as lost.
   */
  takeUntil(partition: number, untilMs: number, epoch?: number): Promise<{ entries: DueEntry[]; stamp: number }>;
  /** Marks the partition's buckets complete (rebuilt from the system of record), at `stamp`. */
  setIntact(partition: number, stamp: number): Promise<void>;
  /** The stamps of these partitions, in order (0: lost). */
  stamps(partitions: readonly number[]): Promise<number[]>;
}

export interface QueueDepth {
  taskType: string;
  priority: number;
  depth: number;
  /** Milliseconds since the oldest entry's due time, or null when empty. */
  oldestReadyAgeMs: number | null;
}

/**
 * What a push answers when it wrote nothing to any queue: every entry went elsewhere (to its
 * limit key, docs/decisions/0023-flow-control.md). There is no stamp to observe: the
 * partition's stamp did not move, and it is not lost either.
 */
export const NOTHING_PUSHED = -1;

/** Ready queues per task type × priority (Redis sorted sets, or in-process heaps). */
export interface ReadyQueue {
  /**
   * Adds due entries. An entry already queued is not duplicated.
   *
   * With `fence` (a wheel partition firing a slot), the push is refused as a whole with
   * `stale_epoch`, writing nothing, while that partition's fence — the one
   * {@link BucketStore.fence} raises — is above `fence.epoch`; otherwise it raises the
   * partition's stamp and resolves with it (0: the partition is lost). Check and write are
   * atomic. Without `fence` it resolves with 0. A layer that passes the entries on instead
   * (the limits' gate) resolves with {@link NOTHING_PUSHED} when none was written.
   */
  push(entries: DueEntry[], fence?: { partition: number; epoch: number }): Promise<number>;
  /**
   * Which of these entries' tasks are held — queued in their entry's queue, or taken and in
   * flight with exactly this entry — as one consistent reading. For the safety net, which
   * hands on overdue tasks that nothing holds.
   */
  held(entries: readonly DueEntry[]): Promise<Set<string>>;
  /**
   * Takes up to `max` entries for these task types, lowest priority number first, then
   * oldest due first. Taken entries are held in flight until `ack`ed; entries held longer
   * than the in-flight timeout are put back by `requeueStale`.
   */
  take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]>;
  /** Drops in-flight entries once their claim is settled (claimed or found unclaimable). */
  ack(entries: DueEntry[]): Promise<void>;
  /** Puts back in-flight entries taken before `olderThanMs`. Returns how many. */
  requeueStale(olderThanMs: number): Promise<number>;
  depths(nowMs: number): Promise<QueueDepth[]>;
  /**
   * How many queued entries a take for the entry's task type hands out before it: those of
   * its own queue (its task type and priority) ahead of it, plus every entry of the type's
   * more urgent priorities (lower numbers). null when its queue does not hold it (not yet
   * pushed, or taken). Cheap whatever the depth: Redis ZRANK and ZCARDs in one transaction,
   * O(log n); in process a walk of the heap that visits only the entries ahead and their
   * children. For `GET /api/tasks/{id}/explain`.
   */
  ahead(entry: DueEntry): Promise<number | null>;
  /** Entries waiting in all queues. */
  backlog(): Promise<number>;
  /**
   * Calls `listener` after a push (or a requeue) has landed, with the task types it
   * touched, so long-polling workers wake at once: pushes made through this instance, and
   * in Redis those of every other instance on the same prefix (other nodes) as well. A
   * refused (fenced) push is not heard. Returns a function that removes the listener.
   * Listeners should not throw.
   */
  onPush(listener: (taskTypes: Set<string>) => void): () => void;
  /** Releases what the queue holds besides the store's client (Redis: its subscriber connection). */
  close(): Promise<void>;
}
