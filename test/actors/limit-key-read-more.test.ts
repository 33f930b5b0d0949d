/**
 * A limit key's activation reads only the most urgent of its waiting tasks; the rest of those
 * in the task table (parked in a memory that is gone) are read a batch at a time as the key's
 * waiting tasks run low, so none is left for the safety net.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT, type LimitGrant } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';
import type { LiveTasks } from '../../src/store/limit-types.js';

const KEY = 'k:1';
const WINDOW = 4;
/** What one read answers at most: three windows. */
const READ = 12;
const entry = (n: number): DueEntry => ({
  taskId: `task-${String(n).padStart(2, '0')}`,
  taskType: 't',
  priority: 5,
  dueMs: n,
  limits: [KEY],
});

/**
 * Runs a key of window `window` over 30 due pending tasks of the task table that no wheel
 * offers (their activation's memory is gone), reads answering the most urgent `read` and as
 * many more as the key asks beyond: claims take what it admitted, round by round. Answers the
 * tasks never granted.
 */
async function drain(window: number, read: number): Promise<string[]> {
  // A task granted has run and left the table.
  const pending = new Map(Array.from({ length: 30 }, (_, i) => [entry(i).taskId, entry(i)]));
  const admitted: DueEntry[] = [];
  const waitingTasks = async (_key: string, _nowMs: number, beyond = 0): Promise<Omit<LiveTasks, 'running'>> => {
    const waiting = [...pending.values()].slice(0, read + beyond);
    return { waiting, truncated: pending.size > read + beyond };
  };
  const system = limitKeySystem(
    {
      waitingTasks,
      ready: {
        push: async (entries: DueEntry[]) => {
          admitted.push(...entries);
          return 0;
        },
      },
      admitWindow: window,
      readMoreBelow: window,
    },
    100,
  );
  const key = system.ref(LIMIT, KEY);
  try {
    for (let round = 0; round < 1_000 && pending.size > 0; round++) {
      const entries = admitted.splice(0);
      const grant: LimitGrant = await key.ask({ type: 'grant', entries }, 5_000);
      for (const id of grant.granted) pending.delete(id);
      key.tell({ type: 'returned', taskIds: grant.granted });
    }
    return [...pending.keys()];
  } finally {
    await system.shutdown();
  }
}

describe('limit key: reading its waiting tasks in batches', () => {
  it('reads the next batch as its waiting tasks run low, until every one has run', async () => {
    expect(await drain(WINDOW, READ)).toEqual([]);
  });

  it('finds the rest when its window is as large as a read (the read asks beyond what it holds)', async () => {
    // The key admits a whole read at once; its next read, of the same size, would bring only
    // the tasks it admitted and take that for "none left".
    expect(await drain(READ, READ)).toEqual([]);
  });
});
