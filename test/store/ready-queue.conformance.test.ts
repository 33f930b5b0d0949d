import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DueEntry } from '../../src/domain/model.js';
import { partitionOf } from '../../src/lib/ids.js';
import { fastStoreBackends, type FastStoreBackend, type FastStores } from '../support/redis.js';
import { stopTestRedisCluster } from '../support/redis-cluster.js';

afterAll(stopTestRedisCluster);

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function entry(n: number, dueMs: number, taskType = 'email', priority = 5): DueEntry {
  return { taskId: `task-${String(n).padStart(6, '0')}`, taskType, priority, dueMs };
}

const ids = (entries: DueEntry[]): string[] => entries.map((e) => e.taskId);

/**
 * The order a take must follow: priority, then due time, across types. Ties on due time go
 * by task id in Redis and by insertion in memory; tests push in id order so both agree.
 */
function takeOrder(a: DueEntry, b: DueEntry): number {
  return a.priority - b.priority || a.dueMs - b.dueMs || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0);
}

/**
 * Checks what one take handed out of `pool` (everything queued before it, no take running
 * beside it), as the backend orders: with `global` ordering, the first `max` of the pool in
 * take order; with `partitioned` ordering, as many, in take order, none of a less urgent
 * priority while one more urgent is left, and in each wheel partition the partition's first
 * in take order.
 */
function expectTaken(backend: FastStoreBackend, taken: DueEntry[], pool: DueEntry[], max: number): void {
  const order = [...pool].sort(takeOrder);
  if (backend.ordering === 'global') {
    expect(taken).toEqual(order.slice(0, max));
    return;
  }
  const partitions = backend.partitions ?? 1;
  expect(taken).toHaveLength(Math.min(max, pool.length));
  expect(taken).toEqual([...taken].sort(takeOrder));
  const takenIds = new Set(ids(taken));
  const left = order.filter((e) => !takenIds.has(e.taskId));
  const mostUrgentLeft = Math.min(...left.map((e) => e.priority));
  for (const e of taken) expect(e.priority).toBeLessThanOrEqual(mostUrgentLeft);
  for (let p = 0; p < partitions; p++) {
    const inP = (list: DueEntry[]) => list.filter((e) => partitionOf(e.taskId, partitions) === p);
    const mine = inP(taken);
    expect(mine, `partition ${p}`).toEqual(inP(order).slice(0, mine.length));
  }
}

describe.each(fastStoreBackends)('ReadyQueue on $name', (backend) => {
  let stores: FastStores;
  beforeEach(async () => {
    stores = await backend.open();
  });
  afterEach(async () => {
    await stores.ready.close();
    await stores.close();
  });

  describe('push', () => {
    it('does not duplicate an entry already queued, and keeps the first due time', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW - 10)]);
      await ready.push([entry(1, NOW - 10), entry(1, NOW - 500), entry(2, NOW)]);
      expect(await ready.backlog()).toBe(2);
      expect(await ready.take(['email'], 10, NOW)).toEqual([entry(1, NOW - 10), entry(2, NOW)]);
    });

    it('keeps every field of an entry', async () => {
      const { ready } = stores;
      const entries = [entry(1, NOW, 'etl:load.v2-x_y', 0), entry(2, NOW - 3, 'a', 9)];
      await ready.push(entries);
      expect(await ready.take(['etl:load.v2-x_y', 'a'], 10, NOW)).toEqual(entries);
    });

    it('does nothing for an empty batch', async () => {
      await stores.ready.push([]);
      expect(await stores.ready.backlog()).toBe(0);
    });
  });

  describe('take', () => {
    it('serves the lowest priority number first, whatever the due times', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW - 1_000, 'email', 9), entry(2, NOW, 'email', 0), entry(3, NOW - 10, 'email', 5)]);
      expect(ids(await ready.take(['email'], 2, NOW))).toEqual(['task-000002', 'task-000003']);
      expect(ids(await ready.take(['email'], 2, NOW))).toEqual(['task-000001']);
    });

    it('serves oldest due first within a queue', async () => {
      const { ready } = stores;
      await ready.push([entry(4, NOW + 5), entry(3, NOW - 5), entry(1, NOW), entry(2, NOW)]);
      expect(ids(await ready.take(['email'], 10, NOW))).toEqual([
        'task-000003',
        'task-000001',
        'task-000002',
        'task-000004',
      ]);
    });

    it('orders by due time across task types of one priority, so no type starves', async () => {
      const { ready } = stores;
      const a = [1, 3, 5].map((n) => entry(n, NOW + n, 'a'));
      const b = [2, 4, 6].map((n) => entry(n, NOW + n, 'b'));
      await ready.push([...a, ...b]);
      const first = await ready.take(['a', 'b'], 4, NOW);
      expectTaken(backend, first, [...a, ...b], 4);
      const firstIds = new Set(ids(first));
      const left = [...a, ...b].filter((e) => !firstIds.has(e.taskId));
      expect(await ready.take(['b', 'a'], 4, NOW)).toEqual(left.sort(takeOrder));
    });

    it('takes only the requested task types', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW, 'a'), entry(2, NOW, 'b'), entry(3, NOW, 'c', 0)]);
      expect(ids(await ready.take(['b', 'zzz'], 10, NOW))).toEqual(['task-000002']);
      expect(await ready.backlog()).toBe(2);
    });

    it('takes nothing for no types or a max of 0, and nothing from empty queues', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW)]);
      expect(await ready.take([], 10, NOW)).toEqual([]);
      expect(await ready.take(['email'], 0, NOW)).toEqual([]);
      expect(await ready.take(['other'], 10, NOW)).toEqual([]);
      expect(await ready.backlog()).toBe(1);
    });

    it('takes 500 of 10 000 entries in priority, due, id order', async () => {
      const { ready } = stores;
      const types = ['a', 'b', 'c'];
      const entries = Array.from({ length: 10_000 }, (_, i) =>
        entry(i, NOW - ((i * 7_919) % 5_000), types[i % 3], (i * 31) % 10),
      );
      await ready.push(entries);
      const first = await ready.take(types, 500, NOW);
      expectTaken(backend, first, entries, 500);
      const firstIds = new Set(ids(first));
      const second = await ready.take(types, 500, NOW);
      expectTaken(
        backend,
        second,
        entries.filter((e) => !firstIds.has(e.taskId)),
        500,
      );
      expect(await ready.backlog()).toBe(9_000);
    });

    it('never hands the same entry to two concurrent takes', async () => {
      const { ready } = stores;
      const entries = Array.from({ length: 2_000 }, (_, i) => entry(i, NOW - (i % 97), i % 2 === 0 ? 'a' : 'b', i % 3));
      await ready.push(entries);
      const takes = await Promise.all(
        Array.from({ length: 10 }, (_, i) => ready.take(i % 2 === 0 ? ['a', 'b'] : ['b', 'a'], 300, NOW)),
      );
      const all = takes.flat();
      expect(all).toHaveLength(2_000);
      expect(new Set(ids(all)).size).toBe(2_000);
      expect(await ready.backlog()).toBe(0);
    });
  });

  describe('in flight', () => {
    it('puts back exactly the entries taken before the bound and not acknowledged', async () => {
      const { ready } = stores;
      const entries = [entry(1, NOW - 30, 'a', 2), entry(2, NOW - 20, 'b', 7), entry(3, NOW - 10, 'a', 2)];
      await ready.push(entries);
      const taken = await ready.take(['a', 'b'], 10, NOW);
      expect(taken).toEqual([entries[0], entries[2], entries[1]]);
      await ready.ack([entries[0] as DueEntry]);

      expect(await ready.requeueStale(NOW)).toBe(0);
      expect(await ready.backlog()).toBe(0);
      expect(await ready.requeueStale(NOW + 1)).toBe(2);
      expect(await ready.backlog()).toBe(2);
      expect(await ready.requeueStale(NOW + 1)).toBe(0);

      const again = await ready.take(['a', 'b'], 10, NOW + 5);
      expect(again).toEqual([entries[2], entries[1]]);
      await ready.ack(again);
      expect(await ready.requeueStale(Number.MAX_SAFE_INTEGER)).toBe(0);
    });

    it('does not duplicate an entry that was queued again while in flight', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW)]);
      await ready.take(['email'], 1, NOW);
      await ready.push([entry(1, NOW)]);
      expect(await ready.requeueStale(NOW + 1)).toBe(1);
      expect(await ready.backlog()).toBe(1);
      expect(await ready.take(['email'], 10, NOW + 2)).toEqual([entry(1, NOW)]);
    });

    it('puts back more than one batch of stale entries', async () => {
      const { ready } = stores;
      const entries = Array.from({ length: 2_500 }, (_, i) => entry(i, NOW - i));
      await ready.push(entries);
      expect(await ready.take(['email'], 3_000, NOW)).toHaveLength(2_500);
      expect(await ready.requeueStale(NOW + 1)).toBe(2_500);
      expect(await ready.backlog()).toBe(2_500);
    });

    it('ignores acks of entries not in flight', async () => {
      const { ready } = stores;
      await ready.ack([entry(1, NOW)]);
      await ready.ack([]);
      expect(await ready.requeueStale(NOW + 1)).toBe(0);
    });
  });

  describe('depths and backlog', () => {
    it('reports depth and oldest ready age per type and priority', async () => {
      const { ready } = stores;
      await ready.push([
        entry(1, NOW - 100, 'b', 5),
        entry(2, NOW - 50, 'b', 5),
        entry(3, NOW + 500, 'a', 0),
        entry(4, NOW - 7, 'b', 1),
      ]);
      expect(await ready.depths(NOW)).toEqual([
        { taskType: 'a', priority: 0, depth: 1, oldestReadyAgeMs: 0 },
        { taskType: 'b', priority: 1, depth: 1, oldestReadyAgeMs: 7 },
        { taskType: 'b', priority: 5, depth: 2, oldestReadyAgeMs: 100 },
      ]);
      expect(await ready.backlog()).toBe(4);

      await ready.take(['b'], 10, NOW);
      expect(await ready.depths(NOW)).toEqual([
        { taskType: 'a', priority: 0, depth: 1, oldestReadyAgeMs: 0 },
        { taskType: 'b', priority: 1, depth: 0, oldestReadyAgeMs: null },
        { taskType: 'b', priority: 5, depth: 0, oldestReadyAgeMs: null },
      ]);
      expect(await ready.backlog()).toBe(1);
    });

    it('is empty after the store loses its data', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW)]);
      await ready.take(['email'], 1, NOW);
      await ready.push([entry(2, NOW)]);
      await stores.flush();
      expect(await ready.depths(NOW)).toEqual([]);
      expect(await ready.backlog()).toBe(0);
      expect(await ready.requeueStale(NOW + 1)).toBe(0);
    });
  });

  describe('ahead', () => {
    it('counts what a take of the type hands out first: its queue ahead of it and the more urgent priorities', async () => {
      const { ready } = stores;
      // 300 entries of one type at priority 5, pushed out of due order; 40 at priority 2; 25 of
      // another type at priority 0, which a take of this type never hands out.
      const mine = Array.from({ length: 300 }, (_, i) => entry(i, NOW - ((i * 7919) % 300) * 10));
      const urgent = Array.from({ length: 40 }, (_, i) => entry(1000 + i, NOW, 'email', 2));
      const other = Array.from({ length: 25 }, (_, i) => entry(2000 + i, NOW - 100_000, 'sms', 0));
      await ready.push([...mine, ...urgent, ...other]);
      const order = [...mine].sort(takeOrder);
      for (const position of [0, 1, 17, 150, 299]) {
        expect(await ready.ahead(order[position]!)).toBe(40 + position);
      }
      expect(await ready.ahead(urgent[0]!)).toBe(0);
      expect(await ready.ahead(other[24]!)).toBe(24);
      // The oracle: as many as a take hands out before it (globally ordered: the first of
      // `order`; partitioned: the first of its partition).
      const taken = await ready.take(['email'], 41, NOW);
      expectTaken(backend, taken, [...mine, ...urgent], 41);
      const takenIds = new Set(ids(taken));
      expect(await ready.ahead(order[10]!)).toBe(order.slice(0, 10).filter((e) => !takenIds.has(e.taskId)).length);
    });

    it('is null for an entry its queue does not hold: taken, never pushed, or queued under another priority', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW), entry(2, NOW + 1)]);
      await ready.take(['email'], 1, NOW);
      expect(await ready.ahead(entry(1, NOW))).toBeNull();
      expect(await ready.ahead(entry(2, NOW + 1))).toBe(0);
      expect(await ready.ahead(entry(3, NOW))).toBeNull();
      expect(await ready.ahead(entry(2, NOW + 1, 'email', 4))).toBeNull();
    });
  });

  describe('onPush', () => {
    it('tells listeners the task types once the push has landed', async () => {
      const { ready } = stores;
      const heard: { types: string[]; backlog: Promise<number> }[] = [];
      const stop = ready.onPush((types) => heard.push({ types: [...types].sort(), backlog: ready.backlog() }));
      await ready.push([entry(1, NOW, 'b'), entry(2, NOW, 'a'), entry(3, NOW, 'b')]);
      expect(heard.map((h) => h.types)).toEqual([['a', 'b']]);
      expect(await heard[0]?.backlog).toBe(3);

      stop();
      await ready.push([entry(4, NOW, 'c')]);
      expect(heard).toHaveLength(1);
    });

    it('tells listeners when stale entries are put back', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW, 'a')]);
      await ready.take(['a'], 1, NOW);
      const heard: string[][] = [];
      ready.onPush((types) => heard.push([...types]));
      await ready.requeueStale(NOW + 1);
      expect(heard).toEqual([['a']]);
      await ready.requeueStale(NOW + 1);
      expect(heard).toHaveLength(1);
    });

    it('runs every listener even when one throws, then rejects the push', async () => {
      const { ready } = stores;
      let called = false;
      ready.onPush(() => {
        throw new Error('listener broke');
      });
      ready.onPush(() => {
        called = true;
      });
      await expect(ready.push([entry(1, NOW)])).rejects.toThrow('listener broke');
      expect(called).toBe(true);
      expect(await ready.backlog()).toBe(1);
    });
  });

  describe('held', () => {
    it('holds an entry while it is queued or in flight, and not once it is acknowledged', async () => {
      const { ready } = stores;
      const queued = entry(1, NOW - 10);
      const taken = entry(2, NOW - 5, 'sms', 3);
      const never = entry(3, NOW);
      await ready.push([queued, taken]);
      expect(await ready.take(['sms'], 10, NOW)).toEqual([taken]);
      expect([...(await ready.held([queued, taken, never]))].sort()).toEqual([queued.taskId, taken.taskId]);
      await ready.ack([taken]);
      expect([...(await ready.held([queued, taken, never]))]).toEqual([queued.taskId]);
      expect(await ready.held([])).toEqual(new Set());
    });

    it('looks for an entry in its own queue and with its own due time in flight', async () => {
      const { ready } = stores;
      await ready.push([entry(1, NOW - 10), entry(2, NOW - 10)]);
      await ready.take(['email'], 1, NOW);
      // Same tasks, another type or priority (another queue), or another due time in flight.
      expect(await ready.held([entry(1, NOW - 10, 'sms'), entry(2, NOW - 10, 'email', 1), entry(1, NOW - 9)])).toEqual(
        new Set(),
      );
    });
  });
});
