/**
 * Found by the 3-node kill case (issue 28): a task's lease ran out, its wheel fired it again,
 * and the offer reached its key before the permit's return did (they come from different
 * actors, often different nodes). The key counted the task a holder, dropped the offer as a
 * duplicate, then the return freed the permit: the task waited in no memory until the safety
 * net found it, ~15 s later. The key now remembers a holder offered again, for a while, and
 * takes it in when its permit comes back.
 */
import { describe, expect, it, vi } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import { GRANT_GRACE_MS } from '../../src/actors/limit-rules.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';

const KEY = 'k:1';
const entry = (id: string): DueEntry => ({ taskId: id, taskType: 't', priority: 5, dueMs: 1, limits: [KEY] });

async function offerThenReturn(opts: { offered: boolean; readInstead?: boolean; waitMs?: number }): Promise<string[]> {
  const now = Date.now();
  const pushed: string[] = [];
  const system = limitKeySystem(
    {
      holders: async () => [{ taskId: 'expired', version: 1, startedMs: now }],
      waitingTasks: async () => ({ waiting: [], truncated: false }),
      ready: {
        push: async (entries: DueEntry[]) => {
          pushed.push(...entries.map((e) => e.taskId));
          return entries.length;
        },
      },
    },
    1,
  );
  try {
    vi.useFakeTimers({ now, toFake: ['Date'] });
    const ref = system.ref(LIMIT, KEY);
    await ref.ask({ type: 'inspect' }, 1_000);
    if (opts.offered) ref.tell({ type: 'offer', entries: [entry('expired')], fired: true });
    if (opts.readInstead) ref.tell({ type: 'read', entries: [entry('expired')], more: false });
    await ref.ask({ type: 'inspect' }, 1_000);
    expect(pushed).toEqual([]); // a holder: not admitted again while it holds the permit
    if (opts.waitMs) vi.setSystemTime(now + opts.waitMs);
    ref.tell({ type: 'returned', taskIds: ['expired'] });
    await ref.ask({ type: 'inspect' }, 1_000);
    return pushed;
  } finally {
    vi.useRealTimers();
    await system.shutdown();
  }
}

describe('a limit key offered a task it counts a holder', () => {
  it('takes the task in when its permit comes back', async () => {
    expect(await offerThenReturn({ offered: true })).toEqual(['expired']);
  });

  it('forgets it when the permit comes back much later (the safety net offers it again then)', async () => {
    expect(await offerThenReturn({ offered: true, waitMs: GRANT_GRACE_MS + 1_000 })).toEqual([]);
  });

  it('does not take in a task its own read brought while it held it, nor one never offered', async () => {
    expect(await offerThenReturn({ offered: false, readInstead: true })).toEqual([]);
    expect(await offerThenReturn({ offered: false })).toEqual([]);
  });
});
