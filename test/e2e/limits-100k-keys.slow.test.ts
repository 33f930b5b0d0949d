import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import type { Worker } from '../../src/worker/index.js';
import { startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import { LimitWatch, declareLimit, submitMany, watchingWorker } from '../support/limit-task-workers.js';

/**
 * 100 000 distinct keys of one family on one node, Postgres + Redis (issue 28: tens of
 * thousands of keys must not break the engine). Each key `cust:<i>` of a family of
 * concurrency 1 gets one task, and the first 100 keys three each (50 ms of work, so that a
 * key that let two run at once is seen doing it). Every task runs, no key ever runs two at
 * once, and once the keys are idle their actors leave memory and give their rows in
 * `actor_snapshots` up (`limitIdleSeconds` 3). What it stands on: the keys activating in one
 * turn take their rows (and give them back) in one statement, and read their live tasks through
 * an index that is not scanned whole at each lookup (docs/decisions/0024-distinct-limit-keys.md).
 * The run time and the most limit actors live at once are printed.
 */
const KEYS = 100_000;
const BUSY_KEYS = 100;
const TASKS_PER_BUSY_KEY = 3;

describe('100 000 limit keys on postgres', () => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode('postgres', { safetyNetGraceSeconds: 120, limitIdleSeconds: 3, postgresPoolSize: 8 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  it('runs a task on each of 100 000 keys of a family within its limit, then the idle keys passivate', async () => {
    const type = uniqueType('lim.100k');
    const family = `${type.replace(/\./g, '-')}-cust`;
    await declareLimit(c.url, `${family}:*`, { concurrency: 1 });
    const task = (i: number) => ({
      task_type: type,
      limits: [`${family}:${i}`],
      payload: { keys: [`${family}:${i}`] },
    });
    const tasks = Array.from({ length: KEYS }, (_, i) => task(i));
    for (let i = 0; i < BUSY_KEYS; i++) for (let n = 1; n < TASKS_PER_BUSY_KEY; n++) tasks.push(task(i));
    const t0 = Date.now();
    const ids = await submitMany(c.url, tasks);
    const submittedMs = Date.now() - t0;
    const busy = new Set(ids.filter((_, at) => at < BUSY_KEYS || at >= KEYS));

    const live = () => c.node.system.countByKind().get(LIMIT.name) ?? 0;
    let peak = 0;
    const watchPeak = setInterval(() => (peak = Math.max(peak, live())), 200);
    const watch = new LimitWatch();
    workers.push(
      watchingWorker(watch, {
        url: c.url,
        taskTypes: [type],
        concurrency: 500,
        work: (id) => (busy.has(id) ? sleep(50) : Promise.resolve()),
      }),
    );
    try {
      await eventually(
        () => (watch.done.size === ids.length ? true : undefined),
        900_000,
        `${ids.length} tasks to run`,
        500,
      );
    } finally {
      clearInterval(watchPeak);
    }
    const ranMs = Date.now() - t0;
    await eventually(() => (live() === 0 ? true : undefined), 120_000, 'the idle keys to passivate', 500);
    const idleMs = Date.now() - t0;
    const [held] = await c.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM actor_snapshots WHERE kind = 'limit' AND owner_node IS NOT NULL`,
    );
    console.log(
      `[postgres] ${KEYS} keys (${ids.length} tasks): submitted in ${submittedMs} ms, all run ${ranMs} ms after ` +
        `the first submit, no limit actor live ${idleMs} ms after it; at most ${peak} limit actors live at once`,
    );
    expect(new Set(watch.startedIds()).size).toBe(ids.length);
    const over = [...watch.max].filter(([, max]) => max > 1);
    expect(over, 'keys that ran two tasks at once').toEqual([]);
    expect(held?.n, 'rows in actor_snapshots still owned once the keys are idle').toBe(0);
  }, 1_200_000);
});
