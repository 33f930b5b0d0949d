import type { BackendKind, CompiledOptions } from '../lib/config.js';
import type { SnapshotStore } from '../runtime/snapshots.js';
import { ConnectionHealth } from './connection-health.js';
import { openPostgres, type Db } from './db.js';
import { openPglite } from './db-pglite.js';
import { PartitionMarks } from './fences.js';
import { PriorityLane } from './priority-lane.js';
import { MemoryBucketStore } from './memory-buckets.js';
import { MemoryReadyQueue } from './memory-ready-queue.js';
import { migrate } from './migrate.js';
import { SqlDagStore } from './dag-store.js';
import { SqlLimitStore } from './limit-store.js';
import { SqlApiKeyStore, type ApiKeyStore } from './api-key-store.js';
import { SqlMembershipStore } from './membership-store.js';
import { SqlScheduleStore } from './schedule-store.js';
import { SqlSnapshotStore } from './snapshot-store.js';
import { SqlTaskStore } from './task-store.js';
import { SqlOperationStore } from './operation-store.js';
import type { OperationStore } from './operation-types.js';
import { SqlTaskStatsStore } from './task-stats-store.js';
import type { TaskStatsStore } from './task-stats-types.js';
import type { MembershipStore } from '../runtime/membership-store.js';
import type { ScheduleStore, TaskStore } from './types.js';
import type { BucketStore, ReadyQueue } from './fast-index-types.js';
import type { DagStore } from './dag-types.js';
import type { LimitStore } from './limit-types.js';
import type { RedisStores } from './backend-redis.js';

/** Connections reserved for the priority lane's statements (src/store/priority-lane.ts). */
const LANE_CONNECTIONS = 2;

/** Every store a node needs, on one backend. */
export interface Backend {
  readonly kind: BackendKind;
  readonly db: Db;
  /** Where listings run: on Postgres a pool of their own with a statement timeout; else `db`. */
  readonly listings: Db;
  readonly tasks: TaskStore;
  readonly schedules: ScheduleStore;
  readonly dags: DagStore;
  /** Operations on many tasks (`operations`). */
  readonly operations: OperationStore;
  /** Task activity by minute, task type and node (`task_stats`). */
  readonly stats: TaskStatsStore;
  /** Flow control: declared limits and what a key's actor reads of the tasks. */
  readonly limits: LimitStore;
  readonly snapshots: SnapshotStore;
  readonly buckets: BucketStore;
  readonly ready: ReadyQueue;
  /** Cluster membership (`cluster_nodes`). */
  readonly membership: MembershipStore;
  /** API keys (`api_keys`). */
  readonly apiKeys: ApiKeyStore;
  /** Resolves when every store answers. */
  ping(): Promise<void>;
  /** Asks Redis alone (a PING): what a node's heartbeat says of its reach (src/node/reach-probe.ts). Absent embedded. */
  pingRedis?(): Promise<void>;
  /** The database's clock now, Unix ms: what nodes align their clocks on (`AlignedClock`). */
  databaseNowMs(): Promise<number>;
  /** What the node should warn about at start (a store setting that is allowed but not advised). */
  readonly warnings: readonly string[];
  /**
   * The stores reached over the network, each telling when it is lost and when it is back:
   * Postgres and Redis; none on the embedded backend, which has no connection to lose.
   */
  readonly health: readonly ConnectionHealth[];
  close(): Promise<void>;
}

/**
 * Opens the configured backend and applies migrations: Postgres + Redis, or the embedded
 * default (PGlite under `dataDir`, in-process buckets and ready queues). PGlite is one
 * connection: listings share it, with no statement timeout (none fires in PGlite); what one
 * listing reads is bounded by `listScanRows` and `maxPageBytes` on either backend.
 */
export async function openBackend(options: CompiledOptions): Promise<Backend> {
  if (options.backend === 'embedded') {
    const db = await openPglite({ dataDir: options.dataDir, schema: options.postgresSchema });
    await migrate(db, options.postgresSchema);
    // One set of marks for both: a fence raised through the buckets holds fenced pushes too.
    const marks = new PartitionMarks();
    const ready = new MemoryReadyQueue(marks);
    return {
      kind: 'embedded',
      db,
      listings: db,
      tasks: new SqlTaskStore(db),
      schedules: new SqlScheduleStore(db),
      dags: new SqlDagStore(db),
      operations: new SqlOperationStore(db),
      stats: new SqlTaskStatsStore(db),
      limits: new SqlLimitStore(db),
      snapshots: new SqlSnapshotStore(db),
      buckets: new MemoryBucketStore(marks),
      ready,
      membership: new SqlMembershipStore(db),
      apiKeys: new SqlApiKeyStore(db),
      ping: async () => {
        await db.query('SELECT 1');
      },
      databaseNowMs: () => databaseNowMs(db),
      warnings: [],
      health: [],
      close: async () => {
        await ready.close();
        await db.close();
      },
    };
  }
  // Every connection of this node carries its id, so pg_stat_activity tells whose it is.
  const applicationName = `wheelhouse ${options.nodeId}`;
  // One for the five pools: the database is lost when a statement of any of them cannot
  // reach it, and back when one gets an answer.
  const postgresHealth = new ConnectionHealth('postgres');
  const redisHealth = new ConnectionHealth('redis');
  const db = openPostgres({
    url: options.postgresUrl,
    schema: options.postgresSchema,
    poolSize: Math.max(1, Math.ceil(options.postgresPoolSize / 2)),
    applicationName,
    health: postgresHealth,
  });
  // Claims, heartbeats and results commit asynchronously on a pool of their own:
  // docs/decisions/0003-asynchronous-commit-for-claims.md.
  const leasesDb = openPostgres({
    url: options.postgresUrl,
    schema: options.postgresSchema,
    poolSize: Math.max(1, Math.floor(options.postgresPoolSize / 2)),
    asynchronousCommit: true,
    applicationName,
    health: postgresHealth,
  });
  // Heartbeats get a connection of their own: queued behind a burst of submissions for longer
  // than the failure timeout, they would put a busy but healthy node out of the ring.
  const membershipDb = openPostgres({
    url: options.postgresUrl,
    schema: options.postgresSchema,
    poolSize: 1,
    applicationName,
    health: postgresHealth,
  });
  // Listings on a pool of their own, with a statement timeout: a slow one neither waits behind
  // submissions nor holds their connections (src/store/sql/list.ts bounds what one page reads).
  const listDb = openPostgres({
    url: options.postgresUrl,
    schema: options.postgresSchema,
    poolSize: options.listPoolSize,
    statementTimeoutMs: options.listTimeoutMs,
    applicationName,
    health: postgresHealth,
  });
  // Limit keys' activations and one-task submits go first: decision 0028.
  const laneDb = openPostgres({
    url: options.postgresUrl,
    schema: options.postgresSchema,
    poolSize: LANE_CONNECTIONS,
    keepOpen: true,
    applicationName,
    health: postgresHealth,
  });
  const lane = new PriorityLane(db, laneDb, LANE_CONNECTIONS);
  const pools = [db, leasesDb, membershipDb, listDb, laneDb];
  try {
    await migrate(db, options.postgresSchema);
    // The lane's connections open now, not when a flood's first second needs them.
    await Promise.all(Array.from({ length: LANE_CONNECTIONS }, () => laneDb.query('SELECT 1')));
  } catch (error) {
    await Promise.allSettled(pools.map((p) => p.close()));
    throw error;
  }
  let redisStores: RedisStores;
  try {
    // Loaded here only: the embedded default never loads ioredis (see backend-redis.ts).
    const { openRedisStores } = await import('./backend-redis.js');
    redisStores = await openRedisStores(options, redisHealth);
  } catch (error) {
    await Promise.allSettled(pools.map((p) => p.close()));
    throw error;
  }
  const { redis, buckets, ready, warning } = redisStores;
  return {
    kind: 'postgres',
    db,
    listings: listDb,
    tasks: new SqlTaskStore(db, leasesDb, listDb, lane),
    schedules: new SqlScheduleStore(db),
    dags: new SqlDagStore(db, leasesDb),
    operations: new SqlOperationStore(db),
    stats: new SqlTaskStatsStore(db, listDb),
    limits: new SqlLimitStore(db, lane),
    snapshots: new SqlSnapshotStore(db, lane),
    buckets,
    ready,
    membership: new SqlMembershipStore(membershipDb),
    apiKeys: new SqlApiKeyStore(membershipDb),
    ping: async () => {
      await Promise.all([db.query('SELECT 1'), redis.ping()]);
    },
    pingRedis: async () => {
      await redis.ping();
    },
    // The membership connection: it carries one heartbeat a second, so a sample rarely waits.
    databaseNowMs: () => databaseNowMs(membershipDb),
    warnings: warning === null ? [] : [warning],
    health: [postgresHealth, redisHealth],
    close: async () => {
      // Closing ends every connection: that is not an outage.
      postgresHealth.close();
      redisHealth.close();
      // The ready queue first: it writes what is still waiting to be pushed, then closes its
      // subscriber connection, before the client it writes through goes.
      await ready.close();
      await Promise.allSettled([...pools.map((p) => p.close()), redis.quit()]);
    },
  };
}

/** The database's clock (`clock_timestamp()`, not the transaction's start), Unix ms. */
async function databaseNowMs(db: Db): Promise<number> {
  const { rows } = await db.query<{ ms: number }>(
    `SELECT round(date_part('epoch', clock_timestamp()) * 1000)::float8 AS ms`,
    [],
    'wh_clock',
  );
  return Number(rows[0]?.ms);
}
