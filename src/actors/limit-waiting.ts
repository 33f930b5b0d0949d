import { BinaryHeap } from '../lib/binary-heap.js';
import type { DueEntry } from '../domain/model.js';

interface Waiting {
  /** The entry's priority and due time, copied: the comparison reads them without a hop. */
  priority: number;
  dueMs: number;
  /** Arrival order, the last tie-break: first come, first out within a priority and due time. */
  seq: number;
  entry: DueEntry;
}

/** Priority, then due time, then arrival; one function for every key (not a closure per key). */
function moreUrgent(a: Waiting, b: Waiting): number {
  return a.priority - b.priority || a.dueMs - b.dueMs || a.seq - b.seq;
}

/** Taken entries at the head of the in-order run after which it is cut down (and half of it, at least). */
const RUN_SLACK = 4_096;

/**
 * The tasks of one limit key that wait for room: most urgent first (priority, then due time,
 * then arrival), each task once. Removal is lazy: a task taken out of the middle (granted
 * from the ready queue, cancelled by a strategy) is only forgotten by id, and skipped when
 * it reaches the top.
 *
 * Tasks mostly arrive in order — wheels fire by due time, and a flood's tasks share a
 * priority — so those that come no more urgent than the last arrival queue up in a plain
 * run (O(1) in and out) and only the others go into the heap (O(log n)); a take merges the
 * two heads. In W1L (50 000 tasks through a key that never binds, its window of 256 holding
 * the rest here) the heap alone was the key's largest cost.
 */
export class WaitingTasks {
  private readonly heap = new BinaryHeap<Waiting>(moreUrgent);
  /** Arrivals each no more urgent than the one before, from `runHead` on. */
  private run: Waiting[] = [];
  private runHead = 0;
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
    const waiting: Waiting = { priority: entry.priority, dueMs: entry.dueMs, seq, entry };
    const last = this.run.length > this.runHead ? this.run[this.run.length - 1] : undefined;
    if (last === undefined || moreUrgent(last, waiting) <= 0) this.run.push(waiting);
    else this.heap.push(waiting);
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
      const top = this.next();
      if (top === undefined) break;
      if (this.live.get(top.entry.taskId) !== top.seq) continue;
      this.live.delete(top.entry.taskId);
      out.push(top.entry);
    }
    if (this.live.size === 0) this.compact();
    return out;
  }

  /** The most urgent of the run's head and the heap's top, taken out. */
  private next(): Waiting | undefined {
    const first = this.runHead < this.run.length ? this.run[this.runHead] : undefined;
    const top = this.heap.peek();
    if (first === undefined || (top !== undefined && moreUrgent(top, first) < 0)) return this.heap.pop();
    this.runHead++;
    if (this.runHead === this.run.length) {
      this.run = [];
      this.runHead = 0;
    } else if (this.runHead > RUN_SLACK && this.runHead * 2 > this.run.length) {
      this.run = this.run.slice(this.runHead);
      this.runHead = 0;
    }
    return first;
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
    this.run = [];
    this.runHead = 0;
  }
}
