import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import {
  createWorker,
  TaskTimeoutError,
  type TaskHandler,
  type Worker,
  type WorkerTransport,
} from '../../src/worker/index.js';
import { TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Deadlines through the worker SDK against a real node, on both backends and both transports:
 * a handler that hangs — and ignores its signal — is aborted at `timeout_seconds` with a
 * `TaskTimeoutError`, its slot is free for the next attempt at once, and the node runs the
 * task again; `ctx.extendDeadline` is honoured up to `max_timeout_seconds` and no further.
 */
const CASES: [BackendName, WorkerTransport][] = BACKENDS.flatMap((b) =>
  (['channel', 'http'] as const).map((t): [BackendName, WorkerTransport] => [b, t]),
);

interface TaskBody {
  status: string;
  attempts: number;
  last_error: string | null;
  started_at: string | null;
}

describe.each(CASES)('deadlines through the SDK on %s over %s', (backend, transport) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, {
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.05,
      safetyNetGraceSeconds: 60,
      workerHeartbeatSeconds: 0.5,
    });
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 100 })));
    await c?.cleanup();
  });

  const worker = (taskTypes: string[], handler: TaskHandler, concurrency = 1): Worker => {
    const w = createWorker({ url: c.url, transport, taskTypes, concurrency, handler, onError: () => undefined });
    workers.push(w);
    w.start();
    return w;
  };
  const submit = async (body: Record<string, unknown>): Promise<string> => {
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(res.status).toBe(201);
    return res.body.task_id;
  };
  const task = async (id: string) => (await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`)).body;

  it('aborts a hung handler at its deadline, frees its slot, and the task runs again', async () => {
    const type = uniqueType('sdk.dl.hang');
    const aborts: unknown[] = [];
    const attempts: number[] = [];
    // One slot: attempt 2 can start here only if the hung attempt 1 gave its slot back.
    const w = worker([type], ({ attempt, signal }) => {
      attempts.push(attempt);
      if (attempt > 1) return Promise.resolve({ attempt });
      signal.addEventListener('abort', () => aborts.push(signal.reason));
      return new Promise(() => undefined); // hangs, whatever its signal says
    });
    const id = await submit({ task_type: type, timeout_seconds: 1, max_retries: 2 });
    const done = await eventually(
      async () => {
        const t = await task(id);
        return t.status === 'succeeded' ? t : undefined;
      },
      10_000,
      'the task to succeed on its second attempt',
    );
    expect(done.attempts).toBe(2);
    expect(attempts).toEqual([1, 2]);
    expect(aborts).toHaveLength(1);
    expect(aborts[0]).toBeInstanceOf(TaskTimeoutError);
    expect(w.stats).toMatchObject({ timedOut: 1, succeeded: 1, failed: 0 });
    const history = await api<{ executions: { attempt: number; status: string; error: string | null }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions).toMatchObject([
      { attempt: 2, status: 'succeeded' },
      { attempt: 1, status: 'timed_out', error: TIMED_OUT },
    ]);
  });

  it('honours ctx.extendDeadline up to max_timeout_seconds, and aborts at the extended deadline', async () => {
    const type = uniqueType('sdk.dl.ext');
    const granted: Date[] = [];
    const abortedAt: number[] = [];
    worker([type], async (ctx) => {
      granted.push(await ctx.extendDeadline(60));
      if (ctx.payload === 'finish') {
        await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the 1 s timeout: real time is the subject
        return 'done';
      }
      ctx.signal.addEventListener('abort', () => abortedAt.push(Date.now()));
      return new Promise(() => undefined);
    });
    // Extended to 3 s, it finishes at 1.5 s: the one attempt succeeds.
    const finished = await submit({ task_type: type, payload: 'finish', timeout_seconds: 1, max_timeout_seconds: 3 });
    const ok = await eventually(async () => {
      const t = await task(finished);
      return t.status === 'succeeded' ? t : undefined;
    }, 10_000);
    expect(ok.attempts).toBe(1);
    expect(granted[0]!.getTime() - Date.parse(ok.started_at!)).toBe(3_000);

    // Extended to 3 s and hung: aborted at 3 s, not at 1 s, and it fails as a timeout.
    const hung = await submit({ task_type: type, timeout_seconds: 1, max_timeout_seconds: 3, max_retries: 0 });
    const failed = await eventually(
      async () => {
        const t = await task(hung);
        return t.status === 'failed' ? t : undefined;
      },
      10_000,
      'the hung task to fail',
    );
    expect(failed.last_error).toBe(TIMED_OUT);
    const started = Date.parse(failed.started_at!);
    expect(granted[1]!.getTime() - started).toBe(3_000);
    expect(abortedAt).toHaveLength(1);
    expect(abortedAt[0]!).toBeGreaterThanOrEqual(started + 3_000 - 50);
  });

  it('grants an extension the store could not take at first, once it can: the attempt is not cut short', async () => {
    const type = uniqueType('sdk.dl.out');
    const workersApi = c.node.services.workers;
    const heartbeat = workersApi.heartbeat.bind(workersApi);
    let refused = 0;
    vi.spyOn(workersApi, 'heartbeat').mockImplementation((taskId, leaseToken, extendSeconds) => {
      if (extendSeconds !== undefined && refused++ < 1) {
        return Promise.reject(new WheelhouseError('store_unavailable', 'the database cannot be reached'));
      }
      return heartbeat(taskId, leaseToken, extendSeconds);
    });
    const granted: Date[] = [];
    worker([type], async (ctx) => {
      granted.push(await ctx.extendDeadline(3));
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the 1 s timeout
      return 'done';
    });
    const id = await submit({ task_type: type, timeout_seconds: 1, max_timeout_seconds: 4, max_retries: 0 });
    const ok = await eventually(
      async () => {
        const t = await task(id);
        return t.status === 'succeeded' || t.status === 'failed' ? t : undefined;
      },
      10_000,
      'the task to end',
    );
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(ok).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(granted).toHaveLength(1);
    expect(granted[0]!.getTime() - Date.parse(ok.started_at!)).toBeGreaterThan(1_000);
  });
});
