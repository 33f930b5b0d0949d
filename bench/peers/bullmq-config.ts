import type { RedisOptions } from 'bullmq';

/**
 * Where the peer bench's BullMQ lives: the machine's Redis (the one the Wheelhouse nodes use),
 * on a database index of its own, so that flushing it between rounds touches nothing else.
 */
export const BULLMQ_REDIS_HOST = '127.0.0.1';
export const BULLMQ_REDIS_PORT = 6379;
/** Key prefix of every BullMQ queue the bench makes. */
export const BULLMQ_PREFIX = 'peerbench';

/** Given to a BullMQ worker process (bench/peers/bullmq-worker.ts) as its only argument, JSON. */
export interface BullmqWorkerConfig {
  /** Redis database index. */
  redisDb: number;
  queue: string;
  /** BullMQ's `concurrency`: jobs the one Worker runs at once. */
  concurrency: number;
  /** Each processor call sleeps this long before it returns (W6). Omitted: no-op jobs. */
  handlerSleepMs?: number;
  /** Stream the lags of jobs carrying `due_ms` with the progress messages, as bench/worker.ts does (W6, rate). */
  streamLags?: boolean;
}

/** Connection options for a BullMQ Queue or Worker on database `db` (a Worker needs `maxRetriesPerRequest: null`). */
export function bullmqConnection(db: number): RedisOptions {
  return { host: BULLMQ_REDIS_HOST, port: BULLMQ_REDIS_PORT, db, maxRetriesPerRequest: null };
}
