import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import {
  Holds,
  LimitWatch,
  declareLimit,
  submitMany,
  submitOne,
  taskOf,
  watchingWorker,
} from '../support/limit-task-workers.js';

/**
 * The `on_limit` strategies of a key with concurrency 1, one node, both backends, through the
 * SDK over the channel: each test holds the key's first task running (its handler waits for
 * the test) and then submits more of the key, and checks from the worker's side what started
 * and from the tasks' rows what was cancelled and why.
 */
describe.each(BACKENDS)('on_limit strategies on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  /** A key of concurrency 1 with `onLimit`, a worker of its type, and its first task running. */
  const holding = async (onLimit: string) => {
    const type = uniqueType(`lim.${onLimit}`);
    const key = `${type}-key`;
    await declareLimit(c.url, key, { concurrency: 1, on_limit: onLimit });
    const watch = new LimitWatch();
    const holds = new Holds();
    workers.push(watchingWorker(watch, { url: c.url, taskTypes: [type], concurrency: 20, work: holds.work }));
    const task = (extra: Record<string, unknown> = {}) => ({
      task_type: type,
      limits: [key],
      payload: { keys: [key] },
      ...extra,
    });
    const first = await submitOne(c.url, task());
    await eventually(() => (watch.live.has(first) ? true : undefined), 10_000, 'the first task to start');
    return { type, key, watch, holds, task, first };
  };
  const statusIs = (id: string, status: string) =>
    eventually(async () => ((await taskOf(c.url, id)).status === status ? true : undefined), 10_000, `${id} ${status}`);
  /** Waits until the key's actor has `n` tasks waiting. */
  const waitingAt = (key: string, n: number) =>
    eventually(
      async () =>
        (await api<{ waiting: number }>(c.url, 'GET', `/api/limits/${key}`)).body.waiting === n ? true : undefined,
      10_000,
      `${n} tasks waiting on ${key}`,
    );

  it('cancel_new: at the limit the new task ends cancelled, last_error naming the limit', async () => {
    const { key, watch, holds, task, first } = await holding('cancel_new');
    const second = await submitOne(c.url, task());
    await statusIs(second, 'cancelled');
    const row = await taskOf(c.url, second);
    expect(row.last_error).toContain(key);
    expect(row.last_error).toContain('cancel_new');
    holds.release(first);
    await statusIs(first, 'succeeded');
    // With the key free again, a new task runs.
    const third = await submitOne(c.url, task());
    holds.release(third);
    await statusIs(third, 'succeeded');
    expect(watch.startedIds()).toEqual([first, third]);
    expect(watch.maxOf(key)).toBe(1);
  });

  it('cancel_running: the oldest running task is cancelled (its worker is told) and the new one starts', async () => {
    const { key, watch, holds, task, first } = await holding('cancel_running');
    const second = await submitOne(c.url, task());
    await eventually(
      () => (watch.cancelled.has(first) ? true : undefined),
      10_000,
      'the worker told to stop the first',
    );
    await statusIs(first, 'cancelled');
    await eventually(() => (watch.live.has(second) ? true : undefined), 10_000, 'the second to start');
    // A third: the second is now the oldest running, and goes the same way.
    const third = await submitOne(c.url, task());
    await eventually(() => (watch.cancelled.has(second) ? true : undefined), 10_000, 'the second told to stop');
    await eventually(() => (watch.live.has(third) ? true : undefined), 10_000, 'the third to start');
    holds.release(third);
    await statusIs(third, 'succeeded');
    await statusIs(second, 'cancelled');
    expect(watch.startedIds()).toEqual([first, second, third]);
    expect(watch.maxOf(key)).toBe(1);
  });

  it('keep_latest_waiting: only the newest waiting task runs after the holder; older waiting ones are cancelled', async () => {
    const { key, watch, holds, task, first } = await holding('keep_latest_waiting');
    const b = await submitOne(c.url, task());
    await waitingAt(key, 1);
    const cId = await submitOne(c.url, task());
    await statusIs(b, 'cancelled');
    // Several in one batch: they reach the key in any order (their wheel partitions differ),
    // and were made in the same millisecond; exactly one of them is kept, never an older one.
    const batch = await submitMany(c.url, [task(), task(), task(), task()]);
    await statusIs(cId, 'cancelled');
    const kept = await eventually(
      async () => {
        const statuses = await Promise.all(batch.map(async (id) => (await taskOf(c.url, id)).status));
        const live = batch.filter((_, i) => statuses[i] !== 'cancelled');
        return live.length === 1 && statuses.filter((s) => s === 'cancelled').length === 3 ? live : undefined;
      },
      10_000,
      'all but one of the batch cancelled',
    );
    const newest = kept[0] as string;
    await waitingAt(key, 1);
    for (const id of [b, cId]) {
      expect((await taskOf(c.url, id)).last_error).toContain(key);
      expect((await taskOf(c.url, id)).last_error).toContain('keep_latest_waiting');
    }
    // Older by creation though later to arrive (it was delayed): cancelled, the newer kept.
    const x = await submitOne(c.url, task({ schedule: { type: 'delayed', delay_seconds: 1.5 } }));
    const y = await submitOne(c.url, task());
    await statusIs(newest, 'cancelled');
    await statusIs(x, 'cancelled');
    expect((await taskOf(c.url, y)).status).not.toBe('cancelled');
    holds.releaseAll();
    await statusIs(y, 'succeeded');
    expect(watch.startedIds()).toEqual([first, y]);
    expect(watch.maxOf(key)).toBe(1);
  });

  it('queue: waiting tasks of the key run first in first out, priorities first', async () => {
    const { key, watch, holds, task, first } = await holding('queue');
    const fifo: string[] = [];
    for (let i = 0; i < 4; i++) fifo.push(await submitOne(c.url, task({ priority: 5 })));
    const urgent = await submitOne(c.url, task({ priority: 1 }));
    const late = await submitOne(c.url, task({ priority: 5 }));
    await waitingAt(key, 6);
    holds.releaseAll();
    await eventually(() => (watch.done.size === 7 ? true : undefined), 20_000, 'every task to run');
    expect(watch.startedIds()).toEqual([first, urgent, ...fifo, late]);
    expect(watch.maxOf(key)).toBe(1);
  });
});
