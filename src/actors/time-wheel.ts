import type { DueEntry } from '../domain/model.js';

/**
 * The near wheel of a partition: tasks due in the next minute or two, in memory, in slots
 * of `slotMs` (10 ms by default). Slots are kept sparse — a map from slot number to its
 * entries plus a min-heap of the non-empty slot numbers — so a quiet partition costs
 * nothing and a 300 K-task midnight slot is one array. Adding is O(log slots); taking the
 * due entries is O(entries in the due slots), never O(all tasks).
 *
 * Nothing is ever taken early: an entry leaves the wheel only once `nowMs >= dueMs`, even
 * when its slot is the one the clock is passing through. An entry added for a slot that
 * has already passed is due at the next take.
 */
export class TimeWheel {
  private readonly slots = new Map<number, DueEntry[]>();
  private readonly heap: number[] = [];
  private count = 0;

  constructor(readonly slotMs: number) {
    if (!(slotMs > 0)) throw new RangeError('slotMs must be positive');
  }

  /** Entries held. */
  get size(): number {
    return this.count;
  }

  /**
   * How full the wheel is, in counts only: the slots holding entries, the entries, and the
   * first `maxSlots` occupied slots by time with their start and count. For an operator.
   */
  occupancy(maxSlots: number): { slots: number; entries: number; first: { slotStartMs: number; entries: number }[] } {
    const first = [...this.slots.keys()]
      .sort((a, b) => a - b)
      .slice(0, Math.max(0, maxSlots))
      .map((slot) => ({ slotStartMs: slot * this.slotMs, entries: this.slots.get(slot)?.length ?? 0 }));
    return { slots: this.slots.size, entries: this.count, first };
  }

  add(entry: DueEntry): void {
    const slot = Math.floor(entry.dueMs / this.slotMs);
    const entries = this.slots.get(slot);
    if (entries) {
      entries.push(entry);
    } else {
      this.slots.set(slot, [entry]);
      heapPush(this.heap, slot);
    }
    this.count++;
  }

  addAll(entries: Iterable<DueEntry>): void {
    for (const entry of entries) this.add(entry);
  }

  /** Removes and returns every entry due at or before `nowMs`. */
  takeDue(nowMs: number): DueEntry[] {
    const due: DueEntry[] = [];
    for (;;) {
      const slot = this.heap[0];
      if (slot === undefined || slot * this.slotMs > nowMs) break;
      const entries = this.slots.get(slot) ?? [];
      if ((slot + 1) * this.slotMs - 1 <= nowMs) {
        // The whole slot is behind the clock.
        heapPop(this.heap);
        this.slots.delete(slot);
        for (const e of entries) due.push(e);
        this.count -= entries.length;
        continue;
      }
      // The clock is inside this slot: take only what is due, keep the rest.
      const keep: DueEntry[] = [];
      for (const e of entries) (e.dueMs <= nowMs ? due : keep).push(e);
      this.count -= entries.length - keep.length;
      if (keep.length === 0) {
        heapPop(this.heap);
        this.slots.delete(slot);
      } else {
        this.slots.set(slot, keep);
      }
      break;
    }
    return due;
  }

  /** The earliest due time held, or null when empty. */
  nextDueMs(): number | null {
    const slot = this.heap[0];
    if (slot === undefined) return null;
    let min = Infinity;
    for (const e of this.slots.get(slot) ?? []) if (e.dueMs < min) min = e.dueMs;
    return min;
  }

  /** Drops everything (before a full rebuild). */
  clear(): void {
    this.slots.clear();
    this.heap.length = 0;
    this.count = 0;
  }
}

function heapPush(heap: number[], value: number): void {
  heap.push(value);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = heap[parent] as number;
    if (p <= value) break;
    heap[i] = p;
    i = parent;
  }
  heap[i] = value;
}

function heapPop(heap: number[]): number | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length === 0 || last === undefined) return top;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    if (left >= heap.length) break;
    const right = left + 1;
    const child = right < heap.length && (heap[right] as number) < (heap[left] as number) ? right : left;
    if ((heap[child] as number) >= last) break;
    heap[i] = heap[child] as number;
    i = child;
  }
  heap[i] = last;
  return top;
}
