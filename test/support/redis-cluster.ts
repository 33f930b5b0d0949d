/**
 * A real Redis Cluster of three primaries on this machine, for the tests that run the fast
 * index and nodes on Redis Cluster: three private `redis-server --cluster-enabled yes`
 * processes (test/support/redis-server.ts: free ports, temporary dirs, SIGKILLed when the test
 * process exits), joined by `redis-cli --cluster create … --cluster-replicas 0`. A test file
 * starts one (`testRedisCluster`, shared by its tests, which isolate themselves by key prefix)
 * and stops it in `afterAll` (`stopTestRedisCluster`). Starting one takes a second or two.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { Redis, type Cluster } from 'ioredis';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { TEST_POSTGRES_URL } from './postgres.js';
import { clusterReady, openRedisCluster } from '../../src/store/redis.js';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { eventually } from './waits.js';

const run = promisify(execFile);

export interface RedisCluster {
  /** The three primaries. */
  readonly servers: readonly RedisServer[];
  /** Every node as a seed list: `redis://127.0.0.1:p1,redis://127.0.0.1:p2,redis://127.0.0.1:p3`. */
  readonly seeds: string;
  /** Kills the processes and deletes their directories. */
  stop(): Promise<void>;
}

/** Runs one command on one node, on a connection of its own. */
async function onNode(port: number, ...args: string[]): Promise<unknown> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await client.call(args[0] as string, ...args.slice(1));
  } finally {
    client.disconnect();
  }
}

/**
 * Starts three cluster-enabled redis-servers and makes them one cluster; resolves once every
 * node says `cluster_state:ok`. `args` go to each server, e.g. `['--cluster-node-timeout', '1000']`.
 */
export async function startRedisCluster(args: readonly string[] = []): Promise<RedisCluster> {
  const servers: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(servers.map((server) => server.cleanup()));
  };
  try {
    for (let i = 0; i < 3; i++) {
      // `nodes.conf` is written in the server's own --dir.
      servers.push(
        await startRedisServer({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', ...args] }),
      );
    }
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], {
      timeout: 30_000,
    });
    await clusterOk(servers);
  } catch (error) {
    await stop();
    throw error;
  }
  return { servers, seeds: servers.map((server) => server.url).join(','), stop };
}

/** Resolves once every server says `cluster_state:ok` (after a start, or a primary's restart). */
export async function clusterOk(servers: readonly RedisServer[], timeoutMs = 30_000): Promise<void> {
  await eventually(
    async () => {
      const infos = await Promise.all(
        servers.map((server) => onNode(server.port, 'CLUSTER', 'INFO').catch(() => 'unreachable')),
      );
      return infos.every((info) => String(info).includes('cluster_state:ok')) ? true : undefined;
    },
    timeoutMs,
    'cluster_state:ok on every node',
    50,
  );
}

/** Options of an in-process node on the test Postgres and a Redis Cluster (`seeds`): 8 partitions, quiet. */
export function redisClusterNodeOptions(
  seeds: string,
  schema: string,
  redisPrefix: string,
  more: WheelhouseOptions = {},
): WheelhouseOptions {
  return {
    backend: 'postgres',
    port: 0,
    logLevel: 'silent',
    builtinExecutors: false,
    partitions: 8,
    postgresUrl: TEST_POSTGRES_URL,
    postgresSchema: schema,
    postgresPoolSize: 4,
    redisUrl: seeds,
    redisCluster: true,
    redisPrefix,
    ...more,
  };
}

let shared: Promise<RedisCluster> | null = null;

/** This test file's Redis Cluster, started at the first call. */
export function testRedisCluster(): Promise<RedisCluster> {
  shared ??= startRedisCluster();
  return shared;
}

/** Stops this test file's Redis Cluster, if one was started: for `afterAll`. */
export async function stopTestRedisCluster(): Promise<void> {
  const cluster = shared;
  shared = null;
  if (cluster !== null) await (await cluster).stop();
}

export interface TestRedisClusterClient {
  redis: Cluster;
  /** Random, e.g. `whc-3f9a1c2b7d`: every key of this test starts with `${prefix}:`. */
  prefix: string;
  /** The cluster's seeds, for a node's `redisUrl`. */
  seeds: string;
  /** Deletes every key of the prefix, on every primary. */
  flush(): Promise<void>;
  /** Deletes every key of the prefix and closes the client. */
  cleanup(): Promise<void>;
}

/** A client from `openRedisCluster` on this file's cluster, with a fresh random prefix. */
export async function createTestRedisClusterClient(): Promise<TestRedisClusterClient> {
  const { seeds } = await testRedisCluster();
  const prefix = `whc-${randomBytes(5).toString('hex')}`;
  const redis = openRedisCluster({ url: seeds, prefix });
  await clusterReady(redis, 10_000);
  return {
    redis,
    prefix,
    seeds,
    flush: () => deleteClusterKeysWithPrefix(redis, prefix),
    cleanup: async () => {
      await deleteClusterKeysWithPrefix(redis, prefix);
      await redis.quit();
    },
  };
}

/** Deletes every key that starts with `${prefix}:` on every primary, by SCAN (never KEYS). */
export async function deleteClusterKeysWithPrefix(redis: Cluster, prefix: string): Promise<void> {
  await Promise.all(
    redis.nodes('master').map(async (node) => {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        // One UNLINK per key: keys of one node may lie in many slots.
        await Promise.all(keys.map((key) => node.unlink(key)));
        cursor = next;
      } while (cursor !== '0');
    }),
  );
}
