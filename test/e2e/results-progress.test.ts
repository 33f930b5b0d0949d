import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { createWorker, type Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Results and progress through a real node, on both backends: a result sent with the single
 * or the batch completion is stored with the task and shown by GET and the history; progress
 * sent with a heartbeat is shown by GET until a retry clears it; a result over
 * `maxResultBytes` is a 400 and nothing is recorded; a result sent with a wrong token is
 * refused and not stored. And through the worker SDK: the handler's value is the result,
 * `ctx.progress` shows up on GET, a value that cannot be stored fails the attempt for good.
 */
interface Polled {
  tasks: { task_id: string; attempt: number; lease_token: string }[];
}
interface TaskJson {
  task_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  result: unknown;
  progress: unknown;
  progress_at: string | null;
}
interface HistoryJson {
  executions: { attempt: number; status: string; error: string | null; result: unknown }[];
}
interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

const MAX_RESULT_BYTES = 4096;

describe.each(BACKENDS)('results and progress on %s', (backend) => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, {
      maxResultBytes: MAX_RESULT_BYTES,
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.05,
    });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await c?.cleanup();
  });

  const submit = async (type: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, () => ({ task_type: type, ...extra })),
    });
    expect(res.status).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  const poll = async (type: string, n: number): Promise<Polled['tasks']> => {
    const got: Polled['tasks'] = [];
    await eventually(async () => {
      const res = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-results',
        task_types: [type],
        max_tasks: n - got.length,
        wait_ms: 1000,
      });
      expect(res.status).toBe(200);
      got.push(...res.body.tasks);
      return got.length === n ? true : undefined;
    });
    return got;
  };
  const getTask = async (id: string): Promise<TaskJson> => {
    const res = await api<TaskJson>(c.url, 'GET', `/api/tasks/${id}`);
    expect(res.status).toBe(200);
    return res.body;
  };
  const history = async (id: string): Promise<HistoryJson['executions']> => {
    const res = await api<HistoryJson>(c.url, 'GET', `/api/tasks/${id}/history`);
    expect(res.status).toBe(200);
    return res.body.executions;
  };
  const post = <T = ErrorBody>(path: string, body: unknown) => api<T>(c.url, 'POST', path, body);

  it('stores a result sent with the single completion; GET and the history show it', async () => {
    const type = uniqueType('single');
    const [id] = await submit(type, 1);
    const before = await getTask(id!);
    expect(before).toMatchObject({ result: null, progress: null, progress_at: null });
    const [task] = await poll(type, 1);
    const result = { rows: 3, files: ['a.csv', 'b.csv'], ok: true, note: 'é ☃' };
    const res = await post(`/api/tasks/${id}/complete`, {
      lease_token: task!.lease_token,
      status: 'succeeded',
      result,
    });
    expect(res.status).toBe(200);
    expect(await getTask(id!)).toMatchObject({ status: 'succeeded', result });
    expect(await history(id!)).toEqual([
      expect.objectContaining({ attempt: 1, status: 'succeeded', result, error: null }),
    ]);
    // The client library reads them too.
    const client = createClient({ url: c.url });
    expect((await client.get(id!)).result).toEqual(result);
    const executions = [];
    for await (const e of client.history(id!)) executions.push(e);
    expect(executions.map((e) => e.result)).toEqual([result]);
  });

  it('stores results sent with the batch completion, each with its own task, and a failed attempt shows its error', async () => {
    const type = uniqueType('batch');
    const ids = await submit(type, 3, { max_retries: 1 });
    const tasks = await poll(type, 3);
    const byId = new Map(tasks.map((t) => [t.task_id, t]));
    const [a, b, f] = ids.map((id) => byId.get(id)!);
    const res = await post<{ results: { task_id: string; ok: boolean }[] }>('/api/workers/complete', {
      results: [
        { task_id: a!.task_id, lease_token: a!.lease_token, status: 'succeeded', result: [1, 2, 3] },
        { task_id: b!.task_id, lease_token: b!.lease_token, status: 'succeeded', result: 'plain text' },
        { task_id: f!.task_id, lease_token: f!.lease_token, status: 'failed', error: 'boom', result: 'ignored' },
      ],
    });
    expect(res.status).toBe(200);
    expect(res.body.results.every((r) => r.ok)).toBe(true);
    expect((await getTask(a!.task_id)).result).toEqual([1, 2, 3]);
    expect((await getTask(b!.task_id)).result).toBe('plain text');
    // A failure's result is not stored; its retry runs and succeeds with one.
    expect((await getTask(f!.task_id)).result).toBeNull();
    const [retry] = await poll(type, 1);
    expect(retry).toMatchObject({ task_id: f!.task_id, attempt: 2 });
    const done = await post(`/api/tasks/${f!.task_id}/complete`, {
      lease_token: retry!.lease_token,
      status: 'succeeded',
      result: { second: true },
    });
    expect(done.status).toBe(200);
    expect(await history(f!.task_id)).toEqual([
      expect.objectContaining({ attempt: 2, status: 'succeeded', result: { second: true }, error: null }),
      expect.objectContaining({ attempt: 1, status: 'failed', result: null, error: 'boom' }),
    ]);
  });

  it('shows the latest progress sent with heartbeats; a retry clears it, the end keeps it', async () => {
    const type = uniqueType('progress');
    const [id] = await submit(type, 1, { max_retries: 1 });
    const [first] = await poll(type, 1);
    const beat = (token: string, progress: unknown) =>
      post<{ ok: boolean }>(`/api/tasks/${id}/heartbeat`, { lease_token: token, progress });
    expect((await beat(first!.lease_token, { done: 1, of: 4 })).status).toBe(200);
    expect((await beat(first!.lease_token, { done: 2, of: 4 })).status).toBe(200);
    const running = await getTask(id!);
    expect(running).toMatchObject({ status: 'running', progress: { done: 2, of: 4 } });
    expect(Date.parse(running.progress_at!)).toBeGreaterThan(0);
    // A plain heartbeat leaves it as it is.
    expect((await post(`/api/tasks/${id}/heartbeat`, { lease_token: first!.lease_token })).status).toBe(200);
    expect((await getTask(id!)).progress).toEqual({ done: 2, of: 4 });
    // A wrong token records nothing.
    const wrong = await beat(`lt2.${'0'.repeat(32)}`, { done: 99 });
    expect(wrong.status).toBe(409);
    expect((await getTask(id!)).progress).toEqual({ done: 2, of: 4 });

    // The attempt fails and is retried: the new attempt starts without the old progress.
    const failed = await post(`/api/tasks/${id}/complete`, { lease_token: first!.lease_token, status: 'failed' });
    expect(failed.status).toBe(200);
    expect(await getTask(id!)).toMatchObject({ progress: null, progress_at: null });
    const [second] = await poll(type, 1);
    expect((await beat(second!.lease_token, 'almost')).status).toBe(200);
    expect(
      (await post(`/api/tasks/${id}/complete`, { lease_token: second!.lease_token, status: 'succeeded' })).status,
    ).toBe(200);
    expect(await getTask(id!)).toMatchObject({ status: 'succeeded', progress: 'almost', result: null });
  });

  it('refuses a result over maxResultBytes with 400 and records nothing, single or in a batch', async () => {
    const type = uniqueType('over');
    const [id, other] = await submit(type, 2);
    const tasks = await poll(type, 2);
    const mine = tasks.find((t) => t.task_id === id)!;
    const theirs = tasks.find((t) => t.task_id === other)!;
    const big = { blob: 'x'.repeat(MAX_RESULT_BYTES) };
    const single = await post(`/api/tasks/${id}/complete`, {
      lease_token: mine.lease_token,
      status: 'succeeded',
      result: big,
    });
    expect(single.status).toBe(400);
    expect(single.body.error).toMatchObject({
      code: 'validation_failed',
      details: { field: 'result', limit_bytes: MAX_RESULT_BYTES },
    });
    const batch = await post('/api/workers/complete', {
      results: [
        { task_id: other, lease_token: theirs.lease_token, status: 'succeeded', result: 'fits' },
        { task_id: id, lease_token: mine.lease_token, status: 'succeeded', result: big },
      ],
    });
    expect(batch.status).toBe(400);
    expect(batch.body.error.details).toMatchObject({ field: 'results[1].result', index: 1 });
    const progress = await post(`/api/tasks/${id}/heartbeat`, { lease_token: mine.lease_token, progress: big });
    expect(progress.status).toBe(400);
    expect(progress.body.error.details).toMatchObject({ field: 'progress' });
    // Nothing of any of them was recorded: both still run, with neither result nor progress.
    for (const taskId of [id!, other!]) {
      expect(await getTask(taskId)).toMatchObject({ status: 'running', result: null, progress: null });
    }
    // The leases still hold: results that fit are taken.
    const ok = await post(`/api/tasks/${id}/complete`, {
      lease_token: mine.lease_token,
      status: 'succeeded',
      result: 1,
    });
    expect(ok.status).toBe(200);
    expect((await getTask(id!)).result).toBe(1);
  });

  it('refuses a result sent with a wrong token and stores nothing', async () => {
    const type = uniqueType('wrong');
    const [id, other] = await submit(type, 2);
    const tasks = await poll(type, 2);
    const mine = tasks.find((t) => t.task_id === id)!;
    const theirs = tasks.find((t) => t.task_id === other)!;
    const forged = { forged: true };
    const single = await post(`/api/tasks/${id}/complete`, {
      lease_token: theirs.lease_token,
      status: 'succeeded',
      result: forged,
    });
    expect(single.status).toBe(409);
    expect(single.body.error.code).toBe('lease_not_held');
    const batch = await post<{ results: { task_id: string; ok: boolean }[] }>('/api/workers/complete', {
      results: [{ task_id: id, lease_token: `lt2.${'a'.repeat(32)}`, status: 'succeeded', result: forged }],
    });
    expect(batch.body.results).toEqual([{ task_id: id, ok: false }]);
    expect(await getTask(id!)).toMatchObject({ status: 'running', result: null });
    const stored = await c.sql<{ result: unknown }>('SELECT result FROM tasks WHERE id = $1', [id]);
    expect(stored[0]!.result).toBeNull();
    // The holder's own result is the one stored.
    await post(`/api/tasks/${id}/complete`, { lease_token: mine.lease_token, status: 'succeeded', result: 'mine' });
    expect((await getTask(id!)).result).toBe('mine');
  });

  it("through the worker SDK: the handler's value is the result and ctx.progress shows on GET", async () => {
    const type = uniqueType('sdk');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const errors: string[] = [];
    const worker = createWorker({
      url: c.url,
      // Progress on heartbeats is the HTTP transport's; the channel's is in worker-sdk-channel.test.ts.
      transport: 'http',
      taskTypes: [type],
      pollWaitMs: 1_000,
      heartbeatEveryMs: 5_000,
      maxResultBytes: MAX_RESULT_BYTES,
      onError: (error, context) => errors.push(`${context}: ${String(error)}`),
      handler: async (task) => {
        const { mode } = task.payload as { mode: string };
        if (mode === 'progress') {
          for (let i = 1; i <= 50; i++) task.progress({ step: i });
          task.progress(10n); // not JSON: dropped and reported, never thrown
          await released;
          return { steps: 50 };
        }
        if (mode === 'big') return 'y'.repeat(MAX_RESULT_BYTES + 1);
        if (mode === 'bigint') return { n: 1n };
        return undefined;
      },
    });
    workers.push(worker);
    worker.start();
    const ids = await Promise.all(
      ['progress', 'big', 'bigint', 'none'].map(async (mode) => (await submit(type, 1, { payload: { mode } }))[0]!),
    );
    const [progressId, bigId, bigintId, noneId] = ids as [string, string, string, string];

    // Only the latest progress is sent, brought forward ahead of the 5 s heartbeat.
    await eventually(async () => ((await getTask(progressId)).progress !== null ? true : undefined), 4_000);
    expect((await getTask(progressId)).progress).toEqual({ step: 50 });
    expect(errors.some((e) => e.includes('progress') && e.includes('not JSON'))).toBe(true);
    release();
    await eventually(async () => ((await getTask(progressId)).status === 'succeeded' ? true : undefined));
    expect(await getTask(progressId)).toMatchObject({ result: { steps: 50 }, progress: { step: 50 } });

    // A value that cannot be stored fails the attempt for good, saying why.
    for (const [id, why] of [
      [bigId, `is ${MAX_RESULT_BYTES + 3} bytes of JSON`],
      [bigintId, 'is not JSON'],
    ] as const) {
      await eventually(async () => ((await getTask(id)).status === 'failed' ? true : undefined));
      const failed = await getTask(id);
      expect(failed).toMatchObject({ attempts: 1, result: null });
      expect(failed.last_error).toContain(why);
    }
    // undefined: succeeded without a result.
    await eventually(async () => ((await getTask(noneId)).status === 'succeeded' ? true : undefined));
    expect((await getTask(noneId)).result).toBeNull();
  });
});
