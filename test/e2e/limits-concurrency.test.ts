import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWorker, type Worker, type WorkerTransport } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * Concurrency limits on one node, through the SDK, both backends and both transports: a
 * key's tasks never run more at once than its concurrency, counted on the worker side while
 * the handlers sleep 20–100 ms and the worker has many more slots than the limit; a task that
 * names two keys waits for both; a task type's limit gates every task of the type; and every
 * task still runs.
 */
const CASES: [BackendName, WorkerTransport][] = BACKENDS.flatMap((b) =>
  (['channel', 'http'] as const).map((t): [BackendName, WorkerTransport] => [b, t]),
);

describe.each(CASES)('concurrency limits on %s over %s', (backend, transport) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  const declare = async (name: string, body: Record<string, unknown>): Promise<void> => {
    const res = await api(c.url, 'PUT', `/api/limits/${name}`, body);
    expect(res.status).toBe(200);
  };
  const submitAll = async (tasks: Record<string, unknown>[]): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', { tasks });
    expect(res.status).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  /** A worker of `type` with 50 slots that counts, per key in the payload, how many run at once. */
  const countingWorker = (type: string) => {
    const running = new Map<string, number>();
    const max = new Map<string, number>();
    const done = new Set<string>();
    const w = createWorker({
      url: c.url,
      transport,
      taskTypes: [type],
      concurrency: 50,
      onError: () => undefined,
      handler: async ({ taskId, payload }) => {
        const keys = (payload as { keys: string[] }).keys;
        for (const k of keys) {
          const n = (running.get(k) ?? 0) + 1;
          running.set(k, n);
          max.set(k, Math.max(max.get(k) ?? 0, n));
        }
        await sleep(20 + Math.floor(Math.random() * 80));
        for (const k of keys) running.set(k, (running.get(k) ?? 1) - 1);
        done.add(taskId);
        return null;
      },
    });
    workers.push(w);
    w.start();
    return { max, done };
  };

  it('never runs more tasks of a key at once than its concurrency (1 and 5), and runs them all', async () => {
    const type = uniqueType('lim.conc');
    const one = `${type}-one`;
    const five = `${type}-five`;
    await declare(one, { concurrency: 1 });
    await declare(five, { concurrency: 5 });
    const ids = await submitAll([
      ...Array.from({ length: 20 }, () => ({ task_type: type, limits: [one], payload: { keys: [one] } })),
      ...Array.from({ length: 60 }, () => ({ task_type: type, limits: [five], payload: { keys: [five] } })),
    ]);
    const { max, done } = countingWorker(type);
    await eventually(() => (done.size === ids.length ? true : undefined), 60_000, 'every task to run');
    expect(max.get(one)).toBe(1);
    expect(max.get(five)).toBeLessThanOrEqual(5);
    expect(max.get(five)).toBeGreaterThan(1);
  });

  // Fast admission (docs/decisions/0023-flow-control.md): tasks arriving a few at a time while
  // the worker runs find the key open (it has answered claims and has room) and go straight
  // into the ready queue; then the key binds, and only the grant at the claim holds it to its
  // concurrency (with the grant skipped for the tasks pushed straight, 7 ran under 5).
  it('keeps a key that turns binding mid-flood within its concurrency, its tasks pushed straight while it was open', async () => {
    const type = uniqueType('lim.fast');
    const key = `${type}-k`;
    await declare(key, { concurrency: 5 });
    const { max, done } = countingWorker(type);
    let submitted = 0;
    for (let batch = 0; batch < 15; batch++) {
      const n = 1 + (batch % 4) * 6;
      submitted += (
        await submitAll(Array.from({ length: n }, () => ({ task_type: type, limits: [key], payload: { keys: [key] } })))
      ).length;
      await sleep(25);
    }
    await eventually(() => (done.size === submitted ? true : undefined), 60_000, 'every task to run');
    expect(max.get(key)).toBeLessThanOrEqual(5);
    expect(max.get(key)).toBeGreaterThan(1);
  });

  it('holds a task naming two keys until both have room', async () => {
    const type = uniqueType('lim.two');
    const a = `${type}-a`;
    const b = `${type}-b`;
    await declare(a, { concurrency: 2 });
    await declare(b, { concurrency: 1 });
    const ids = await submitAll([
      ...Array.from({ length: 10 }, () => ({ task_type: type, limits: [a, b], payload: { keys: [a, b] } })),
      ...Array.from({ length: 10 }, () => ({ task_type: type, limits: [a], payload: { keys: [a] } })),
    ]);
    const { max, done } = countingWorker(type);
    await eventually(() => (done.size === ids.length ? true : undefined), 60_000, 'every task to run');
    expect(max.get(a)).toBeLessThanOrEqual(2);
    expect(max.get(b)).toBe(1);
  });

  it('limits a task type through type:<task_type>', async () => {
    const type = uniqueType('lim.type');
    await declare(`type:${type}`, { concurrency: 3 });
    const ids = await submitAll(Array.from({ length: 30 }, () => ({ task_type: type, payload: { keys: ['t'] } })));
    const { max, done } = countingWorker(type);
    await eventually(() => (done.size === ids.length ? true : undefined), 60_000, 'every task to run');
    expect(max.get('t')).toBeLessThanOrEqual(3);
    expect(max.get('t')).toBeGreaterThan(1);
  });
});
