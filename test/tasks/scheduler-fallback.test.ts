import { describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/errors.js';
import { partitionOf } from '../../src/ids.js';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import { Scheduler, type SchedulerDeps } from '../../src/tasks/scheduler.js';
import type { DueEntry } from '../../src/store/types.js';
import { nextId, T0 } from '../support/tasks.js';

/**
 * When a wheel partition does not answer (its node died and the ring has not dropped it yet),
 * the entries go straight into its minute buckets: the partition's next activation reloads
 * only its near window from the task table, so a task due further out would otherwise never
 * be fired.
 */
describe('Scheduler hand-off to the wheel', () => {
  function scheduler(answer: (partition: string) => Promise<void>, refuse = false) {
    const added: { partition: number; entries: DueEntry[] }[] = [];
    const errors: unknown[] = [];
    const system = {
      nodeId: 'n1',
      ref: (_kind: string, key: string) => ({ kind: 'wheel', key, tell() {}, ask: () => answer(key) }),
    } as unknown as ActorSystemApi;
    const deps = {
      system,
      partitions: 8,
      buckets: {
        add: async (partition: number, entries: DueEntry[]) => {
          if (refuse) throw new Error('redis down');
          added.push({ partition, entries });
        },
      },
      onError: (error: unknown) => errors.push(error),
    } as unknown as SchedulerDeps;
    return { scheduler: new Scheduler(deps), added, errors };
  }
  const entries = Array.from({ length: 20 }, () => ({ taskId: nextId(), taskType: 't', priority: 5, dueMs: T0 + 3_600_000 }));

  it('puts the entries of a partition that does not answer into its buckets, and leaves the others to their partitions', async () => {
    const dead = String(partitionOf(entries[0]!.taskId, 8));
    const { scheduler: s, added, errors } = scheduler(async (key) => {
      if (key === dead) throw new WheelhouseError('ask_timeout', 'no node accepted the message before its deadline');
    });
    await s.place(entries);
    expect(added.map((a) => a.partition)).toEqual([Number(dead)]);
    expect(added[0]!.entries.map((e) => e.taskId).sort()).toEqual(entries.filter((e) => String(partitionOf(e.taskId, 8)) === dead).map((e) => e.taskId).sort());
    expect(errors).toEqual([]);
  });

  it('reports, without throwing, when the buckets refuse too', async () => {
    const { scheduler: s, errors } = scheduler(async () => {
      throw new WheelhouseError('ask_timeout', 'gone');
    }, true);
    await s.place(entries.slice(0, 1));
    expect(errors).toHaveLength(1);
    expect(String((errors[0] as AggregateError).errors[1])).toMatch(/redis down/);
  });
});
