/**
 * Found by the nemesis: a limit key whose push of admitted tasks to the ready queue failed (its
 * node cut off from Redis for 11 s) put them back to wait for "the next message" — and a key
 * with nothing running gets none: three keys admitted nothing for the last four minutes of the
 * run, 391 tasks left pending. A failed push is retried after a pause, message or not.
 */
import { describe, expect, it, vi } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';

const KEY = 'k:1';
const entry = (n: number): DueEntry => ({ taskId: `task-${n}`, taskType: 't', priority: 5, dueMs: n, limits: [KEY] });

describe('a limit key whose push to the ready queue failed', () => {
  it('pushes its admitted tasks again without waiting for another message', async () => {
    const pushed: string[] = [];
    let failures = 1;
    const system = limitKeySystem(
      {
        waitingTasks: async () => ({ waiting: [entry(1), entry(2)], truncated: false }),
        ready: {
          push: async (entries: DueEntry[]) => {
            if (failures-- > 0) throw new Error('Redis is unavailable (ready.push): Command timed out');
            pushed.push(...entries.map((e) => e.taskId));
            return 0;
          },
        },
      },
      2,
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
