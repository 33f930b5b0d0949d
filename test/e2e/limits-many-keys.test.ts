import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import { LimitWatch, declareLimit, submitMany, watchingWorker } from '../support/limit-task-workers.js';

/**
 * Many distinct keys of one family, one node, both backends: each task names its own key
 * `cust:<i>` of a family of concurrency 1; every task runs (the time is printed), and once the
 * keys are idle their actors leave memory (`limitIdleSeconds`). Sized for the suite (3 000 and
 * 1 000 keys); `npm run bench:limit-keys -- --keys 100000` runs the same with 100 000 keys and
 * measures the node's memory once they are idle (docs/benchmarks.md, "Flow control").
 */
const KEYS: Record<BackendName, number> = { postgres: 3_000, embedded: 1_000 };

describe.each(BACKENDS)('many limit keys on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60, limitIdleSeconds: 3 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  it('runs a task on each of many keys of a family, then the idle keys passivate', async () => {
    const n = KEYS[backend];
    const type = uniqueType('lim.many');
    const family = `${type.replace(/\./g, '-')}-cust`;
    await declareLimit(c.url, `${family}:*`, { concurrency: 1 });
    const t0 = Date.now();
    const ids = await submitMany(
      c.url,
      Array.from({ length: n }, (_, i) => ({
        task_type: type,
        limits: [`${family}:${i}`],
        payload: { keys: [`${family}:${i}`] },
      })),
    );
    const submittedMs = Date.now() - t0;
    const watch = new LimitWatch();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 200 }));
    await eventually(() => (watch.done.size === ids.length ? true : undefined), 300_000, `${n} tasks to run`, 200);
    const ranMs = Date.now() - t0;
    const live = () => c.node.system.countByKind().get(LIMIT.name) ?? 0;
    const peak = live();
    await eventually(() => (live() < Math.min(peak, 10) ? true : undefined), 60_000, 'the idle keys to passivate', 200);
    const listed = await api<{ actors: unknown[] }>(c.url, 'GET', '/admin/actors?kind=limit&limit=100');
    console.log(
      `[${backend}] ${n} keys: submitted in ${submittedMs} ms, all run ${ranMs} ms after the first submit; ` +
        `limit actors ${peak} live at the end, ${live()} after idle (admin list: ${listed.body.actors?.length})`,
    );
    expect(new Set(watch.startedIds()).size).toBe(n);
    expect(listed.body.actors.length).toBeLessThan(10);
  }, 400_000);
});
