import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { partitionOf } from '../../src/lib/ids.js';
import { CoalescingReadyQueue } from '../../src/store/coalescing-ready-queue.js';
import { PartitionMarks } from '../../src/store/fences.js';
import { MemoryBucketStore } from '../../src/store/memory-buckets.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { RedisBucketStore } from '../../src/store/redis-buckets.js';
import { PartitionedReadyQueue } from '../../src/store/redis-partitioned-ready-queue.js';
import { RedisReadyQueue } from '../../src/store/redis-ready-queue.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { BucketStore, ReadyQueue } from '../../src/store/fast-index-types.js';
import { CLUSTER_TEST_PARTITIONS, createTestRedis } from '../support/redis.js';
import { createTestRedisClusterClient, stopTestRedisCluster } from '../support/redis-cluster.js';

afterAll(stopTestRedisCluster);

/** A minute boundary: 2026-11-30 12:00:00 UTC. */
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const MINUTE = 60_000;

function entry(n: number, dueMs: number, taskType = 'email', priority = 5): DueEntry {
  return { taskId: `task-${String(n).padStart(6, '0')}`, taskType, priority, dueMs };
}

/** The entries' ids, each as `entry` made it (without what `at` added). */
const ids = (entries: DueEntry[]): string[] => entries.map((e) => e.taskId.replace(/\.\d+$/, ''));
const taken = (take: { entries: DueEntry[] }): string[] => ids(take.entries);

/** The fast index of one backend, with the bucket store and the ready queue sharing fences. */
interface FencedStores {
  buckets: BucketStore;
  ready: ReadyQueue;
  /** The ready queue behind a `CoalescingReadyQueue`. */
  coalesced: ReadyQueue;
  /** Script calls (EVALSHA) and pipelines sent so far; null in memory and on Redis Cluster. */
  roundTrips: (() => { scripts: number; pipelines: number }) | null;
  /**
   * Where the ready queue keeps each task's entry when it places entries by their task's wheel
   * partition (Redis Cluster): that many partitions; otherwise null, and a fenced push may hold
   * any task.
   */
  partitions: number | null;
  flush(): Promise<void>;
  close(): Promise<void>;
}

const backends: { name: string; open(): Promise<FencedStores> }[] = [
  {
    name: 'redis',
    open: async () => {
      const test = await createTestRedis();
      const ready = new RedisReadyQueue(test.redis, test.prefix);
      const scripts = vi.spyOn(test.redis, 'evalsha');
      const pipelines = vi.spyOn(test.redis, 'pipeline');
      return {
        buckets: new RedisBucketStore(test.redis, test.prefix),
        ready,
        coalesced: new CoalescingReadyQueue(ready),
        roundTrips: () => ({ scripts: scripts.mock.calls.length, pipelines: pipelines.mock.calls.length }),
        partitions: null,
        flush: test.flush,
        close: async () => {
          await ready.close();
          await test.cleanup();
        },
      };
    },
  },
  {
    name: 'redis-cluster',
    open: async () => {
      const test = await createTestRedisClusterClient();
      const ready = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: CLUSTER_TEST_PARTITIONS });
      return {
        buckets: new RedisBucketStore(test.redis, test.prefix),
        ready,
        coalesced: new CoalescingReadyQueue(ready),
        // One push script per partition written to, and a registry script per task type.
        roundTrips: null,
        partitions: CLUSTER_TEST_PARTITIONS,
        flush: test.flush,
        close: async () => {
          await ready.close();
          await test.cleanup();
        },
      };
    },
  },
  {
    name: 'memory',
    open: async () => {
      const marks = new PartitionMarks();
      const buckets = new MemoryBucketStore(marks);
      const ready = new MemoryReadyQueue(marks);
      return {
        buckets,
        ready,
        coalesced: new CoalescingReadyQueue(ready),
        roundTrips: null,
        partitions: null,
        flush: async () => {
          buckets.clear();
          ready.clear();
        },
        close: async () => undefined,
      };
    },
  },
];

/** The rejection of `promise`, or a failure if it resolved. */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (error: unknown) => error,
  );
}

function expectStale(error: unknown, details: { partition: number; epoch: number; fence: number }): void {
  expect(isWheelhouseError(error, 'stale_epoch')).toBe(true);
  expect((error as { details: unknown }).details).toMatchObject(details);
}

describe.each(backends)('fences on $name', (backend) => {
  let stores: FencedStores;
  beforeEach(async () => {
    stores = await backend.open();
  });
  afterEach(async () => {
    await stores.close();
    vi.restoreAllMocks();
  });
  /**
   * The entries as a wheel partition pushes them: tasks of that partition. Where the queue
   * places entries by their task's partition, each id gets the first suffix `.k` that puts it
   * there (`ids` drops it again); elsewhere the entries as they are.
   */
  const at = (partition: number, entries: DueEntry[]): DueEntry[] => {
    const partitions = stores.partitions;
    if (partitions === null) return entries;
    return entries.map((e) => {
      for (let k = 0; ; k++) {
        const taskId = `${e.taskId}.${k}`;
        if (partitionOf(taskId, partitions) === partition) return { ...e, taskId };
      }
    });
  };

  describe('BucketStore', () => {
    it('raises a fence but never lowers it', async () => {
      const { buckets } = stores;
      await buckets.fence(3, 5);
      await buckets.fence(3, 2);
      expectStale(await rejection(buckets.add(3, [entry(1, T0)], 4)), { partition: 3, epoch: 4, fence: 5 });
      await buckets.add(3, [entry(1, T0)], 5);
      await buckets.fence(3, 7);
      await buckets.fence(3, 6);
      expectStale(await rejection(buckets.takeUntil(3, T0 + MINUTE, 6)), { partition: 3, epoch: 6, fence: 7 });
      expect((await buckets.takeUntil(3, T0 + MINUTE, 7)).entries).toEqual([entry(1, T0)]);
    });

    it('refuses an add below the fence and adds nothing of it; an add at or above it, or without an epoch, goes in', async () => {
      const { buckets } = stores;
      await buckets.add(1, [entry(1, T0)], 2);
      await buckets.fence(1, 3);
      const stale = [entry(2, T0 + 5), entry(3, T0 + 2 * MINUTE)];
      expectStale(await rejection(buckets.add(1, stale, 2)), { partition: 1, epoch: 2, fence: 3 });
      await buckets.add(1, [entry(4, T0 + 6)], 3);
      await buckets.add(1, [entry(5, T0 + 7)], 4);
      await buckets.add(1, [entry(6, T0 + 8)]);
      expect(taken(await buckets.takeUntil(1, T0 + 10 * MINUTE, 4))).toEqual([
        'task-000001',
        'task-000004',
        'task-000005',
        'task-000006',
      ]);
    });

    it('refuses a take below the fence, taking nothing and keeping the stamp', async () => {
      const { buckets } = stores;
      await buckets.add(2, [entry(1, T0), entry(2, T0 + MINUTE)]);
      await buckets.setIntact(2, 1);
      await buckets.fence(2, 4);
      expectStale(await rejection(buckets.takeUntil(2, T0 + 2 * MINUTE, 3)), { partition: 2, epoch: 3, fence: 4 });
      expect(await buckets.stamps([2])).toEqual([1]);
      expect(taken(await buckets.takeUntil(2, T0 + MINUTE, 4))).toEqual(['task-000001']);
      expect(taken(await buckets.takeUntil(2, T0 + 2 * MINUTE, 9))).toEqual(['task-000002']);
      expect(await buckets.takeUntil(2, T0 + 3 * MINUTE)).toEqual({ entries: [], stamp: 3 });
      expect(await buckets.stamps([2])).toEqual([3]);
    });

    it("raises the partition's stamp with a fenced push and answers it; an unfenced push answers 0", async () => {
      const { buckets, ready, coalesced } = stores;
      await buckets.setIntact(6, 20);
      expect(await ready.push(at(6, [entry(1, T0)]), { partition: 6, epoch: 1 })).toBe(21);
      expect(await coalesced.push(at(6, [entry(2, T0)]), { partition: 6, epoch: 1 })).toBe(22);
      expect(await ready.push([entry(3, T0)])).toBe(0);
      expect(await buckets.add(6, [entry(4, T0 + MINUTE)], 1)).toBe(23);
      expect(await ready.push(at(7, [entry(5, T0)]), { partition: 7, epoch: 1 })).toBe(0); // never marked intact: lost
      expect(await buckets.stamps([6, 7])).toEqual([23, 0]);
    });

    it('leaves the stamp alone on an unfenced add, so writes the owner never saw cannot hide a store gone back', async () => {
      const { buckets } = stores;
      await buckets.setIntact(8, 40);
      expect(await buckets.add(8, [entry(1, T0 + MINUTE)], 1)).toBe(41);
      // A failover to a replica that missed the last write puts the stamp back to 40; then
      // submits place two tasks straight into the buckets (the partition did not answer).
      await buckets.setIntact(8, 40);
      expect(await buckets.add(8, [entry(2, T0 + MINUTE)])).toBe(40);
      expect(await buckets.add(8, [entry(3, T0 + MINUTE)])).toBe(40);
      // The owner's next write still answers less than 41 + 1: the loss shows.
      expect(await buckets.add(8, [entry(4, T0 + MINUTE)], 1)).toBe(41);
      expect(await buckets.stamps([8])).toEqual([41]);
    });

    it('allows every epoch where no fence was raised, and keeps partitions apart', async () => {
      const { buckets } = stores;
      await buckets.fence(1, 9);
      await buckets.add(2, [entry(1, T0)], 0);
      expect((await buckets.takeUntil(2, T0 + MINUTE, 0)).entries).toEqual([entry(1, T0)]);
      expectStale(await rejection(buckets.add(1, [entry(2, T0)], 8)), { partition: 1, epoch: 8, fence: 9 });
      expect((await buckets.takeUntil(1, T0 + MINUTE, 9)).entries).toEqual([]);
    });

    it('adds 30 000 entries over several minutes under a fence', async () => {
      const { buckets } = stores;
      await buckets.fence(6, 1);
      const entries = Array.from({ length: 30_000 }, (_, i) => entry(i, T0 + ((i * 7_919) % (5 * MINUTE))));
      await buckets.add(6, entries, 1);
      expect((await buckets.takeUntil(6, T0 + 5 * MINUTE, 1)).entries).toHaveLength(30_000);
    });

    it('refuses an epoch or partition that is not a non-negative integer', async () => {
      const { buckets } = stores;
      for (const call of [
        buckets.fence(1, -1),
        buckets.fence(1, 1.5),
        buckets.fence(-1, 1),
        buckets.add(1, [entry(1, T0)], Number.NaN),
        buckets.takeUntil(1, T0, -2),
      ]) {
        expect(isWheelhouseError(await rejection(call), 'internal')).toBe(true);
      }
      expect((await buckets.takeUntil(1, T0 + MINUTE)).entries).toEqual([]);
    });
  });

  describe('ReadyQueue', () => {
    it('refuses a push below the fence the bucket store raised, writing nothing and waking nobody', async () => {
      const { buckets, ready } = stores;
      const heard: string[][] = [];
      ready.onPush((types) => heard.push([...types].sort()));
      await buckets.fence(4, 3);
      const stale = [entry(1, T0, 'b'), entry(2, T0, 'a')];
      expectStale(await rejection(ready.push(at(4, stale), { partition: 4, epoch: 2 })), {
        partition: 4,
        epoch: 2,
        fence: 3,
      });
      expect(await ready.backlog()).toBe(0);
      expect(await ready.depths(T0)).toEqual([]);
      expect(heard).toEqual([]);

      await ready.push(at(4, stale), { partition: 4, epoch: 3 });
      await ready.push(at(4, [entry(3, T0, 'a')]), { partition: 4, epoch: 4 });
      await ready.push([entry(4, T0, 'a')]);
      expect(heard).toEqual([['a', 'b'], ['a'], ['a']]);
      expect(ids(await ready.take(['a', 'b'], 10, T0))).toEqual([
        'task-000001',
        'task-000002',
        'task-000003',
        'task-000004',
      ]);
    });

    it('allows a fenced push where no fence was raised, and looks at its own partition only', async () => {
      const { buckets, ready } = stores;
      await buckets.fence(4, 8);
      await ready.push(at(5, [entry(1, T0)]), { partition: 5, epoch: 0 });
      await ready.push(at(6, [entry(2, T0)]), { partition: 6, epoch: 1 });
      expect(await ready.backlog()).toBe(2);
    });

    it('loses the fences with the rest of its data: every epoch goes until the owner fences again', async () => {
      const { buckets, ready } = stores;
      await buckets.fence(5, 4);
      await stores.flush();
      await buckets.add(5, [entry(1, T0)], 1);
      await ready.push(at(5, [entry(2, T0)]), { partition: 5, epoch: 1 });
      await buckets.fence(5, 4);
      expectStale(await rejection(buckets.add(5, [entry(3, T0)], 1)), { partition: 5, epoch: 1, fence: 4 });
      expectStale(await rejection(ready.push(at(5, [entry(4, T0)]), { partition: 5, epoch: 1 })), {
        partition: 5,
        epoch: 1,
        fence: 4,
      });
      expect(ids(await ready.take(['email'], 10, T0))).toEqual(['task-000002']);
    });

    it("raises the fence with every fenced write above it, so after a flush the owner's first write fences the stale writer out", async () => {
      const { buckets, ready } = stores;
      await buckets.fence(5, 4);
      await stores.flush();
      await buckets.add(5, [entry(1, T0 + MINUTE)], 3); // the stale node, first after the flush
      await ready.push(at(5, [entry(2, T0)]), { partition: 5, epoch: 4 }); // the owner's next slot
      expectStale(await rejection(buckets.takeUntil(5, T0 + 2 * MINUTE, 3)), { partition: 5, epoch: 3, fence: 4 });
      expectStale(await rejection(ready.push(at(5, [entry(3, T0)]), { partition: 5, epoch: 3 })), {
        partition: 5,
        epoch: 3,
        fence: 4,
      });
      expect(taken(await buckets.takeUntil(5, T0 + 2 * MINUTE, 5))).toEqual(['task-000001']);
      expectStale(await rejection(buckets.add(5, [entry(4, T0)], 4)), { partition: 5, epoch: 4, fence: 5 });
    });

    it('merges the pushes of one turn into one call, refusing only the stale caller', async () => {
      const { buckets, coalesced } = stores;
      await buckets.fence(1, 5);
      await buckets.fence(2, 5);
      const heard: string[][] = [];
      coalesced.onPush((types) => heard.push([...types].sort()));
      const before = stores.roundTrips?.();
      const settled = await Promise.allSettled([
        coalesced.push(at(1, [entry(1, T0, 'a'), entry(2, T0, 'a')]), { partition: 1, epoch: 5 }),
        coalesced.push(at(2, [entry(3, T0, 'b')]), { partition: 2, epoch: 4 }),
        coalesced.push(at(3, [entry(4, T0, 'c')]), { partition: 3, epoch: 1 }),
        coalesced.push([entry(5, T0, 'd')]),
        coalesced.push(at(1, [entry(6, T0, 'a')]), { partition: 1, epoch: 6 }),
      ]);
      const after = stores.roundTrips?.();
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
      expectStale((settled[1] as PromiseRejectedResult).reason, { partition: 2, epoch: 4, fence: 5 });
      expect(heard).toEqual([['a', 'c', 'd']]);
      expect(ids(await coalesced.take(['a', 'b', 'c', 'd'], 10, T0))).toEqual([
        'task-000001',
        'task-000002',
        'task-000004',
        'task-000005',
        'task-000006',
      ]);
      if (before !== undefined && after !== undefined) {
        expect(after.scripts - before.scripts).toBe(1);
        expect(after.pipelines - before.pipelines).toBe(0);
      }
    });

    it('refuses a malformed push alone in a merged turn', async () => {
      const { coalesced } = stores;
      const settled = await Promise.allSettled([
        coalesced.push(at(1, [entry(1, T0)]), { partition: 1, epoch: 1 }),
        coalesced.push(at(1, [entry(2, T0 + 0.5)]), { partition: 1, epoch: 1 }),
        coalesced.push(at(1, [entry(3, T0)]), { partition: 1, epoch: -1 }),
      ]);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'rejected']);
      for (const s of settled.slice(1))
        expect(isWheelhouseError((s as PromiseRejectedResult).reason, 'internal')).toBe(true);
      expect(ids(await coalesced.take(['email'], 10, T0))).toEqual(['task-000001']);
    });

    it('pushes entries over many calls under a fence (300 000; on Redis Cluster 30 000), and refuses as many whole', async () => {
      const { buckets, coalesced } = stores;
      // Still three calls of 10 000 on Redis Cluster, where the client's cost per entry is higher.
      const count = stores.partitions === null ? 300_000 : 30_000;
      await buckets.fence(7, 2);
      const many = (from: number) =>
        Array.from({ length: count }, (_, i) => entry(from + i, T0 - (i % 5_000), i % 2 === 0 ? 'a' : 'b', i % 10));
      await coalesced.push(at(7, many(0)), { partition: 7, epoch: 2 });
      expect(await coalesced.backlog()).toBe(count);
      await buckets.fence(7, 3);
      expectStale(await rejection(coalesced.push(at(7, many(count)), { partition: 7, epoch: 2 })), {
        partition: 7,
        epoch: 2,
        fence: 3,
      });
      expect(await coalesced.backlog()).toBe(count);
    });
  });
});
