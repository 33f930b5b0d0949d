import { BinaryHeap } from '../lib/binary-heap.js';
import { clampDelay, type Cancel, type Clock } from './clock.js';

/**
 * The actors' timers, many on one clock timer: a min-heap of due times and a single
 * `clock.setTimer` for the earliest. 100 000 cron schedules or leases each holding a timer
 * cost one heap entry apiece (~100 bytes) instead of a Node `Timeout` with its closures
 * (~600 bytes, measured per actor). Timers due at the same instant run in the order they
 * were set. Cancelling marks an entry; marked entries are dropped when they come up, or all
 * at once when they outnumber the live ones.
 */
export interface TimerTarget<P> {
  onTimer(payload: P, entry: TimerEntry<P>): void;
}

export interface TimerEntry<P> {
  readonly atMs: number;
  readonly seq: number;
  readonly target: TimerTarget<P>;
  readonly payload: P;
  cancelled: boolean;
}

export class TimerQueue<P> {
  private readonly heap = new BinaryHeap<TimerEntry<P>>((a, b) => a.atMs - b.atMs || a.seq - b.seq);
  private seq = 0;
  private cancelledCount = 0;
  private armedAtMs = Infinity;
  private disarm: Cancel | null = null;

  constructor(private readonly clock: Clock) {}

  /** Timers set and not yet run or cancelled. */
  get size(): number {
    return this.heap.size - this.cancelledCount;
  }

  /** Calls `target.onTimer(payload)` after `delayMs` (clamped as `Clock.setTimer` does). */
  add(delayMs: number, target: TimerTarget<P>, payload: P): TimerEntry<P> {
    const entry: TimerEntry<P> = {
      atMs: this.clock.now() + clampDelay(delayMs),
      seq: this.seq++,
      target,
      payload,
      cancelled: false,
    };
    this.heap.push(entry);
    if (entry.atMs < this.armedAtMs) this.arm(entry.atMs);
    return entry;
  }

  cancel(entry: TimerEntry<P>): void {
    if (entry.cancelled) return;
    entry.cancelled = true;
    this.cancelledCount++;
    if (this.cancelledCount > 1_000 && this.cancelledCount > this.heap.size / 2) {
      this.heap.retain((e) => !e.cancelled);
      this.cancelledCount = 0;
    }
    // Drop cancelled entries from the top. With none left, the clock timer goes too (a node
    // with no timers leaves none on its clock); otherwise it stays armed for the earlier
    // time and, when it fires, finds nothing due and re-arms. Re-arming here instead meant
    // a clearTimeout + setTimeout per released lease (30 000 a second in W1).
    for (let top = this.heap.peek(); top?.cancelled; top = this.heap.peek()) {
      this.heap.pop();
      this.cancelledCount--;
    }
    if (this.heap.size === 0) {
      this.disarm?.();
      this.disarm = null;
      this.armedAtMs = Infinity;
    }
  }

  private arm(atMs: number): void {
    this.disarm?.();
    this.armedAtMs = atMs;
    this.disarm = this.clock.setTimer(atMs - this.clock.now(), () => this.run());
  }

  private run(): void {
    this.disarm = null;
    this.armedAtMs = Infinity;
    const now = this.clock.now();
    try {
      for (let next = this.heap.peek(); next !== undefined && next.atMs <= now; next = this.heap.peek()) {
        this.heap.pop();
        if (next.cancelled) {
          this.cancelledCount--;
          continue;
        }
        // Marked before the call, so that cancelling from inside the callback is a no-op.
        next.cancelled = true;
        next.target.onTimer(next.payload, next);
      }
    } finally {
      const next = this.heap.peek();
      if (next !== undefined && next.atMs < this.armedAtMs) this.arm(next.atMs);
    }
  }
}
