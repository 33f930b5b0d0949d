import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { isWheelhouseError } from '../../src/errors.js';
import { RedisBucketStore } from '../../src/store/redis-buckets.js';
import { defineScript, runScript } from '../../src/store/redis-commands.js';
import { RedisReadyQueue } from '../../src/store/redis-ready-queue.js';
import { openRedis, toStoreError } from '../../src/store/redis.js';
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
        buckets.lostPartitions([0, 1]).catch((e: unknown) => e),
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
    await buckets.setIntact(11);

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
    expect(await buckets.lostPartitions([11])).toEqual([11]);
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
      await buckets.setIntact(3);
      await ready.push([{ taskId: 't2', taskType: 'mail.send', priority: 4, dueMs: NOW }]);
      await ready.take(['mail.send'], 1, NOW);
      const keys: string[] = [];
      for await (const batch of own.redis.scanStream({ match: `${own.prefix}:*` })) keys.push(...(batch as string[]));
      expect(keys.sort()).toEqual(
        [
          `${own.prefix}:{p3}:b:${NOW}`,
          `${own.prefix}:{p3}:intact`,
          `${own.prefix}:{p3}:minutes`,
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
});
