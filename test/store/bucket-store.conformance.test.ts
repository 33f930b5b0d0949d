import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/errors.js';
import type { DueEntry } from '../../src/store/types.js';
import { fastStoreBackends, type FastStores } from '../support/redis.js';

/** A minute boundary: 2026-11-30 12:00:00 UTC. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const MINUTE = 60_000;

function entry(n: number, dueMs: number, taskType = 'email.send', priority = 5): DueEntry {
  return { taskId: `task-${String(n).padStart(6, '0')}`, taskType, priority, dueMs };
}

describe.each(fastStoreBackends)('BucketStore on $name', (backend) => {
  let stores: FastStores;
  beforeEach(async () => {
    stores = await backend.open();
  });
  afterEach(async () => {
    await stores.close();
  });

  it('takes a whole minute bucket once the bound passes its start, not before', async () => {
    const { buckets } = stores;
    const first = entry(1, T0);
    const lastOfMinute = entry(2, T0 + MINUTE - 1);
    const nextMinute = entry(3, T0 + MINUTE);
    await buckets.add(7, [nextMinute, lastOfMinute, first]);

    expect(await buckets.takeUntil(7, T0)).toEqual([]);
    expect(await buckets.takeUntil(7, T0 + 1)).toEqual([first, lastOfMinute]);
    expect(await buckets.takeUntil(7, T0 + MINUTE)).toEqual([]);
    expect(await buckets.takeUntil(7, T0 + MINUTE + 1)).toEqual([nextMinute]);
  });

  it('takes entries spanning several minutes in one call, in due order', async () => {
    const { buckets } = stores;
    const entries = [
      entry(5, T0 + 3 * MINUTE + 10),
      entry(4, T0 + 2 * MINUTE),
      entry(2, T0 + 11),
      entry(1, T0 + 10),
      entry(3, T0 + MINUTE + 59_999),
      entry(6, T0 + 4 * MINUTE),
    ];
    await buckets.add(0, entries);
    const taken = await buckets.takeUntil(0, T0 + 4 * MINUTE);
    expect(taken.map((e) => e.taskId)).toEqual(['task-000001', 'task-000002', 'task-000003', 'task-000004', 'task-000005']);
    expect(await buckets.takeUntil(0, T0 + 5 * MINUTE)).toEqual([entry(6, T0 + 4 * MINUTE)]);
  });

  it('takes buckets from the past too (the bound is exclusive on minute starts, not a window)', async () => {
    const { buckets } = stores;
    await buckets.add(1, [entry(1, T0 - 10 * MINUTE), entry(2, T0 - 1)]);
    expect((await buckets.takeUntil(1, T0)).map((e) => e.taskId)).toEqual(['task-000001', 'task-000002']);
  });

  it('keeps every field of an entry, whatever its type and priority', async () => {
    const { buckets } = stores;
    const entries = [entry(1, T0, 'etl:load.v2-x_y', 0), entry(2, T0 + 1, 'a', 9)];
    await buckets.add(3, entries);
    expect(await buckets.takeUntil(3, T0 + MINUTE)).toEqual(entries);
  });

  it('is idempotent: adding an entry twice stores it once', async () => {
    const { buckets } = stores;
    const entries = [entry(1, T0 + 5), entry(2, T0 + MINUTE + 5)];
    await buckets.add(2, entries);
    await buckets.add(2, entries);
    await buckets.add(2, [entries[0] as DueEntry]);
    expect(await buckets.takeUntil(2, T0 + 2 * MINUTE)).toEqual(entries);
  });

  it('removes what it takes, and takes nothing from an empty partition', async () => {
    const { buckets } = stores;
    expect(await buckets.takeUntil(4, T0 + MINUTE)).toEqual([]);
    await buckets.add(4, [entry(1, T0)]);
    expect(await buckets.takeUntil(4, T0 + MINUTE)).toHaveLength(1);
    expect(await buckets.takeUntil(4, T0 + 100 * MINUTE)).toEqual([]);
  });

  it('keeps partitions apart', async () => {
    const { buckets } = stores;
    await buckets.add(1, [entry(1, T0)]);
    await buckets.add(2, [entry(2, T0)]);
    expect((await buckets.takeUntil(1, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000001']);
    expect((await buckets.takeUntil(2, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000002']);
  });

  it('adds after a take land in the right buckets again', async () => {
    const { buckets } = stores;
    await buckets.add(5, [entry(1, T0)]);
    await buckets.takeUntil(5, T0 + MINUTE);
    await buckets.add(5, [entry(2, T0 + 30), entry(3, T0 + 2 * MINUTE)]);
    expect((await buckets.takeUntil(5, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000002']);
    expect((await buckets.takeUntil(5, T0 + 3 * MINUTE)).map((e) => e.taskId)).toEqual(['task-000003']);
  });

  it('round-trips a batch of 3 000 entries over many minutes', async () => {
    const { buckets } = stores;
    const entries = Array.from({ length: 3_000 }, (_, i) => entry(i, T0 + ((i * 7_919) % (30 * MINUTE))));
    await buckets.add(9, entries);
    const taken = await buckets.takeUntil(9, T0 + 30 * MINUTE);
    // Due order; equal due times may come in either order (by id in Redis, by insertion in memory).
    const byDue = (list: DueEntry[]) => [...list].sort((a, b) => a.dueMs - b.dueMs || (a.taskId < b.taskId ? -1 : 1));
    expect(taken.map((e) => e.dueMs)).toEqual(byDue(entries).map((e) => e.dueMs));
    expect(byDue(taken)).toEqual(byDue(entries));
  });

  it('refuses an entry whose due time is not an integer', async () => {
    const error = await stores.buckets.add(0, [entry(1, T0 + 0.5)]).catch((e: unknown) => e);
    expect(isWheelhouseError(error, 'internal')).toBe(true);
  });

  it('reports partitions never marked intact as lost', async () => {
    const { buckets } = stores;
    expect(await buckets.lostPartitions([0, 1, 2])).toEqual([0, 1, 2]);
    await buckets.setIntact(1);
    await buckets.setIntact(1);
    expect(await buckets.lostPartitions([0, 1, 2])).toEqual([0, 2]);
    expect(await buckets.lostPartitions([])).toEqual([]);
  });

  it('keeps the mark of a partition through its takes, and marks none by taking', async () => {
    const { buckets } = stores;
    await buckets.setIntact(1);
    await buckets.add(1, [entry(1, T0), entry(2, T0 + MINUTE)]);
    await buckets.add(2, [entry(3, T0)]);
    expect(await buckets.takeUntil(1, T0 + 2 * MINUTE)).toHaveLength(2);
    expect(await buckets.takeUntil(1, T0 + 3 * MINUTE)).toEqual([]);
    expect(await buckets.takeUntil(2, T0 + MINUTE)).toHaveLength(1);
    expect(await buckets.lostPartitions([1, 2])).toEqual([2]);
  });

  it('loses marks and buckets together when the store is flushed', async () => {
    const { buckets } = stores;
    await buckets.add(1, [entry(1, T0)]);
    await buckets.setIntact(1);
    await buckets.setIntact(2);
    expect(await buckets.lostPartitions([1, 2])).toEqual([]);
    await stores.flush();
    expect(await buckets.lostPartitions([1, 2])).toEqual([1, 2]);
    expect(await buckets.takeUntil(1, T0 + MINUTE)).toEqual([]);
    await buckets.setIntact(1);
    expect(await buckets.lostPartitions([1, 2])).toEqual([2]);
  });
});
