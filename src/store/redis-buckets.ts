/**
 * Far time buckets in Redis: one ZSET per partition per minute (member = task id,
 * priority and type; score = due ms), an index ZSET of each partition's bucket minutes so
 * `takeUntil` never scans keys, and a marker key per partition that vanishes when Redis
 * loses its data.
 */
import type { Redis } from 'ioredis';
import { takeBuckets } from './lua/take-buckets.js';
import {
  assertDueEntry,
  decodeBucketMember,
  encodeBucketMember,
  minuteStart,
} from './entry-codec.js';
import { assertPrefix, redisOperation } from './redis.js';
import { execPipeline, runScript } from './redis-commands.js';
import { bucketKeys } from './redis-keys.js';
import type { BucketStore, DueEntry } from './types.js';

/** Most members per ZADD, so one huge add does not build one huge command. */
const ZADD_CHUNK = 2_000;

/** The production {@link BucketStore}: far time buckets as Redis sorted sets. */
export class RedisBucketStore implements BucketStore {
  private readonly redis: Redis;
  private readonly prefix: string;

  /**
   * @param redis a client from `openRedis`
   * @param prefix the key prefix: every key starts with `${prefix}:`
   */
  constructor(redis: Redis, prefix: string) {
    assertPrefix(prefix);
    this.redis = redis;
    this.prefix = prefix;
  }

  /**
   * One MULTI: the minute index first, then one ZADD per minute bucket. The transaction
   * keeps a concurrent `takeUntil` from ever seeing a bucket missing from the index.
   */
  async add(partition: number, entries: DueEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const byMinute = new Map<number, (string | number)[]>();
    for (const entry of entries) {
      assertDueEntry(entry);
      const minute = minuteStart(entry.dueMs);
      let args = byMinute.get(minute);
      if (args === undefined) byMinute.set(minute, (args = []));
      args.push(entry.dueMs, encodeBucketMember(entry));
    }
    const keys = bucketKeys(this.prefix, partition);
    const multi = this.redis.multi();
    const index: (string | number)[] = [];
    for (const minute of byMinute.keys()) index.push(minute, String(minute));
    multi.zadd(keys.minutes, ...index);
    for (const [minute, args] of byMinute) {
      for (let i = 0; i < args.length; i += 2 * ZADD_CHUNK) {
        multi.zadd(`${keys.bucketPrefix}${minute}`, ...args.slice(i, i + 2 * ZADD_CHUNK));
      }
    }
    await redisOperation('buckets.add', () => execPipeline(multi));
  }

  /**
   * One script reads and deletes the buckets, in (minute, due, task id) order. If it took
   * anything it also deleted the intact marker, set again here once the reply is in: a
   * call that rejects may have taken entries, and then leaves the partition lost.
   */
  async takeUntil(partition: number, untilMs: number): Promise<DueEntry[]> {
    const keys = bucketKeys(this.prefix, partition);
    return redisOperation('buckets.takeUntil', async () => {
      const flat = (await runScript(
        this.redis,
        takeBuckets,
        [keys.minutes, keys.intact],
        [keys.bucketPrefix, untilMs],
      )) as (string | number)[];
      const count = (flat.length - 1) / 2;
      const entries = new Array<DueEntry>(count);
      for (let i = 0; i < count; i++) {
        entries[i] = decodeBucketMember(String(flat[2 * i]), Number(flat[2 * i + 1]));
      }
      if (flat[flat.length - 1] === 1) await this.redis.set(keys.intact, '1');
      return entries;
    });
  }

  async setIntact(partition: number): Promise<void> {
    await redisOperation('buckets.setIntact', () =>
      this.redis.set(bucketKeys(this.prefix, partition).intact, '1'),
    );
  }

  /** One pipeline of EXISTS: each marker lives in its partition's slot, beside its buckets. */
  async lostPartitions(partitions: number[]): Promise<number[]> {
    if (partitions.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const partition of partitions) pipeline.exists(bucketKeys(this.prefix, partition).intact);
    const found = await redisOperation('buckets.lostPartitions', () => execPipeline(pipeline));
    return partitions.filter((_, i) => found[i] !== 1);
  }
}
