/**
 * The Redis connection of the fast index (far buckets and ready queues), and the mapping
 * of Redis failures onto the error catalogue.
 */
import { Cluster, Redis } from 'ioredis';
import { WheelhouseError } from '../lib/errors.js';
import type { ConnectionHealth } from './connection-health.js';

/** A client of the fast index: one Redis server (or primary), or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** True for a Redis Cluster client: its pipelines and MULTIs must stay within one node or slot. */
export function isCluster(client: RedisClient): client is Cluster {
  return client instanceof Cluster;
}

/** How to reach Redis. */
export interface RedisOptions {
  /**
   * e.g. `redis://127.0.0.1:6379`; for {@link openRedisCluster}, one or more seed nodes of the
   * cluster separated by commas (`redis://10.0.0.1:7000,redis://10.0.0.2:7000`). The user name,
   * password and scheme (`rediss:` for TLS) of the first apply to every node.
   */
  url: string;
  /** Every key this node writes starts with `${prefix}:`. No braces (they are hash tags). */
  prefix: string;
  /**
   * Batch commands issued in the same event-loop turn into one write. Off by default: the
   * stores batch their own commands, and with 16 workers taking 500 at a time it cut
   * take throughput by a third to a half in our measurements.
   * @default false
   */
  autoPipelining?: boolean;
  /**
   * Reconnection attempts a command waits through before it fails, so a down Redis gives
   * a fast `store_unavailable` instead of a hang.
   * @default 1
   */
  maxRetriesPerRequest?: number;
  /**
   * Fails a command with no reply after this many ms (a hung or overloaded server).
   * @default 5000
   */
  commandTimeoutMs?: number;
  /** @default 2000 */
  connectTimeoutMs?: number;
  /**
   * Told of connection-level errors. Commands that fail meanwhile reject with
   * `store_unavailable` on their own, so the default ignores these reports.
   */
  onError?: (error: Error) => void;
  /** Told when the connection is lost and when it is ready again (see {@link watchRedis}). @default none */
  health?: ConnectionHealth;
}

/** Longest wait between reconnection attempts, ms. */
const MAX_RECONNECT_DELAY_MS = 1_000;

/**
 * Opens an ioredis client for the fast index. The key prefix is checked here, and the
 * connection is named after it so `CLIENT LIST` shows which cluster a client belongs to.
 */
export function openRedis(options: RedisOptions): Redis {
  assertPrefix(options.prefix);
  const redis = new Redis(options.url, {
    connectionName: `wheelhouse:${options.prefix}`,
    // RESP2: nothing here needs RESP3, and ioredis parses large RESP2 arrays (a bucket of
    // 30 000 entries) about 20 % faster.
    protocol: 2,
    enableAutoPipelining: options.autoPipelining ?? false,
    maxRetriesPerRequest: options.maxRetriesPerRequest ?? 1,
    commandTimeout: options.commandTimeoutMs ?? 5_000,
    connectTimeout: options.connectTimeoutMs ?? 2_000,
    retryStrategy: (times) => Math.min(50 * 2 ** times, MAX_RECONNECT_DELAY_MS),
  });
  const onError = options.onError ?? (() => undefined);
  redis.on('error', onError);
  if (options.health !== undefined) watchRedis(redis, options.health);
  return redis;
}

/**
 * Opens an ioredis Cluster client for the fast index on Redis Cluster, from the seed nodes in
 * `options.url`: it learns the others and the slot map from them, follows MOVED and ASK
 * redirections, and refreshes the map after a failover. The options mean what they mean for
 * {@link openRedis}, applied to each node's connection; a cluster that is down (CLUSTERDOWN) or
 * a node that is lost fails a command with `store_unavailable` once its retries are spent.
 * While the client has no slot map (before it first connects, and while it reconnects) a
 * command fails at once rather than waiting in an offline queue that has no timeout: a request
 * answers 503 instead of hanging. Wait for {@link clusterReady} before the first command.
 */
export function openRedisCluster(options: RedisOptions): Cluster {
  assertPrefix(options.prefix);
  const seeds = parseSeeds(options.url);
  const first = seeds[0] as URL;
  const cluster = new Cluster(
    seeds.map((seed) => ({ host: seed.hostname, port: Number(seed.port || 6379) })),
    {
      enableAutoPipelining: options.autoPipelining ?? false,
      enableOfflineQueue: false,
      clusterRetryStrategy: (times) => Math.min(50 * 2 ** times, MAX_RECONNECT_DELAY_MS),
      redisOptions: {
        connectionName: `wheelhouse:${options.prefix}`,
        protocol: 2,
        maxRetriesPerRequest: options.maxRetriesPerRequest ?? 1,
        commandTimeout: options.commandTimeoutMs ?? 5_000,
        connectTimeout: options.connectTimeoutMs ?? 2_000,
        ...(first.username === '' ? {} : { username: decodeURIComponent(first.username) }),
        ...(first.password === '' ? {} : { password: decodeURIComponent(first.password) }),
        ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    },
  );
  const onError = options.onError ?? (() => undefined);
  cluster.on('error', onError);
  // A node's own connection errors (one node of several down) are told here, not as `error`.
  cluster.on('node error', onError);
  if (options.health !== undefined) watchRedis(cluster, options.health);
  return cluster;
}

/**
 * Resolves once a cluster client from {@link openRedisCluster} has its slot map and
 * connections; rejects with `store_unavailable` after `timeoutMs` (nothing answers at the
 * seeds, or the cluster is down).
 */
export async function clusterReady(cluster: Cluster, timeoutMs: number): Promise<void> {
  if (cluster.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cluster.off('ready', onReady);
      reject(
        new WheelhouseError(
          'store_unavailable',
          `Redis Cluster is not ready after ${timeoutMs} ms (status ${cluster.status}): are its seed nodes reachable and is every slot served?`,
          { retryAfterSeconds: 1 },
        ),
      );
    }, timeoutMs);
    const onReady = (): void => {
      clearTimeout(timer);
      resolve();
    };
    cluster.once('ready', onReady);
  });
}

/** The seed nodes of a `redisUrl` for Redis Cluster: URLs separated by commas. */
export function parseSeeds(url: string): URL[] {
  const seeds = url
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map((part) => {
      let seed: URL;
      try {
        seed = new URL(part);
      } catch (error) {
        throw new TypeError(`not a Redis URL: ${JSON.stringify(part)}`, { cause: error });
      }
      if ((seed.protocol !== 'redis:' && seed.protocol !== 'rediss:') || seed.hostname === '') {
        throw new TypeError(`not a Redis URL (redis://host:port or rediss://host:port): ${JSON.stringify(part)}`);
      }
      return seed;
    });
  if (seeds.length === 0) throw new TypeError('no Redis Cluster seed node given');
  return seeds;
}

/**
 * Tells `health` when `redis` loses its connection and when it is ready again. ioredis reports a lost connection as `close` then `reconnecting` (with the
 * `error` that caused it, if any, just before), and again for each failed attempt; `ready`
 * when it is back. Only `reconnecting` marks it lost: a connection this node closes on
 * purpose (`quit`, `disconnect`) closes and ends without reconnecting, and the retry strategy
 * of {@link openRedis} never gives up, so `end` means a close on purpose.
 */
function watchRedis(redis: RedisClient, health: ConnectionHealth): void {
  let lastError: unknown = null;
  redis.on('error', (error: Error) => {
    lastError = error;
  });
  redis.on('reconnecting', () => {
    health.down(lastError ?? new Error('connection closed'));
  });
  redis.on('ready', () => {
    lastError = null;
    health.up();
  });
}

/** Throws when a key prefix cannot be used: empty, or holding a hash-tag brace. */
export function assertPrefix(prefix: string): void {
  if (prefix.length === 0 || /[{}\s*?[\]]/.test(prefix)) {
    throw new TypeError(
      `redis prefix must be non-empty, without braces, blanks or glob characters: ${JSON.stringify(prefix)}`,
    );
  }
}

/** Error codes of replies that mean "not now" rather than "wrong" (OOM: full under noeviction, until memory frees). */
const UNAVAILABLE_CODES = 'LOADING|BUSY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY|NOREPLICAS|OOM';
const UNAVAILABLE_REPLY = new RegExp(`^(?:${UNAVAILABLE_CODES})\\b`);
/**
 * An error a script's command met, as Redis before 7 wraps it:
 * `ERR Error running script (call to f_…): @user_script:95: … -OOM command not allowed …`.
 * Redis 7 answers the inner error's own code (`OOM command not allowed … script: …`).
 */
const UNAVAILABLE_IN_SCRIPT = new RegExp(`^ERR Error running script\\b[^]*?-(?:${UNAVAILABLE_CODES})\\b`);

/**
 * True when a Redis failure means the store cannot be reached or cannot answer now: a
 * connection error, a timeout, exhausted retries, or a server that is loading, busy or out of
 * memory — also when a script or a MULTI met that (a MULTI's `EXECABORT` carries the errors of
 * the commands it refused).
 */
export function isRedisUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  if (error.name !== 'ReplyError') return true;
  if (UNAVAILABLE_REPLY.test(error.message) || UNAVAILABLE_IN_SCRIPT.test(error.message)) return true;
  const previous = (error as { previousErrors?: unknown }).previousErrors;
  return error.message.startsWith('EXECABORT') && Array.isArray(previous) && previous.some(isRedisUnavailable);
}

/**
 * Maps a Redis failure onto the catalogue: `store_unavailable` (retry after 1 s) when
 * Redis is unreachable, `internal` for anything else. The original is the `cause`.
 */
export function toStoreError(error: unknown, operation: string): WheelhouseError {
  if (error instanceof WheelhouseError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (isRedisUnavailable(error)) {
    return new WheelhouseError('store_unavailable', `Redis is unavailable (${operation}): ${message}`, {
      cause: error,
      retryAfterSeconds: 1,
    });
  }
  return new WheelhouseError('internal', `Redis failed (${operation}): ${message}`, { cause: error });
}

/**
 * How long one store operation may take before it counts as unavailable, ms. Each command has
 * its own timeout (`commandTimeoutMs`), but ioredis starts it only when the command is written
 * to a connection: on Redis Cluster a command held back while the client finds the slot's node
 * again (a network cut, a failover) can wait with no timeout at all (ioredis #1604). A nemesis
 * run saw two limit keys stop for good after their node was cut from Redis for 7 s: the push
 * of their admitted tasks never settled, and a key pushes one batch at a time.
 */
export const REDIS_OPERATION_DEADLINE_MS = 15_000;

/**
 * Runs one store operation, mapping whatever Redis throws with {@link toStoreError}, and
 * failing it as unavailable once `deadlineMs` has passed without an answer (the commands may
 * still land later: like a command's own timeout, the caller cannot know whether it did).
 */
export async function redisOperation<T>(
  operation: string,
  run: () => Promise<T>,
  deadlineMs = REDIS_OPERATION_DEADLINE_MS,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(
        new WheelhouseError(
          'store_unavailable',
          `Redis is unavailable (${operation}): no answer within ${deadlineMs} ms`,
          {
            retryAfterSeconds: 1,
          },
        ),
      );
    }, deadlineMs);
    timer.unref();
  });
  try {
    return await Promise.race([run(), deadline]);
  } catch (error) {
    throw toStoreError(error, operation);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Checks that Redis will not evict the fast index's keys. A `maxmemory-policy` of
 * `allkeys-*` may drop any key — a bucket, a ready queue — when memory runs short, silently
 * losing tasks from the index: refused, with an error that says what to set. A `volatile-*`
 * policy only evicts keys with a TTL, which the index never sets (a full Redis then refuses
 * writes instead, which the nodes retry): allowed, with a warning. Answers the warning, or
 * null when the policy is `noeviction`. A server that does not allow CONFIG GET (some
 * managed services) cannot be checked: a warning says so. On Redis Cluster every primary
 * known at the time is checked.
 */
export async function checkEvictionPolicy(redis: RedisClient): Promise<string | null> {
  if (!isCluster(redis)) return checkNodeEvictionPolicy(redis);
  try {
    // The first command waits for the slot map, and with it the list of primaries.
    await redis.ping();
  } catch (error) {
    return `could not read Redis maxmemory-policy (${(error as Error).message}); it must be noeviction, or Redis may drop queued tasks`;
  }
  const warnings = await Promise.all(redis.nodes('master').map(checkNodeEvictionPolicy));
  return warnings.find((warning) => warning !== null) ?? null;
}

async function checkNodeEvictionPolicy(redis: Redis): Promise<string | null> {
  let policy: string;
  try {
    const reply = (await redis.call('CONFIG', 'GET', 'maxmemory-policy')) as string[];
    policy = String(reply[1] ?? '');
  } catch (error) {
    return `could not read Redis maxmemory-policy (${(error as Error).message}); it must be noeviction, or Redis may drop queued tasks`;
  }
  if (policy === 'noeviction' || policy === '') return null;
  if (policy.startsWith('allkeys-')) {
    throw new WheelhouseError(
      'internal',
      `Redis maxmemory-policy is ${policy}: Redis may evict any key, and with it tasks from the buckets and ready queues. Set it to noeviction (CONFIG SET maxmemory-policy noeviction, or maxmemory-policy in redis.conf).`,
      { details: { maxmemory_policy: policy } },
    );
  }
  return `Redis maxmemory-policy is ${policy}: Wheelhouse keys carry no TTL, so they are never evicted, but a full Redis refuses writes; noeviction is recommended`;
}
