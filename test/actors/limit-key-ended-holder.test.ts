/**
 * A task a key counts as a holder that comes back due (its lease ran out where no return
 * reached the key) is checked against the task table, and waits again if it is no longer
 * running — also when it comes in an offer of more entries than the key has holders, where
 * the key looks through its holders for one old enough instead of looking up every entry.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import { GRANT_GRACE_MS, dropEndedHolders, grantOrRefuse } from '../../src/actors/limit-rules.js';
import { freshState, type LimitKeyDeps } from '../../src/actors/limit-state.js';
import { NO_EVENTS } from '../../src/lib/events.js';
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

describe('the floor of a key’s holders', () => {
  const limit = {
    key: KEY,
    declaredAs: KEY,
    family: null,
    concurrency: null,
    rate: null,
    onLimit: 'queue' as const,
    weight: 1,
  };
  const deps = (asked: string[][]): LimitKeyDeps =>
    ({
      events: NO_EVENTS,
      cancel: () => undefined,
      store: {
        stillRunning: async (ids: readonly string[]) => {
          asked.push([...ids]);
          return new Set<string>();
        },
      },
    }) as unknown as LimitKeyDeps;

  it('follows grants: a holder granted long ago is checked, among younger ones granted since', async () => {
    const now = Date.now();
    const asked: string[][] = [];
    const state = freshState(limit, [], now);
    grantOrRefuse(state, [entry('old')], now - GRANT_GRACE_MS - 1_000, deps(asked));
    grantOrRefuse(state, [entry('a'), entry('b')], now, deps(asked));
    await dropEndedHolders(state, [entry('a'), entry('old')], now, deps(asked));
    expect(asked).toEqual([['old']]);
    expect([...state.holders.keys()]).toEqual(['a', 'b']);
  });

  it('rises to the oldest holder left once the oldest has gone', async () => {
    const now = Date.now();
    const asked: string[][] = [];
    const state = freshState(limit, [], now);
    grantOrRefuse(state, [entry('old')], now - GRANT_GRACE_MS - 1_000, deps(asked));
    grantOrRefuse(state, [entry('a')], now, deps(asked));
    state.holders.delete('old'); // its permit came back
    await dropEndedHolders(state, [entry('a')], now, deps(asked));
    expect(state.holdersFloorMs).toBe(now);
    expect(asked).toEqual([]);
  });
});
