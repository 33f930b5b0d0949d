import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { partitionOf } from '../../src/lib/ids.js';
import { queueName } from '../../src/store/entry-codec.js';
import { RedisBucketStore } from '../../src/store/redis-buckets.js';
import { bucketKeys, fenceKey, partitionReadyKeys, typeRegistryKeys } from '../../src/store/redis-keys.js';
import { PartitionedReadyQueue } from '../../src/store/redis-partitioned-ready-queue.js';
import { RedisPushChannel } from '../../src/store/redis-push-channel.js';
import { TypeRegistry, addMember } from '../../src/store/redis-type-registry.js';
import { checkEvictionPolicy, clusterReady, openRedisCluster, toStoreError } from '../../src/store/redis.js';
import type { DueEntry } from '../../src/domain/model.js';
import {
  createTestRedisClusterClient,
  stopTestRedisCluster,
  testRedisCluster,
  type TestRedisClusterClient,
} from '../support/redis-cluster.js';

/**
 * The fast index on a real Redis Cluster of three primaries: every script's keys in one slot,
 * a partition's keys beside its fence, the registry that tells a take where to look, and the
 * announcements between nodes. (The conformance suites run the stores themselves on it.)
 */

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);
const PARTITIONS = 8;

afterAll(stopTestRedisCluster);

/** A task id of `partition` (of PARTITIONS): `t<n>.<k>` with the first k that lands there. */
function idIn(partition: number, n: number): string {
  for (let k = 0; ; k++) {
    const id = `t${n}.${k}`;
    if (partitionOf(id, PARTITIONS) === partition) return id;
  }
}

function entry(taskId: string, taskType = 'mail', priority = 5, dueMs = NOW): DueEntry {
  return { taskId, taskType, priority, dueMs };
}

describe('the fast index on Redis Cluster', () => {
  let test: TestRedisClusterClient;
  beforeEach(async () => {
    test = await createTestRedisClusterClient();
  });
  afterEach(async () => {
    vi.restoreAllMocks();
    await test.cleanup();
  });

  const slotOf = async (key: string): Promise<number> => Number(await test.redis.call('CLUSTER', 'KEYSLOT', key));

  it("puts every key of a partition in one slot, the fence's, and a task type's registry in one", async () => {
    const slots = new Set<number>();
    for (const partition of [0, 1, 7, 63, 4095]) {
      const buckets = bucketKeys(test.prefix, partition);
      const ready = partitionReadyKeys(test.prefix, partition);
      const keys = [
        fenceKey(test.prefix, partition),
        buckets.minutes,
        buckets.intact,
        `${buckets.bucketPrefix}${NOW}`,
        ready.registry,
        ready.inFlight,
        `${ready.queuePrefix}${queueName('etl:load.v2-x_y', 0)}`,
        `${ready.queuePrefix}${queueName('mail', 9)}`,
      ];
      const found = new Set(await Promise.all(keys.map(slotOf)));
      expect(found.size, `partition ${partition}: ${keys.join(', ')}`).toBe(1);
      slots.add([...found][0] as number);
    }
    // Different partitions, different slots: they spread over the cluster.
    expect(slots.size).toBe(5);
    for (const taskType of ['mail', 'etl:load.v2-x_y']) {
      const registry = typeRegistryKeys(test.prefix, taskType);
      expect(new Set([await slotOf(registry.partitions), await slotOf(registry.counter)]).size).toBe(1);
    }
  });

  it('sends every script with its keys in one slot, and keeps every key under a hash tag', async () => {
    const scripts = vi.spyOn(test.redis, 'evalsha');
    const buckets = new RedisBucketStore(test.redis, test.prefix);
    const ready = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: PARTITIONS });
    try {
      for (let p = 0; p < PARTITIONS; p++) {
        await buckets.fence(p, 1);
        await buckets.setIntact(p, 1);
        await buckets.add(p, [entry(idIn(p, 100 + p), 'mail', 5, NOW + 90_000)], 1);
        await ready.push([entry(idIn(p, p)), entry(idIn(p, 10 + p), 'sms', 2)], { partition: p, epoch: 1 });
        await buckets.takeUntil(p, NOW + 180_000, 1);
      }
      await ready.push([entry(idIn(3, 50)), entry(idIn(5, 51), 'sms', 0)]);
      const taken = await ready.take(['mail', 'sms'], 7, NOW);
      expect(taken).toHaveLength(7);
      await ready.ack(taken.slice(0, 3));
      await ready.held(taken);
      await ready.requeueStale(NOW + 1);
      await ready.depths(NOW);
      await ready.backlog();
      await ready.ahead(taken[0] as DueEntry);
    } finally {
      await ready.close();
    }
    expect(scripts.mock.calls.length).toBeGreaterThan(50);
    for (const call of scripts.mock.calls) {
      const [, count, ...rest] = call as unknown as [string, number, ...string[]];
      const keys = rest.slice(0, Number(count));
      const slots = new Set(await Promise.all(keys.map(slotOf)));
      expect(slots.size, `script keys ${keys.join(', ')}`).toBe(1);
    }
    const keys: string[] = [];
    for (const node of test.redis.nodes('master')) {
      keys.push(...(await node.keys(`${test.prefix}:*`)));
    }
    const tagged = new RegExp(`^${test.prefix}:\\{(p\\d+|t:[A-Za-z0-9_.:-]+)\\}:`);
    expect(keys.filter((key) => !tagged.test(key))).toEqual([]);
  });

  it("refuses a fenced push holding another partition's task, writing nothing", async () => {
    const ready = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: PARTITIONS });
    const error = await ready
      .push([entry(idIn(2, 1)), entry(idIn(3, 2))], { partition: 2, epoch: 1 })
      .catch((e: unknown) => e);
    expect(isWheelhouseError(error, 'internal')).toBe(true);
    expect(await ready.backlog()).toBe(0);
    await ready.close();
  });

  it('looks only where the registry says, and takes across partitions priority first', async () => {
    const ready = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: PARTITIONS });
    const scripts = vi.spyOn(test.redis, 'evalsha');
    await ready.push([entry(idIn(1, 1), 'mail', 9), entry(idIn(4, 2), 'mail', 0), entry(idIn(6, 3), 'mail', 0)]);
    const before = scripts.mock.calls.length;
    const first = await ready.take(['mail'], 2, NOW);
    // One take script for each of the two partitions holding priority 0; none elsewhere.
    expect(scripts.mock.calls.length - before).toBe(2);
    expect(first.map((e) => e.taskId).sort()).toEqual([idIn(4, 2), idIn(6, 3)].sort());
    expect((await ready.take(['mail'], 5, NOW)).map((e) => e.taskId)).toEqual([idIn(1, 1)]);
    await ready.close();
  });

  it("hands out what a wave took when another partition's script in the same wave fails", async () => {
    // Seen in `npm run bench:herd-failover -- --store redis`: a take during a Redis primary's
    // failover lost the entries the healthy partitions of its wave had moved to in flight, and
    // they went out only after the stale-entry requeue, 30 s later.
    const errors: string[] = [];
    const ready = new PartitionedReadyQueue(test.redis, test.prefix, {
      partitions: PARTITIONS,
      onError: (_error, context) => errors.push(context),
    });
    await ready.push([entry(idIn(1, 1)), entry(idIn(4, 2)), entry(idIn(6, 3))]);
    const down = partitionReadyKeys(test.prefix, 4).inFlight;
    const evalsha = test.redis.evalsha.bind(test.redis);
    vi.spyOn(test.redis, 'evalsha').mockImplementation((...args: Parameters<typeof evalsha>) =>
      args.includes(down) ? Promise.reject(new Error('CLUSTERDOWN The cluster is down')) : evalsha(...args),
    );
    const taken = await ready.take(['mail'], 3, NOW);
    expect(taken.map((e) => e.taskId).sort()).toEqual([idIn(1, 1), idIn(6, 3)].sort());
    expect(errors).toEqual(['a take of ready entries stopped after 2']);
    vi.restoreAllMocks();
    expect((await ready.take(['mail'], 3, NOW)).map((e) => e.taskId)).toEqual([idIn(4, 2)]);
    await ready.close();
  });

  it('keeps a registry member that a push bumped after a take read it', async () => {
    const channel = new RedisPushChannel(test.redis, test.prefix, () => undefined);
    const registry = new TypeRegistry(test.redis, test.prefix, channel);
    const members = new Map<string, Set<string>>();
    addMember(members, 'mail', 5, 3);
    await registry.bump(members, 'test');
    const read = await registry.read(['mail']);
    expect(read).toEqual([expect.objectContaining({ taskType: 'mail', priority: 5, partition: 3, member: '5:3' })]);
    await registry.bump(members, 'test'); // a push that landed after the take looked
    await registry.prune(read);
    expect((await registry.read(['mail'])).map((q) => q.member)).toEqual(['5:3']);
    await registry.prune(await registry.read(['mail']));
    expect(await registry.read(['mail'])).toEqual([]);
    // Dropped and bumped again: a new score, never one a take may still hold.
    await registry.bump(members, 'test');
    await registry.prune(read);
    expect((await registry.read(['mail'])).map((q) => q.member)).toEqual(['5:3']);
  });

  it('registers again, on the periodic requeue, queues whose registration was lost', async () => {
    const ready = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: PARTITIONS });
    const heard: string[][] = [];
    ready.onPush((types) => heard.push([...types]));
    await ready.push([entry(idIn(2, 1)), entry(idIn(5, 2))]);
    // What a node that died between a push and its registry bump leaves behind.
    await test.redis.del(typeRegistryKeys(test.prefix, 'mail').partitions);
    expect(await ready.take(['mail'], 10, NOW)).toEqual([]);
    expect(await ready.backlog()).toBe(2);
    heard.length = 0;
    expect(await ready.requeueStale(NOW)).toBe(0);
    expect(heard).toEqual([['mail']]);
    expect((await ready.take(['mail'], 10, NOW)).map((e) => e.taskId).sort()).toEqual([idIn(2, 1), idIn(5, 2)].sort());
    await ready.close();
  });

  it('checks the eviction policy of every primary', async () => {
    const { servers } = await testRedisCluster();
    const last = servers[2]!;
    const direct = openRedisCluster({ url: test.seeds, prefix: test.prefix });
    await clusterReady(direct, 10_000);
    try {
      expect(await checkEvictionPolicy(direct)).toBeNull();
      await direct
        .nodes('master')
        .find((n) => n.options.port === last.port)!
        .config('SET', 'maxmemory-policy', 'allkeys-lru');
      await expect(checkEvictionPolicy(direct)).rejects.toThrow(/allkeys-lru/);
    } finally {
      await direct
        .nodes('master')
        .find((n) => n.options.port === last.port)!
        .config('SET', 'maxmemory-policy', 'noeviction');
      await direct.quit();
    }
  });

  describe('push announcements across instances', () => {
    let other: TestRedisClusterClient;
    let a: PartitionedReadyQueue;
    let b: PartitionedReadyQueue;
    const heardB: string[][] = [];
    beforeAll(async () => {
      other = await createTestRedisClusterClient();
    });
    afterAll(async () => {
      await other.cleanup();
    });

    it("wakes the other node's listeners once the entries can be taken there", async () => {
      // Two nodes: two cluster clients, one prefix.
      a = new PartitionedReadyQueue(test.redis, test.prefix, { partitions: PARTITIONS });
      const second = openRedisCluster({ url: other.seeds, prefix: test.prefix });
      await clusterReady(second, 10_000);
      b = new PartitionedReadyQueue(second, test.prefix, { partitions: PARTITIONS });
      const takenOnWake: Promise<DueEntry[]>[] = [];
      b.onPush((types) => {
        heardB.push([...types].sort());
        takenOnWake.push(b.take([...types], 10, NOW));
      });
      await b.listening();
      try {
        await a.push([entry(idIn(1, 1), 'report'), entry(idIn(6, 2), 'report')], undefined);
        await vi.waitFor(() => expect(heardB).toEqual([['report']]), { timeout: 5_000, interval: 10 });
        const taken = await takenOnWake[0];
        expect(taken?.map((e) => e.taskId).sort()).toEqual([idIn(1, 1), idIn(6, 2)].sort());
      } finally {
        await Promise.all([a.close(), b.close()]);
        await second.quit();
      }
    });
  });
});

describe('a Redis Cluster client with no cluster to reach', () => {
  it('fails a command at once with store_unavailable instead of queueing it, and says when start gave up', async () => {
    // A port nothing listens on: the client never gets a slot map.
    const lost = openRedisCluster({ url: 'redis://127.0.0.1:1', prefix: 'whc-unreachable' });
    try {
      const startedMs = Date.now();
      const error: unknown = await lost.ping().then(
        () => null,
        (e: unknown) => toStoreError(e, 'ping'),
      );
      expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
      expect(Date.now() - startedMs).toBeLessThan(5_000); // it used to wait for ever
      await expect(clusterReady(lost, 200)).rejects.toThrow(/not ready after 200 ms/);
    } finally {
      lost.disconnect();
    }
  });
});
