import { BinaryHeap } from '../lib/binary-heap.js';
import type { DueEntry } from '../domain/model.js';

interface Waiting {
  entry: DueEntry;
  /** Arrival order, the last tie-break: first come, first out within a priority and due time. */
  seq: number;
}

/** Priority, then due time, then arrival; one function for every key (not a closure per key). */
function moreUrgent(a: Waiting, b: Waiting): number {
  return a.entry.priority - b.entry.priority || a.entry.dueMs - b.entry.dueMs || a.seq - b.seq;
}

/**
 * The tasks of one limit key that wait for room: most urgent first (priority, then due time,
 * then arrival), each task once. Removal is lazy: a task taken out of the middle (granted
 * from the ready queue, cancelled by a strategy) is only forgotten by id, and skipped when
 * it reaches the top.
 */
export class WaitingTasks {
  private readonly heap = new BinaryHeap<Waiting>(moreUrgent);
  /** The live ones, by task id, with their arrival number. */
  private readonly live = new Map<string, number>();
  private seq = 0;

  get size(): number {
    return this.live.size;
  }

  has(taskId: string): boolean {
    return this.live.has(taskId);
  }

  /** Adds a task; false when it already waits. */
  add(entry: DueEntry): boolean {
    if (this.live.has(entry.taskId)) return false;
    const seq = this.seq++;
    this.live.set(entry.taskId, seq);
    this.heap.push({ entry, seq });
    return true;
  }

  /** Forgets a task (it started, or was cancelled); false when it did not wait. */
  delete(taskId: string): boolean {
    return this.live.delete(taskId);
  }

  /** Takes out up to `max` of the most urgent. */
  take(max: number): DueEntry[] {
    const out: DueEntry[] = [];
    while (out.length < max) {
      const top = this.heap.pop();
      if (top === undefined) break;
      if (this.live.get(top.entry.taskId) !== top.seq) continue;
      this.live.delete(top.entry.taskId);
      out.push(top.entry);
    }
    if (this.live.size === 0 && this.heap.size > 0) this.compact();
    return out;
  }

  /**
   * Every waiting task but `keep`, taken out (for `keep_latest_waiting`). Answers their ids.
   */
  takeAllBut(keep: string | null): string[] {
    const out = [...this.live.keys()].filter((id) => id !== keep);
    for (const id of out) this.live.delete(id);
    return out;
  }

  /**
   * The newest task waiting by creation: the greatest id (a UUID v7 starts with its creation
   * time), not the last to arrive — the tasks of one submission reach their key from several
   * wheel partitions, in any order. null when none waits.
   */
  newest(): string | null {
    let newest: string | null = null;
    for (const id of this.live.keys()) if (newest === null || id > newest) newest = id;
    return newest;
  }

  /** Ids of the waiting tasks (for the admin view), at most `max`. */
  ids(max: number): string[] {
    const out: string[] = [];
    for (const id of this.live.keys()) {
      if (out.length >= max) break;
      out.push(id);
    }
    return out;
  }

  private compact(): void {
    while (this.heap.size > 0) this.heap.pop();
  }
}
