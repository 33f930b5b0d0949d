/**
 * One primary of a Redis Cluster lost and back empty, under a node on the partitioned layout:
 * while it is down every route answers 2xx or 503 with Retry-After, never 500 (the cluster
 * client fails fast instead of queueing, src/store/redis.ts); once it is back with none of its
 * keys (its wheel partitions' buckets, ready queues, fences and intact markers, and the task
 * types' registries that hashed to it), every task accepted before or during the outage
 * reaches a worker — the immediate ones that sat in its ready queues, the delayed ones in its
 * buckets, and those submitted while it was down. A private cluster with a one-second node
 * timeout, so that the others declare the primary failed quickly.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { TEST_POSTGRES_URL, api } from '../support/nodes.js';
import { clusterOk, redisClusterNodeOptions, startRedisCluster, type RedisCluster } from '../support/redis-cluster.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

interface Polled {
  tasks?: { task_id: string; lease_token: string }[];
}

describe('a Redis Cluster primary lost', () => {
  const schema = `fault_rcl_${randomBytes(4).toString('hex')}`;
  let redis: RedisCluster;
  let node: WheelhouseNode;
  let pool: pg.Pool;

  beforeAll(async () => {
    redis = await startRedisCluster(['--cluster-node-timeout', '1000']);
    pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
    node = await startNode(
      redisClusterNodeOptions(redis.seeds, schema, `rcl${randomBytes(4).toString('hex')}`, { pollMaxWaitSeconds: 1 }),
    );
  });
  afterAll(async () => {
    await node?.close();
    await redis?.stop();
    await pool?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await pool?.end();
  });

  it('answers 2xx or 503 while it is down, never 500, and loses nothing once it is back empty', async () => {
    const taskType = uniqueType('rc.lost');
    const statuses: number[] = [];
    const record = (status: number, headers: Headers): void => {
      statuses.push(status);
      if (status === 503) expect(headers.get('retry-after')).not.toBeNull();
    };
    const accepted: string[] = [];
    const submit = async (tasks: Record<string, unknown>[]): Promise<void> => {
      const created = await api<{ tasks?: { task_id: string }[] }>(node.url, 'POST', '/api/tasks/batch', { tasks });
      record(created.status, created.headers);
      accepted.push(...(created.body.tasks ?? []).map((t) => t.task_id));
    };
    const received = new Set<string>();
    const pollOnce = async (waitMs: number): Promise<void> => {
      const polled = await api<Polled>(node.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-lost',
        task_types: [taskType],
        max_tasks: 100,
        wait_ms: waitMs,
      });
      record(polled.status, polled.headers);
      const tasks = polled.body.tasks ?? [];
      if (tasks.length === 0) return;
      for (const task of tasks) received.add(task.task_id);
      const results = tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' }));
      const completed = await api(node.url, 'POST', '/api/workers/complete', { results });
      record(completed.status, completed.headers);
    };

    // Before: immediate tasks queued in every partition's ready queue (nobody polls yet), and
    // delayed ones due after the primary is back.
    await submit(Array.from({ length: 80 }, (_, i) => ({ task_type: taskType, payload: { i } })));
    await submit(
      Array.from({ length: 40 }, (_, i) => ({
        task_type: taskType,
        payload: { i },
        schedule: { type: 'delayed', delay_seconds: 6 },
      })),
    );
    expect(accepted).toHaveLength(120);
    await eventually(async () => ((await node.backend.ready.backlog()) >= 80 ? true : undefined), 10_000, '80 ready');

    const lost = redis.servers[0];
    if (lost === undefined) throw new Error('no primary');
    await lost.kill();
    // Down, then declared failed by the other two: the node answers throughout.
    const downUntil = Date.now() + 4_000;
    while (Date.now() < downUntil) {
      await submit(Array.from({ length: 5 }, () => ({ task_type: taskType })));
      await pollOnce(0);
      const queues = await api(node.url, 'GET', '/admin/queues');
      record(queues.status, queues.headers);
      const health = await api(node.url, 'GET', '/readyz');
      expect([200, 503]).toContain(health.status);
    }
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);

    // Back, empty: what was accepted runs all the same.
    await lost.start();
    await clusterOk(redis.servers);
    await eventually(
      async () => {
        await pollOnce(500);
        return accepted.every((id) => received.has(id)) ? true : undefined;
      },
      60_000,
      'every accepted task received',
    );
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    expect(accepted.filter((id) => !received.has(id))).toEqual([]);
  });
});
