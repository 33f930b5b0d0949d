import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { maxInWindow } from '../../bench/stats.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import { LimitWatch, declareLimit, submitMany, watchingWorker } from '../support/limit-task-workers.js';

/**
 * Rates, one node, both backends, measured from the worker's start times:
 * - a delayed task of a key does not slow the key's rate (BullMQ #3325: delayed jobs of a
 *   group held its rate-limited jobs back): 100 due tasks and 50 due in an hour, at 20/s, run
 *   as fast as 100 alone;
 * - accuracy: with many waiting, no 1 s window holds more starts than `limit + burst`, and the
 *   run uses at least 95 % of the starts the rate allows.
 */

const ACCURACY: Record<BackendName, { tasks: number; limit: number }> = {
  postgres: { tasks: 2_000, limit: 100 },
  embedded: { tasks: 1_000, limit: 50 },
};

/**
 * When the node started each task of `type` (`started_at`: the claim, where the key's grant is
 * used), read back page by page. The rate's bound is on these; the workers' own clocks add the
 * delivery's jitter on top (printed beside).
 */
async function nodeStarts(url: string, type: string): Promise<number[]> {
  const out: number[] = [];
  let token: string | null = null;
  do {
    const query: string = `/api/tasks?task_type=${encodeURIComponent(type)}&limit=1000${token ? `&next_token=${token}` : ''}`;
    const res = await api<{ tasks: { started_at: string | null }[]; next_token: string | null }>(url, 'GET', query);
    for (const t of res.body.tasks) if (t.started_at) out.push(Date.parse(t.started_at));
    token = res.body.next_token;
  } while (token);
  return out.sort((a, b) => a - b);
}

describe.each(BACKENDS)('rate limits on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  /** Runs `due` tasks of a fresh key at 20/s, with `delayed` more of the key due in an hour. */
  const runAt20 = async (due: number, delayed: number) => {
    const type = uniqueType('lim.delayed');
    const key = `${type}-rate`;
    await declareLimit(c.url, key, { rate: { limit: 20, period_seconds: 1 } });
    const task = { task_type: type, limits: [key], payload: { keys: [key] } };
    await submitMany(c.url, [
      ...Array.from({ length: delayed }, () => ({ ...task, schedule: { type: 'delayed', delay_seconds: 3600 } })),
    ]);
    const ids = await submitMany(
      c.url,
      Array.from({ length: due }, () => task),
    );
    const watch = new LimitWatch();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 100 }));
    await eventually(() => (watch.done.size === ids.length ? true : undefined), 30_000, `${due} tasks to run`);
    const times = await nodeStarts(c.url, type);
    return { spanMs: (times.at(-1) as number) - (times[0] as number), bestSecond: maxInWindow(times, 1000) };
  };

  it('a delayed task sharing the key does not slow its rate (BullMQ #3325)', async () => {
    const alone = await runAt20(100, 0);
    const shared = await runAt20(100, 50);
    console.log(
      `[${backend}] 100 at 20/s: alone ${alone.spanMs} ms (best 1 s: ${alone.bestSecond}); ` +
        `with 50 delayed: ${shared.spanMs} ms (best 1 s: ${shared.bestSecond})`,
    );
    expect(shared.bestSecond).toBeGreaterThanOrEqual(15);
    expect(shared.bestSecond).toBeLessThanOrEqual(21);
    expect(alone.bestSecond).toBeGreaterThanOrEqual(15);
  });

  it('keeps every 1 s window within limit + burst and uses at least 95 % of the allowed starts', async () => {
    const { tasks, limit } = ACCURACY[backend];
    const type = uniqueType('lim.rate');
    const key = `${type}-rate`;
    await declareLimit(c.url, key, { rate: { limit, period_seconds: 1 } });
    const ids = await submitMany(
      c.url,
      Array.from({ length: tasks }, () => ({ task_type: type, limits: [key], payload: { keys: [key] } })),
    );
    const watch = new LimitWatch();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 200 }));
    // The figures are taken however far the run got: a slow rate is what they show.
    const finished = await eventually(
      () => (watch.done.size === ids.length ? true : undefined),
      (tasks / limit) * 1000 + 30_000,
      `${tasks} tasks to run`,
    ).catch(() => false);
    const times = await nodeStarts(c.url, type);
    const spanMs = (times.at(-1) as number) - (times[0] as number);
    const allowed = Math.floor((spanMs / 1000) * limit) + 1;
    const used = times.length / allowed;
    const worst = maxInWindow(times, 1000);
    const workerSide = maxInWindow(
      watch.starts.map((s) => s.atMs).sort((a, b) => a - b),
      1000,
    );
    const activations = (await c.node.backend.snapshots.owners('limit')).find((o) => o.key === key)?.epoch ?? 0;
    console.log(
      `[${backend}] rate ${limit}/s, ${tasks} tasks (key activated ${activations}×): ${spanMs} ms, ` +
        `${(used * 100).toFixed(1)} % of the ${allowed} allowed starts used, most in a 1 s window ${worst} ` +
        `(node's start times; ${workerSide} by the worker's clock)`,
    );
    // The key grants at most limit + burst in any window of its clock (test/domain/limits-rate),
    // and a claim records the grant's instant as the start, so the node's start times keep the
    // same bound (+ 1 for a start at the window's edge read back through a float of ms). Before
    // the claim recorded that instant, a loaded run showed 104 of 100 here.
    expect(worst).toBeLessThanOrEqual(limit + 1);
    expect(finished).toBe(true);
    expect(used).toBeGreaterThanOrEqual(0.95);
  }, 180_000);
});
