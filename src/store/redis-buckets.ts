/**
 * Far time buckets in Redis: one ZSET per partition per minute (member = task id,
 * priority, type and limits, `encodeBucketMember`; score = due ms), an index ZSET of each partition's bucket minutes so
 * `takeUntil` never scans keys, a marker key per partition holding its stamp (it vanishes
 * when Redis loses its data, and goes back when Redis goes back in time), and a fence key
 * per partition (`fenceKey`) that fenced writes check in the same script that makes them.
 * All of a partition's keys share its hash tag `{p<partition>}`, so each script touches one
 * Redis Cluster slot.
 */
import { addBuckets } from './lua/add-buckets.js';
import { raiseFence } from './lua/raise-fence.js';
import { takeBuckets } from './lua/take-buckets.js';
import { assertDueEntry, decodeBucketMember, encodeBucketMember, minuteStart } from './entry-codec.js';
import { assertFenceArgs, staleEpochError } from './fences.js';
import { assertPrefix, isCluster, redisOperation, type RedisClient } from './redis.js';
import { execPipeline, runScript } from './redis-commands.js';
import { bucketKeys, fenceKey } from './redis-keys.js';
import type { DueEntry } from '../domain/model.js';
import type { BucketStore } from './fast-index-types.js';

/**
 * Most entries per add script, so one huge add neither builds one huge command nor holds
 * Redis for long; larger adds take several calls.
 */
const ADD_CALL_ENTRIES = 10_000;

/** The production {@link BucketStore}: far time buckets as Redis sorted sets. */
export class RedisBucketStore implements BucketStore {
  private readonly redis: RedisClient;
  private readonly prefix: string;

  /**
   * @param redis a client from `openRedis` or `openRedisCluster`
   * @param prefix the key prefix: every key starts with `${prefix}:`
   */
  constructor(redis: RedisClient, prefix: string) {
    assertPrefix(prefix);
    this.redis = redis;
    this.prefix = prefix;
  }

  /** One script: see `lua/raise-fence.ts`. */
  async fence(partition: number, epoch: number): Promise<void> {
    assertFenceArgs(partition, epoch);
    await redisOperation('buckets.fence', () =>
      runScript(this.redis, raiseFence, [fenceKey(this.prefix, partition)], [epoch]),
    );
  }

  /**
   * One script per 10 000 entries (see `lua/add-buckets.ts`): the fence check, the minute
   * index, then the buckets, so a concurrent `takeUntil` never sees a bucket missing from
   * the index. An add of more than 10 000 entries is not atomic as a whole: should the
   * fence rise between two of its calls, the entries of the earlier ones stay (as if they
   * had been an add that landed just before the fence) and the rest are refused.
   */
  async add(partition: number, entries: DueEntry[], epoch?: number): Promise<number> {
    if (epoch !== undefined) assertFenceArgs(partition, epoch);
    if (entries.length === 0) return (await this.stamps([partition]))[0] ?? 0;
    for (const entry of entries) assertDueEntry(entry);
    const keys = bucketKeys(this.prefix, partition);
    const scriptKeys = [keys.minutes, fenceKey(this.prefix, partition), keys.intact];
    const head = [epoch ?? '', keys.bucketPrefix];
    let stamp = 0;
    for (let from = 0; from < entries.length; from += ADD_CALL_ENTRIES) {
      const byMinute = new Map<number, (string | number)[]>();
      for (const entry of entries.slice(from, from + ADD_CALL_ENTRIES)) {
        const minute = minuteStart(entry.dueMs);
        let pairs = byMinute.get(minute);
        if (pairs === undefined) byMinute.set(minute, (pairs = []));
        pairs.push(entry.dueMs, encodeBucketMember(entry));
      }
      const args: (string | number)[] = [...head];
      for (const [minute, pairs] of byMinute) {
        args.push(minute, pairs.length / 2);
        for (const value of pairs) args.push(value);
      }
      const [refused, value] = (await redisOperation('buckets.add', () =>
        runScript(this.redis, addBuckets, scriptKeys, args),
      )) as [number, number];
      if (refused !== 0) throw staleEpochError('buckets.add', partition, epoch ?? 0, Number(value));
      stamp = Number(value);
    }
    return stamp;
  }

  /**
   * One script reads and deletes the buckets, in (minute, due, task id) order, unless the
   * partition is fenced past `epoch` (then it takes nothing). If it took anything it also
   * deleted the intact marker, set again here to the raised stamp once the reply is in: a
   * call that rejects may have taken entries, and then leaves the partition lost.
   */
  async takeUntil(partition: number, untilMs: number, epoch?: number): Promise<{ entries: DueEntry[]; stamp: number }> {
    if (epoch !== undefined) assertFenceArgs(partition, epoch);
    const keys = bucketKeys(this.prefix, partition);
    return redisOperation('buckets.takeUntil', async () => {
      const reply = (await runScript(
        this.redis,
        takeBuckets,
        [keys.minutes, keys.intact, fenceKey(this.prefix, partition)],
        [keys.bucketPrefix, untilMs, epoch ?? ''],
      )) as (string | number)[] | number;
      if (typeof reply === 'number') throw staleEpochError('buckets.takeUntil', partition, epoch ?? 0, reply);
      const count = (reply.length - 1) / 2;
      const entries = new Array<DueEntry>(count);
      for (let i = 0; i < count; i++) {
        entries[i] = decodeBucketMember(String(reply[2 * i]), Number(reply[2 * i + 1]));
      }
      const stamp = Number(reply[reply.length - 1]);
      if (count > 0 && stamp > 0) await this.redis.set(keys.intact, String(stamp));
      return { entries, stamp };
    });
  }

  async setIntact(partition: number, stamp: number): Promise<void> {
    await redisOperation('buckets.setIntact', () =>
      this.redis.set(bucketKeys(this.prefix, partition).intact, String(stamp)),
    );
  }

  /**
   * One pipeline of GET: each marker lives in its partition's slot, beside its buckets. On
   * Redis Cluster, whose pipelines stay on one node, the GETs go out together instead.
   */
  async stamps(partitions: readonly number[]): Promise<number[]> {
    if (partitions.length === 0) return [];
    const markers = partitions.map((partition) => bucketKeys(this.prefix, partition).intact);
    const redis = this.redis;
    const found = await redisOperation('buckets.stamps', () => {
      if (isCluster(redis)) return Promise.all(markers.map((marker) => redis.get(marker)));
      const pipeline = redis.pipeline();
      for (const marker of markers) pipeline.get(marker);
      return execPipeline(pipeline);
    });
    return partitions.map((_, i) => {
      const stamp = Number(found[i] ?? 0);
      return Number.isSafeInteger(stamp) && stamp > 0 ? stamp : 0;
    });
  }
}
