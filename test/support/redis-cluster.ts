/**
 * A real Redis Cluster of three primaries on this machine, for the tests that run the fast
 * index and nodes on Redis Cluster: three private `redis-server --cluster-enabled yes`
 * processes (test/support/redis-server.ts: free ports, temporary dirs, SIGKILLed when the test
 * process exits), joined by `redis-cli --cluster create … --cluster-replicas 0`. A test file
 * starts one (`testRedisCluster`, shared by its tests, which isolate themselves by key prefix)
 * and stops it in `afterAll` (`stopTestRedisCluster`). Starting one takes a second or two.
 *
 * With `{ replicas: 1 }` each primary gets a replica (six processes, `--cluster-replicas 1`),
 * and `failOver` kills a primary with SIGKILL and waits for its replica's promotion, as an
 * operator's cluster does when a machine dies.
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
  /** Every node: the three primaries as started first, then their replicas (if any). */
  readonly servers: readonly RedisServer[];
  /** Every node as a seed list: `redis://127.0.0.1:p1,redis://127.0.0.1:p2,redis://127.0.0.1:p3`. */
  readonly seeds: string;
  /** Kills the processes and deletes their directories. */
  stop(): Promise<void>;
}

/** Runs one command on one node, on a connection of its own. */
export async function onNode(port: number, ...args: string[]): Promise<unknown> {
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
 * Starts three cluster-enabled redis-servers (six with `replicas: 1`) and makes them one
 * cluster; resolves once every node says `cluster_state:ok` and, with replicas, once each
 * replica is linked to its primary and has all it sent. `args` go to each server, e.g.
 * `['--cluster-node-timeout', '1000']`.
 */
export async function startRedisCluster(
  args: readonly string[] = [],
  /** `beforeCreate`: runs once the servers are up, before they are joined (e.g. to relay their ports). */
  options: { replicas?: 0 | 1; beforeCreate?: (servers: readonly RedisServer[]) => Promise<void> } = {},
): Promise<RedisCluster> {
  const replicas = options.replicas ?? 0;
  const servers: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(servers.map((server) => server.cleanup()));
  };
  try {
    for (let i = 0; i < 3 * (1 + replicas); i++) {
      // `nodes.conf` is written in the server's own --dir.
      servers.push(
        await startRedisServer({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', ...args] }),
      );
    }
    await options.beforeCreate?.(servers);
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    await run(
      'redis-cli',
      ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'],
      {
        timeout: 30_000,
      },
    );
    await clusterOk(servers);
    if (replicas > 0) await replicasInSync(servers);
  } catch (error) {
    await stop();
    throw error;
  }
  return { servers, seeds: servers.map((server) => server.url).join(','), stop };
}

/**
 * Resolves once every running server says `cluster_state:ok` (after a start, a primary's
 * restart, or a failover; a killed server is not asked).
 */
export async function clusterOk(servers: readonly RedisServer[], timeoutMs = 30_000): Promise<void> {
  await eventually(
    async () => {
      const infos = await Promise.all(
        servers
          .filter((server) => server.running())
          .map((server) => onNode(server.port, 'CLUSTER', 'INFO').catch(() => 'unreachable')),
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

/** One line of `CLUSTER NODES`, as far as these tests need it. */
export interface ClusterNodeLine {
  id: string;
  port: number;
  /** `master` or `slave` (a node the others declared failed keeps its role and gains `fail`). */
  role: 'master' | 'slave';
  failed: boolean;
  /** A replica's primary; `-` for a primary. */
  masterId: string;
  /** Slot ranges a primary serves, inclusive. */
  slots: [number, number][];
}

/** `CLUSTER NODES` as one node sees it. */
export async function clusterNodes(port: number): Promise<ClusterNodeLine[]> {
  const text = String(await onNode(port, 'CLUSTER', 'NODES'));
  return text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const [id = '', address = '', flags = '', masterId = '', , , , , ...ranges] = line.split(' ');
      const flagList = flags.split(',');
      return {
        id,
        port: Number(address.split('@')[0]?.split(':')[1]),
        role: flagList.includes('master') ? 'master' : 'slave',
        failed: flagList.includes('fail'),
        masterId,
        slots: ranges
          .filter((range) => !range.startsWith('['))
          .map((range) => {
            const [from, to = from] = range.split('-');
            return [Number(from), Number(to)] as [number, number];
          }),
      };
    });
}

/** The server that serves `key`'s slot as primary right now, and its replica (if any). */
export async function primaryOf(
  cluster: RedisCluster,
  key: string,
): Promise<{ primary: RedisServer; replica: RedisServer | undefined }> {
  const asked = cluster.servers.find((server) => server.running());
  if (asked === undefined) throw new Error('no node of the cluster runs');
  const slot = Number(await onNode(asked.port, 'CLUSTER', 'KEYSLOT', key));
  const nodes = await clusterNodes(asked.port);
  const master = nodes.find(
    (node) => node.role === 'master' && !node.failed && node.slots.some(([from, to]) => from <= slot && slot <= to),
  );
  const byPort = (port: number | undefined): RedisServer | undefined =>
    cluster.servers.find((server) => server.port === port);
  const primary = byPort(master?.port);
  if (master === undefined || primary === undefined) throw new Error(`no primary serves slot ${slot} (${key})`);
  const replica = byPort(nodes.find((node) => node.role === 'slave' && node.masterId === master.id)?.port);
  return { primary, replica };
}

/**
 * Resolves once every running primary has each of its replicas online with all it sent
 * (`INFO replication`: the replica's `offset` equals the primary's `master_repl_offset`).
 */
export async function replicasInSync(servers: readonly RedisServer[], timeoutMs = 30_000): Promise<void> {
  await eventually(
    async () => {
      let replicas = 0;
      for (const server of servers.filter((s) => s.running())) {
        const info = String(await onNode(server.port, 'INFO', 'replication').catch(() => ''));
        if (!info.includes('role:master')) continue;
        const offset = /master_repl_offset:(\d+)/.exec(info)?.[1];
        for (const match of info.matchAll(/slave\d+:[^\r\n]*state=(\w+),offset=(\d+)/g)) {
          if (match[1] !== 'online' || match[2] !== offset) return undefined;
          replicas++;
        }
      }
      return replicas === servers.filter((s) => s.running()).length / 2 ? true : undefined;
    },
    timeoutMs,
    'every replica online and in sync',
    50,
  );
}

/** Sends `signal` to a node's process (its pid from `INFO server`, read while it answers). */
export async function signalNode(server: RedisServer, signal: 'SIGSTOP' | 'SIGCONT', pid?: number): Promise<number> {
  const id = pid ?? Number(/process_id:(\d+)/.exec(String(await onNode(server.port, 'INFO', 'server')))?.[1]);
  if (!Number.isSafeInteger(id) || id <= 0) throw new Error(`no pid for redis-server on port ${server.port}`);
  process.kill(id, signal);
  return id;
}

/**
 * Kills `primary` with SIGKILL and resolves once `replica` calls itself a primary and every
 * running node says `cluster_state:ok`; answers when each happened (`Date.now()`).
 * `whileDown` runs right after the kill (e.g. to let a stopped replica go on).
 */
export async function failOver(
  cluster: RedisCluster,
  primary: RedisServer,
  replica: RedisServer,
  whileDown: () => Promise<void> = async () => undefined,
): Promise<{ killedAt: number; promotedAt: number }> {
  await primary.kill();
  const killedAt = Date.now();
  await whileDown();
  await eventually(
    async () => {
      const nodes = await clusterNodes(replica.port).catch(() => []);
      return nodes.some((node) => node.port === replica.port && node.role === 'master') ? true : undefined;
    },
    60_000,
    `the replica on port ${replica.port} promoted`,
    20,
  );
  const promotedAt = Date.now();
  await clusterOk(cluster.servers, 60_000);
  return { killedAt, promotedAt };
}
