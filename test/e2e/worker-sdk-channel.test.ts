import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import {
  createWorker,
  TaskCancelledError,
  WorkerStoppedError,
  type TaskContext,
  type Worker,
  type WorkerOptions,
} from '../../src/worker/index.js';
import { startFaultProxy, type FaultProxy, type ProxyTarget } from '../support/fault-proxy.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The SDK's worker on the channel against real nodes, on both backends: tasks run through
 * the socket and their results are recorded; a socket dropped mid-task and a node restarted
 * mid-task are both survived by reconnecting and resuming the lease, so the same attempt
 * completes; a cancel is pushed to the handler; stop({ timeoutMs }) hands a stuck task back.
 * The worker reaches the node through a TCP proxy, so the test can drop its socket and point
 * it at the restarted node.
 */
describe.each(BACKENDS)('the SDK worker on the channel, %s', (backend) => {
  let c: TestCluster;
  let proxy: FaultProxy;
  let proxyUrl: string;
  const target: ProxyTarget = { host: '127.0.0.1', port: 0 };
  const workers: Worker[] = [];

  beforeAll(async () => {
    c = await startTestNode(backend, { retryBaseSeconds: 0.05, retryMaxSeconds: 0.05 });
    target.port = Number(new URL(c.url).port);
    // The proxy reads `target` on each new connection: after a restart the test re-points it.
    proxy = await startFaultProxy({ target });
    proxyUrl = proxy.url(c.url).replace(/\/$/, '');
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await proxy?.close();
    await c?.cleanup();
  });

  function worker(options: Omit<WorkerOptions, 'url'>): Worker {
    const w = createWorker({ url: proxyUrl, onError: () => undefined, ...options });
    workers.push(w);
    w.start();
    return w;
  }
  const submit = async (type: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, (_, i) => ({ task_type: type, payload: { i }, ...extra })),
    });
    expect(res.status).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  const getTask = async (id: string) =>
    (await api<{ status: string; attempts: number; last_error: string | null }>(c.url, 'GET', `/api/tasks/${id}`)).body;
  const until = (check: () => boolean | Promise<boolean>, what: string, timeoutMs = 15_000) =>
    eventually(async () => ((await check()) ? true : undefined), timeoutMs, what, 10);
  /** A handler that holds every task until `release()`; `started` resolves with the first. */
  const holding = () => {
    let open!: () => void;
    const released = new Promise<void>((resolve) => (open = resolve));
    const seen: TaskContext[] = [];
    return {
      seen,
      release: () => open(),
      handler: async (t: TaskContext) => {
        seen.push(t);
        await released;
      },
    };
  };

  it('runs tasks through the socket and the node records their results', async () => {
    const type = uniqueType('sdkch');
    const w = worker({ taskTypes: [type], concurrency: 8, handler: async () => undefined });
    const ids = await submit(type, 50);
    await until(() => w.stats.reported === 50, 'fifty results acknowledged');
    const statuses = await Promise.all(ids.map(async (id) => (await getTask(id)).status));
    expect(new Set(statuses)).toEqual(new Set(['succeeded']));
    // Through the channel: not one poll, and results shared frames.
    expect(w.stats.polls).toBe(0);
    expect(w.stats.resultFrames).toBeGreaterThan(0);
    expect(w.stats.resultFrames).toBeLessThan(50);
  });

  it('stores the handler value as the result and shows progress while the task runs', async () => {
    const type = uniqueType('sdkresult');
    let open!: () => void;
    const released = new Promise<void>((resolve) => (open = resolve));
    worker({
      taskTypes: [type],
      handler: async ({ payload, progress }) => {
        progress({ done: 1, of: 2 });
        await released;
        return { echoed: payload };
      },
    });
    const [id] = await submit(type, 1);
    const task = async () =>
      (await api<{ status: string; result: unknown; progress: unknown }>(c.url, 'GET', `/api/tasks/${id}`)).body;
    await until(async () => (await task()).progress !== null, 'the progress shown');
    expect(await task()).toMatchObject({ status: 'running', progress: { done: 1, of: 2 } });
    open();
    await until(async () => (await task()).status === 'succeeded', 'the task to succeed');
    expect((await task()).result).toEqual({ echoed: { i: 0 } });
  });

  it('after its socket is dropped mid-task, reconnects, resumes the lease, and the same attempt completes', async () => {
    const type = uniqueType('sdkdrop');
    const held = holding();
    const w = worker({ taskTypes: [type], concurrency: 2, handler: held.handler });
    const [id] = await submit(type, 1);
    await until(() => held.seen.length === 1, 'the task to start');
    const reconnects = w.stats.reconnects;
    expect(proxy.dropAll()).toBeGreaterThan(0);
    await until(() => w.stats.reconnects > reconnects, 'a new socket welcomed');
    held.release();
    await until(async () => (await getTask(id!)).status === 'succeeded', 'the task to succeed');
    expect(await getTask(id!)).toMatchObject({ attempts: 1 });
    expect(held.seen).toHaveLength(1);
    expect(held.seen[0]!.signal.aborted).toBe(false);
    expect(w.stats).toMatchObject({ leasesLost: 0, discarded: 0 });
  });

  it('sends a result again when the node could not record it (its store out), and the same attempt completes', async () => {
    const type = uniqueType('sdkstore');
    const held = holding();
    const w = worker({ taskTypes: [type], concurrency: 2, handler: held.handler });
    const [id] = await submit(type, 1);
    await until(() => held.seen.length === 1, 'the task to start');
    const workers = c.node.services.workers;
    const record = workers.complete.bind(workers);
    let refused = 0;
    const complete = vi.spyOn(workers, 'complete').mockImplementation((results) => {
      if (refused++ < 2)
        return Promise.reject(new WheelhouseError('store_unavailable', 'the database cannot be reached'));
      return record(results);
    });
    try {
      held.release();
      await until(async () => (await getTask(id!)).status === 'succeeded', 'the task to succeed');
    } finally {
      complete.mockRestore();
    }
    expect(refused).toBe(3); // refused twice, recorded the third time
    expect(await getTask(id!)).toMatchObject({ attempts: 1 });
    expect(held.seen).toHaveLength(1);
    expect(w.stats).toMatchObject({ reported: 1, discarded: 0, leasesLost: 0 });
  });

  it('after its node restarts mid-task, reconnects to it, resumes the lease, and the same attempt completes', async () => {
    const type = uniqueType('sdkrestart');
    const held = holding();
    const w = worker({ taskTypes: [type], concurrency: 2, handler: held.handler });
    const [id] = await submit(type, 1);
    await until(() => held.seen.length === 1, 'the task to start');
    const reconnects = w.stats.reconnects;
    await c.restart();
    target.port = Number(new URL(c.url).port);
    await until(() => w.stats.reconnects > reconnects, 'a socket to the restarted node', 30_000);
    held.release();
    await until(async () => (await getTask(id!)).status === 'succeeded', 'the task to succeed');
    expect(await getTask(id!)).toMatchObject({ attempts: 1 });
    expect(held.seen).toHaveLength(1);
    expect(w.stats).toMatchObject({ leasesLost: 0, discarded: 0 });
  });

  it('aborts the handler of a task cancelled while it runs, and the task ends cancelled', async () => {
    const type = uniqueType('sdkcancel');
    let reason: unknown;
    const started: string[] = [];
    worker({
      taskTypes: [type],
      handler: async ({ taskId, signal }) => {
        started.push(taskId);
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        reason = signal.reason as unknown;
        throw signal.reason;
      },
    });
    const [id] = await submit(type, 1);
    await until(() => started.length === 1, 'the task to start');
    expect((await api(c.url, 'DELETE', `/api/tasks/${id}`)).status).toBe(200);
    await until(async () => (await getTask(id!)).status === 'cancelled', 'the task to end cancelled');
    expect(reason).toBeInstanceOf(TaskCancelledError);
  });

  it('stop({ timeoutMs }) hands a stuck task back as failed and retryable', async () => {
    const type = uniqueType('sdkstop');
    const started: TaskContext[] = [];
    const w = worker({
      taskTypes: [type],
      handler: async (t) => {
        started.push(t);
        await new Promise(() => undefined); // never settles
      },
    });
    const [id] = await submit(type, 1, { max_retries: 3 });
    await until(() => started.length === 1, 'the task to start');
    await w.stop({ timeoutMs: 200 });
    expect(started[0]!.signal.reason).toBeInstanceOf(WorkerStoppedError);
    expect(w.stats).toMatchObject({ failed: 1, reported: 1, unreported: 0 });
    const task = await getTask(id!);
    expect(['pending', 'ready']).toContain(task.status);
    expect(task.last_error).toMatch(/stop grace of 200 ms/);
  });
});
