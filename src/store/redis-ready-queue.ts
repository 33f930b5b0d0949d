/**
 * Ready queues in Redis: a ZSET per (task type, priority) with member = task id and
 * score = due ms, which orders by due time and never holds an id twice; a registry SET
 * of queue names for depths and backlog; and an in-flight ZSET (the reliable-queue
 * pattern) holding what was taken until it is acknowledged or found stale.
 */
import type { Redis } from 'ioredis';
import { WheelhouseError } from '../errors.js';
import { readyBacklog } from './lua/ready-backlog.js';
import { readyDepths } from './lua/ready-depths.js';
import { requeueStale } from './lua/requeue-stale.js';
import { takeReady } from './lua/take-ready.js';
import {
  PRIORITIES,
  assertDueEntry,
  compareQueueDepths,
  decodeInFlightMember,
  encodeInFlightMember,
  parseQueueName,
  queueName,
} from './entry-codec.js';
import { PushListeners, type PushListener } from './push-listeners.js';
import { assertPrefix, redisOperation } from './redis.js';
import { execPipeline, runScript } from './redis-commands.js';
import { readyKeys, type ReadyKeys } from './redis-keys.js';
import type { DueEntry, QueueDepth, ReadyQueue } from './types.js';

/** Most members per ZADD/ZREM, so one huge batch does not build one huge command. */
const COMMAND_CHUNK = 2_000;

/** Most stale entries one requeue script moves, so one call never blocks Redis long. */
const REQUEUE_BATCH = 1_000;

/** The production {@link ReadyQueue}: sorted sets per task type × priority, with an in-flight set. */
export class RedisReadyQueue implements ReadyQueue {
  private readonly redis: Redis;
  private readonly keys: ReadyKeys;
  private readonly listeners = new PushListeners();

  /**
   * @param redis a client from `openRedis`
   * @param prefix the key prefix: every key starts with `${prefix}:`
   */
  constructor(redis: Redis, prefix: string) {
    assertPrefix(prefix);
    this.redis = redis;
    this.keys = readyKeys(prefix);
  }

  /** One pipeline: register the queues, then ZADD NX per queue. Listeners run after it lands. */
  async push(entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const byQueue = new Map<string, (string | number)[]>();
    const taskTypes = new Set<string>();
    for (const entry of entries) {
      assertDueEntry(entry);
      const name = queueName(entry.taskType, entry.priority);
      let args = byQueue.get(name);
      if (args === undefined) byQueue.set(name, (args = []));
      args.push(entry.dueMs, entry.taskId);
      taskTypes.add(entry.taskType);
    }
    // Registry first: a pipeline cut short still leaves every written queue visible.
    const pipeline = this.redis.pipeline().sadd(this.keys.registry, ...byQueue.keys());
    for (const [name, args] of byQueue) {
      for (let i = 0; i < args.length; i += 2 * COMMAND_CHUNK) {
        pipeline.zadd(`${this.keys.queuePrefix}${name}`, 'NX', ...args.slice(i, i + 2 * COMMAND_CHUNK));
      }
    }
    await redisOperation('ready.push', () => execPipeline(pipeline));
    this.listeners.emit(taskTypes);
  }

  /** One script: see `lua/take-ready.ts`. */
  async take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    const types = [...new Set(taskTypes)];
    if (types.length === 0 || max <= 0) return [];
    const keys = [this.keys.inFlight];
    for (const priority of PRIORITIES) {
      for (const taskType of types) keys.push(`${this.keys.queuePrefix}${queueName(taskType, priority)}`);
    }
    const args = [nowMs, Math.floor(max), types.length, ...types, ...PRIORITIES];
    const reply = await redisOperation('ready.take', () => runScript(this.redis, takeReady, keys, args));
    return (reply as string[]).map(decodeInFlightMember);
  }

  async ack(entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const members = entries.map(encodeInFlightMember);
    const pipeline = this.redis.pipeline();
    for (let i = 0; i < members.length; i += COMMAND_CHUNK) {
      pipeline.zrem(this.keys.inFlight, ...members.slice(i, i + COMMAND_CHUNK));
    }
    await redisOperation('ready.ack', () => execPipeline(pipeline));
  }

  /** Scripts of at most 1 000 entries each until none is left; listeners hear of the types. */
  async requeueStale(olderThanMs: number): Promise<number> {
    let moved = 0;
    let malformed = 0;
    const taskTypes = new Set<string>();
    for (;;) {
      const reply = (await redisOperation('ready.requeueStale', () =>
        runScript(
          this.redis,
          requeueStale,
          [this.keys.inFlight, this.keys.registry],
          [olderThanMs, this.keys.queuePrefix, REQUEUE_BATCH],
        ),
      )) as [number, number, ...string[]];
      const [batchMoved, batchMalformed, ...types] = reply;
      moved += batchMoved;
      malformed += batchMalformed;
      for (const taskType of types) taskTypes.add(taskType);
      if (batchMoved + batchMalformed < REQUEUE_BATCH) break;
    }
    this.listeners.emit(taskTypes);
    if (malformed > 0) {
      throw new WheelhouseError('internal', `${malformed} unreadable in-flight entries were dropped.`, {
        details: { moved, malformed },
      });
    }
    return moved;
  }

  /** One script over the registry; ordered by task type, then priority. */
  async depths(nowMs: number): Promise<QueueDepth[]> {
    const flat = (await redisOperation('ready.depths', () =>
      runScript(this.redis, readyDepths, [this.keys.registry], [this.keys.queuePrefix]),
    )) as (string | number)[];
    const depths: QueueDepth[] = [];
    for (let i = 0; i < flat.length; i += 3) {
      const name = String(flat[i]);
      const queue = parseQueueName(name);
      if (queue === null) throw new WheelhouseError('internal', `Malformed ready-queue name: ${name}`);
      const oldest = String(flat[i + 2]);
      depths.push({
        taskType: queue.taskType,
        priority: queue.priority,
        depth: Number(flat[i + 1]),
        oldestReadyAgeMs: oldest === '' ? null : Math.max(0, nowMs - Number(oldest)),
      });
    }
    return depths.sort(compareQueueDepths);
  }

  /** One script summing ZCARD over the registry. */
  async backlog(): Promise<number> {
    const total = await redisOperation('ready.backlog', () =>
      runScript(this.redis, readyBacklog, [this.keys.registry], [this.keys.queuePrefix]),
    );
    return Number(total);
  }

  /**
   * Calls `listener` after each push (and each requeue) lands on this node, with the task
   * types it touched. Pushes made by other nodes are not heard here.
   */
  onPush(listener: PushListener): () => void {
    return this.listeners.add(listener);
  }
}
