/**
 * How many wheel partitions of a node read and write a page of a full rebuild's far part at
 * once. Without a bound, every partition of a node that lost its Redis reads a page at the
 * same time: 64 pages of 5 000 entries held together (the node passed 512 MiB rebuilding 10
 * million tasks), and each page took seconds of wall time while the partition's ticks waited
 * behind it in its mailbox (a task due during the rebuild started 2.7 s late).
 *
 * A permit is asked for outside the mailbox: the partition's next page message is sent only
 * once it holds one, so a partition waiting for a permit still ticks. Permits are held per
 * partition number, so releasing is idempotent: the page's handler releases it, and so does
 * the partition's deactivation (a message that never ran, or ran on another node after a ring
 * change, leaks nothing here).
 */
export class RebuildPermits {
  private readonly holders = new Set<number>();
  /** Partitions waiting for a permit, first come first served, and how each starts its page. */
  private readonly waiting = new Map<number, () => void>();

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`a permit limit must be a positive integer, got ${limit}`);
  }

  /**
   * Calls `start` once `partition` holds a permit: now, or when another partition's is
   * released (so inside that one's call; `start` must not throw).
   */
  request(partition: number, start: () => void): void {
    if (this.holders.has(partition) || this.holders.size < this.limit) {
      this.holders.add(partition);
      start();
    } else {
      this.waiting.set(partition, start);
    }
  }

  /** Gives back `partition`'s permit (or its place in the queue); nothing if it holds neither. */
  release(partition: number): void {
    this.waiting.delete(partition);
    if (!this.holders.delete(partition)) return;
    const next = this.waiting.entries().next();
    if (next.done === true) return;
    const [waiter, start] = next.value;
    this.waiting.delete(waiter);
    this.holders.add(waiter);
    start();
  }

  /** Partitions holding a permit, and waiting for one. */
  get counts(): { holding: number; waiting: number } {
    return { holding: this.holders.size, waiting: this.waiting.size };
  }
}
