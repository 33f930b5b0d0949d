/**
 * Found by the nemesis (run D): a node cut off from Redis left the ring, another node
 * activated its limit key at a newer epoch, and when the node came back its own activation —
 * still live, never told — took the key's messages again. Every claim refused its grants (they
 * carried the old epoch: docs/decisions/0023-flow-control.md) and offered the tasks back to
 * it, which granted them again: 385 tasks never ran. A claim that refuses a key's grants for
 * tasks still pending now asks the key to check it owns itself; a stale one stops, and the
 * next message starts an activation that does.
 */
import { describe, expect, it, vi } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';
import { limitKeySystem } from './limit-key-system.js';

const KEY = 'k:1';
const entry = (n: number): DueEntry => ({ taskId: `task-${n}`, taskType: 't', priority: 5, dueMs: n, limits: [KEY] });

describe('a limit key asked to verify its ownership', () => {
  it('stops when another activation took it over, and the next message starts one that owns it', async () => {
    const snapshots = new MemorySnapshotStore();
    const system = limitKeySystem(
      {
        waitingTasks: async () => ({ waiting: [entry(1)], truncated: false }),
        ready: { push: async () => 0 },
      },
      1,
      snapshots,
    );
    try {
      await system.ref(LIMIT, KEY).ask({ type: 'inspect' }, 5_000);
      const first = system.inspect('limit', KEY)?.epoch as number;
      expect(first).toBeGreaterThan(0);

      // Still the owner: checking changes nothing.
      system.ref(LIMIT, KEY).tell({ type: 'verify' });
      await system.ref(LIMIT, KEY).ask({ type: 'inspect' }, 5_000);
      expect(system.inspect('limit', KEY)?.epoch).toBe(first);

      // Another node's activation takes the key over (its ownership statement bumps the epoch).
      await snapshots.acquire('limit', KEY, 'n2', Date.now());
      await new Promise((resolve) => setTimeout(resolve, 1_100)); // past the check's once-a-second bound
      system.ref(LIMIT, KEY).tell({ type: 'verify' });
      await vi.waitFor(() => expect(system.inspect('limit', KEY)).toBeNull(), { timeout: 5_000, interval: 20 });

      await system.ref(LIMIT, KEY).ask({ type: 'inspect' }, 5_000);
      expect(system.inspect('limit', KEY)?.epoch).toBe(first + 2);
    } finally {
      await system.shutdown();
    }
  });
});
