/**
 * The partitioned layout's registry of where a task type's ready entries are: per task type a
 * ZSET of `priority:partition` (`typeRegistryKeys`), one member per partition whose queue of
 * the type at that priority may hold entries. A take reads it instead of probing every
 * partition. It lives in the type's slot, not the partitions', so it cannot be written in the
 * same script as the queues; it is kept right by the order of the writes:
 *
 * - a push writes its queues first, then bumps their members (`bump`), each to a score the
 *   registry never gave before (its change counter);
 * - a take reads the members with their scores before it looks into the partitions, and drops
 *   a member it found empty only if its score is unchanged (`prune`): a push that landed after
 *   the take looked has bumped it since, so it stays.
 *
 * A member is thus never dropped while its queue holds an entry that no take has seen; at
 * worst it stays while its queue is empty, until the next take finds it so. What a node crash
 * between a push and its bump leaves unregistered, `repair` registers again (the ready queue's
 * periodic requeue runs it).
 */
import { bumpRegistry } from './lua/bump-registry.js';
import { pruneRegistry } from './lua/prune-registry.js';
import { redisOperation, type RedisClient } from './redis.js';
import { runScript } from './redis-commands.js';
import { typeRegistryKeys } from './redis-keys.js';
import type { RedisPushChannel } from './redis-push-channel.js';

/** One registry member as a take read it. */
export interface RegisteredQueue {
  taskType: string;
  priority: number;
  partition: number;
  /** The member, `priority:partition`. */
  member: string;
  /** Its score when read, as Redis printed it: what `prune` compares. */
  score: string;
}

/** `priority:partition`. */
export function registryMember(priority: number, partition: number): string {
  return `${priority}:${partition}`;
}

/** Members to write, by task type. */
export type MembersByType = Map<string, Set<string>>;

/** Adds a member for the queue of `taskType` at `priority` in `partition`. */
export function addMember(members: MembersByType, taskType: string, priority: number, partition: number): void {
  let set = members.get(taskType);
  if (set === undefined) members.set(taskType, (set = new Set()));
  set.add(registryMember(priority, partition));
}

export class TypeRegistry {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly channel: RedisPushChannel,
  ) {}

  /** The members of these task types' registries, one ZRANGE each, sent together. */
  async read(taskTypes: readonly string[]): Promise<RegisteredQueue[]> {
    const replies = await redisOperation('ready.take', () =>
      Promise.all(
        taskTypes.map((taskType) =>
          this.redis.zrange(typeRegistryKeys(this.prefix, taskType).partitions, '0', '-1', 'WITHSCORES'),
        ),
      ),
    );
    const found: RegisteredQueue[] = [];
    replies.forEach((flat, t) => {
      const taskType = taskTypes[t] as string;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const member = flat[i] as string;
        const colon = member.indexOf(':');
        const priority = Number(member.slice(0, colon));
        const partition = Number(member.slice(colon + 1));
        if (colon <= 0 || !Number.isInteger(priority) || !Number.isInteger(partition)) continue;
        found.push({ taskType, priority, partition, member, score: flat[i + 1] as string });
      }
    });
    return found;
  }

  /**
   * Gives each member a new score, after a write to its queue; each type's script then
   * announces the type on the push channel. One script per type, sent together.
   */
  bump(members: MembersByType, operation: string): Promise<void> {
    return this.write(members, 'bump', operation).then(() => undefined);
  }

  /**
   * Registers the members not registered (queues found holding entries), announcing the types
   * that had any; answers those types.
   */
  async repair(members: MembersByType): Promise<Set<string>> {
    const written = await this.write(members, 'missing', 'ready.requeueStale');
    return new Set([...members.keys()].filter((_, i) => (written[i] ?? 0) > 0));
  }

  /** Drops the members a take found empty, unless bumped since it read them. One script per type. */
  async prune(found: readonly RegisteredQueue[]): Promise<void> {
    const byType = new Map<string, string[]>();
    for (const queue of found) {
      let args = byType.get(queue.taskType);
      if (args === undefined) byType.set(queue.taskType, (args = []));
      args.push(queue.member, queue.score);
    }
    await redisOperation('ready.take', () =>
      Promise.all(
        [...byType].map(([taskType, args]) =>
          runScript(this.redis, pruneRegistry, [typeRegistryKeys(this.prefix, taskType).partitions], args),
        ),
      ),
    );
  }

  private write(members: MembersByType, mode: 'bump' | 'missing', operation: string): Promise<number[]> {
    return redisOperation(operation, () =>
      Promise.all(
        [...members].map(async ([taskType, set]) => {
          const keys = typeRegistryKeys(this.prefix, taskType);
          const announcement = this.channel.announcement(new Set([taskType]));
          const args = [mode, this.channel.name, announcement, ...set];
          return Number(await runScript(this.redis, bumpRegistry, [keys.partitions, keys.counter], args));
        }),
      ),
    );
  }
}
