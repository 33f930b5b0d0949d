import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';
import { LimitWatch, declareLimit, submitMany, watchingWorker } from '../support/limit-task-workers.js';

/**
 * A restart does not deadlock a key (Hatchet PR #4804: a group's slot held by a task parked
 * for another limit was never freed after a restart), one node, both backends: tasks name a
 * key of concurrency 1 and a key of rate 1 per 2 s, the node restarts on the same store while
 * some of them wait, and every task still runs, never two of the first key at once.
 */
describe.each(BACKENDS)('limits across a restart on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  it('a holder parked for a rate does not deadlock its concurrency key after a restart', async () => {
    const type = uniqueType('lim.restart');
    const conc = `${type}-a-conc`;
    const rate = `${type}-b-rate`;
    await declareLimit(c.url, conc, { concurrency: 1 });
    await declareLimit(c.url, rate, { rate: { limit: 1, period_seconds: 2 } });
    const ids = await submitMany(
      c.url,
      Array.from({ length: 5 }, () => ({ task_type: type, limits: [conc, rate], payload: { keys: [conc] } })),
    );
    const watch = new LimitWatch();
    // Each task runs 300 ms: real time is what the rate spaces out.
    const work = () => sleep(300);
    const first = watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 10, work });
    await eventually(() => (watch.done.size >= 2 ? true : undefined), 20_000, 'two tasks to run');
    // The rest wait on one key or the other; the worker leaves and the node restarts.
    await first.stop({ timeoutMs: 5_000 });
    await c.restart();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 10, work }));
    await eventually(() => (ids.every((id) => watch.done.has(id)) ? true : undefined), 40_000, 'every task to run');
    expect(watch.maxOf(conc)).toBe(1);
    const times = watch.starts.map((s) => s.atMs).sort((a, b) => a - b);
    console.log(`[${backend}] starts after the first: ${times.map((t) => t - (times[0] as number)).join(', ')} ms`);
  });

  it('a key that leaves memory with tasks waiting hands them to its next activation at once', async () => {
    // Tasks wait in the key's memory for its rate; nothing else will message it (no holder
    // left to return a permit, the safety net's grace is a minute). Its activation ends —
    // here by passivation, in a cluster by a hand-off or a node dropping what it held — and
    // the waiting tasks must not wait for the net.
    const type = uniqueType('lim.handon');
    const key = `${type}-rate`;
    await declareLimit(c.url, key, { rate: { limit: 1, period_seconds: 3 } });
    const watch = new LimitWatch();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 10 }));
    const ids = await submitMany(
      c.url,
      Array.from({ length: 3 }, () => ({ task_type: type, limits: [key], payload: { keys: [key] } })),
    );
    await eventually(() => (watch.done.size >= 1 ? true : undefined), 20_000, 'a first task to run');
    // Its permit back and the two others waiting for the rate, in the key's memory only.
    await eventually(
      async () => {
        const r = await fetch(`${c.url}/api/limits/${key}`);
        const body = (await r.json()) as { running: number; waiting: number };
        return body.running === 0 && body.waiting === 2 ? true : undefined;
      },
      10_000,
      'the key to hold two waiting tasks and no permit',
    );
    await c.node.system.passivate('limit', key);
    await eventually(
      () => (ids.every((id) => watch.done.has(id)) ? true : undefined),
      20_000,
      'the tasks that waited in the passivated key to run',
    );
  });
});
