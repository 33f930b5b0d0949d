/**
 * Redis for tests: one shared server, isolated by a random key prefix per test (file or
 * case), cleaned up with SCAN. Also the fast-store backends the conformance suites run on.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryBucketStore } from '../../src/store/memory-buckets.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { RedisBucketStore } from '../../src/store/redis-buckets.js';
import { PartitionedReadyQueue } from '../../src/store/redis-partitioned-ready-queue.js';
import { RedisReadyQueue } from '../../src/store/redis-ready-queue.js';
import { openRedis } from '../../src/store/redis.js';
import type { BucketStore, ReadyQueue } from '../../src/store/fast-index-types.js';
import { createTestRedisClusterClient } from './redis-cluster.js';

export const TEST_REDIS_URL = process.env.WHEELHOUSE_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface TestRedis {
  redis: Redis;
  /** Random, e.g. `wht-3f9a1c2b7d`: every key of this test starts with `${prefix}:`. */
  prefix: string;
  /** Deletes every key of the prefix. */
  flush(): Promise<void>;
  /** Deletes every key of the prefix and closes the client. */
  cleanup(): Promise<void>;
}

/** A client from `openRedis` with a fresh random prefix. */
export async function createTestRedis(): Promise<TestRedis> {
  const prefix = `wht-${randomBytes(5).toString('hex')}`;
  const redis = openRedis({ url: TEST_REDIS_URL, prefix });
  await redis.ping();
  return {
    redis,
    prefix,
    flush: () => deleteKeysWithPrefix(redis, prefix),
    cleanup: async () => {
      await deleteKeysWithPrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/** Deletes every key that starts with `${prefix}:`, by SCAN (never KEYS). */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
}

/** The fast-index stores of one backend, isolated from every other test. */
export interface FastStores {
  buckets: BucketStore;
  ready: ReadyQueue;
  /** Loses all data, as a Redis flush or restart (or a process restart, in memory) would. */
  flush: () => Promise<void>;
  close: () => Promise<void>;
}

export interface FastStoreBackend {
  name: 'redis' | 'redis-cluster' | 'memory';
  /**
   * How a take orders what it hands out: `global` — priority, then due, then task id over all
   * queues; `partitioned` — priority over all queues, due and task id within each wheel
   * partition (`partitions` of them), a take spreading over the partitions.
   */
  ordering: 'global' | 'partitioned';
  /** The wheel partition count the backend places entries by (partitioned ordering). */
  partitions?: number;
  open(): Promise<FastStores>;
}

/** Wheel partitions of the Redis Cluster backend's ready queues. */
export const CLUSTER_TEST_PARTITIONS = 8;

/**
 * The implementations of the fast index, for `describe.each`: one Redis server, a Redis
 * Cluster of three primaries (test/support/redis-cluster.ts; a file using it calls
 * `stopTestRedisCluster` in `afterAll`), and in process.
 */
export const fastStoreBackends: FastStoreBackend[] = [
  {
    name: 'redis',
    ordering: 'global',
    open: async () => {
      const test = await createTestRedis();
      return {
        buckets: new RedisBucketStore(test.redis, test.prefix),
        ready: new RedisReadyQueue(test.redis, test.prefix),
        flush: test.flush,
        close: test.cleanup,
      };
    },
  },
  {
    name: 'redis-cluster',
    ordering: 'partitioned',
    partitions: CLUSTER_TEST_PARTITIONS,
    open: async () => {
      const test = await createTestRedisClusterClient();
      return {
        buckets: new RedisBucketStore(test.redis, test.prefix),
        ready: new PartitionedReadyQueue(test.redis, test.prefix, { partitions: CLUSTER_TEST_PARTITIONS }),
        flush: test.flush,
        close: test.cleanup,
      };
    },
  },
  {
    name: 'memory',
    ordering: 'global',
    open: async () => {
      const buckets = new MemoryBucketStore();
      const ready = new MemoryReadyQueue();
      return {
        buckets,
        ready,
        flush: async () => {
          buckets.clear();
          ready.clear();
        },
        close: async () => undefined,
      };
    },
  },
];
