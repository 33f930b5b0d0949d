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

/** Priority, then due time: a key's order of urgency (arrival breaks ties where it is known). */
export function compareUrgency(
  a: Pick<DueEntry, 'priority' | 'dueMs'>,
  b: Pick<DueEntry, 'priority' | 'dueMs'>,
): number {
  return a.priority - b.priority || a.dueMs - b.dueMs;
}

/** Priority, then due time, then arrival; one function for every key (not a closure per key). */
function moreUrgent(a: Waiting, b: Waiting): number {
  return a.priority - b.priority || a.dueMs - b.dueMs || a.seq - b.seq;
}

/** `moreUrgent` of a heap's entry and a run's (an entry and its arrival number). */
function moreUrgentThanRun(a: Waiting, entry: DueEntry, seq: number): number {
  return a.priority - entry.priority || a.dueMs - entry.dueMs || a.seq - seq;
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
 * the rest here) the heap alone was the key's largest cost. The run holds the entries
 * themselves, their arrival numbers beside them: a flood's 200 000 make no object more.
 */
export class WaitingTasks {
  private readonly heap = new BinaryHeap<Waiting>(moreUrgent);
  /** Arrivals each no more urgent than the one before, from `runHead` on, and their arrival numbers. */
  private run: DueEntry[] = [];
  private runSeq: number[] = [];
  private runHead = 0;
  /** The live ones, by task id, with their arrival number. */
  private readonly live = new Map<string, number>();
  private seq = 0;
  /** Whether the head `head` last found is the heap's top (else the run's). */
  private fromHeap = false;

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
    const last = this.run.length > this.runHead ? this.run[this.run.length - 1] : undefined;
    // Arrival numbers only grow: no more urgent than the last is no earlier by priority, then due time.
    if (
      last === undefined ||
      last.priority < entry.priority ||
      (last.priority === entry.priority && last.dueMs <= entry.dueMs)
    ) {
      this.run.push(entry);
      this.runSeq.push(seq);
    } else this.heap.push({ priority: entry.priority, dueMs: entry.dueMs, seq, entry });
    return true;
  }

  /** Forgets a task (it started, or was cancelled); false when it did not wait. */
  delete(taskId: string): boolean {
    return this.live.delete(taskId);
  }

  /**
   * Takes out up to `max` of the most urgent; with `before`, only those strictly more urgent
   * than it by priority and due time (the head of the key's inbox, in a merge of the two).
   */
  take(max: number, before?: DueEntry): DueEntry[] {
    const out: DueEntry[] = [];
    while (out.length < max) {
      const entry = this.head();
      if (entry === undefined) break;
      if (before !== undefined && compareUrgency(entry, before) >= 0) break;
      this.removeHead();
      this.live.delete(entry.taskId);
      out.push(entry);
    }
    if (this.live.size === 0) this.compact();
    return out;
  }

  /** The most urgent live task, not taken out. */
  peek(): DueEntry | undefined {
    return this.head();
  }

  /** The most urgent live task; drops the removed ones found at the top on the way. */
  private head(): DueEntry | undefined {
    for (;;) {
      let entry: DueEntry;
      let seq: number;
      const top = this.heap.peek();
      if (this.runHead < this.run.length) {
        entry = this.run[this.runHead] as DueEntry;
        seq = this.runSeq[this.runHead] as number;
        this.fromHeap = top !== undefined && moreUrgentThanRun(top, entry, seq) < 0;
        if (this.fromHeap) {
          entry = (top as Waiting).entry;
          seq = (top as Waiting).seq;
        }
      } else if (top !== undefined) {
        this.fromHeap = true;
        entry = top.entry;
        seq = top.seq;
      } else return undefined;
      if (this.live.get(entry.taskId) === seq) return entry;
      this.removeHead();
    }
  }

  /** Removes what `head` last found. */
  private removeHead(): void {
    if (this.fromHeap) this.heap.pop();
    else this.advanceRun();
  }

  /** Moves past the run's head; drops the taken head of a long run now and then. */
  private advanceRun(): void {
    this.runHead++;
    if (this.runHead === this.run.length) {
      this.run = [];
      this.runSeq = [];
      this.runHead = 0;
    } else if (this.runHead > RUN_SLACK && this.runHead * 2 > this.run.length) {
      this.run = this.run.slice(this.runHead);
      this.runSeq = this.runSeq.slice(this.runHead);
      this.runHead = 0;
    }
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
    this.runSeq = [];
    this.runHead = 0;
  }
}
