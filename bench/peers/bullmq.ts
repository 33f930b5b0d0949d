import { resolve } from 'node:path';
import { Queue, type JobsOptions } from 'bullmq';
import { Redis } from 'ioredis';
import { percentiles } from '../stats.js';
import { BATCH_SIZE, type SubmitOutcome } from '../submit.js';
import { w1Count, W1_CONCURRENCY } from '../w1-throughput.js';
import { w2Shape } from '../w2-herd.js';
import { w3Shape } from '../w3-precision.js';
import { WorkerFleet } from '../worker-process.js';
import type { RunFigures } from '../workload.js';
import type { WorkerResult } from '../protocol.js';
import {
  bullmqConnection,
  BULLMQ_PREFIX,
  BULLMQ_REDIS_HOST,
  BULLMQ_REDIS_PORT,
  type BullmqWorkerConfig,
} from './bullmq-config.js';
import type { PeerContext } from './shapes.js';

/**
 * BullMQ through the shapes of W1, W2 and W3: the same N, the same due times, the same worker
 * slots, submitted with `addBulk` (1 000 jobs a call, 4 calls in flight, as our harness posts
 * batches) and run by BullMQ's own Worker in separate processes (bench/peers/bullmq-worker.ts).
 * Each measurement starts on an emptied Redis database of its own (`--peers-redis-db`).
 */
const WORKER_SCRIPT = resolve(import.meta.dirname, 'bullmq-worker.js');
const SUBMIT_PARALLEL = 4;

export interface Job {
  name: string;
  data: Record<string, unknown>;
  opts?: JobsOptions;
}

/** W1 with the worker already waiting: first addBulk → last job completed; and BullMQ's own figure, processing after enqueue. */
export async function bullmqW1(ctx: PeerContext): Promise<RunFigures> {
  const count = w1Count(ctx.quick);
  const queueName = 'w1';
  const whileSubmitting = await onEmptyDb(ctx, queueName, async (queue) => {
    const fleet = await startFleet(ctx, queueName, W1_CONCURRENCY);
    try {
      const submitted = await addJobs(queue, count, () => ({ name: queueName, data: {} }));
      await fleet.until((f) => f.reported >= count, 60_000 + count, `${count} BullMQ W1 results`);
      const results = await fleet.stop();
      const wallMs = lastReported(results) - submitted.firstSubmitMs;
      return {
        rate: (count / wallMs) * 1000,
        submitRate: (count / (submitted.lastAnsweredMs - submitted.firstSubmitMs)) * 1000,
        check: await verifyCompleted(queue, count),
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  });
  const afterEnqueue = await onEmptyDb(ctx, queueName, async (queue) => {
    await addJobs(queue, count, () => ({ name: queueName, data: {} }));
    const fleet = await startFleet(ctx, queueName, W1_CONCURRENCY);
    try {
      await fleet.until((f) => f.reported >= count, 60_000 + count, `${count} enqueued BullMQ W1 results`);
      const results = await fleet.stop();
      return { processRate: processRate(results, count), check: await verifyCompleted(queue, count) };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  });
  return {
    values: {
      rate: whileSubmitting.rate,
      submitRate: whileSubmitting.submitRate,
      processRate: afterEnqueue.processRate,
    },
    notes: [...whileSubmitting.check.notes, ...afterEnqueue.check.notes],
    verified: whileSubmitting.check.verified && afterEnqueue.check.verified,
  };
}

/** W2: N delayed jobs all due at T, T chosen from a calibrated submission rate exactly as W2 does. */
export async function bullmqW2(ctx: PeerContext): Promise<RunFigures> {
  const shape = w2Shape(ctx.quick);
  const { count } = shape;
  const queueName = 'w2';
  return onEmptyDb(ctx, queueName, async (queue) => {
    const fleet = await startFleet(ctx, queueName, shape.concurrency);
    try {
      const dueMs = await chooseBullmqDueMs(ctx, queueName, count);
      const submitted = await addJobs(queue, count, () => delayedJob(queueName, { due_ms: dueMs }, dueMs));
      const notes: string[] = [];
      const gapMs = dueMs - submitted.lastAnsweredMs;
      if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
      if (fleet.started > 0) notes.push(`${fleet.started} jobs started before T`);
      await fleet.until((f) => f.reported >= count, gapMs + 300_000, `${count} BullMQ W2 results`);
      const results = await fleet.stop();
      const lags = results.flatMap((r) => r.lagsMs);
      const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
      if (lags.length !== count) notes.push(`worker saw ${lags.length} starts for ${count} jobs`);
      const check = await verifyCompleted(queue, count);
      return {
        values: { p50S: p50 / 1000, p99S: p99 / 1000, maxS: max / 1000, marginS: gapMs / 1000 },
        notes: [...notes, ...check.notes],
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  });
}

/**
 * T for a herd of `count` jobs, chosen as W2 chooses it: the add rate measured on a second queue
 * no worker takes from (jobs due in an hour, as W2's calibration tasks of another type), then
 * T = now + margin + W2's factor × count / rate. Shared by W2 and W6.
 */
export async function chooseBullmqDueMs(ctx: PeerContext, queueName: string, count: number): Promise<number> {
  const shape = w2Shape(ctx.quick);
  const calibrationQueue = new Queue(`${queueName}-calibration`, {
    connection: bullmqConnection(ctx.redisDb),
    prefix: BULLMQ_PREFIX,
  });
  try {
    const calibrationJob = (): Job => delayedJob('calibration', {}, Date.now() + 3_600_000);
    await addJobs(calibrationQueue, shape.calibrationTasks / 2, calibrationJob);
    const calibration = await addJobs(calibrationQueue, shape.calibrationTasks / 2, calibrationJob);
    const submitPerMs = shape.calibrationTasks / 2 / (calibration.lastAnsweredMs - calibration.firstSubmitMs);
    const dueMs = Date.now() + shape.marginMs + Math.ceil((count / submitPerMs) * shape.submitTimeFactor);
    ctx.log(
      `BullMQ ${queueName}: adding ${count} jobs due at ${new Date(dueMs).toISOString()} (calibrated at ${Math.round(submitPerMs * 1000)} adds/s)`,
    );
    return dueMs;
  } finally {
    await calibrationQueue.close();
  }
}

/** W3: N delayed jobs due at random milliseconds over the window, an idle worker. */
export async function bullmqW3(ctx: PeerContext): Promise<RunFigures> {
  const { count, spreadMs, leadMs, concurrency } = w3Shape(ctx.quick);
  const queueName = 'w3';
  return onEmptyDb(ctx, queueName, async (queue) => {
    const fleet = await startFleet(ctx, queueName, concurrency);
    try {
      const baseMs = Date.now() + leadMs;
      const dues = Array.from({ length: count }, () => baseMs + Math.floor(Math.random() * spreadMs));
      const submitted = await addJobs(queue, count, (i) => {
        const dueMs = dues[i] as number;
        return delayedJob(queueName, { due_ms: dueMs }, dueMs);
      });
      const notes: string[] = [];
      if (submitted.lastAnsweredMs > baseMs)
        notes.push(`INVALID: submission ended ${submitted.lastAnsweredMs - baseMs} ms after the first due time`);
      await fleet.until((f) => f.reported >= count, spreadMs + leadMs + 60_000, `${count} BullMQ W3 results`);
      const results = await fleet.stop();
      const lags = results.flatMap((r) => r.lagsMs);
      const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
      if (lags.length !== count) notes.push(`worker saw ${lags.length} starts for ${count} jobs`);
      const check = await verifyCompleted(queue, count);
      return {
        values: { p50Ms: p50, p99Ms: p99, maxMs: max },
        notes: [...notes, ...check.notes],
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  });
}

/**
 * A job due at `dueMs`: BullMQ puts it in its delayed set with score timestamp + delay, so
 * both are set from one clock reading and the sum is exactly `dueMs`.
 */
export function delayedJob(name: string, data: Record<string, unknown>, dueMs: number): Job {
  const now = Date.now();
  return { name, data, opts: { timestamp: now, delay: Math.max(0, dueMs - now) } };
}

/** Adds `count` jobs built by `jobAt(i)` with addBulk, BATCH_SIZE a call, SUBMIT_PARALLEL calls in flight. */
export async function addJobs(queue: Queue, count: number, jobAt: (i: number) => Job): Promise<SubmitOutcome> {
  let next = 0;
  const firstSubmitMs = Date.now();
  const lane = async (): Promise<void> => {
    while (next < count) {
      const from = next;
      const to = Math.min(count, from + BATCH_SIZE);
      next = to;
      const jobs: Job[] = [];
      for (let i = from; i < to; i++) jobs.push(jobAt(i));
      await queue.addBulk(jobs);
    }
  };
  await Promise.all(Array.from({ length: SUBMIT_PARALLEL }, lane));
  return { firstSubmitMs, lastAnsweredMs: Date.now(), retried: 0 };
}

export function startFleet(
  ctx: PeerContext,
  queue: string,
  concurrency: number,
  extra: Pick<BullmqWorkerConfig, 'handlerSleepMs' | 'streamLags'> = {},
): Promise<WorkerFleet> {
  const config: BullmqWorkerConfig = { redisDb: ctx.redisDb, queue, concurrency, ...extra };
  return WorkerFleet.startScript(WORKER_SCRIPT, ctx.workers, config);
}

function lastReported(results: WorkerResult[]): number {
  return Math.max(...results.map((r) => r.lastReportedMs));
}

/** N ÷ (first processor call → last job seen completed), per second. */
function processRate(results: WorkerResult[], count: number): number {
  const first = Math.min(...results.map((r) => r.firstStartMs).filter((ms) => Number.isFinite(ms)));
  return (count / (lastReported(results) - first)) * 1000;
}

/** Every job of the queue completed, none failed or left waiting, active or delayed. */
export async function verifyCompleted(queue: Queue, expected: number): Promise<{ verified: boolean; notes: string[] }> {
  const counts = await queue.getJobCounts('completed', 'failed', 'active', 'wait', 'delayed', 'prioritized');
  const others = Object.entries(counts).filter(([state, n]) => state !== 'completed' && n > 0);
  if (counts.completed === expected && others.length === 0) return { verified: true, notes: [] };
  return {
    verified: false,
    notes: [`MISMATCH: expected ${expected} completed BullMQ jobs, the queue has ${JSON.stringify(counts)}`],
  };
}

/**
 * Runs `fn` with a fresh queue on an emptied database `ctx.redisDb`, and empties it again after.
 * Refuses a database that holds keys other than the peer bench's (someone else's data) and
 * database 0 (where the nodes, the tests and everyone else keep theirs).
 */
export async function onEmptyDb<T>(ctx: PeerContext, queueName: string, fn: (queue: Queue) => Promise<T>): Promise<T> {
  const redis = new Redis({ host: BULLMQ_REDIS_HOST, port: BULLMQ_REDIS_PORT, db: ctx.redisDb, lazyConnect: true });
  await redis.connect();
  let queue: Queue | undefined;
  try {
    await assertOnlyOurs(redis, ctx.redisDb);
    await redis.flushdb();
    queue = new Queue(queueName, { connection: bullmqConnection(ctx.redisDb), prefix: BULLMQ_PREFIX });
    return await fn(queue);
  } finally {
    await queue?.close();
    await redis.flushdb().catch(() => undefined);
    redis.disconnect();
  }
}

async function assertOnlyOurs(redis: Redis, db: number): Promise<void> {
  if (db === 0) throw new Error('--peers-redis-db 0 is refused: the bench empties that database between rounds');
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 1000);
    cursor = next;
    const foreign = keys.find((k) => !k.startsWith(`${BULLMQ_PREFIX}:`));
    if (foreign !== undefined)
      throw new Error(
        `Redis database ${db} holds keys that are not the peer bench's (e.g. "${foreign}"); choose another with --peers-redis-db`,
      );
  } while (cursor !== '0');
}
