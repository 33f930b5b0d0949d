import type { DueEntry } from '../domain/model.js';
import { NOTHING_PUSHED, type ReadyQueue } from '../store/fast-index-types.js';
import type { LimitGate } from './limit-gate.js';

/**
 * The ready queue as the wheels see it: due entries that no limit gates go in as before;
 * gated ones go to their home key's actor, which admits them a window at a time
 * (docs/decisions/0023-flow-control.md). The fenced push is made with the free entries
 * only; when there are none, nothing is pushed and the answer is `NOTHING_PUSHED`, which the
 * wheel does not take for a lost store (a stamp of 0 had it rebuild and fire its gated tasks
 * again, every few hundred ms). A stale owner's offer is harmless: the key dedups, and a
 * claim takes only a task still pending at the entry's due time.
 *
 * `held`: a gated entry counts as held (its key keeps it), and asking is what hands it back
 * to the key: the safety net asks about the overdue pending tasks of a partition, and each
 * gated one is offered to its home key again, which knows it already or takes it back (a
 * crash between a wheel and a key, a key that passivated with tasks waiting). Nothing is
 * pushed or counted as recovered for it.
 */
export function gatedReadyQueue(inner: ReadyQueue, gate: Pick<LimitGate, 'split' | 'offer'>): ReadyQueue {
  return {
    async push(entries, fence) {
      const { free, gated } = gate.split(entries);
      if (gated.length === 0) return inner.push(entries, fence);
      if (free.length === 0) {
        gate.offer(gated);
        return NOTHING_PUSHED;
      }
      const stamp = await inner.push(free, fence);
      gate.offer(gated);
      return stamp;
    },
    async held(entries: readonly DueEntry[]) {
      const { free, gated } = gate.split(entries);
      const held = free.length > 0 ? await inner.held(free) : new Set<string>();
      if (gated.length > 0) {
        gate.offer(gated);
        for (const entry of gated) held.add(entry.taskId);
      }
      return held;
    },
    take: (taskTypes, max, nowMs) => inner.take(taskTypes, max, nowMs),
    ack: (entries) => inner.ack(entries),
    requeueStale: (olderThanMs) => inner.requeueStale(olderThanMs),
    depths: (nowMs) => inner.depths(nowMs),
    ahead: (entry) => inner.ahead(entry),
    backlog: () => inner.backlog(),
    onPush: (listener) => inner.onPush(listener),
    close: () => inner.close(),
  };
}
