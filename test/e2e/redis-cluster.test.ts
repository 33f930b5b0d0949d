import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { TestWorker, duplicates, missing, submitBatch } from '../support/cluster-worker.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL, api } from '../support/nodes.js';
import {
  deleteClusterKeysWithPrefix,
  redisClusterNodeOptions,
  stopTestRedisCluster,
  testRedisCluster,
} from '../support/redis-cluster.js';
import { deleteKeysWithPrefix } from '../support/redis.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Nodes on a real Redis Cluster of three primaries (`redisCluster`): a cluster of node
 * processes runs immediate and delayed tasks submitted on one node, owned by all, polled on
 * another; and a node moved onto Redis Cluster, or restarted on one whose ready queues lost
 * their entries, hands out every pending task all the same (its wheel partitions push again,
 * on activation, the due tasks they read from Postgres).
 */

afterAll(stopTestRedisCluster);

interface Polled {
  tasks: { task_id: string; lease_token: string }[];
}

/** Polls `taskType` on `url` and completes what it gets, until `count` tasks are done; answers their ids. */
async function drain(url: string, taskType: string, count: number): Promise<string[]> {
  const done: string[] = [];
  await eventually(
    async () => {
      const polled = await api<Polled>(url, 'POST', '/api/workers/poll', {
        worker_id: 'w-cluster',
        task_types: [taskType],
        max_tasks: 100,
        wait_ms: 1_000,
      });
      expect(polled.status).toBe(200);
      if (polled.body.tasks.length > 0) {
        const results = polled.body.tasks.map((t) => ({
          task_id: t.task_id,
          lease_token: t.lease_token,
          status: 'succeeded',
        }));
        const completed = await api<{ results: { ok: boolean }[] }>(url, 'POST', '/api/workers/complete', { results });
        expect(completed.body.results.every((r) => r.ok)).toBe(true);
        done.push(...polled.body.tasks.map((t) => t.task_id));
      }
      return done.length >= count ? done : undefined;
    },
    30_000,
    `${count} tasks of ${taskType} done`,
  );
  return done;
}

describe('a node on Redis Cluster', () => {
  const schema = `e2e_rc_${randomBytes(4).toString('hex')}`;
  const prefix = `trc${randomBytes(4).toString('hex')}`;
  let seeds: string;
  let pool: pg.Pool;
  let node: WheelhouseNode | null = null;

  const options = (more: WheelhouseOptions): WheelhouseOptions => redisClusterNodeOptions(seeds, schema, prefix, more);
  const submit = async (url: string, taskType: string, n: number): Promise<string[]> => {
    const tasks = Array.from({ length: n }, (_, i) => ({ task_type: taskType, payload: { i } }));
    const created = await api<{ tasks: { task_id: string }[] }>(url, 'POST', '/api/tasks/batch', { tasks });
    expect(created.status).toBe(201);
    return created.body.tasks.map((t) => t.task_id);
  };
  const backlogOf = (of: WheelhouseNode, n: number) =>
    eventually(async () => ((await of.backend.ready.backlog()) >= n ? true : undefined), 10_000, `${n} ready`);

  beforeAll(async () => {
    seeds = (await testRedisCluster()).seeds;
    pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
  });
  afterEach(async () => {
    await node?.close();
    node = null;
  });
  afterAll(async () => {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool.end();
    const single = new Redis(TEST_REDIS_URL);
    await deleteKeysWithPrefix(single, prefix);
    single.disconnect();
    const client = clusterClient();
    await client.ping();
    await deleteClusterKeysWithPrefix(client, prefix);
    client.disconnect();
  });
  /** A plain cluster client, to look at and delete keys. */
  const clusterClient = (): Cluster =>
    new Cluster(seeds.split(',').map((url) => ({ host: '127.0.0.1', port: Number(new URL(url).port) })));

  it('takes over from a node on one Redis server: the tasks its ready queues held there run', async () => {
    const taskType = uniqueType('rc.moved');
    const before = await startNode(options({ redisUrl: TEST_REDIS_URL, redisCluster: false }));
    let ids: string[];
    try {
      ids = await submit(before.url, taskType, 20);
      // Fired into the single server's ready queues, where no node on the cluster looks.
      await backlogOf(before, 20);
    } finally {
      await before.close();
    }
    node = await startNode(options({}));
    expect((await drain(node.url, taskType, 20)).sort()).toEqual(ids.sort());
  });

  it('hands out the due tasks that its ready queues lost while it was down', async () => {
    const taskType = uniqueType('rc.restart');
    node = await startNode(options({}));
    const ids = await submit(node.url, taskType, 30);
    await backlogOf(node, 30);
    await node.close();
    node = null;
    // The ready entries go (as entries left in keys of another layout would be unread); the
    // partitions' intact markers and buckets stay, so no partition is rebuilt as lost.
    const client = clusterClient();
    try {
      await client.ping(); // connected: the primaries are known
      const queued: string[] = [];
      for (const n of client.nodes('master')) queued.push(...(await n.keys(`${prefix}:*`)));
      const ready = queued.filter((key) => /:\{p\d+\}:(q:|queues$)|:\{t:/.test(key));
      expect(ready.length).toBeGreaterThan(0);
      expect(queued.some((key) => key.endsWith(':intact'))).toBe(true);
      for (const key of ready) await client.del(key);
    } finally {
      client.disconnect();
    }
    node = await startNode(options({}));
    expect((await drain(node.url, taskType, 30)).sort()).toEqual(ids.sort());
  });
});

describe('a cluster of node processes on Redis Cluster', () => {
  let cluster: ProcessCluster;
  beforeAll(async () => {
    const { seeds } = await testRedisCluster();
    cluster = await startCluster({
      nodes: 3,
      partitions: 16,
      label: 'rediscluster',
      extraArgs: ['--redis-cluster', '--redis-url', seeds],
    });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('runs immediate and delayed tasks submitted on one node, polled on another, exactly once', async () => {
    const type = uniqueType('rc.routing');
    const tasks = [
      ...Array.from({ length: 40 }, (_, i) => ({ task_type: type, payload: { i } })),
      ...Array.from({ length: 40 }, (_, i) => ({
        task_type: type,
        payload: { i: 40 + i },
        schedule: { type: 'delayed', delay_seconds: 1 },
      })),
    ];
    const submitted = await submitBatch(cluster, 'n1', tasks);
    const worker = new TestWorker(cluster, { types: [type], targets: ['n3'], loops: 2 }).start();
    try {
      await worker.waitFor(
        submitted.map((t) => t.taskId),
        30_000,
      );
    } finally {
      await worker.stop();
    }
    const counts = worker.counts();
    expect(duplicates(counts)).toEqual([]);
    expect(
      missing(
        counts,
        submitted.map((t) => t.taskId),
      ),
    ).toEqual([]);
    expect(worker.refused).toEqual([]);
    // The partitions are spread over the three nodes, and their wheels on all of them fired.
    const status = await cluster.status('n1');
    expect(new Set(status.partitions.map((p) => p.owner)).size).toBe(3);
    const answers = await Promise.all(
      submitted.map((t) => cluster.api<{ status: string }>('n2', 'GET', `/api/tasks/${t.taskId}`)),
    );
    expect(answers.filter((r) => r.body.status !== 'succeeded')).toEqual([]);
  });
});
