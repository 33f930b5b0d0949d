/**
 * Ready queues in Redis, the single-server layout: a ZSET per (task type, priority) with
 * member = task id (and its limits, `encodeReadyMember`) and score = due ms, which orders by
 * due time and never holds a task twice (its limits never change);
 * a registry SET of queue names for depths and backlog; and an in-flight ZSET (the
 * reliable-queue pattern) holding what was taken until it is acknowledged or found stale. All
 * share the hash tag `{rq}`, so a take is one script over every queue of its types; a fenced
 * push reads its partition's fence (`{p<N>}`) in the same script, which only one Redis server
 * allows. On Redis Cluster the partitioned layout takes its place
 * (`PartitionedReadyQueue`, docs/decisions/0017-redis-cluster.md).
 *
 * Every push and requeue is announced on a pub/sub channel ({@link RedisPushChannel}), so a
 * worker long-polling one node wakes when another node's wheel pushes.
 */
import type { Redis } from 'ioredis';
import { WheelhouseError } from '../lib/errors.js';
import type { GroupingReadyQueue, PushFence, PushGroup } from './coalescing-ready-queue.js';
import { planCalls, type Piece } from './push-plan.js';
import { appendPushGroup, pushReady } from './lua/push-ready.js';
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
  encodeReadyMember,
  parseQueueName,
  queueName,
} from './entry-codec.js';
import { assertFenceArgs, staleEpochError } from './fences.js';
import { PushListeners, type PushListener } from './push-listeners.js';
import { assertPrefix, redisOperation } from './redis.js';
import { execPipeline, runScript } from './redis-commands.js';
import { bucketKeys, fenceKey, readyKeys, type ReadyKeys } from './redis-keys.js';
import { RedisPushChannel } from './redis-push-channel.js';
import type { DueEntry } from '../domain/model.js';
import type { QueueDepth } from './fast-index-types.js';

/** Most members per ZADD/ZREM, so one huge batch does not build one huge command. */
const COMMAND_CHUNK = 2_000;

/** Most stale entries one requeue script moves, so one call never blocks Redis long. */
const REQUEUE_BATCH = 1_000;

export interface RedisReadyQueueOptions {
  /**
   * Told of the failures no caller can be handed: errors of the subscriber connection
   * (ioredis reconnects and subscribes again on its own) and errors thrown by listeners
   * on hearing another instance's push. Both leave only a wake-up unsent, which the
   * long-poll's periodic recheck makes up for, so the default ignores them.
   */
  onError?: (error: unknown, context: string) => void;
}

/** What the script did with a piece: refused by a fence, or written (its partition's stamp then). */
interface PieceOutcome {
  refusedBy: number | null;
  stamp: number;
}

/** The production {@link ReadyQueue}: sorted sets per task type × priority, with an in-flight set. */
export class RedisReadyQueue implements GroupingReadyQueue {
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly keys: ReadyKeys;
  private readonly listeners = new PushListeners();
  /** Announces this instance's pushes to the others, and hears theirs. */
  private readonly channel: RedisPushChannel;

  /**
   * @param redis a client from `openRedis`
   * @param prefix the key prefix: every key starts with `${prefix}:`
   */
  constructor(redis: Redis, prefix: string, options: RedisReadyQueueOptions = {}) {
    assertPrefix(prefix);
    this.redis = redis;
    this.prefix = prefix;
    this.keys = readyKeys(prefix);
    this.channel = new RedisPushChannel(redis, prefix, options.onError ?? (() => undefined));
  }

  /**
   * Unfenced: one pipeline, registering the queues, then ZADD NX per queue, then the
   * announcement. Fenced: the push script (see {@link pushGroups}). Listeners run after
   * the push lands.
   */
  async push(entries: DueEntry[], fence?: PushFence): Promise<number> {
    if (entries.length === 0) return 0;
    if (fence !== undefined) {
      const [result] = await this.pushGroups([{ entries, fence }]);
      if (typeof result !== 'number')
        throw result ?? new WheelhouseError('internal', 'A ready-queue push gave no result.');
      return result;
    }
    const byQueue = new Map<string, (string | number)[]>();
    const taskTypes = new Set<string>();
    for (const entry of entries) {
      assertDueEntry(entry);
      const name = queueName(entry.taskType, entry.priority);
      let args = byQueue.get(name);
      if (args === undefined) byQueue.set(name, (args = []));
      args.push(entry.dueMs, encodeReadyMember(entry));
      taskTypes.add(entry.taskType);
    }
    // Registry first: a pipeline cut short still leaves every written queue visible.
    const pipeline = this.redis.pipeline().sadd(this.keys.registry, ...byQueue.keys());
    for (const [name, args] of byQueue) {
      for (let i = 0; i < args.length; i += 2 * COMMAND_CHUNK) {
        pipeline.zadd(`${this.keys.queuePrefix}${name}`, 'NX', ...args.slice(i, i + 2 * COMMAND_CHUNK));
      }
    }
    pipeline.publish(this.channel.name, this.channel.announcement(taskTypes));
    await redisOperation('ready.push', async () => {
      const results = await pipeline.exec();
      if (results === null) throw new Error('The Redis pipeline was aborted.');
      // The last reply is the announcement's: its failure does not fail the push (a lost wake-up).
      for (const [error] of results.slice(0, -1)) if (error) throw error;
    });
    this.listeners.emit(taskTypes);
    return 0;
  }

  /**
   * The push script (`lua/push-ready.ts`) with every group in one call — one round trip
   * for the pushes of a turn — or, past 10 000 entries, in several calls one after the
   * other. Each call checks the fences of its fenced groups and writes only the groups
   * whose fence holds (raising their partitions' stamps), then announces what it wrote. A
   * group split over several calls is not atomic as a whole: should its fence rise between
   * two of them, the entries of the earlier calls stay (as a push that landed just before
   * the fence would) and the rest are refused. See {@link GroupingReadyQueue.pushGroups}
   * for the results.
   */
  async pushGroups(groups: readonly PushGroup[]): Promise<(Error | number)[]> {
    const results: (Error | number)[] = groups.map(() => 0);
    const valid: number[] = [];
    groups.forEach((group, g) => {
      try {
        for (const entry of group.entries) assertDueEntry(entry);
        if (group.fence !== undefined) assertFenceArgs(group.fence.partition, group.fence.epoch);
        if (group.entries.length > 0) valid.push(g);
      } catch (error) {
        results[g] = asError(error);
      }
    });
    const taskTypes = new Set<string>();
    const calls = planCalls(groups, valid);
    for (let c = 0; c < calls.length; c++) {
      const pieces = (calls[c] as Piece[]).filter((piece) => typeof results[piece.group] === 'number');
      if (pieces.length === 0) continue;
      let outcomes: PieceOutcome[];
      try {
        outcomes = await this.pushPieces(groups, pieces);
      } catch (error) {
        const failure = asError(error);
        for (const later of calls.slice(c)) {
          for (const piece of later) if (typeof results[piece.group] === 'number') results[piece.group] = failure;
        }
        break;
      }
      pieces.forEach((piece, i) => {
        const outcome = outcomes[i] ?? { refusedBy: null, stamp: 0 };
        const own = groups[piece.group]?.fence;
        if (outcome.refusedBy === null || own === undefined) {
          for (const entry of piece.entries) taskTypes.add(entry.taskType);
          // A group split over calls answers its last piece's stamp, the highest.
          results[piece.group] = outcome.stamp;
        } else {
          results[piece.group] = staleEpochError('ready.push', own.partition, own.epoch, outcome.refusedBy);
        }
      });
    }
    try {
      this.listeners.emit(taskTypes);
    } catch (error) {
      const failure = asError(error);
      const written = new Set(valid);
      return results.map((result, g) => (typeof result === 'number' && written.has(g) ? failure : result));
    }
    return results;
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

  /**
   * One transaction (MULTI, so queue and in-flight are read at one instant): ZMSCORE of each
   * entry's queue for its task ids, and of the in-flight set for the entries' members.
   */
  async held(entries: readonly DueEntry[]): Promise<Set<string>> {
    if (entries.length === 0) return new Set();
    const byQueue = new Map<string, DueEntry[]>();
    for (const entry of entries) {
      assertDueEntry(entry);
      const name = queueName(entry.taskType, entry.priority);
      let list = byQueue.get(name);
      if (list === undefined) byQueue.set(name, (list = []));
      list.push(entry);
    }
    const transaction = this.redis.multi();
    for (const [name, list] of byQueue) {
      transaction.zmscore(`${this.keys.queuePrefix}${name}`, ...list.map(encodeReadyMember));
    }
    transaction.zmscore(this.keys.inFlight, ...entries.map(encodeInFlightMember));
    const replies = (await redisOperation('ready.held', () => execPipeline(transaction))) as (string | null)[][];
    const held = new Set<string>();
    [...byQueue.values()].forEach((list, q) => {
      list.forEach((entry, i) => {
        if (replies[q]?.[i] !== null && replies[q]?.[i] !== undefined) held.add(entry.taskId);
      });
    });
    const inFlight = replies[byQueue.size] ?? [];
    entries.forEach((entry, i) => {
      if (inFlight[i] !== null && inFlight[i] !== undefined) held.add(entry.taskId);
    });
    return held;
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
      const [batchMoved, batchMalformed, ...names] = reply;
      moved += batchMoved;
      malformed += batchMalformed;
      for (const name of names) {
        const queue = parseQueueName(name);
        if (queue !== null) taskTypes.add(queue.taskType);
      }
      if (batchMoved + batchMalformed < REQUEUE_BATCH) break;
    }
    await this.channel.announce(taskTypes);
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

  /**
   * One transaction (MULTI, one instant): ZRANK of the task in its queue, and ZCARD of each of
   * its type's more urgent queues. A ZSET orders equal due times by task id, as `take` does.
   */
  async ahead(entry: DueEntry): Promise<number | null> {
    assertDueEntry(entry);
    const transaction = this.redis.multi();
    transaction.zrank(`${this.keys.queuePrefix}${queueName(entry.taskType, entry.priority)}`, encodeReadyMember(entry));
    for (const priority of PRIORITIES) {
      if (priority >= entry.priority) break;
      transaction.zcard(`${this.keys.queuePrefix}${queueName(entry.taskType, priority)}`);
    }
    const [rank, ...urgent] = (await redisOperation('ready.ahead', () => execPipeline(transaction))) as (
      number | null
    )[];
    if (rank === null || rank === undefined) return null;
    return urgent.reduce<number>((sum, n) => sum + Number(n ?? 0), Number(rank));
  }

  /** One script summing ZCARD over the registry. */
  async backlog(): Promise<number> {
    const total = await redisOperation('ready.backlog', () =>
      runScript(this.redis, readyBacklog, [this.keys.registry], [this.keys.queuePrefix]),
    );
    return Number(total);
  }

  /**
   * Calls `listener` after each push (and each requeue) lands, with the task types it
   * touched: once for those made through this instance, right after they land; and for
   * those of every other instance on the prefix, when their announcement arrives. The
   * first listener opens the subscriber connection (a `duplicate()` of the client), which
   * stays open until {@link close}.
   */
  onPush(listener: PushListener): () => void {
    const remove = this.listeners.add(listener);
    this.channel.listen((taskTypes) => this.listeners.emit(taskTypes));
    return remove;
  }

  /**
   * Resolves once other instances' pushes are heard here: the subscription is in place (or
   * failed, as told to `onError`). At once when no listener was ever added.
   */
  listening(): Promise<void> {
    return this.channel.listening();
  }

  /** Closes the subscriber connection, if any; the client given to the constructor stays open. */
  close(): Promise<void> {
    return this.channel.close();
  }

  /** One script call for some pieces; answers each one's outcome, in order. */
  private async pushPieces(groups: readonly PushGroup[], pieces: Piece[]): Promise<PieceOutcome[]> {
    const keys = [this.keys.registry];
    const fenceIndex = new Map<number, number>();
    const args: (string | number)[] = [
      this.keys.queuePrefix,
      this.channel.name,
      this.channel.instanceId,
      pieces.length,
    ];
    for (const piece of pieces) {
      const fence = groups[piece.group]?.fence;
      let k = 0;
      if (fence !== undefined) {
        k = fenceIndex.get(fence.partition) ?? 0;
        if (k === 0) {
          keys.push(fenceKey(this.prefix, fence.partition), bucketKeys(this.prefix, fence.partition).intact);
          k = keys.length - 1; // KEYS is 1-based in Lua: the fence's index; its marker's is k + 1
          fenceIndex.set(fence.partition, k);
        }
      }
      appendPushGroup(args, k, fence?.epoch, piece.entries);
    }
    const reply = (await redisOperation('ready.push', () => runScript(this.redis, pushReady, keys, args))) as number[];
    return pieces.map((_, i) => {
      const value = Number(reply[2 * i + 1] ?? 0);
      return Number(reply[2 * i]) === 1 ? { refusedBy: value, stamp: 0 } : { refusedBy: null, stamp: value };
    });
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new WheelhouseError('internal', String(error), { cause: error });
}
