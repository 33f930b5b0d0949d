/**
 * Found by the 3-node flow-control run (issue 28): a key's node paused past the failure
 * timeout; its new activation admitted a task, a claim on a node that had not yet seen the ring
 * move asked the stale activation, which refused and parked it, and handed it on when it
 * ended. The owner still counted the task admitted (in a ready queue), so under a limit of 1
 * nothing ran for 30 s (ADMITTED_TTL_MS). A handed-on task is in no ready queue: the owner
 * takes it back and admits it again at once.
 */
import { describe, expect, it, vi } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';

const KEY = 'k:1';
const entry = (n: number): DueEntry => ({ taskId: `task-${n}`, taskType: 't', priority: 5, dueMs: n, limits: [KEY] });

describe('a limit key offered a task it counts admitted', () => {
  const run = async (handed: boolean): Promise<string[]> => {
    const pushed: string[] = [];
    const system = limitKeySystem(
      {
        waitingTasks: async () => ({ waiting: [entry(1), entry(2)], truncated: false }),
        ready: {
          push: async (entries: DueEntry[]) => {
            pushed.push(...entries.map((e) => e.taskId));
            return 0;
          },
        },
      },
      1,
    );
    try {
      const key = system.ref(LIMIT, KEY);
      await key.ask({ type: 'inspect' }, 5_000);
      // Concurrency 1: the first task admitted, the second waits behind it.
      await vi.waitFor(() => expect(pushed).toEqual(['task-1']), { timeout: 5_000, interval: 20 });
      key.tell({ type: 'offer', entries: [entry(1)], ...(handed ? { handed: true } : {}) });
      await key.ask({ type: 'inspect' }, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      return pushed;
    } finally {
      await system.shutdown();
    }
  };

  it('admits it again when an ending activation handed it on', async () => {
    expect(await run(true)).toEqual(['task-1', 'task-1']);
  });

  it('leaves it admitted when the offer is a plain duplicate (a wheel or the safety net again)', async () => {
    expect(await run(false)).toEqual(['task-1']);
  });
});
