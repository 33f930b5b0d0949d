import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dagClient } from '../support/dags.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';

/**
 * `POST /api/tasks/{id}/retry` on each backend, over HTTP: a failed task runs again through
 * its wheel partition and the ready queue to a worker's poll, as a new attempt, its history
 * keeping both; every other status is a 409, an unknown id a 404, and so is a task cancelled
 * because its predecessor failed (docs/api.md: it would run without what it waits for).
 */
interface TaskBody {
  task_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  completed_at: string | null;
  cancel_requested: boolean;
}
interface Polled {
  tasks: { task_id: string; attempt: number; lease_token: string }[];
}
interface ErrorBody {
  error: { code: string; message: string };
}

describe.each(BACKENDS)('retry on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const poll = async (taskType: string) => {
    const polled = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-retry',
      task_types: [taskType],
      max_tasks: 1,
      wait_ms: 5000,
    });
    expect(polled.body.tasks).toHaveLength(1);
    return polled.body.tasks[0]!;
  };
  const complete = (id: string, leaseToken: string, body: Record<string, unknown>) =>
    api(c.url, 'POST', `/api/tasks/${id}/complete`, { lease_token: leaseToken, ...body });
  const retry = (id: string) => api<TaskBody & ErrorBody>(c.url, 'POST', `/api/tasks/${id}/retry`);

  it('runs a failed task again as attempt 2, which succeeds; the history shows both attempts', async () => {
    const taskType = `retry.${backend}`;
    const created = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: taskType,
      max_retries: 0,
    });
    const id = created.body.task_id;
    const first = await poll(taskType);
    expect(first).toMatchObject({ task_id: id, attempt: 1 });
    await complete(id, first.lease_token, { status: 'failed', error: 'smtp down' });
    expect((await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`)).body).toMatchObject({
      status: 'failed',
      attempts: 1,
    });

    const retried = await retry(id);
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ task_id: id, attempts: 1, last_error: 'smtp down', completed_at: null });
    expect(['ready', 'running']).toContain(retried.body.status);

    const second = await poll(taskType);
    expect(second).toMatchObject({ task_id: id, attempt: 2 });
    expect((await complete(id, second.lease_token, { status: 'succeeded', result: { sent: true } })).status).toBe(200);
    const done = await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`);
    expect(done.body).toMatchObject({ status: 'succeeded', attempts: 2 });
    const history = await api<{ executions: { attempt: number; status: string; error: string | null }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions.map((e) => [e.attempt, e.status, e.error])).toEqual([
      [2, 'succeeded', null],
      [1, 'failed', 'smtp down'],
    ]);

    // Succeeded: nothing to retry.
    const again = await retry(id);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('invalid_transition');
    expect(again.body.error.message).toMatch(/succeeded/);
  });

  it('refuses a pending and a running task with invalid_transition naming the status; an unknown id is a 404', async () => {
    const taskType = `retry.refused.${backend}`;
    const later = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: taskType,
      schedule: { type: 'delayed', delay_seconds: 3600 },
    });
    const pending = await retry(later.body.task_id);
    expect(pending.status).toBe(409);
    expect(pending.body.error).toMatchObject({ code: 'invalid_transition' });
    expect(pending.body.error.message).toMatch(/pending/);

    const now = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: taskType });
    await poll(taskType);
    const running = await retry(now.body.task_id);
    expect(running.status).toBe(409);
    expect(running.body.error.message).toMatch(/running/);

    const unknown = await retry('0192f3a4-5b6c-7d8e-9f00-112233445566');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('task_not_found');
  });

  it('refuses a task its failed predecessor cancelled, and leaves it as it was', async () => {
    const w = dagClient(() => c.url);
    const type = `retry.dag.${backend}`;
    const submitted = await w.submitDag({
      tasks: [
        { ref: 'a', task_type: type, max_retries: 0 },
        { ref: 'b', task_type: `${type}.after`, depends_on: ['a'] },
      ],
    });
    expect(submitted.status).toBe(201);
    const [a, b] = submitted.body.tasks.map((t) => t.task_id) as [string, string];
    const taken = await w.take([type], 1);
    await w.complete(taken, 'failed', { error: 'boom', retryable: false });
    const cancelled = await w.waitStatus(b, 'cancelled');
    expect(cancelled.last_error).toBe(`predecessor ${a} failed`);

    const refused = await retry(b);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('invalid_transition');
    expect(await w.task(b)).toEqual(cancelled);
    expect(await w.poll([`${type}.after`], 1, 0)).toEqual([]);
  });

  it('refuses a cron schedule', async () => {
    const cron = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: `retry.cron.${backend}`,
      schedule: { type: 'cron', cron_expression: '0 0 1 1 *' },
    });
    await api(c.url, 'POST', `/api/tasks/${cron.body.task_id}/pause`);
    const refused = await retry(cron.body.task_id);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toMatch(/cron schedule/);
  });
});
