/**
 * A Redis out of memory (`maxmemory` reached under `noeviction`) through a real node: every
 * route answers 2xx or 503 with Retry-After, never 500; submissions are in Postgres before
 * they are answered, so what was submitted meanwhile reaches a worker once Redis has room.
 * A private redis-server, so that filling it touches no other test.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestNode, type TestCluster } from '../support/nodes.js';
import { deleteKeysWithPrefix } from '../support/redis.js';
import { startRedisServer, type RedisServer } from '../support/redis-server.js';

describe('Redis out of memory', () => {
  let redis: RedisServer;
  let node: TestCluster;
  let filler: Redis;

  beforeAll(async () => {
    redis = await startRedisServer({ maxmemory: '4mb' });
    node = await startTestNode('postgres', { redisUrl: redis.url, pollMaxWaitSeconds: 1 });
    filler = new Redis(redis.url);
  });
  afterAll(async () => {
    filler?.disconnect();
    await node?.cleanup();
    await redis?.cleanup();
  });

  it('answers 2xx or 503, never 500, and loses nothing', async () => {
    const value = 'x'.repeat(1000);
    let full = false;
    for (let i = 0; i < 20_000 && !full; i++) {
      full = await filler.set(`junk:${i}`, value).then(
        () => false,
        (error: Error) => error.message.startsWith('OOM'),
      );
    }
    expect(full, 'Redis refuses writes').toBe(true);

    const statuses: number[] = [];
    const submitted: string[] = [];
    // Handed to the worker, during the outage or after it. Redis refuses a write only while
    // its used memory is above maxmemory, and that moves (client buffers grow and shrink), so
    // on a loaded machine a push can get through and a poll below hand the task out (seen in
    // CI: five tasks claimed here were missing from the tally after the outage).
    const received = new Set<string>();
    const record = (status: number, headers: Headers): void => {
      statuses.push(status);
      if (status === 503) expect(headers.get('retry-after')).toBe('1');
    };
    for (let i = 0; i < 5; i++) {
      const batch = await api<{ tasks?: { task_id: string }[] }>(node.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: 20 }, () => ({ task_type: 'oom' })),
      });
      record(batch.status, batch.headers);
      submitted.push(...(batch.body.tasks ?? []).map((t) => t.task_id));
      const later = await api(node.url, 'POST', '/api/tasks', {
        task_type: 'oom.later',
        schedule: { type: 'delayed', delay_seconds: 3600 },
      });
      record(later.status, later.headers);
      const poll = await api<{ tasks?: { task_id: string }[] }>(node.url, 'POST', '/api/workers/poll', {
        worker_id: 'w',
        task_types: ['oom'],
        wait_ms: 0,
      });
      record(poll.status, poll.headers);
      for (const task of poll.body.tasks ?? []) received.add(task.task_id);
      const queues = await api(node.url, 'GET', '/admin/queues');
      record(queues.status, queues.headers);
    }
    expect(statuses.filter((s) => s >= 500 && s !== 503)).toEqual([]);
    expect(submitted.length).toBeGreaterThan(0);

    // Room again (the filler's keys only: the node's own are as the outage left them), and
    // what was submitted during it reaches a worker.
    await deleteKeysWithPrefix(filler, 'junk');
    const deadline = Date.now() + 20_000;
    while (received.size < submitted.length && Date.now() < deadline) {
      const poll = await api<{ tasks: { task_id: string }[] }>(node.url, 'POST', '/api/workers/poll', {
        worker_id: 'w',
        task_types: ['oom'],
        max_tasks: 100,
        wait_ms: 500,
      });
      expect(poll.status).toBe(200);
      for (const task of poll.body.tasks) received.add(task.task_id);
    }
    expect(submitted.filter((id) => !received.has(id))).toEqual([]);
  });
});
