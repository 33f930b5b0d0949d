/**
 * The two store cases of `npm run bench:herd-failover` (bench/herd-failover.ts), each with the
 * store that fails over run highly available and the other one the local single server:
 *
 * - `postgres`: a pg_auto_failover set (bench/pg-ha.ts) on 56432–56434 — clear of the
 *   nemesis's 55432–55434 — reached through its multi-host URL, and the local Redis under a
 *   fresh key prefix. The kill is pg-failover's: SIGKILL of the primary's keeper, server and
 *   backends; the set has failed over when the secondary takes writes.
 * - `redis`: a Redis Cluster of three primaries and three replicas
 *   (test/support/redis-cluster.ts, node timeout 1.5 s as in the nemesis), on which a node keeps
 *   its ready queues per wheel partition (decision 0017), and the local Postgres under a fresh
 *   schema. The primary killed is the one that serves the most wheel partitions, not counting
 *   the one that holds the task type's registry (every claim of the type reads it first, so
 *   while it is down no claim of the type is made at all: not a partition's window), as in
 *   test/faults/redis-cluster-failover.slow.test.ts; it has failed over when its replica
 *   calls itself a primary and the cluster says `cluster_state:ok`.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { bucketKeys, typeRegistryKeys } from '../src/store/redis-keys.js';
import { PgHa } from './pg-ha.js';
import { POSTGRES_URL, REDIS_URL } from './stores.js';
import { failOver, onNode, primaryOf, startRedisCluster, type RedisCluster } from '../test/support/redis-cluster.js';
import type { RedisServer } from '../test/support/redis-server.js';

/** Where the Postgres set of the `postgres` case listens (monitor; the servers take the next two). */
const PG_HA_BASE_PORT = 56432;
/** How long a Redis node may go unheard before its replica is promoted, ms (Redis' default: 15 000). */
const REDIS_NODE_TIMEOUT_MS = 1_500;

export type HerdStore = 'postgres' | 'redis';

/** What a kill of the primary did. */
export interface Failover {
  /** Date.now() at the kill (the process gone). */
  killedMs: number;
  /** From the kill to the replacement taking over (pg: a server takes writes; redis: the replica promoted), ms. */
  takeOverMs: number;
  what: string;
  /** redis: the wheel partitions whose keys the killed primary served; postgres: every partition. */
  affectedPartitions: number[] | null;
}

export interface HerdStores {
  /** `wheelhouse node` flags that put a node on these stores (its schema and prefix come apart). */
  readonly nodeFlags: readonly string[];
  /** One line on the set, for the log. */
  readonly description: string;
  /** A URL of a Postgres server that holds the run's schema and takes writes now. */
  postgresUrl(): Promise<string>;
  /** Kills the primary with SIGKILL; resolves once its replacement took over. */
  killPrimary(): Promise<Failover>;
  /** Stops the HA set and removes what the run left in the single server. Safe after a failure. */
  stop(): Promise<void>;
}

export interface HerdStoreNames {
  schema: string;
  redisPrefix: string;
  taskType: string;
  partitions: number;
}

export function startHerdStores(
  store: HerdStore,
  names: HerdStoreNames,
  log: (line: string) => void,
): Promise<HerdStores> {
  return store === 'postgres' ? startPgHa(names, log) : startRedisClusterStores(names);
}

async function startPgHa(names: HerdStoreNames, log: (line: string) => void): Promise<HerdStores> {
  const ha = await PgHa.start({ basePort: PG_HA_BASE_PORT, log });
  const primary = await ha.primary();
  const replication = primary === undefined ? null : await ha.replicationSettings(primary.port);
  return {
    nodeFlags: ['--postgres-url', ha.url, '--retry-base-seconds', '0'],
    description:
      `Postgres: pg_auto_failover on ${ha.url} (monitor settings ${JSON.stringify(ha.monitorSettings)}; ` +
      `synchronous_standby_names '${replication?.synchronousStandbyNames ?? '?'}', synchronous_commit ${replication?.synchronousCommit ?? '?'}); ` +
      `Redis: ${REDIS_URL} prefix ${names.redisPrefix}`,
    postgresUrl: async () => ha.serverUrl(await ha.waitForWritable()),
    async killPrimary() {
      const killed = await ha.killPrimary();
      const killedMs = Date.now();
      const port = await ha.waitForWritable(180_000, killed.port);
      const takeOverMs = Date.now() - killedMs;
      return {
        killedMs,
        takeOverMs,
        what: `killed the Postgres primary ${killed.name} (:${killed.port}); :${port} took writes after ${takeOverMs} ms`,
        affectedPartitions: null,
      };
    },
    async stop() {
      await ha.stop();
      await deleteRedisKeys(names.redisPrefix);
    },
  };
}

async function startRedisClusterStores(names: HerdStoreNames): Promise<HerdStores> {
  const cluster = await startRedisCluster(['--cluster-node-timeout', String(REDIS_NODE_TIMEOUT_MS)], { replicas: 1 });
  // Chosen now, so that the kill comes when it is due (the slots stay where they are until then).
  const target = await busiestPrimary(cluster, names).catch(async (error: unknown) => {
    await cluster.stop();
    throw error;
  });
  return {
    nodeFlags: ['--postgres-url', POSTGRES_URL, '--redis-url', cluster.seeds, '--redis-cluster'],
    description: `Redis Cluster (3 primaries + 3 replicas, node timeout ${REDIS_NODE_TIMEOUT_MS} ms) on ${cluster.seeds}; Postgres: ${POSTGRES_URL} schema ${names.schema}`,
    postgresUrl: () => Promise.resolve(POSTGRES_URL),
    killPrimary: () => killRedisPrimary(cluster, target),
    async stop() {
      await cluster.stop();
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS "${names.schema}" CASCADE`);
      } finally {
        await client.end().catch(() => undefined);
      }
    },
  };
}

interface RedisTarget {
  primary: RedisServer;
  replica: RedisServer;
  /** The wheel partitions whose keys it serves. */
  affectedPartitions: number[];
  /** The port of the primary that holds the task type's registry. */
  registry: number;
}

/** The primary that serves the most wheel partitions, other than the task type's registry's. */
async function busiestPrimary(cluster: RedisCluster, names: HerdStoreNames): Promise<RedisTarget> {
  const served = await Promise.all(
    Array.from({ length: names.partitions }, (_, p) => primaryOf(cluster, bucketKeys(names.redisPrefix, p).intact)),
  );
  const registry = (await primaryOf(cluster, typeRegistryKeys(names.redisPrefix, names.taskType).partitions)).primary
    .port;
  const counts = new Map<number, number>();
  for (const { primary } of served) {
    if (primary.port !== registry) counts.set(primary.port, (counts.get(primary.port) ?? 0) + 1);
  }
  const [port] = [...counts].sort((a, b) => b[1] - a[1])[0] ?? [];
  const affectedPartitions = served.flatMap((s, p) => (s.primary.port === port ? [p] : []));
  const { primary, replica } = served[affectedPartitions[0] ?? -1] ?? {};
  if (primary === undefined || replica === undefined) throw new Error('no Redis primary with a replica to kill');
  return { primary, replica, affectedPartitions, registry };
}

/** The kill of the Redis case: SIGKILL, then its replica's promotion and a whole cluster. */
async function killRedisPrimary(cluster: RedisCluster, target: RedisTarget): Promise<Failover> {
  const { primary, replica, affectedPartitions, registry } = target;
  // How far behind the replica may have been as the primary died (Redis replicates
  // asynchronously; a replica acknowledges once a second, so this is an upper bound).
  const info = String(await onNode(primary.port, 'INFO', 'replication').catch(() => ''));
  const sent = Number(/master_repl_offset:(\d+)/.exec(info)?.[1]);
  const acked = Number(/slave\d+:[^\r\n]*offset=(\d+)/.exec(info)?.[1]);
  const behind = Number.isFinite(sent - acked) ? `${sent - acked} bytes` : 'unknown';
  const { killedAt, promotedAt } = await failOver(cluster, primary, replica);
  return {
    killedMs: killedAt,
    takeOverMs: promotedAt - killedAt,
    what:
      `killed the Redis primary :${primary.port} (${affectedPartitions.length} wheel partitions; the type's registry is on :${registry}); ` +
      `replica :${replica.port} (its last acknowledged offset ${behind} behind the primary's just before the kill) promoted after ${promotedAt - killedAt} ms`,
    affectedPartitions,
  };
}

async function deleteRedisKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  redis.on('error', () => undefined);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}
