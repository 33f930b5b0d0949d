/**
 * Ready queues in Redis, the partitioned layout, for Redis Cluster: each wheel partition has
 * its own ready queues (a ZSET per task type × priority, member = task id and its limits
 * (`encodeReadyMember`), score = due ms),
 * their registry SET and its in-flight ZSET, all tagged `{p<partition>}` beside the
 * partition's far buckets and fence. A task's entry lives in its wheel partition
 * (`partitionOf(taskId)`), so every script — a fenced push checking the fence, a take, a
 * requeue — touches the one slot of one partition. A task type's registry
 * ({@link TypeRegistry}, tagged `{t:<type>}`) says which partitions may hold its entries.
 *
 * A take reads its types' registries and takes from the partitions they name, priority first
 * (`PartitionTaker`); a push writes each partition's part in its slot, then bumps the registry
 * (`pushByPartition`).
 */
import { WheelhouseError } from '../lib/errors.js';
import { partitionOf } from '../lib/ids.js';
import type { GroupingReadyQueue, PushFence, PushGroup } from './coalescing-ready-queue.js';
import { readyAhead } from './lua/ready-ahead.js';
import { readyBacklog } from './lua/ready-backlog.js';
import { readyDepths } from './lua/ready-depths.js';
import { requeueStale } from './lua/requeue-stale.js';
import {
  PRIORITIES,
  assertDueEntry,
  compareQueueDepths,
  encodeInFlightMember,
  encodeReadyMember,
  parseQueueName,
  queueName,
} from './entry-codec.js';
import { PushListeners, type PushListener } from './push-listeners.js';
import { assertPrefix, redisOperation, type RedisClient } from './redis.js';
import { execPipeline, runScript } from './redis-commands.js';
import { partitionReadyKeys, type ReadyKeys } from './redis-keys.js';
import { pushByPartition, type PushTarget } from './redis-partition-push.js';
import { PartitionTaker } from './redis-partition-take.js';
import { RedisPushChannel } from './redis-push-channel.js';
import { addMember, TypeRegistry, type MembersByType } from './redis-type-registry.js';
import type { DueEntry } from '../domain/model.js';
import type { QueueDepth } from './fast-index-types.js';

/** Most members per ZREM, so one huge ack does not build one huge command. */
const COMMAND_CHUNK = 2_000;

/** Most stale entries one requeue script moves, so one call never blocks Redis long. */
const REQUEUE_BATCH = 1_000;

export interface PartitionedReadyQueueOptions {
  /** The deployment's wheel partition count (`partitions`): where each task's entry lives. */
  partitions: number;
  /**
   * Told of the failures no caller can be handed: errors of the subscriber connection, of
   * listeners on hearing another instance's push, and of dropping registry members a take
   * found empty (the next take drops them). Ignored by default.
   */
  onError?: (error: unknown, context: string) => void;
}

/** The production {@link ReadyQueue} on Redis Cluster: per-partition queues, found through per-type registries. */
export class PartitionedReadyQueue implements GroupingReadyQueue {
  private readonly listeners = new PushListeners();
  private readonly channel: RedisPushChannel;
  private readonly registry: TypeRegistry;
  private readonly partitions: number;
  private readonly onError: (error: unknown, context: string) => void;
  private readonly taker: PartitionTaker;
  /** Where pushes write. */
  private readonly target: PushTarget;

  /**
   * @param redis a client from `openRedisCluster` (or `openRedis`: the layout runs on one server too)
   * @param prefix the key prefix: every key starts with `${prefix}:`
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    options: PartitionedReadyQueueOptions,
  ) {
    assertPrefix(prefix);
    if (!Number.isSafeInteger(options.partitions) || options.partitions < 1) {
      throw new TypeError(`partitions must be a positive integer, got ${options.partitions}`);
    }
    this.partitions = options.partitions;
    this.onError = options.onError ?? (() => undefined);
    this.channel = new RedisPushChannel(redis, prefix, this.onError);
    this.registry = new TypeRegistry(redis, prefix, this.channel);
    this.target = { redis, prefix, partitions: this.partitions, instanceId: this.channel.instanceId };
    this.taker = new PartitionTaker(redis, prefix, this.registry, this.onError);
  }

  /** {@link pushGroups} with one group. */
  async push(entries: DueEntry[], fence?: PushFence): Promise<number> {
    if (entries.length === 0) return 0;
    const [result] = await this.pushGroups([fence === undefined ? { entries } : { entries, fence }]);
    if (typeof result !== 'number')
      throw result ?? new WheelhouseError('internal', 'A ready-queue push gave no result.');
    return result;
  }

  /**
   * Per partition, the push script (`lua/push-ready.ts`) with that partition's part of every
   * group — one call, or past 10 000 entries several one after the other — the partitions'
   * calls sent together (`pushByPartition`); then the registry bumps of the queues written,
   * one script per task type, which announce the types. A fenced group goes to its partition,
   * and its entries must belong to it (a wheel partition pushes its own tasks); an unfenced
   * group is split by each entry's partition. Results as
   * {@link GroupingReadyQueue.pushGroups}; an unfenced group whose part failed in one
   * partition fails, the parts written elsewhere staying (a push is idempotent: its caller
   * pushes again).
   */
  async pushGroups(groups: readonly PushGroup[]): Promise<(Error | number)[]> {
    const results: (Error | number)[] = groups.map(() => 0);
    const { written, writtenGroups } = await pushByPartition(this.target, groups, results);
    const taskTypes = new Set(written.keys());
    try {
      await this.registry.bump(written, 'ready.push');
    } catch (error) {
      // The queues hold the entries, but no take may find them yet: the callers push again.
      const failure = asError(error);
      return results.map((result, g) => (typeof result === 'number' && writtenGroups.has(g) ? failure : result));
    }
    try {
      this.listeners.emit(taskTypes);
    } catch (error) {
      const failure = asError(error);
      return results.map((result, g) => (typeof result === 'number' && writtenGroups.has(g) ? failure : result));
    }
    return results;
  }

  /** See {@link PartitionTaker.take}. */
  take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    return this.taker.take(taskTypes, max, nowMs);
  }

  /**
   * Per partition holding any of the entries, one transaction (MULTI, one instant, one slot):
   * ZMSCORE of each entry's queue for its task ids, and of the in-flight set for the entries'
   * members. The partitions' transactions go out together.
   */
  async held(entries: readonly DueEntry[]): Promise<Set<string>> {
    if (entries.length === 0) return new Set();
    for (const entry of entries) assertDueEntry(entry);
    const held = new Set<string>();
    await redisOperation('ready.held', () =>
      Promise.all(
        [...this.byPartition(entries)].map(async ([partition, list]) => {
          const keys = this.keys(partition);
          const byQueue = new Map<string, DueEntry[]>();
          for (const entry of list) {
            const name = queueName(entry.taskType, entry.priority);
            let queue = byQueue.get(name);
            if (queue === undefined) byQueue.set(name, (queue = []));
            queue.push(entry);
          }
          const transaction = this.redis.multi();
          for (const [name, queue] of byQueue) {
            transaction.zmscore(`${keys.queuePrefix}${name}`, ...queue.map(encodeReadyMember));
          }
          transaction.zmscore(keys.inFlight, ...list.map(encodeInFlightMember));
          const replies = (await execPipeline(transaction)) as (string | null)[][];
          [...byQueue.values()].forEach((queue, q) => {
            queue.forEach((entry, i) => {
              if (replies[q]?.[i] !== null && replies[q]?.[i] !== undefined) held.add(entry.taskId);
            });
          });
          const inFlight = replies[byQueue.size] ?? [];
          list.forEach((entry, i) => {
            if (inFlight[i] !== null && inFlight[i] !== undefined) held.add(entry.taskId);
          });
        }),
      ),
    );
    return held;
  }

  /** ZREM from each entry's partition's in-flight set; the partitions' commands go out together. */
  async ack(entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const commands: Promise<unknown>[] = [];
    for (const [partition, list] of this.byPartition(entries)) {
      const members = list.map(encodeInFlightMember);
      const inFlight = this.keys(partition).inFlight;
      for (let i = 0; i < members.length; i += COMMAND_CHUNK) {
        commands.push(this.redis.zrem(inFlight, ...members.slice(i, i + COMMAND_CHUNK)));
      }
    }
    await redisOperation('ready.ack', () => Promise.all(commands));
  }

  /**
   * Per partition, scripts of at most 1 000 entries each until none is left, the partitions
   * together; the queues put back into are bumped in their types' registries (which announce
   * them), and listeners hear of the types. Then the repair under the registries: every
   * partition's queues holding entries are registered where their member is missing (left so
   * by a node that died between a push and its bump), and listeners hear of those types too.
   */
  async requeueStale(olderThanMs: number): Promise<number> {
    let moved = 0;
    let malformed = 0;
    const requeued: MembersByType = new Map();
    await redisOperation('ready.requeueStale', () =>
      Promise.all(
        this.allPartitions().map(async (partition) => {
          const keys = this.keys(partition);
          for (;;) {
            const reply = (await runScript(
              this.redis,
              requeueStale,
              [keys.inFlight, keys.registry],
              [olderThanMs, keys.queuePrefix, REQUEUE_BATCH],
            )) as [number, number, ...string[]];
            const [batchMoved, batchMalformed, ...names] = reply;
            moved += batchMoved;
            malformed += batchMalformed;
            for (const name of names) {
              const queue = parseQueueName(name);
              if (queue !== null) addMember(requeued, queue.taskType, queue.priority, partition);
            }
            if (batchMoved + batchMalformed < REQUEUE_BATCH) break;
          }
        }),
      ),
    );
    await this.registry.bump(requeued, 'ready.requeueStale');
    const taskTypes = new Set(requeued.keys());
    const holding: MembersByType = new Map();
    for (const [partition, flat] of (await this.allDepths()).entries()) {
      for (let i = 0; i < flat.length; i += 3) {
        const queue = parseQueueName(String(flat[i]));
        if (queue !== null && Number(flat[i + 1]) > 0) addMember(holding, queue.taskType, queue.priority, partition);
      }
    }
    for (const taskType of await this.registry.repair(holding)) taskTypes.add(taskType);
    this.listeners.emit(taskTypes);
    if (malformed > 0) {
      throw new WheelhouseError('internal', `${malformed} unreadable in-flight entries were dropped.`, {
        details: { moved, malformed },
      });
    }
    return moved;
  }

  /** One script per partition over its registry, together; merged per queue, ordered by task type, then priority. */
  async depths(nowMs: number): Promise<QueueDepth[]> {
    const merged = new Map<string, { depth: number; oldestDueMs: number | null }>();
    for (const flat of await this.allDepths()) {
      for (let i = 0; i < flat.length; i += 3) {
        const name = String(flat[i]);
        const oldest = String(flat[i + 2]);
        const queue = merged.get(name) ?? { depth: 0, oldestDueMs: null };
        queue.depth += Number(flat[i + 1]);
        if (oldest !== '' && (queue.oldestDueMs === null || Number(oldest) < queue.oldestDueMs)) {
          queue.oldestDueMs = Number(oldest);
        }
        merged.set(name, queue);
      }
    }
    const depths: QueueDepth[] = [];
    for (const [name, { depth, oldestDueMs }] of merged) {
      const queue = parseQueueName(name);
      if (queue === null) throw new WheelhouseError('internal', `Malformed ready-queue name: ${name}`);
      depths.push({
        taskType: queue.taskType,
        priority: queue.priority,
        depth,
        oldestReadyAgeMs: oldestDueMs === null ? null : Math.max(0, nowMs - oldestDueMs),
      });
    }
    return depths.sort(compareQueueDepths);
  }

  /**
   * One script per partition (see `lua/ready-ahead.ts`), together: the entry's rank in its
   * own partition's queue, and in every other partition the entries a take in global (priority,
   * due, task id) order would hand out before it. A take here spreads over the partitions, so
   * this is an estimate of the wait, exact when the type's entries are all in one partition.
   */
  async ahead(entry: DueEntry): Promise<number | null> {
    assertDueEntry(entry);
    const own = partitionOf(entry.taskId, this.partitions);
    const counts = await redisOperation('ready.ahead', () =>
      Promise.all(
        this.allPartitions().map((partition) => {
          const keys = this.keys(partition);
          const queues = PRIORITIES.filter((p) => p <= entry.priority).map(
            (priority) => `${keys.queuePrefix}${queueName(entry.taskType, priority)}`,
          );
          const args = [entry.dueMs, encodeReadyMember(entry), partition === own ? '1' : '0'];
          return runScript(this.redis, readyAhead, queues, args);
        }),
      ),
    );
    if (Number(counts[own]) < 0) return null;
    return counts.reduce<number>((sum, n) => sum + Number(n), 0);
  }

  /** One script per partition summing ZCARD over its registry, together. */
  async backlog(): Promise<number> {
    const totals = await redisOperation('ready.backlog', () =>
      Promise.all(
        this.allPartitions().map((partition) => {
          const keys = this.keys(partition);
          return runScript(this.redis, readyBacklog, [keys.registry], [keys.queuePrefix]);
        }),
      ),
    );
    return totals.reduce<number>((sum, n) => sum + Number(n), 0);
  }

  /** As `RedisReadyQueue.onPush`: this instance's pushes, and those announced by others. */
  onPush(listener: PushListener): () => void {
    const remove = this.listeners.add(listener);
    this.channel.listen((taskTypes) => this.listeners.emit(taskTypes));
    return remove;
  }

  /** Resolves once other instances' pushes are heard here (at once when no listener was added). */
  listening(): Promise<void> {
    return this.channel.listening();
  }

  /** Waits for registry prunes under way, then closes the subscriber connection, if any. */
  async close(): Promise<void> {
    await this.taker.settled();
    await this.channel.close();
  }

  private keys(partition: number): ReadyKeys {
    return partitionReadyKeys(this.prefix, partition);
  }

  private allPartitions(): number[] {
    return Array.from({ length: this.partitions }, (_, partition) => partition);
  }

  private byPartition(entries: readonly DueEntry[]): Map<number, DueEntry[]> {
    const out = new Map<number, DueEntry[]>();
    for (const entry of entries) {
      const partition = partitionOf(entry.taskId, this.partitions);
      let list = out.get(partition);
      if (list === undefined) out.set(partition, (list = []));
      list.push(entry);
    }
    return out;
  }

  /** Every partition's `lua/ready-depths.ts` reply (name, depth, oldest due, …), in partition order. */
  private allDepths(): Promise<(string | number)[][]> {
    return redisOperation('ready.depths', () =>
      Promise.all(
        this.allPartitions().map((partition) => {
          const keys = this.keys(partition);
          return runScript(this.redis, readyDepths, [keys.registry], [keys.queuePrefix]) as Promise<
            (string | number)[]
          >;
        }),
      ),
    );
  }
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new WheelhouseError('internal', String(error), { cause: error });
}
