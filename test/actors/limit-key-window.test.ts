/**
 * A limit key's admission window is fairness between the keys of one family (decision 0051):
 * a key in no family has nothing to share with, and pushes all its offered tasks its
 * concurrency has room for; a family's key pushes at most its window.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import { collectingReady, limitKeySystem } from './limit-key-system.js';

const WINDOW = 10;
const entry = (n: number, key: string): DueEntry => ({
  taskId: `task-${String(n).padStart(3, '0')}`,
  taskType: 't',
  priority: 5,
  dueMs: n,
  limits: [key],
});

/** How many of 200 tasks offered at once a key of `family` (and concurrency 1 000) pushes. */
async function pushedOfOffer(key: string, family: string | null): Promise<number> {
  const { pushed, waitingTasks, ready } = collectingReady();
  const system = limitKeySystem(
    {
      waitingTasks,
      ready,
      resolve: (k) => ({ key: k, declaredAs: k, family, concurrency: 1_000, rate: null, onLimit: 'queue', weight: 1 }),
      admitWindow: WINDOW,
    },
    1_000,
  );
  try {
    system.ref(LIMIT, key).tell({ type: 'offer', entries: Array.from({ length: 200 }, (_, i) => entry(i, key)) });
    await expect.poll(() => pushed.length).toBeGreaterThan(0);
    // Whatever else it would push goes in the same push or the next, at once.
    await new Promise((resolve) => setTimeout(resolve, 50));
    return pushed.length;
  } finally {
    await system.shutdown();
  }
}

describe('a limit key’s admission window', () => {
  it('holds a family’s key to its window', async () => {
    expect(await pushedOfOffer('k:1', 'k:*')).toBe(WINDOW);
  });

  it('does not hold a key in no family: its concurrency is its only bound', async () => {
    expect(await pushedOfOffer('solo', null)).toBe(200);
  });
});
