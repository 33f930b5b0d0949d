/**
 * A due entry's limits travel with it through the ready queues (issue 28, decision 0023): a
 * dispatcher that takes an entry must know the keys of its task without reading the row, on
 * every path an entry takes — unfenced and fenced pushes, take, requeue of stale entries —
 * and a queue must still hold a task once, find it (`held`, `ahead`) and let it go (`ack`).
 * Every backend: Redis (single layout), Redis Cluster (partitioned layout), in process.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DueEntry } from '../../src/domain/model.js';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { partitionOf } from '../../src/lib/ids.js';
import { fastStoreBackends, type FastStores } from '../support/redis.js';
import { stopTestRedisCluster } from '../support/redis-cluster.js';

afterAll(stopTestRedisCluster);

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function entry(n: number, dueMs: number, limits?: string[], taskType = 'email', priority = 5): DueEntry {
  const e: DueEntry = { taskId: `task-${String(n).padStart(6, '0')}`, taskType, priority, dueMs };
  if (limits !== undefined) e.limits = limits;
  return e;
}

/** Names at the edges of what a limit name may be: every allowed character, and 200 long. */
const LIMITS = ['customer:42', 'stripe-api', 'x'.repeat(200), 'z_A.9:b-c'];

/** Each entry with its own fields only: an entry without limits must come back without the key. */
function exactly(entries: DueEntry[]): DueEntry[] {
  return entries.map((e) => ({ ...e }));
}

describe.each(fastStoreBackends)('ReadyQueue with limits on $name', (backend) => {
  let stores: FastStores;
  beforeEach(async () => {
    stores = await backend.open();
  });
  afterEach(async () => {
    await stores.ready.close();
    await stores.close();
  });

  it('hands out an entry with its limits, and one without limits without any', async () => {
    const { ready } = stores;
    const entries = [entry(1, NOW - 20, LIMITS), entry(2, NOW - 10), entry(3, NOW, ['solo'], 'sms', 0)];
    await ready.push(entries);
    const taken = await ready.take(['email', 'sms'], 10, NOW);
    expect(taken).toStrictEqual(exactly([entries[2] as DueEntry, entries[0] as DueEntry, entries[1] as DueEntry]));
    expect('limits' in (taken[2] as DueEntry)).toBe(false);
  });

  it('keeps the limits through a fenced push', async () => {
    const { buckets, ready } = stores;
    const limited = entry(7, NOW - 5, ['a', 'b']);
    const partition = partitionOf(limited.taskId, backend.partitions ?? 16);
    await buckets.fence(partition, 3);
    await ready.push([limited], { partition, epoch: 3 });
    expect(await ready.take(['email'], 10, NOW)).toStrictEqual(exactly([limited]));
  });

  it('holds a task once, however often its entry is pushed', async () => {
    const { ready } = stores;
    const limited = entry(1, NOW, ['a', 'b']);
    await ready.push([limited]);
    await ready.push([limited, { ...limited }]);
    expect(await ready.backlog()).toBe(1);
    expect(await ready.take(['email'], 10, NOW)).toStrictEqual(exactly([limited]));
  });

  it('puts a stale entry back with its limits, once even when it was queued again meanwhile', async () => {
    const { ready } = stores;
    const entries = [entry(1, NOW - 30, ['a']), entry(2, NOW - 20), entry(3, NOW - 10, ['b', 'c'], 'sms', 2)];
    await ready.push(entries);
    expect(await ready.take(['email', 'sms'], 10, NOW)).toHaveLength(3);
    await ready.push([entries[0] as DueEntry]);
    expect(await ready.requeueStale(NOW + 1)).toBe(3);
    expect(await ready.backlog()).toBe(3);
    const again = await ready.take(['email', 'sms'], 10, NOW + 2);
    expect(again).toStrictEqual(exactly([entries[2] as DueEntry, entries[0] as DueEntry, entries[1] as DueEntry]));
    await ready.ack(again);
    expect(await ready.requeueStale(Number.MAX_SAFE_INTEGER)).toBe(0);
  });

  it('finds a limited entry queued and in flight, and lets it go on ack', async () => {
    const { ready } = stores;
    const queued = entry(1, NOW - 10, ['a']);
    const taken = entry(2, NOW - 5, ['a', 'b'], 'sms', 3);
    await ready.push([queued, taken]);
    expect(await ready.take(['sms'], 10, NOW)).toStrictEqual(exactly([taken]));
    expect([...(await ready.held([queued, taken]))].sort()).toEqual([queued.taskId, taken.taskId]);
    await ready.ack([taken]);
    expect([...(await ready.held([queued, taken]))]).toEqual([queued.taskId]);
    expect(await ready.requeueStale(Number.MAX_SAFE_INTEGER)).toBe(0);
  });

  it('counts what is ahead of a limited entry', async () => {
    const { ready } = stores;
    const urgent = entry(1, NOW, ['u'], 'email', 1);
    const before = entry(2, NOW - 20);
    const mine = entry(3, NOW - 10, ['customer:42']);
    const after = entry(4, NOW, ['customer:42']);
    await ready.push([urgent, before, mine, after]);
    expect(await ready.ahead(mine)).toBe(2);
    expect(await ready.ahead(after)).toBe(3);
  });

  it('refuses limits a member could not carry: unsorted, repeated, empty, or holding | or ,', async () => {
    const { ready } = stores;
    for (const limits of [['b', 'a'], ['a', 'a'], [''], ['a|b'], ['a,b']]) {
      const error = await ready.push([entry(1, NOW, limits)]).then(
        () => null,
        (e: unknown) => e,
      );
      expect(isWheelhouseError(error) && error.code === 'internal', JSON.stringify(limits)).toBe(true);
    }
    expect(await ready.backlog()).toBe(0);
  });
});
