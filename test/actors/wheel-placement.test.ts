import { describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import { partitionOf } from '../../src/lib/ids.js';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import { FakeClock } from '../../src/runtime/clock.js';
import type { DutyFailure } from '../../src/runtime/supervision.js';
import { WheelPlacement, type WheelPlacementDeps } from '../../src/actors/wheel-placement.js';
import type { DueEntry } from '../../src/domain/model.js';
import { nextId, T0 } from '../support/tasks.js';

/**
 * When a wheel partition does not answer (its node died and the ring has not dropped it yet),
 * the entries go straight into its minute buckets: the partition's next activation reloads
 * only its near window from the task table, so a task due further out would otherwise never
 * be fired. When the buckets refuse too, the placement goes on being tried, with backoff.
 */
describe('WheelPlacement: the hand-off to the wheel', () => {
  function scheduler(answer: (partition: string) => Promise<void>, refuse = { buckets: false }) {
    const added: { partition: number; entries: DueEntry[] }[] = [];
    const errors: unknown[] = [];
    const failures: DutyFailure[] = [];
    const clock = new FakeClock(T0);
    const system = {
      nodeId: 'n1',
      ref: (kind: { name: string }, key: string) => ({ kind: kind.name, key, tell() {}, ask: () => answer(key) }),
    } as unknown as ActorSystemApi;
    const deps = {
      system,
      partitions: 8,
      clock,
      buckets: {
        add: async (partition: number, entries: DueEntry[]) => {
          if (refuse.buckets) throw new Error('redis down');
          added.push({ partition, entries });
          return 1;
        },
      },
      onError: (error: unknown) => errors.push(error),
      onDutyFailure: (error: unknown, failure: DutyFailure) => {
        errors.push(error);
        failures.push(failure);
      },
    } as unknown as WheelPlacementDeps;
    return { scheduler: new WheelPlacement(deps), added, errors, failures, clock };
  }
  const entries = Array.from({ length: 20 }, () => ({
    taskId: nextId(),
    taskType: 't',
    priority: 5,
    dueMs: T0 + 3_600_000,
  }));

  it('puts the entries of a partition that does not answer into its buckets, and leaves the others to their partitions', async () => {
    const dead = String(partitionOf(entries[0]!.taskId, 8));
    const {
      scheduler: s,
      added,
      errors,
    } = scheduler(async (key) => {
      if (key === dead) throw new WheelhouseError('ask_timeout', 'no node accepted the message before its deadline');
    });
    await s.place(entries);
    expect(added.map((a) => a.partition)).toEqual([Number(dead)]);
    expect(added[0]!.entries.map((e) => e.taskId).sort()).toEqual(
      entries
        .filter((e) => String(partitionOf(e.taskId, 8)) === dead)
        .map((e) => e.taskId)
        .sort(),
    );
    expect(errors).toEqual([]);
  });

  it('reports, without throwing, when the buckets refuse too, and goes on trying until they take the entries', async () => {
    const refuse = { buckets: true };
    const {
      scheduler: s,
      added,
      errors,
      failures,
      clock,
    } = scheduler(async () => {
      throw new WheelhouseError('ask_timeout', 'gone');
    }, refuse);
    await s.place(entries.slice(0, 1));
    expect(errors).toHaveLength(1);
    expect(String((errors[0] as AggregateError).errors[1])).toMatch(/redis down/);
    await clock.advance(3_000);
    expect(failures.length).toBeGreaterThan(2);
    expect(failures.map((f) => f.attempt)).toEqual(failures.map((_, i) => i + 1));
    expect(added).toEqual([]);
    refuse.buckets = false;
    await clock.advance(10_000);
    expect(added.map((a) => a.entries.map((e) => e.taskId))).toEqual([[entries[0]!.taskId]]);
    const settled = failures.length;
    await clock.advance(60_000);
    expect(failures).toHaveLength(settled);
  });

  it('stops trying when the node stops (the partition finds the task in Postgres)', async () => {
    const {
      scheduler: s,
      failures,
      clock,
    } = scheduler(
      async () => {
        throw new WheelhouseError('ask_timeout', 'gone');
      },
      { buckets: true },
    );
    await s.place(entries.slice(0, 1));
    s.stop();
    const seen = failures.length;
    await clock.advance(60_000);
    expect(failures).toHaveLength(seen);
  });
});
