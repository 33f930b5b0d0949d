/**
 * The partitioned layout's take (see `PartitionedReadyQueue`): a task type's entries are spread
 * over the wheel partitions, so a take reads its types' registries (`TypeRegistry`), then takes
 * from the partitions they name, priority by priority, in waves. Each wave asks as many
 * partitions as entries are still wanted (at most all of them), starting at a point that turns
 * with every take, each for an equal share of what is wanted; a partition that gave its whole
 * share may hold more and is asked again in the next wave, after those not yet asked; one that
 * gave less is read to its end at that priority, and its registry members are dropped after
 * the take (`TypeRegistry.prune`, which keeps any a push bumped meanwhile).
 *
 * So entries go out lowest priority number first across all partitions, and oldest due first
 * within each; across partitions a take spreads over them rather than following due times
 * exactly (docs/decisions/0017-redis-cluster.md). A take of n entries from k partitions holding
 * them costs one registry read per type, then about one wave: min(n, k) scripts sent together.
 */
import { takeReady } from './lua/take-ready.js';
import { PRIORITIES, decodeInFlightMember, queueName } from './entry-codec.js';
import { redisOperation, type RedisClient } from './redis.js';
import { runScript } from './redis-commands.js';
import { partitionReadyKeys } from './redis-keys.js';
import type { RegisteredQueue, TypeRegistry } from './redis-type-registry.js';
import type { DueEntry } from '../domain/model.js';

export class PartitionTaker {
  /** Where the next take starts among a priority's partitions: turns by one per take. */
  private rotation = 0;
  /** Registry prunes under way (see `settled`). */
  private readonly prunes = new Set<Promise<void>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly registry: TypeRegistry,
    private readonly onError: (error: unknown, context: string) => void,
  ) {}

  /**
   * Takes up to `max` entries of these types (see the file's comment): the registries read,
   * then per priority waves of take scripts, one per partition, each in its slot. Entries come
   * back lowest priority number first, then oldest due, then task id. Should a script fail after
   * entries were taken — in an earlier wave or by the other scripts of its own wave — those are
   * answered (they are in flight) and the failure is told to `onError`; a failure with none
   * taken rejects.
   */
  async take(taskTypes: string[], max: number, nowMs: number): Promise<DueEntry[]> {
    const types = [...new Set(taskTypes)];
    let remaining = Math.floor(max);
    if (types.length === 0 || remaining <= 0) return [];
    const registered = await this.registry.read(types);
    if (registered.length === 0) return [];
    const byPriority = new Map<number, Map<number, RegisteredQueue[]>>();
    for (const queue of registered) {
      let partitions = byPriority.get(queue.priority);
      if (partitions === undefined) byPriority.set(queue.priority, (partitions = new Map<number, RegisteredQueue[]>()));
      const list = partitions.get(queue.partition);
      if (list === undefined) partitions.set(queue.partition, [queue]);
      else list.push(queue);
    }
    const start = this.rotation++;
    const taken: DueEntry[] = [];
    const emptied: RegisteredQueue[] = [];
    try {
      for (const priority of PRIORITIES) {
        const partitions = byPriority.get(priority);
        if (remaining <= 0) break;
        if (partitions === undefined) continue;
        const sorted = [...partitions.keys()].sort((a, b) => a - b);
        const turn = start % sorted.length;
        let candidates = [...sorted.slice(turn), ...sorted.slice(0, turn)];
        while (remaining > 0 && candidates.length > 0) {
          const wave = candidates.slice(0, Math.min(candidates.length, remaining));
          const share = Math.floor(remaining / wave.length);
          const asks = wave.map((_, i) => share + (i < remaining % wave.length ? 1 : 0));
          // Settled, not all: a partition whose script failed (its primary down) must not drop
          // what the others of the wave took — those entries are in flight already, and would
          // wait for the requeue of stale entries (`inflightTimeoutSeconds`) to go out again.
          const replies = await Promise.allSettled(
            wave.map((partition, i) => this.takeFrom(partition, types, priority, asks[i] as number, nowMs)),
          );
          const failed = replies.find((r): r is PromiseRejectedResult => r.status === 'rejected');
          const again: number[] = [];
          wave.forEach((partition, i) => {
            const reply = replies[i] as PromiseSettledResult<DueEntry[]>;
            if (reply.status === 'rejected') return;
            const got = reply.value;
            for (const entry of got) taken.push(entry);
            remaining -= got.length;
            // Fewer than asked: every queue of these types at this priority is read to its end.
            if (got.length === asks[i]) again.push(partition);
            else emptied.push(...(partitions.get(partition) ?? []));
          });
          if (failed !== undefined) throw failed.reason;
          candidates = [...candidates.slice(wave.length), ...again];
        }
      }
    } catch (error) {
      // Entries already taken are in flight: hand them out rather than leave them to the requeue.
      if (taken.length === 0) throw error;
      this.onError(error, `a take of ready entries stopped after ${taken.length}`);
    } finally {
      if (emptied.length > 0) this.pruneLater(emptied);
    }
    return taken.sort(compareTakeOrder);
  }

  /** One take script in one partition, for these types at one priority. */
  private async takeFrom(
    partition: number,
    types: string[],
    priority: number,
    max: number,
    nowMs: number,
  ): Promise<DueEntry[]> {
    const keys = partitionReadyKeys(this.prefix, partition);
    const scriptKeys = [
      keys.inFlight,
      ...types.map((taskType) => `${keys.queuePrefix}${queueName(taskType, priority)}`),
    ];
    const args = [nowMs, max, types.length, ...types, priority];
    const reply = await redisOperation('ready.take', () => runScript(this.redis, takeReady, scriptKeys, args));
    return (reply as string[]).map(decodeInFlightMember);
  }

  /** Drops the registry members a take found empty, off the take's path. */
  private pruneLater(emptied: RegisteredQueue[]): void {
    const prune = this.registry.prune(emptied).catch((error: unknown) => {
      this.onError(error, 'dropping emptied queues from the ready-queue registry');
    });
    this.prunes.add(prune);
    void prune.finally(() => this.prunes.delete(prune));
  }

  /** Resolves once the registry prunes under way have ended. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.prunes]);
  }
}

/** Priority, then due time, then task id. */
function compareTakeOrder(a: DueEntry, b: DueEntry): number {
  return a.priority - b.priority || a.dueMs - b.dueMs || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0);
}
