/**
 * Found by the nemesis: a limit key whose push of admitted tasks to the ready queue failed (its
 * node cut off from Redis for 11 s) put them back to wait for "the next message" — and a key
 * with nothing running gets none: three keys admitted nothing for the last four minutes of the
 * run, 391 tasks left pending. A failed push is retried after a pause, message or not.
 */
import { describe, expect, it, vi } from 'vitest';
import { LIMIT, limitKeyBehavior } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { NO_EVENTS } from '../../src/lib/events.js';
import { systemClock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';

const KEY = 'k:1';
const entry = (n: number): DueEntry => ({ taskId: `task-${n}`, taskType: 't', priority: 5, dueMs: n, limits: [KEY] });

describe('a limit key whose push to the ready queue failed', () => {
  it('pushes its admitted tasks again without waiting for another message', async () => {
    const pushed: string[] = [];
    let failures = 1;
    const system = new ActorSystem({
      nodeId: 'n1',
      clock: systemClock,
      snapshots: new MemorySnapshotStore(),
      placement: new LocalPlacement('n1'),
      onError: () => undefined,
    });
    system.register(
      limitKeyBehavior({
        store: { stillRunning: async () => new Set() },
        liveTasks: async () => ({ running: [], waiting: [entry(1), entry(2)], truncated: false }),
        resolve: (key) => ({ key, declaredAs: 'k:*', concurrency: 2, rate: null, onLimit: 'queue', weight: 1 }),
        reload: async () => undefined,
        handOn: () => undefined,
        ready: {
          push: async (entries: DueEntry[]) => {
            if (failures-- > 0) throw new Error('Redis is unavailable (ready.push): Command timed out');
            pushed.push(...entries.map((e) => e.taskId));
            return 0;
          },
        },
        cancel: () => undefined,
        events: NO_EVENTS,
        admitWindow: 100,
        readMoreBelow: 100,
        idlePassivationMs: 60_000,
        reconcileMs: 60_000,
      }),
    );
    try {
      // One message activates the key: it reads its two waiting tasks, admits them, and the
      // push fails. Nothing else is sent to it.
      await system.ref(LIMIT, KEY).ask({ type: 'inspect' }, 5_000);
      await vi.waitFor(() => expect(pushed.sort()).toEqual(['task-1', 'task-2']), { timeout: 10_000, interval: 50 });
    } finally {
      await system.shutdown();
    }
  });
});
