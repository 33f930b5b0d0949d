/**
 * A limit key's activation reads its holders alone. Its waiting tasks in the task table (parked
 * in the memory of an activation that is gone) it reads after the message that activated it,
 * and only while few wait in its memory: a flood's key offered its whole flood at T does not
 * go through every one of the flood's rows then (W6: 550 ms of Postgres at T, shared with the
 * first tasks of the keys activating beside it), but once the flood has drained.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { OnLimit } from '../../src/domain/limits.js';
import type { LiveTasks } from '../../src/store/limit-types.js';
import { limitKeySystem } from './limit-key-system.js';

const nextTick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

const KEY = 'k:1';
const READ_MORE_BELOW = 100;
const FLOOD = 3_000;
const entry = (n: number): DueEntry => ({
  taskId: `task-${String(n).padStart(6, '0')}`,
  taskType: 't',
  priority: 5,
  dueMs: n,
  limits: [KEY],
});

/** A key over a task table holding `parked` waiting tasks and `running` holders; its reads counted. */
function keyOver(parked: DueEntry[], opts: { concurrency: number; onLimit?: OnLimit; running?: string[] }) {
  const pushed: DueEntry[] = [];
  const cancelled: string[] = [];
  const reads = { waiting: 0 };
  const system = limitKeySystem(
    {
      waitingTasks: async (): Promise<Omit<LiveTasks, 'running'>> => {
        reads.waiting++;
        return { waiting: parked, truncated: false };
      },
      holders: async () => (opts.running ?? []).map((taskId) => ({ taskId, version: 1, startedMs: 0 })),
      resolve: (key) => ({
        key,
        declaredAs: 'k:*',
        family: 'k:*',
        concurrency: opts.concurrency,
        rate: null,
        onLimit: opts.onLimit ?? 'queue',
        weight: 1,
      }),
      cancel: (taskIds) => cancelled.push(...taskIds),
      ready: {
        push: async (entries: DueEntry[]) => {
          pushed.push(...entries);
          return entries.length;
        },
      },
      readMoreBelow: READ_MORE_BELOW,
      admitWindow: 10,
    },
    opts.concurrency,
  );
  return { system, pushed, cancelled, reads, ref: system.ref(LIMIT, KEY) };
}

describe('a limit key activated', () => {
  it('by a flood reads no waiting tasks until fewer than its threshold wait in its memory', async () => {
    const parked = [entry(FLOOD + 1)]; // one task of a memory that is gone
    const { system, ref, pushed, reads } = keyOver(parked, { concurrency: 10 });
    ref.tell({ type: 'offer', entries: Array.from({ length: FLOOD }, (_, i) => entry(i)) });
    const seen = new Set<string>();
    let readWhileFlooded = -1;
    for (let round = 0; seen.size < FLOOD + 1 && round < FLOOD; round++) {
      const view = await ref.ask({ type: 'inspect' }, 1_000);
      if (view.waiting >= READ_MORE_BELOW * 2) readWhileFlooded = reads.waiting;
      const admitted = pushed.splice(0);
      if (admitted.length === 0) {
        await nextTick(); // the next slice of the offer comes by a timer
        continue;
      }
      const answer = await ref.ask({ type: 'grant', entries: admitted }, 1_000);
      for (const id of answer.granted) seen.add(id);
      ref.tell({ type: 'returned', taskIds: answer.granted });
    }
    expect(readWhileFlooded).toBe(0);
    // Read once the flood ran low, the parked task ran too.
    expect(reads.waiting).toBeGreaterThan(0);
    expect(seen.has(parked[0]!.taskId)).toBe(true);
    expect(seen.size).toBe(FLOOD + 1);
    await system.shutdown();
  });

  it('by a single task reads its parked tasks right after, and admits the most urgent first', async () => {
    const parked = [entry(1), entry(2)];
    const { system, ref, pushed, reads } = keyOver(parked, { concurrency: 1 });
    ref.tell({ type: 'offer', entries: [entry(3)] });
    await ref.ask({ type: 'inspect' }, 1_000);
    await ref.ask({ type: 'inspect' }, 1_000); // the read's answer is a message of its own
    expect(reads.waiting).toBe(1);
    const view = await ref.ask({ type: 'inspect' }, 1_000);
    expect(view.waiting).toBe(3);
    // The offered task was admitted before the read landed; the parked ones wait behind it,
    // and the next permit goes to the most urgent of them.
    const first = pushed.splice(0);
    const answer = await ref.ask({ type: 'grant', entries: first }, 1_000);
    ref.tell({ type: 'returned', taskIds: answer.granted });
    await ref.ask({ type: 'inspect' }, 1_000);
    expect(pushed.map((e) => e.taskId)).toEqual([entry(1).taskId]);
    await system.shutdown();
  });

  it('runs no on_limit strategy again for the tasks its first read brings back (they arrived at the last activation)', async () => {
    // Full (one holder of one), cancel_new: a task arriving now is cancelled; one parked by the
    // last activation (held back then by something else, a rate) waits as it did there.
    const parked = [entry(1)];
    const { system, ref, cancelled } = keyOver(parked, { concurrency: 1, onLimit: 'cancel_new', running: ['held'] });
    await ref.ask({ type: 'inspect' }, 1_000);
    await ref.ask({ type: 'inspect' }, 1_000);
    expect(cancelled).toEqual([]);
    expect((await ref.ask({ type: 'inspect' }, 1_000)).waiting).toBe(1);
    // A new arrival at full concurrency is still cancelled.
    ref.tell({ type: 'offer', entries: [entry(2)] });
    await ref.ask({ type: 'inspect' }, 1_000);
    expect(cancelled).toEqual([entry(2).taskId]);
    await system.shutdown();
  });
});
