import type { CompiledOptions } from '../lib/config.js';
import type { ConnectionHealth } from './connection-health.js';
import { CoalescingReadyQueue } from './coalescing-ready-queue.js';
import type { BucketStore } from './fast-index-types.js';
import { RedisBucketStore } from './redis-buckets.js';
import { PartitionedReadyQueue } from './redis-partitioned-ready-queue.js';
import { RedisReadyQueue } from './redis-ready-queue.js';
import {
  checkEvictionPolicy,
  clusterReady,
  isCluster,
  openRedis,
  openRedisCluster,
  type RedisClient,
} from './redis.js';

/** How long a node's start waits for a Redis Cluster to be reachable and serve every slot. */
const CLUSTER_READY_MS = 10_000;

/** The Postgres backend's Redis part: its client, fast indexes, and what to warn about. */
export interface RedisStores {
  redis: RedisClient;
  buckets: BucketStore;
  ready: CoalescingReadyQueue;
  warning: string | null;
}

/**
 * Opens Redis (one server or a cluster) and the stores on it. A module of its own, imported
 * only when the backend is Postgres + Redis: the embedded default does not load ioredis
 * (~0.1 s of a start that should be ready in 2 s, issue 32).
 */
export async function openRedisStores(
  options: Pick<CompiledOptions, 'redisUrl' | 'redisPrefix' | 'redisCluster' | 'partitions'>,
  health: ConnectionHealth,
): Promise<RedisStores> {
  const redisOptions = { url: options.redisUrl, prefix: options.redisPrefix, health };
  const redis = options.redisCluster ? openRedisCluster(redisOptions) : openRedis(redisOptions);
  let warning: string | null;
  try {
    if (isCluster(redis)) await clusterReady(redis, CLUSTER_READY_MS);
    warning = await checkEvictionPolicy(redis);
  } catch (error) {
    redis.disconnect();
    throw error;
  }
  // The ready queues' subscriber connection is not watched: losing it alone delays a wake-up
  // of a long poll by at most its one-second recheck, and when Redis goes away the client
  // above tells of it.
  // One Redis server: every ready queue under one hash tag, a take is one script. Redis
  // Cluster: the queues of each wheel partition in its slot (docs/decisions/0017-redis-cluster.md).
  const ready = new CoalescingReadyQueue(
    isCluster(redis)
      ? new PartitionedReadyQueue(redis, options.redisPrefix, { partitions: options.partitions })
      : new RedisReadyQueue(redis, options.redisPrefix),
  );
  return { redis, buckets: new RedisBucketStore(redis, options.redisPrefix), ready, warning };
}
