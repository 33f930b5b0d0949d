import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';
import { Holds, LimitWatch, declareLimit, submitMany, taskOf, watchingWorker } from '../support/limit-task-workers.js';

/**
 * Pausing, one node, both backends: `concurrency: 0` on a key, and POST
 * /api/task-types/{t}/pause. The running tasks finish, nothing new starts while paused
 * (watched for a stretch of real time: what did not happen), and on resume the waiting tasks
 * run, within the key's concurrency. Each gated task is fired by its wheel once, however long
 * it waits with its key (a wheel that took "every entry went to a key" for a lost store fired
 * them all again every few hundred ms).
 */
describe.each(BACKENDS)('pausing limits on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  const succeeded = (ids: string[]) =>
    eventually(
      async () => {
        for (const id of ids) if ((await taskOf(c.url, id)).status !== 'succeeded') return undefined;
        return true;
      },
      20_000,
      `${ids.length} tasks to succeed`,
    );

  it('concurrency 0 on a key: running tasks finish, nothing new starts; back to 2: the waiting ones run', async () => {
    let fired = 0;
    const off = c.node.events.on('wheel:fired', ({ count }) => (fired += count));
    try {
      const type = uniqueType('lim.pause');
      const key = `${type}-key`;
      await declareLimit(c.url, key, { concurrency: 2 });
      const watch = new LimitWatch();
      const holds = new Holds();
      workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 20, work: holds.work }));
      const task = { task_type: type, limits: [key], payload: { keys: [key] } };
      const before = await submitMany(c.url, [task, task, task]);
      await eventually(() => (watch.live.size === 2 ? true : undefined), 10_000, 'two running');
      await declareLimit(c.url, key, { concurrency: 0 });
      const after = await submitMany(c.url, [task, task, task, task]);
      const running = [...watch.live];
      for (const id of running) holds.release(id);
      await succeeded(running);
      // Real time is the subject: for a while, nothing starts.
      await sleep(1_500);
      expect(watch.starts.length).toBe(2);
      await declareLimit(c.url, key, { concurrency: 2 });
      holds.releaseAll();
      await succeeded([...before, ...after]);
      expect(watch.starts.length).toBe(7);
      expect(watch.maxOf(key)).toBeLessThanOrEqual(2);
      expect(fired).toBe(7);
    } finally {
      off();
    }
  });

  it('pausing a task type: running tasks finish, nothing new starts; resume: the waiting ones run', async () => {
    const type = uniqueType('lim.ptype');
    const watch = new LimitWatch();
    const holds = new Holds();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 20, work: holds.work }));
    const task = { task_type: type, payload: null };
    const first = await submitMany(c.url, [task, task]);
    await eventually(() => (watch.live.size === 2 ? true : undefined), 10_000, 'two running');
    expect((await api(c.url, 'POST', `/api/task-types/${type}/pause`)).status).toBe(200);
    const later = await submitMany(c.url, [task, task, task]);
    holds.releaseAll();
    await succeeded(first);
    // Real time is the subject: for a while, nothing starts.
    await sleep(1_500);
    expect(watch.starts.length).toBe(2);
    for (const id of later) expect((await taskOf(c.url, id)).status).not.toBe('succeeded');
    expect((await api(c.url, 'POST', `/api/task-types/${type}/resume`)).status).toBe(200);
    await succeeded(later);
    expect(watch.starts.length).toBe(5);
  });
});
