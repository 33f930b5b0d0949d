import type { DueEntry } from '../domain/model.js';
import { NOTHING_PUSHED, type ReadyQueue } from '../store/fast-index-types.js';
import type { LimitGate } from './limit-gate.js';

/**
 * The ready queue as the wheels see it: due entries that no limit gates go in as before;
 * gated ones go to their home key's actor, which admits them a window at a time
 * (docs/decisions/0023-flow-control.md), unless the key said it is open: then they go in
 * with the free ones, in the same fenced push (`LimitGate.route`, "Fast admission"). When
 * nothing is to be pushed, nothing is and the answer is `NOTHING_PUSHED`, which the
 * wheel does not take for a lost store (a stamp of 0 had it rebuild and fire its gated tasks
 * again, every few hundred ms). A stale owner's offer is harmless: the key dedups, and a
 * claim takes only a task still pending at the entry's due time.
 *
 * `held`: an entry in the ready queue (or in flight) is held, gated or not; a gated entry
 * that is not counts as held too (its key keeps it), and asking is what hands it back
 * to the key: the safety net asks about the overdue pending tasks of a partition, and each
 * gated one is offered to its home key again, which knows it already or takes it back (a
 * crash between a wheel and a key, a key that passivated with tasks waiting). Nothing is
 * pushed or counted as recovered for it. A task the net offered is not offered again for
 * {@link REOFFER_AFTER_MS}: a key with 200 000 tasks waiting is the oldest overdue page of
 * every partition at every pass, and offering it all again every few seconds only kept its
 * key busy deduplicating.
 */
/** How long a task the safety net offered to its key is not offered again. */
export const REOFFER_AFTER_MS = 30_000;
/** Most tasks whose last offer by the net is remembered. */
const REOFFERS_REMEMBERED = 100_000;

export function gatedReadyQueue(
  inner: ReadyQueue,
  gate: Pick<LimitGate, 'split' | 'route' | 'offer' | 'offerByHome' | 'notPushed'>,
  clock: { now(): number } = Date,
  /**
   * Registers what forgets the net's offers: an offer made before the ring changed may have
   * been told to a node that has left (lost with it), so after a change every overdue task is
   * offered again at the next pass rather than {@link REOFFER_AFTER_MS} later.
   */
  onRingChange?: (forget: () => void) => void,
): ReadyQueue {
  /** When the net last offered each task, oldest first (bounded). */
  const offeredAt = new Map<string, number>();
  onRingChange?.(() => offeredAt.clear());
  const stale = (entry: DueEntry, now: number): boolean => {
    const at = offeredAt.get(entry.taskId);
    if (at !== undefined && now - at < REOFFER_AFTER_MS) return false;
    offeredAt.delete(entry.taskId);
    offeredAt.set(entry.taskId, now);
    return true;
  };
  return {
    async push(entries, fence) {
      const { free, straight, offered } = gate.route(entries);
      // Nothing gated or all straight: `entries` as they came (an empty push still runs the fence).
      const pushed = offered.size === 0 ? entries : [...free, ...straight];
      if (pushed.length === 0) {
        gate.offerByHome(offered, true);
        return NOTHING_PUSHED;
      }
      let stamp;
      try {
        stamp = await inner.push(pushed, fence);
      } catch (error) {
        gate.notPushed(straight);
        throw error;
      }
      if (offered.size > 0) gate.offerByHome(offered, true);
      return stamp;
    },
    async held(entries: readonly DueEntry[]) {
      // Gated entries too: one its key admitted, or that went straight, is in the queue.
      const held = await inner.held(entries);
      const { gated } = gate.split(entries.filter((entry) => !held.has(entry.taskId)));
      if (gated.length > 0) {
        const now = clock.now();
        gate.offer(gated.filter((entry) => stale(entry, now)));
        for (const entry of gated) held.add(entry.taskId);
        for (const id of offeredAt.keys()) {
          if (offeredAt.size <= REOFFERS_REMEMBERED) break;
          offeredAt.delete(id);
        }
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
