import { limitKeyBehavior, type LimitKeyDeps } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { NO_EVENTS } from '../../src/lib/events.js';
import { systemClock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';

/**
 * One node's actor system running limit keys of the family `k:*` at `concurrency`, on what the
 * test gives (the key's task reads and its ready queue) and nothing else behind them.
 */
export function limitKeySystem(
  deps: Pick<LimitKeyDeps, 'waitingTasks' | 'ready'> & Partial<LimitKeyDeps>,
  concurrency: number,
  snapshots = new MemorySnapshotStore(),
): ActorSystem {
  const system = new ActorSystem({
    nodeId: 'n1',
    clock: systemClock,
    snapshots,
    placement: new LocalPlacement('n1'),
    onError: () => undefined,
  });
  system.register(
    limitKeyBehavior({
      store: { stillRunning: async () => new Set() },
      resolve: (key) => ({
        key,
        declaredAs: 'k:*',
        family: 'k:*',
        concurrency,
        rate: null,
        onLimit: 'queue',
        weight: 1,
      }),
      reload: async () => undefined,
      handOn: () => undefined,
      cancel: () => undefined,
      events: NO_EVENTS,
      admitWindow: 100,
      readMoreBelow: 100,
      idlePassivationMs: 60_000,
      reconcileMs: 60_000,
      holders: async () => [],
      ...deps,
    }),
  );
  return system;
}

/** A ready queue that keeps what a key pushed, and no waiting tasks in the table. */
export function collectingReady(): Pick<LimitKeyDeps, 'waitingTasks' | 'ready'> & { pushed: DueEntry[] } {
  const pushed: DueEntry[] = [];
  return {
    pushed,
    waitingTasks: async () => ({ waiting: [], truncated: false }),
    ready: {
      push: async (entries: DueEntry[]) => {
        pushed.push(...entries);
        return entries.length;
      },
    },
  };
}
