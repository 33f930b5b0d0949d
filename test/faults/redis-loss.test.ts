import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { dagClient } from '../support/dags.js';
import { pollOnFakeTime } from '../support/faulty-node.js';
import { api, startTestNode, type TestCluster } from '../support/nodes.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';
import { uniqueType } from '../support/tasks.js';

/**
 * Redis losing part of its data is noticed and repaired, not only a flush: a Redis restarted
 * from an older snapshot (what a failover to a replica that had not seen the last writes
 * looks like too) has the partition's stamp go back, and the partition rebuilds its buckets
 * and ready entries from Postgres. A Redis that may evict keys is refused at start. Each test
 * runs its own `redis-server`, so it can restart it for real.
 */
const START = Date.UTC(2026, 10, 30, 10, 0, 10);
const MINUTE = 60_000;

describe('Redis losing data', () => {
  let server: RedisServer | undefined;
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    await server?.cleanup();
    c = undefined;
    server = undefined;
  });

  const submit = async (node: TestCluster, type: string, dueMs: number): Promise<string> => {
    const r = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
    });
    expect(r.status).toBe(201);
    return r.body.task_id;
  };

  it('rebuilds a partition whose Redis restarted from an older snapshot: tasks written after it still run', async () => {
    server = await startRedisServer();
    const clock = new FakeClock(START);
    c = await startTestNode(
      'postgres',
      {
        redisUrl: server.url,
        partitions: 1,
        failureTimeoutSeconds: 60,
        safetyNetGraceSeconds: 60,
        logLevel: process.env.TEST_LOG ?? 'silent',
      },
      { clock },
    );
    const node = c;
    const w = dagClient(() => node.url);
    const type = uniqueType('rollback');
    const before = await submit(node, type, START + 3 * MINUTE);
    const warmup = await submit(node, `${type}.now`, START);
    const ran = await pollOnFakeTime(() => node.url, clock, `${type}.now`, START + 5_000);
    expect(ran?.tasks.map((t) => t.task_id)).toEqual([warmup]);
    await w.complete(ran!.tasks);
    await server.save();
    // Written after the snapshot: a far bucket entry and a ready entry, both lost by the restart.
    const after = await submit(node, type, START + 4 * MINUTE);
    const ready = await submit(node, `${type}.ready`, clock.now());
    await clock.advance(0);
    await server.kill();
    await server.start();

    const again = await pollOnFakeTime(() => node.url, clock, `${type}.ready`, clock.now() + 10_000);
    expect(again?.tasks.map((t) => t.task_id)).toEqual([ready]);
    const first = await pollOnFakeTime(() => node.url, clock, type, START + 3 * MINUTE + 2_000);
    expect(first?.tasks.map((t) => t.task_id)).toEqual([before]);
    const second = await pollOnFakeTime(() => node.url, clock, type, START + 4 * MINUTE + 2_000);
    expect(second?.tasks.map((t) => t.task_id)).toEqual([after]);
    expect(second!.atMs).toBeLessThanOrEqual(START + 4 * MINUTE + 1_000);
    const wheel = await api<{ state: { rebuilds: number } }>(node.url, 'GET', '/admin/actors/wheel/0');
    expect(wheel.body.state.rebuilds).toBeGreaterThanOrEqual(1);
    expect(await node.node.metrics.value('wheelhouse_safety_net_recovered_total', { kind: 'pending' })).toBe(0);
  });

  it('refuses to start on a Redis that may evict any key, naming the setting', async () => {
    server = await startRedisServer({ maxmemoryPolicy: 'allkeys-lru' });
    const error = await startTestNode('postgres', { redisUrl: server.url }).catch((e: unknown) => e);
    expect(String((error as Error).message)).toMatch(/maxmemory-policy is allkeys-lru.*noeviction/);
  });

  it('starts on a Redis whose policy evicts only keys with a TTL, with a warning', async () => {
    server = await startRedisServer({ maxmemoryPolicy: 'volatile-lru' });
    c = await startTestNode('postgres', { redisUrl: server.url });
    expect(c.node.backend.warnings).toEqual([expect.stringMatching(/maxmemory-policy is volatile-lru/)]);
  });
});
