import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import type { DueEntry } from '../../src/domain/model.js';
import { fastStoreBackends, type FastStores } from '../support/redis.js';
import { stopTestRedisCluster } from '../support/redis-cluster.js';

afterAll(stopTestRedisCluster);

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
  /** The entries a take returns (the stamp has tests of its own below). */
  const take = async (partition: number, untilMs: number): Promise<DueEntry[]> =>
    (await stores.buckets.takeUntil(partition, untilMs)).entries;
  afterEach(async () => {
    await stores.close();
  });

  it('takes a whole minute bucket once the bound passes its start, not before', async () => {
    const { buckets } = stores;
    const first = entry(1, T0);
    const lastOfMinute = entry(2, T0 + MINUTE - 1);
    const nextMinute = entry(3, T0 + MINUTE);
    await buckets.add(7, [nextMinute, lastOfMinute, first]);

    expect(await take(7, T0)).toEqual([]);
    expect(await take(7, T0 + 1)).toEqual([first, lastOfMinute]);
    expect(await take(7, T0 + MINUTE)).toEqual([]);
    expect(await take(7, T0 + MINUTE + 1)).toEqual([nextMinute]);
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
    const taken = await take(0, T0 + 4 * MINUTE);
    expect(taken.map((e) => e.taskId)).toEqual([
      'task-000001',
      'task-000002',
      'task-000003',
      'task-000004',
      'task-000005',
    ]);
    expect(await take(0, T0 + 5 * MINUTE)).toEqual([entry(6, T0 + 4 * MINUTE)]);
  });

  it('takes buckets from the past too (the bound is exclusive on minute starts, not a window)', async () => {
    const { buckets } = stores;
    await buckets.add(1, [entry(1, T0 - 10 * MINUTE), entry(2, T0 - 1)]);
    expect((await take(1, T0)).map((e) => e.taskId)).toEqual(['task-000001', 'task-000002']);
  });

  it('keeps every field of an entry, whatever its type and priority', async () => {
    const { buckets } = stores;
    const entries = [entry(1, T0, 'etl:load.v2-x_y', 0), entry(2, T0 + 1, 'a', 9)];
    await buckets.add(3, entries);
    expect(await take(3, T0 + MINUTE)).toEqual(entries);
  });

  it("keeps an entry's limits, fenced or not, and adds none to an entry without them", async () => {
    const { buckets } = stores;
    const limited = { ...entry(1, T0, 'etl:load', 2), limits: ['customer:42', 'stripe-api', 'x'.repeat(200)] };
    const plain = entry(2, T0 + 1);
    const fenced = { ...entry(3, T0 + 2), limits: ['solo'] };
    await buckets.add(4, [limited, plain]);
    await buckets.add(4, [limited, fenced], 1);
    const taken = await take(4, T0 + MINUTE);
    expect(taken).toStrictEqual([limited, plain, fenced]);
    expect('limits' in (taken[1] as DueEntry)).toBe(false);
  });

  it("keeps a sampled entry's trace context, with its limits, and adds none to an entry without one", async () => {
    const { buckets } = stores;
    const traced = { ...entry(1, T0), traceparent: `00-${'4b'.repeat(16)}-${'0c'.repeat(8)}-01` };
    const both = {
      ...entry(2, T0 + 1),
      limits: ['stripe-api'],
      traceparent: `00-${'a1'.repeat(16)}-${'f2'.repeat(8)}-01`,
    };
    const plain = entry(3, T0 + 2);
    await buckets.add(5, [traced, plain]);
    await buckets.add(5, [both, traced], 1);
    const taken = await take(5, T0 + MINUTE);
    expect(taken).toStrictEqual([traced, both, plain]);
    expect('traceparent' in (taken[2] as DueEntry)).toBe(false);
  });

  it('is idempotent: adding an entry twice stores it once', async () => {
    const { buckets } = stores;
    const entries = [entry(1, T0 + 5), entry(2, T0 + MINUTE + 5)];
    await buckets.add(2, entries);
    await buckets.add(2, entries);
    await buckets.add(2, [entries[0] as DueEntry]);
    expect(await take(2, T0 + 2 * MINUTE)).toEqual(entries);
  });

  it('removes what it takes, and takes nothing from an empty partition', async () => {
    const { buckets } = stores;
    expect(await take(4, T0 + MINUTE)).toEqual([]);
    await buckets.add(4, [entry(1, T0)]);
    expect(await take(4, T0 + MINUTE)).toHaveLength(1);
    expect(await take(4, T0 + 100 * MINUTE)).toEqual([]);
  });

  it('keeps partitions apart', async () => {
    const { buckets } = stores;
    await buckets.add(1, [entry(1, T0)]);
    await buckets.add(2, [entry(2, T0)]);
    expect((await take(1, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000001']);
    expect((await take(2, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000002']);
  });

  it('adds after a take land in the right buckets again', async () => {
    const { buckets } = stores;
    await buckets.add(5, [entry(1, T0)]);
    await take(5, T0 + MINUTE);
    await buckets.add(5, [entry(2, T0 + 30), entry(3, T0 + 2 * MINUTE)]);
    expect((await take(5, T0 + MINUTE)).map((e) => e.taskId)).toEqual(['task-000002']);
    expect((await take(5, T0 + 3 * MINUTE)).map((e) => e.taskId)).toEqual(['task-000003']);
  });

  it('round-trips a batch of 3 000 entries over many minutes', async () => {
    const { buckets } = stores;
    const entries = Array.from({ length: 3_000 }, (_, i) => entry(i, T0 + ((i * 7_919) % (30 * MINUTE))));
    await buckets.add(9, entries);
    const taken = await take(9, T0 + 30 * MINUTE);
    // Due order; equal due times may come in either order (by id in Redis, by insertion in memory).
    const byDue = (list: DueEntry[]) => [...list].sort((a, b) => a.dueMs - b.dueMs || (a.taskId < b.taskId ? -1 : 1));
    expect(taken.map((e) => e.dueMs)).toEqual(byDue(entries).map((e) => e.dueMs));
    expect(byDue(taken)).toEqual(byDue(entries));
  });

  it('refuses an entry whose due time is not an integer', async () => {
    const error = await stores.buckets.add(0, [entry(1, T0 + 0.5)]).catch((e: unknown) => e);
    expect(isWheelhouseError(error, 'internal')).toBe(true);
  });

  it('reports partitions never marked intact as lost (stamp 0), and the stamp each was marked at', async () => {
    const { buckets } = stores;
    expect(await buckets.stamps([0, 1, 2])).toEqual([0, 0, 0]);
    await buckets.setIntact(1, 7);
    expect(await buckets.stamps([0, 1, 2])).toEqual([0, 7, 0]);
    expect(await buckets.stamps([])).toEqual([]);
  });

  it('raises the stamp by one with every write, answering it: fenced adds, and takes that take something', async () => {
    const { buckets } = stores;
    await buckets.setIntact(1, 10);
    expect(await buckets.add(1, [entry(1, T0), entry(2, T0 + MINUTE)], 4)).toBe(11);
    // An unfenced add answers the stamp and leaves it (see the fencing suite).
    expect(await buckets.add(1, [entry(3, T0)])).toBe(11);
    expect(await buckets.add(1, [entry(3, T0)], 4)).toBe(12);
    expect(await buckets.takeUntil(1, T0)).toEqual({ entries: [], stamp: 12 });
    const first = await buckets.takeUntil(1, T0 + MINUTE);
    expect(first.entries.map((e) => e.taskId)).toEqual(['task-000001', 'task-000003']);
    expect(first.stamp).toBe(13);
    expect(await buckets.stamps([1])).toEqual([13]);
    expect((await buckets.takeUntil(1, T0 + 3 * MINUTE)).stamp).toBe(14);
    expect(await buckets.takeUntil(1, T0 + 3 * MINUTE)).toEqual({ entries: [], stamp: 14 });
  });

  it('leaves a lost partition lost through its writes: they answer 0 until it is marked intact', async () => {
    const { buckets } = stores;
    expect(await buckets.add(2, [entry(3, T0)], 1)).toBe(0);
    expect(await buckets.takeUntil(2, T0 + MINUTE)).toEqual({ entries: [entry(3, T0)], stamp: 0 });
    expect(await buckets.stamps([2])).toEqual([0]);
    await buckets.setIntact(2, 1);
    expect(await buckets.add(2, [entry(4, T0)], 1)).toBe(2);
  });

  it('loses stamps and buckets together when the store is flushed', async () => {
    const { buckets } = stores;
    await buckets.setIntact(1, 3);
    await buckets.add(1, [entry(1, T0)], 1);
    await buckets.setIntact(2, 5);
    expect(await buckets.stamps([1, 2])).toEqual([4, 5]);
    await stores.flush();
    expect(await buckets.stamps([1, 2])).toEqual([0, 0]);
    expect(await take(1, T0 + MINUTE)).toEqual([]);
    await buckets.setIntact(1, 9);
    expect(await buckets.stamps([1, 2])).toEqual([9, 0]);
  });
});
