import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';
import {
  LimitWatch,
  declareLimit,
  submitMany,
  submitOne,
  taskOf,
  watchingWorker,
} from '../support/limit-task-workers.js';

/**
 * Permits against the ways other schedulers lost them, one node, both backends:
 * - a limit of 1 under batched claims — a channel worker of 100 slots and an HTTP worker
 *   asking for 50 at a time, both polling the one key's 200 tasks at once (Hatchet #4778
 *   admitted 3–4 under `max_runs = 2`): never 2 running, counted on the worker side;
 * - a permit held by a worker that went silent comes back when its lease ends — not before
 *   (the next task must not start while the lease could still be honoured), and not much
 *   after.
 */
describe.each(BACKENDS)('limit permits on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  it('a limit of 1 never admits 2 under batch claims from a wide channel worker and an HTTP worker', async () => {
    const type = uniqueType('lim.batch');
    const key = `${type}-one`;
    await declareLimit(c.url, key, { concurrency: 1 });
    const ids = await submitMany(
      c.url,
      Array.from({ length: 200 }, () => ({ task_type: type, limits: [key], payload: { keys: [key] } })),
    );
    const watch = new LimitWatch();
    const work = () => sleep(Math.floor(Math.random() * 4));
    workers.push(
      watchingWorker(watch, { url: c.url, taskTypes: [type], transport: 'channel', concurrency: 100, work }),
      watchingWorker(watch, { url: c.url, taskTypes: [type], transport: 'http', concurrency: 50, work }),
    );
    await eventually(() => (watch.done.size === ids.length ? true : undefined), 90_000, 'every task to run');
    expect(watch.maxOf(key)).toBe(1);
    expect(new Set(watch.startedIds()).size).toBe(ids.length);
  });

  it('a silent worker’s permit comes back when its lease ends, not before', async () => {
    const type = uniqueType('lim.lease');
    const key = `${type}-one`;
    await declareLimit(c.url, key, { concurrency: 1 });
    const first = await submitOne(c.url, {
      task_type: type,
      limits: [key],
      timeout_seconds: 2,
      max_retries: 0,
      payload: { keys: [key] },
    });
    // A raw HTTP worker claims it and is never heard of again: no heartbeat, no result.
    const poll = await api<{ tasks: { task_id: string; lease_expires_at: string }[] }>(
      c.url,
      'POST',
      '/api/workers/poll',
      { worker_id: 'silent', task_types: [type], max_tasks: 5, wait_ms: 5_000 },
    );
    expect(poll.body.tasks.map((t) => t.task_id)).toEqual([first]);
    const leaseEndsMs = Date.parse(poll.body.tasks[0]!.lease_expires_at);
    const second = await submitOne(c.url, { task_type: type, limits: [key], payload: { keys: [key] } });
    const watch = new LimitWatch();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 10 }));
    // The bound: the lease's end, the lease actor's expiry and the permit's way back.
    await eventually(
      () => (watch.done.has(second) ? true : undefined),
      leaseEndsMs - Date.now() + 6_000,
      'the second task to run within 6 s of the lease end',
    );
    const startedMs = watch.starts.find((s) => s.taskId === second)!.atMs;
    console.log(`[${backend}] the second started ${startedMs - leaseEndsMs} ms after the first's lease end`);
    expect(startedMs).toBeGreaterThanOrEqual(leaseEndsMs);
    expect((await taskOf(c.url, first)).status).toBe('failed');
    expect(watch.startedIds()).toEqual([second]);
  });
});
