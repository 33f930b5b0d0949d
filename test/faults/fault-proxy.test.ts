/**
 * The fault-injection tools themselves, against the real shared Postgres and Redis: the TCP
 * fault proxy (test/support/fault-proxy.ts) between real `pg` and ioredis clients and the
 * servers, and a private redis-server (test/support/redis-server.ts) killed and started again.
 * Timings are asserted with wide margins: at least 0.8 × the fault, at most the fault + 3 s.
 */
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { TEST_POSTGRES_URL } from '../support/postgres.js';
import { TEST_REDIS_URL, deleteKeysWithPrefix } from '../support/redis.js';

const SLACK_MS = 3_000;
const prefix = `fp-${randomBytes(5).toString('hex')}`;

function targetOf(url: string): { host: string; port: number } {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port) };
}

/** Milliseconds since `startMs` (a `performance.now()`). */
function since(startMs: number): number {
  return performance.now() - startMs;
}

/** Expects `elapsedMs` to be about `faultMs`: not clearly shorter, not absurdly longer. */
function expectAbout(elapsedMs: number, faultMs: number): void {
  expect(elapsedMs).toBeGreaterThanOrEqual(0.8 * faultMs);
  expect(elapsedMs).toBeLessThan(faultMs + SLACK_MS);
}

/** Resolves at the client's next 'ready', ignoring the 'error' events before it (which `events.once` would reject on). */
function ready(client: Redis): Promise<void> {
  return new Promise((resolve) => client.once('ready', () => resolve()));
}

describe('fault proxy between real clients and the shared servers', () => {
  let pgProxy: FaultProxy;
  let redisProxy: FaultProxy;
  const closers: (() => Promise<unknown>)[] = [];
  /** Errors the pools emitted for idle clients (unhandled, they would crash the run). */
  const idleErrors: Error[] = [];

  function pool(): pg.Pool {
    const created = new pg.Pool({ connectionString: pgProxy.url(TEST_POSTGRES_URL), max: 1 });
    created.on('error', (error) => idleErrors.push(error));
    closers.push(() => created.end());
    return created;
  }

  function redis(options: RedisOptions = {}): Redis {
    const created = new Redis(redisProxy.url(TEST_REDIS_URL), options);
    created.on('error', () => undefined);
    closers.push(async () => created.disconnect());
    return created;
  }

  const direct = new Redis(TEST_REDIS_URL);

  beforeEach(async () => {
    pgProxy = await startFaultProxy({ target: targetOf(TEST_POSTGRES_URL) });
    redisProxy = await startFaultProxy({ target: targetOf(TEST_REDIS_URL) });
    idleErrors.length = 0;
  });

  afterEach(async () => {
    await Promise.all(closers.splice(0).map((close) => close()));
    await Promise.all([pgProxy.close(), redisProxy.close()]);
  });

  afterAll(async () => {
    await deleteKeysWithPrefix(direct, prefix);
    await direct.quit();
  });

  it('points URLs at itself and forwards a pg pool and an ioredis client', async () => {
    expect(pgProxy.url('postgres://postgres@127.0.0.1:5432/test')).toBe(
      `postgres://postgres@127.0.0.1:${pgProxy.port}/test`,
    );
    expect(redisProxy.url('redis://127.0.0.1:6379')).toBe(`redis://127.0.0.1:${redisProxy.port}`);

    const { rows } = await pool().query<{ answer: number }>('SELECT 42 AS answer');
    expect(rows).toEqual([{ answer: 42 }]);
    const client = redis();
    await client.set(`${prefix}:forwarded`, 'yes');
    expect(await direct.get(`${prefix}:forwarded`)).toBe('yes');

    for (const proxy of [pgProxy, redisProxy]) {
      const stats = proxy.stats();
      expect(stats).toMatchObject({ accepted: 1, open: 1, refused: 0, dropped: 0 });
      expect(stats.bytesToTarget).toBeGreaterThan(0);
      expect(stats.bytesFromTarget).toBeGreaterThan(0);
    }
  });

  it('dropAll fails the pg query in flight, the idle pool client errors, and the pool connects again', async () => {
    const sleeper = pool();
    const client = await sleeper.connect();
    // A checked-out client emits 'error' as well as rejecting its query: unheard, it would crash the run.
    const clientError = once(client, 'error');
    const sent = pgProxy.stats().bytesToTarget;
    const inFlight = client.query('SELECT pg_sleep(3)');
    await vi.waitFor(() => expect(pgProxy.stats().bytesToTarget).toBeGreaterThan(sent));

    expect(pgProxy.dropAll()).toBe(1);
    await expect(inFlight).rejects.toThrow('Connection terminated unexpectedly');
    expect(await clientError).toEqual([new Error('Connection terminated unexpectedly')]);
    client.release(true);

    const idle = pool();
    await idle.query('SELECT 1');
    const idleError = once(idle, 'error');
    expect(pgProxy.dropAll()).toBe(1);
    await idleError;
    expect(idleErrors.map((error) => error.message)).toEqual(['Connection terminated unexpectedly']);

    const { rows } = await idle.query<{ answer: number }>('SELECT 7 AS answer');
    expect(rows).toEqual([{ answer: 7 }]);
    expect(pgProxy.stats()).toMatchObject({ accepted: 3, dropped: 2, open: 1 });
  });

  it('dropAll: ioredis reconnects by itself and sends the command in flight again', async () => {
    const client = redis();
    await client.ping();
    const events: string[] = [];
    for (const event of ['close', 'reconnecting', 'connect', 'ready']) client.on(event, () => events.push(event));
    const key = `${prefix}:list`;
    const sent = redisProxy.stats().bytesToTarget;
    const popped = client.blpop(key, 10);
    await vi.waitFor(() => expect(redisProxy.stats().bytesToTarget).toBeGreaterThan(sent));

    const droppedAtMs = performance.now();
    expect(redisProxy.dropAll()).toBe(1);
    await ready(client);
    expect(since(droppedAtMs)).toBeLessThan(SLACK_MS);
    expect(events).toEqual(['close', 'reconnecting', 'connect', 'ready']);

    await direct.rpush(key, 'after-the-drop');
    expect(await popped).toEqual([key, 'after-the-drop']);
    expect(redisProxy.stats()).toMatchObject({ accepted: 2, dropped: 1, open: 1 });
  });

  it('refuse(ms) resets new connections for about ms and leaves open ones alone', async () => {
    const refuseMs = 1_500;
    const open = redis();
    await open.ping();
    const startMs = performance.now();
    const window = pgProxy.refuse(refuseMs);
    const windowOver = redisProxy.refuse(refuseMs).then(() => since(startMs));

    const refused = new pg.Client({ connectionString: pgProxy.url(TEST_POSTGRES_URL) });
    refused.on('error', () => undefined);
    await expect(refused.connect()).rejects.toThrow();
    expect(pgProxy.stats()).toMatchObject({ accepted: 0, refused: 1 });
    expect(await open.ping()).toBe('PONG');

    await window;
    expectAbout(await windowOver, refuseMs);
    const { rows } = await pool().query<{ answer: number }>('SELECT 1 AS answer');
    expect(rows).toEqual([{ answer: 1 }]);
    expect(pgProxy.stats()).toMatchObject({ accepted: 1, refused: 1 });
  });

  it('restart(downMs): ioredis is ready again only once the server is back, and not long after', async () => {
    const downMs = 1_500;
    const client = redis();
    await client.ping();
    const startMs = performance.now();
    const back = redisProxy.restart(downMs);
    const errors: string[] = [];
    client.on('error', (error: Error) => errors.push(error.message));
    await ready(client);
    expectAbout(since(startMs), downMs);
    await back;
    // Each refused attempt is an 'error' event (so `events.once(client, 'ready')` would reject).
    expect(errors.length).toBeGreaterThanOrEqual(1);
    expect(errors.every((message) => message.includes('ECONNRESET'))).toBe(true);
    expect(await client.ping()).toBe('PONG');
    const stats = redisProxy.stats();
    expect(stats.dropped).toBe(1);
    expect(stats.refused).toBeGreaterThanOrEqual(1);
  });

  it('blackhole(ms) holds replies for about ms, then delivers them on the same connections', async () => {
    const holdMs = 1_000;
    const sql = pool();
    await sql.query('SELECT 1');
    const client = redis();
    await client.ping();
    const closes: string[] = [];
    client.on('close', () => closes.push('close'));

    const startMs = performance.now();
    const windows = Promise.all([pgProxy.blackhole(holdMs), redisProxy.blackhole(holdMs)]);
    const [{ rows }, pong] = await Promise.all([sql.query<{ answer: number }>('SELECT 42 AS answer'), client.ping()]);
    expectAbout(since(startMs), holdMs);
    expect(rows).toEqual([{ answer: 42 }]);
    expect(pong).toBe('PONG');
    await windows;
    expect(closes).toEqual([]);
    for (const proxy of [pgProxy, redisProxy])
      expect(proxy.stats()).toMatchObject({ accepted: 1, dropped: 0, open: 1 });
  });

  it('blackhole with release "drop" discards what was held and closes the connections', async () => {
    const holdMs = 500;
    const sql = pool();
    await sql.query('SELECT 1');
    // No reconnection: the SET in flight fails instead of being sent again after the drop.
    const client = redis({ retryStrategy: () => null });
    await client.ping();
    const key = `${prefix}:never-arrives`;

    const windows = Promise.all([
      pgProxy.blackhole(holdMs, { release: 'drop' }),
      redisProxy.blackhole(holdMs, { release: 'drop' }),
    ]);
    const query = sql.query('SELECT 1');
    const set = client.set(key, 'held');
    await Promise.all([
      expect(query).rejects.toThrow('Connection terminated unexpectedly'),
      expect(set).rejects.toThrow('Connection is closed.'),
    ]);
    await windows;
    expect(await direct.exists(key)).toBe(0);
    for (const proxy of [pgProxy, redisProxy]) expect(proxy.stats()).toMatchObject({ dropped: 1, open: 0 });
  });

  it('latency(ms) delays each round trip by about 2 × ms, keeps order, and 0 removes it', async () => {
    const delayMs = 300;
    const client = redis();
    await client.ping();
    const sql = pool();
    await sql.query('SELECT 1');
    pgProxy.latency(delayMs);
    redisProxy.latency(delayMs);

    let startMs = performance.now();
    await client.ping();
    expectAbout(since(startMs), 2 * delayMs);
    startMs = performance.now();
    await sql.query('SELECT 1');
    expectAbout(since(startMs), 2 * delayMs);

    const counter = `${prefix}:counter`;
    const replies = await Promise.all(Array.from({ length: 50 }, () => client.incr(counter)));
    expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));

    redisProxy.latency(0);
    startMs = performance.now();
    await client.ping();
    expect(since(startMs)).toBeLessThan(0.8 * 2 * delayMs);
  });

  it('restore() ends every fault at once and resolves their windows', async () => {
    const client = redis();
    await client.ping();
    redisProxy.latency(5_000);
    const windows = Promise.all([redisProxy.blackhole(), redisProxy.refuse()]);
    const pong = client.ping();
    redisProxy.restore();
    await windows;
    expect(await pong).toBe('PONG');
    const fresh = redis();
    expect(await fresh.ping()).toBe('PONG');
  });
});

describe('private redis-server', () => {
  let server: RedisServer | undefined;

  afterEach(async () => {
    await server?.cleanup();
  });

  it('started again after a kill, it has the writes before its last SAVE and not those after', async () => {
    server = await startRedisServer();
    const client = new Redis(server.url);
    client.on('error', () => undefined);
    try {
      expect(await client.config('GET', 'save')).toEqual(['save', '']);
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
      expect(await client.config('GET', 'bind')).toEqual(['bind', '127.0.0.1']);

      await client.set('before-save', '1');
      await server.save();
      await client.set('after-save', '2');
      await server.kill();
      await server.start();
      // The same client reconnects by itself: the port did not change.
      expect(await client.get('before-save')).toBe('1');
      expect(await client.get('after-save')).toBeNull();

      await client.set('before-stop', '3');
      await server.stop({ save: true });
      await server.start();
      expect(await client.get('before-stop')).toBe('3');

      await client.set('unsaved', '4');
      await server.stop();
      await server.start();
      expect(await client.get('unsaved')).toBeNull();
    } finally {
      client.disconnect();
    }
    const { dir } = server;
    await server.cleanup();
    expect(server.running()).toBe(false);
    expect(existsSync(dir)).toBe(false);
  });

  it('runs with a maxmemory-policy other than noeviction', async () => {
    server = await startRedisServer({ maxmemory: '2mb', maxmemoryPolicy: 'allkeys-lru' });
    const client = new Redis(server.url);
    try {
      expect(await client.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'allkeys-lru']);
      const value = 'x'.repeat(100 * 1024);
      for (let i = 0; i < 50; i += 1) await client.set(`big:${i}`, value);
      expect(await client.dbsize()).toBeLessThan(50);

      await client.config('SET', 'maxmemory-policy', 'noeviction');
      await expect(client.set('one-more', value)).rejects.toThrow(/OOM/);
    } finally {
      client.disconnect();
    }
  });
});
