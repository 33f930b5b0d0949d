import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { CoalescingReadyQueue } from '../../src/store/coalescing-ready-queue.js';
import { RedisBucketStore } from '../../src/store/redis-buckets.js';
import { defineScript, runScript } from '../../src/store/redis-commands.js';
import { pushedChannel } from '../../src/store/redis-keys.js';
import { RedisReadyQueue } from '../../src/store/redis-ready-queue.js';
import { openRedis, toStoreError } from '../../src/store/redis.js';
import type { DueEntry } from '../../src/domain/model.js';
import { TEST_REDIS_URL, createTestRedis, type TestRedis } from '../support/redis.js';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('the Redis fast index', () => {
  let test: TestRedis;
  beforeAll(async () => {
    test = await createTestRedis();
  });
  afterAll(async () => {
    await test.cleanup();
  });

  it('fails fast with store_unavailable when Redis cannot be reached', async () => {
    const redis = openRedis({ url: `redis://127.0.0.1:${await closedPort()}`, prefix: 'down' });
    try {
      const ready = new RedisReadyQueue(redis, 'down');
      const buckets = new RedisBucketStore(redis, 'down');
      const started = Date.now();
      const errors = await Promise.all([
        ready.backlog().catch((e: unknown) => e),
        ready.push([{ taskId: 't1', taskType: 'a', priority: 1, dueMs: NOW }]).catch((e: unknown) => e),
        ready
          .push([{ taskId: 't1', taskType: 'a', priority: 1, dueMs: NOW }], { partition: 0, epoch: 1 })
          .catch((e: unknown) => e),
        buckets.stamps([0, 1]).catch((e: unknown) => e),
        buckets.fence(0, 1).catch((e: unknown) => e),
        buckets.add(0, [{ taskId: 't1', taskType: 'a', priority: 1, dueMs: NOW }], 1).catch((e: unknown) => e),
      ]);
      expect(Date.now() - started).toBeLessThan(3_000);
      for (const error of errors) {
        expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
        expect(error).toMatchObject({ status: 503, retryAfterSeconds: 1 });
        expect((error as Error).cause).toBeInstanceOf(Error);
      }
    } finally {
      redis.disconnect();
    }
  });

  it('shows a partition as lost when the reply of a bucket take never arrives', async () => {
    const buckets = new RedisBucketStore(test.redis, test.prefix);
    await buckets.takeUntil(11, NOW); // loads the script, so the slow client only times out
    const entries = Array.from({ length: 20_000 }, (_, i) => ({
      taskId: `t${i}`,
      taskType: 'a',
      priority: 1,
      dueMs: NOW + (i % 60_000),
    }));
    await buckets.add(11, entries);
    await buckets.setIntact(11, 1);

    const impatient = openRedis({ url: TEST_REDIS_URL, prefix: test.prefix, commandTimeoutMs: 1 });
    try {
      await new Promise((resolve) => impatient.once('ready', resolve));
      const error = await new RedisBucketStore(impatient, test.prefix)
        .takeUntil(11, NOW + 60_000)
        .catch((e: unknown) => e);
      expect(isWheelhouseError(error, 'store_unavailable')).toBe(true);
    } finally {
      impatient.disconnect();
    }
    // The script ran all the same: the entries left Redis, and the partition says so.
    await vi.waitFor(async () => expect(await test.redis.exists(`${test.prefix}:{p11}:minutes`)).toBe(0));
    expect(await buckets.stamps([11])).toEqual([0]);
  });

  it('shows a partition as lost when a bucket its index names is gone (an evicted key)', async () => {
    const buckets = new RedisBucketStore(test.redis, test.prefix);
    await buckets.setIntact(12, 5);
    await buckets.add(12, [
      { taskId: 'a', taskType: 'x', priority: 1, dueMs: NOW },
      { taskId: 'b', taskType: 'x', priority: 1, dueMs: NOW + 60_000 },
    ]);
    await test.redis.del(`${test.prefix}:{p12}:b:${NOW}`);
    const take = await buckets.takeUntil(12, NOW + 120_000);
    expect(take.entries.map((e) => e.taskId)).toEqual(['b']);
    expect(take.stamp).toBe(0);
    expect(await buckets.stamps([12])).toEqual([0]);
  });

  it('answers stamps no higher than those already answered when Redis goes back in time', async () => {
    const buckets = new RedisBucketStore(test.redis, test.prefix);
    const ready = new RedisReadyQueue(test.redis, test.prefix);
    await buckets.setIntact(13, 1);
    const marker = `${test.prefix}:{p13}:intact`;
    const saved = await test.redis.dumpBuffer(marker);
    const seen = await ready.push([{ taskId: 'c', taskType: 'x', priority: 1, dueMs: NOW }], {
      partition: 13,
      epoch: 1,
    });
    expect(seen).toBe(2);
    // What a restart from an older snapshot, or a failover to a replica behind, does to the key:
    // the next write answers no more than the one before it did (a write always raises it).
    await test.redis.restore(marker, 0, saved, 'REPLACE');
    expect(await buckets.stamps([13])).toEqual([1]);
    expect(await buckets.add(13, [{ taskId: 'd', taskType: 'x', priority: 1, dueMs: NOW + 5 }], 1)).toBe(2);
  });

  it('maps "busy" replies to store_unavailable and other replies to internal', () => {
    const reply = (message: string): Error => Object.assign(new Error(message), { name: 'ReplyError' });
    expect(toStoreError(reply('LOADING Redis is loading the dataset'), 'x').code).toBe('store_unavailable');
    expect(toStoreError(reply('BUSY Redis is busy running a script'), 'x').code).toBe('store_unavailable');
    expect(toStoreError(reply('WRONGTYPE Operation against a key'), 'x').code).toBe('internal');
  });

  it('loads a script the server does not know (after a restart or SCRIPT FLUSH)', async () => {
    const script = defineScript('probe', `-- ${randomBytes(8).toString('hex')}\nreturn ARGV[1] .. KEYS[1]`);
    const key = `${test.prefix}:probe`;
    expect(await test.redis.script('EXISTS', script.sha)).toEqual([0]);
    expect(await runScript(test.redis, script, [key], ['x'])).toBe(`x${key}`);
    expect(await test.redis.script('EXISTS', script.sha)).toEqual([1]);
  });

  it('keeps every key under the prefix, with the hash tag of its script', async () => {
    const own = await createTestRedis();
    try {
      const buckets = new RedisBucketStore(own.redis, own.prefix);
      const ready = new RedisReadyQueue(own.redis, own.prefix);
      await buckets.add(3, [{ taskId: 't1', taskType: 'a', priority: 1, dueMs: NOW + 5 }]);
      await buckets.setIntact(3, 1);
      await buckets.fence(3, 2);
      await ready.push([{ taskId: 't2', taskType: 'mail.send', priority: 4, dueMs: NOW }], { partition: 3, epoch: 2 });
      await ready.take(['mail.send'], 1, NOW);
      const keys: string[] = [];
      for await (const batch of own.redis.scanStream({ match: `${own.prefix}:*` })) keys.push(...(batch as string[]));
      expect(keys.sort()).toEqual(
        [
          `${own.prefix}:{p3}:b:${NOW}`,
          `${own.prefix}:{p3}:intact`,
          `${own.prefix}:{p3}:minutes`,
          `${own.prefix}:{p3}:fence`,
          `${own.prefix}:{rq}:inflight`,
          `${own.prefix}:{rq}:queues`,
        ].sort(),
      );
    } finally {
      await own.cleanup();
    }
  });

  it('refuses a prefix that would break hash tags or SCAN patterns', () => {
    expect(() => openRedis({ url: 'redis://127.0.0.1:1', prefix: 'a{b}' })).toThrow(/prefix/);
    expect(() => new RedisReadyQueue(test.redis, '')).toThrow(/prefix/);
  });

  describe('push announcements across instances', () => {
    const waitLong = { timeout: 5_000, interval: 10 };
    const mail = (n: number, taskType = 'mail'): DueEntry => ({ taskId: `t${n}`, taskType, priority: 1, dueMs: NOW });
    let other: ReturnType<typeof openRedis>;
    let a: RedisReadyQueue;
    let b: RedisReadyQueue;
    const heardA: string[][] = [];
    const heardB: string[][] = [];

    beforeAll(async () => {
      // Two nodes: two connections, one prefix.
      other = openRedis({ url: TEST_REDIS_URL, prefix: test.prefix });
      a = new RedisReadyQueue(test.redis, test.prefix);
      b = new RedisReadyQueue(other, test.prefix);
      a.onPush((types) => heardA.push([...types].sort()));
      b.onPush((types) => heardB.push([...types].sort()));
      await Promise.all([a.listening(), b.listening()]);
    });
    afterAll(async () => {
      await Promise.all([a.close(), b.close()]);
      await other.quit();
    });

    it("wakes the other instance's listeners, and the pusher's own once", async () => {
      await a.push([mail(1), mail(2, 'sms')]);
      expect(heardA).toEqual([['mail', 'sms']]);
      await vi.waitFor(() => expect(heardB).toEqual([['mail', 'sms']]), waitLong);
      // A push from b reaches a after a's own announcement (one connection delivers in
      // order): had a heard itself, it would have heard the first push twice.
      await b.push([mail(3, 'report')], { partition: 1, epoch: 1 });
      expect(heardB).toEqual([['mail', 'sms'], ['report']]);
      await vi.waitFor(() => expect(heardA).toEqual([['mail', 'sms'], ['report']]), waitLong);
    });

    it('announces merged pushes and requeues, and never a refused push', async () => {
      heardA.length = 0;
      heardB.length = 0;
      const merged = new CoalescingReadyQueue(a);
      await Promise.all([merged.push([mail(4, 'x')], { partition: 2, epoch: 1 }), merged.push([mail(5, 'y')])]);
      await vi.waitFor(() => expect(heardB).toEqual([['x', 'y']]), waitLong);

      await a.take(['x'], 1, NOW);
      expect(await a.requeueStale(NOW + 1)).toBe(1);
      await vi.waitFor(() => expect(heardB).toEqual([['x', 'y'], ['x']]), waitLong);

      await new RedisBucketStore(test.redis, test.prefix).fence(2, 9);
      await expect(a.push([mail(6, 'stale')], { partition: 2, epoch: 1 })).rejects.toMatchObject({
        code: 'stale_epoch',
      });
      await a.push([mail(7, 'after')]);
      await vi.waitFor(() => expect(heardB).toEqual([['x', 'y'], ['x'], ['after']]), waitLong);
      expect(heardA).toEqual([['x', 'y'], ['x'], ['after']]);
    });

    it('closes its subscriber connection on close', async () => {
      const channel = pushedChannel(test.prefix);
      const subscribers = async () => ((await test.redis.pubsub('NUMSUB', channel)) as [string, number])[1];
      const c = new RedisReadyQueue(test.redis, test.prefix);
      c.onPush(() => undefined);
      await c.listening();
      expect(await subscribers()).toBe(3);
      await c.close();
      await vi.waitFor(async () => expect(await subscribers()).toBe(2), waitLong);
    });
  });
});
