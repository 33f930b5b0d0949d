/**
 * A task a key counts as a holder that comes back due (its lease ran out where no return
 * reached the key) is checked against the task table, and waits again if it is no longer
 * running — also when it comes in an offer of more entries than the key has holders, where
 * the key looks through its holders for one old enough instead of looking up every entry.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import { GRANT_GRACE_MS } from '../../src/actors/limit-rules.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';

const KEY = 'k:1';
const entry = (id: string): DueEntry => ({ taskId: id, taskType: 't', priority: 5, dueMs: 1, limits: [KEY] });

describe.each([
  ['fewer entries than holders', ['ended']],
  ['more entries than holders', ['ended', 'a', 'b', 'c', 'd']],
])('a limit key offered a holder whose attempt ended, %s', (_name, offered) => {
  it('asks the task table, drops the holder and admits the task again', async () => {
    const now = Date.now();
    const pushed: DueEntry[] = [];
    const asked: string[][] = [];
    const system = limitKeySystem(
      {
        holders: async () => [
          { taskId: 'ended', version: 1, startedMs: now - GRANT_GRACE_MS - 5_000 },
          { taskId: 'young', version: 1, startedMs: now },
          { taskId: 'young-2', version: 1, startedMs: now },
        ],
        waitingTasks: async () => ({ waiting: [], truncated: false }),
        store: {
          stillRunning: async (ids) => {
            asked.push([...ids]);
            return new Set();
          },
        },
        ready: {
          push: async (entries: DueEntry[]) => {
            pushed.push(...entries);
            return entries.length;
          },
        },
      },
      3,
    );
    const ref = system.ref(LIMIT, KEY);
    ref.tell({ type: 'offer', entries: offered.map(entry) });
    const view = await ref.ask({ type: 'inspect' }, 1_000);
    expect(asked).toEqual([['ended']]);
    expect(view.running).toBe(2);
    expect(pushed.map((e) => e.taskId)).toEqual(['ended']);
    await system.shutdown();
  });
});
