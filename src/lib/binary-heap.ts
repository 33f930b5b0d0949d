/**
 * A binary min-heap: O(log n) push and pop, O(1) peek. The actor timers share one; the in-process ready queue keeps
 * one per (task type, priority), so a take of 500 from 200 000 entries costs ~500 · 18
 * comparisons instead of a sort or an O(n) shift.
 */
export class BinaryHeap<T> {
  private readonly items: T[] = [];

  /** @param compare negative when `a` comes out before `b`. */
  constructor(private readonly compare: (a: T, b: T) => number) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    let i = items.length;
    items.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const above = items[parent] as T;
      if (this.compare(item, above) >= 0) break;
      items[i] = above;
      i = parent;
    }
    items[i] = item;
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    this.siftDown(0, last);
    return top;
  }

  /**
   * How many items come out before `item` (compare below 0), without taking any out: a walk
   * from the top that stops at each item not before it (nothing under it is), so it visits
   * the items counted and their children only, O(answer).
   */
  countBefore(item: T): number {
    const items = this.items;
    let count = 0;
    const stack = items.length > 0 ? [0] : [];
    for (let i = stack.pop(); i !== undefined; i = stack.pop()) {
      if (this.compare(items[i] as T, item) >= 0) continue;
      count++;
      const left = 2 * i + 1;
      if (left < items.length) stack.push(left);
      if (left + 1 < items.length) stack.push(left + 1);
    }
    return count;
  }

  /** Keeps only the items `keep` accepts, in O(n): the way to drop lazily cancelled entries. */
  retain(keep: (item: T) => boolean): void {
    const items = this.items;
    let n = 0;
    for (const item of items) if (keep(item)) items[n++] = item;
    items.length = n;
    for (let i = (n >> 1) - 1; i >= 0; i--) this.siftDown(i, items[i] as T);
  }

  /** Puts `item` at `i` or below, moving smaller children up. */
  private siftDown(start: number, item: T): void {
    const items = this.items;
    const n = items.length;
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      let child = left;
      if (right < n && this.compare(items[right] as T, items[left] as T) < 0) child = right;
      const below = items[child] as T;
      if (this.compare(below, item) >= 0) break;
      items[i] = below;
      i = child;
    }
    items[i] = item;
  }

  clear(): void {
    this.items.length = 0;
  }
}
