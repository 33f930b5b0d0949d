import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

/**
 * The whole path on each backend, over HTTP: submit → wheel → ready → poll (claim) →
 * heartbeat → complete, with status and history showing every step.
 */
interface Submitted {
  task_id: string;
  status: string;
  due_time: string;
}
interface Polled {
  tasks: {
    task_id: string;
    task_type: string;
    payload: unknown;
    attempt: number;
    lease_token: string;
    lease_expires_at: string;
  }[];
}
interface TaskBody {
  task_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  started_at: string | null;
  completed_at: string | null;
  priority: number;
}

describe.each(BACKENDS)('task flow on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, {
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.2,
      logLevel: process.env.TEST_LOG ?? 'silent',
    });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const submit = (body: unknown) => api<Submitted>(c.url, 'POST', '/api/tasks', body);
  const poll = (types: string[], max = 10, waitMs = 5000) =>
    api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-test',
      task_types: types,
      max_tasks: max,
      wait_ms: waitMs,
    });
  const get = (id: string) => api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`);

  it('runs an immediate task end to end, with status and history', async () => {
    const created = await submit({ task_type: 'flow.immediate', payload: { n: 1 } });
    expect(created.status).toBe(201);
    expect(created.body.status).toBe('pending');
    const id = created.body.task_id;

    const polled = await poll(['flow.immediate']);
    expect(polled.status).toBe(200);
    expect(polled.body.tasks).toHaveLength(1);
    const [task] = polled.body.tasks;
    expect(task).toMatchObject({ task_id: id, task_type: 'flow.immediate', payload: { n: 1 }, attempt: 1 });
    expect((await get(id)).body.status).toBe('running');

    const hb = await api<{ ok: boolean; lease_expires_at: string; cancel_requested: boolean }>(
      c.url,
      'POST',
      `/api/tasks/${id}/heartbeat`,
      { lease_token: task!.lease_token },
    );
    expect(hb.status).toBe(200);
    expect(hb.body).toMatchObject({ ok: true, cancel_requested: false });

    const done = await api(c.url, 'POST', `/api/tasks/${id}/complete`, {
      lease_token: task!.lease_token,
      status: 'succeeded',
    });
    expect(done.status).toBe(200);
    const final = await get(id);
    expect(final.body).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(final.body.completed_at).not.toBeNull();

    const history = await api<{ executions: { attempt: number; status: string; worker_id: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions).toEqual([
      expect.objectContaining({ attempt: 1, status: 'succeeded', worker_id: 'w-test' }),
    ]);
  });

  it('does not hand out a delayed task before its due time, then does', async () => {
    const dueMs = Date.now() + 1500;
    const created = await submit({
      task_type: 'flow.delayed',
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
    });
    expect(created.body.status).toBe('pending');
    const early = await poll(['flow.delayed'], 1, 300);
    expect(early.body.tasks).toHaveLength(0);
    const later = await poll(['flow.delayed'], 1, 5000);
    expect(Date.now()).toBeGreaterThanOrEqual(dueMs);
    expect(later.body.tasks.map((t) => t.task_id)).toEqual([created.body.task_id]);
    await api(c.url, 'POST', `/api/tasks/${created.body.task_id}/complete`, {
      lease_token: later.body.tasks[0]!.lease_token,
      status: 'succeeded',
    });
  });

  it('re-delivers a task whose lease expired, and refuses the stale lease with 409', async () => {
    const { body } = await submit({ task_type: 'flow.expiry', timeout_seconds: 1, max_retries: 2 });
    const first = await poll(['flow.expiry'], 1);
    const stale = first.body.tasks[0]!;
    // No heartbeat: the lease runs out and the task comes back as attempt 2.
    const second = await poll(['flow.expiry'], 1, 10_000);
    expect(second.body.tasks).toHaveLength(1);
    expect(second.body.tasks[0]).toMatchObject({ task_id: body.task_id, attempt: 2 });

    const late = await api<{ error: { code: string } }>(c.url, 'POST', `/api/tasks/${body.task_id}/complete`, {
      lease_token: stale.lease_token,
      status: 'succeeded',
    });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('lease_not_held');
    const staleBeat = await api(c.url, 'POST', `/api/tasks/${body.task_id}/heartbeat`, {
      lease_token: stale.lease_token,
    });
    expect(staleBeat.status).toBe(409);

    const ok = await api(c.url, 'POST', `/api/tasks/${body.task_id}/complete`, {
      lease_token: second.body.tasks[0]!.lease_token,
      status: 'succeeded',
    });
    expect(ok.status).toBe(200);
    const history = await api<{ executions: { attempt: number; status: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${body.task_id}/history`,
    );
    expect(history.body.executions.map((e) => [e.attempt, e.status])).toEqual([
      [2, 'succeeded'],
      [1, 'timed_out'],
    ]);
  });

  it('retries a failed attempt with backoff, then fails for good when retries are spent', async () => {
    const { body } = await submit({ task_type: 'flow.retry', max_retries: 1 });
    for (const attempt of [1, 2]) {
      const polled = await poll(['flow.retry'], 1, 10_000);
      expect(polled.body.tasks[0]).toMatchObject({ task_id: body.task_id, attempt });
      const r = await api(c.url, 'POST', `/api/tasks/${body.task_id}/complete`, {
        lease_token: polled.body.tasks[0]!.lease_token,
        status: 'failed',
        error: `boom ${attempt}`,
      });
      expect(r.status).toBe(200);
    }
    const final = await get(body.task_id);
    expect(final.body).toMatchObject({ status: 'failed', attempts: 2, last_error: 'boom 2' });
  });

  it('fails for good at once when the worker says the error is not retryable', async () => {
    const { body } = await submit({ task_type: 'flow.fatal', max_retries: 5 });
    const polled = await poll(['flow.fatal'], 1);
    await api(c.url, 'POST', `/api/tasks/${body.task_id}/complete`, {
      lease_token: polled.body.tasks[0]!.lease_token,
      status: 'failed',
      error: 'bad input',
      retryable: false,
    });
    expect((await get(body.task_id)).body).toMatchObject({ status: 'failed', attempts: 1 });
  });

  it('replays an idempotent submission with 200 and refuses a different body with 409', async () => {
    const request = { task_type: 'flow.idem', payload: { order: 42 }, idempotency_key: 'order-42' };
    const first = await submit(request);
    const again = await submit({ payload: { order: 42 }, idempotency_key: 'order-42', task_type: 'flow.idem' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body.task_id).toBe(first.body.task_id);
    const conflict = await submit({ ...request, payload: { order: 43 } });
    expect(conflict.status).toBe(409);
    expect((conflict.body as unknown as { error: { code: string } }).error.code).toBe('idempotency_conflict');
    const rows = await c.sql<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE task_type = 'flow.idem'");
    expect(rows[0]!.n).toBe(1);
  });

  it('cancels a pending task at once and a running one at its next report', async () => {
    const pending = await submit({ task_type: 'flow.cancel', schedule: { type: 'delayed', delay_seconds: 3600 } });
    const del = await api<{ ok: boolean; cancelled_instances: number }>(
      c.url,
      'DELETE',
      `/api/tasks/${pending.body.task_id}`,
    );
    expect(del.body).toEqual({ ok: true, cancelled_instances: 1 });
    expect((await get(pending.body.task_id)).body.status).toBe('cancelled');
    const again = await api<{ error: { code: string } }>(c.url, 'DELETE', `/api/tasks/${pending.body.task_id}`);
    expect(again.status).toBe(409);

    const running = await submit({ task_type: 'flow.cancel.run' });
    const polled = await poll(['flow.cancel.run'], 1);
    const token = polled.body.tasks[0]!.lease_token;
    expect((await api(c.url, 'DELETE', `/api/tasks/${running.body.task_id}`)).status).toBe(200);
    const hb = await api<{ cancel_requested: boolean }>(c.url, 'POST', `/api/tasks/${running.body.task_id}/heartbeat`, {
      lease_token: token,
    });
    expect(hb.body.cancel_requested).toBe(true);
    await api(c.url, 'POST', `/api/tasks/${running.body.task_id}/complete`, {
      lease_token: token,
      status: 'succeeded',
    });
    expect((await get(running.body.task_id)).body.status).toBe('cancelled');
  });

  it('hands out lower priority numbers first among due tasks', async () => {
    const ids: Record<number, string> = {};
    // Submitted with the high numbers first so that arrival order cannot explain the result.
    for (const priority of [9, 5, 0]) ids[priority] = (await submit({ task_type: 'flow.prio', priority })).body.task_id;
    await eventually(async () => ((await get(ids[0]!)).body.status === 'ready' ? true : undefined));
    const order: string[] = [];
    for (let i = 0; i < 3; i++) {
      const polled = await poll(['flow.prio'], 1);
      const t = polled.body.tasks[0]!;
      order.push(t.task_id);
      await api(c.url, 'POST', `/api/tasks/${t.task_id}/complete`, { lease_token: t.lease_token, status: 'succeeded' });
    }
    expect(order).toEqual([ids[0], ids[5], ids[9]]);
  });

  it('lists tasks newest first with filters and pagination', async () => {
    for (let i = 0; i < 3; i++)
      await submit({ task_type: 'flow.list', schedule: { type: 'delayed', delay_seconds: 600 } });
    const page1 = await api<{ tasks: TaskBody[]; next_token: string | null }>(
      c.url,
      'GET',
      '/api/tasks?task_type=flow.list&limit=2',
    );
    expect(page1.body.tasks).toHaveLength(2);
    expect(page1.body.next_token).not.toBeNull();
    const page2 = await api<{ tasks: TaskBody[]; next_token: string | null }>(
      c.url,
      'GET',
      `/api/tasks?task_type=flow.list&limit=2&next_token=${page1.body.next_token}`,
    );
    expect(page2.body.tasks).toHaveLength(1);
    const ids = [...page1.body.tasks, ...page2.body.tasks].map((t) => t.task_id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const pending = await api<{ tasks: TaskBody[] }>(c.url, 'GET', '/api/tasks?task_type=flow.list&status=pending');
    expect(pending.body.tasks).toHaveLength(3);
  });
});

describe.each(BACKENDS)('admission, limits and errors through a real node on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend, {
      readyBacklogLimit: 5,
      maxPayloadBytes: 2048,
      logLevel: process.env.TEST_LOG ?? 'silent',
    });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('answers 429 with Retry-After once the ready backlog passes its limit, and creates nothing', async () => {
    const batch = { tasks: Array.from({ length: 6 }, () => ({ task_type: 'adm.flood' })) };
    expect((await api(c.url, 'POST', '/api/tasks/batch', batch)).status).toBe(201);
    // Admission reads a backlog refreshed in the background: wait until it has seen the six.
    await eventually(async () =>
      (await api(c.url, 'POST', '/api/tasks', { task_type: 'adm.probe' })).status === 429 ? true : undefined,
    );
    const refused = await api<{ error: { code: string } }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: [{ task_type: 'adm.late' }],
    });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('backlog_full');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const late = await c.sql<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE task_type = 'adm.late'");
    expect(late[0]!.n).toBe(0);
    // Draining the backlog opens admission again.
    const drained = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w',
      task_types: ['adm.flood', 'adm.probe'],
      max_tasks: 100,
      wait_ms: 1000,
    });
    expect(drained.body.tasks.length).toBeGreaterThanOrEqual(6);
    await eventually(async () =>
      (await api(c.url, 'POST', '/api/tasks', { task_type: 'adm.after' })).status === 201 ? true : undefined,
    );
  });

  it('maps bad input to the catalogue with nothing written', async () => {
    const cases: [string, string, unknown, number, string][] = [
      ['POST', '/api/tasks', '{"task_type": ', 400, 'malformed_json'],
      ['POST', '/api/tasks', { payload: {} }, 400, 'validation_failed'],
      ['POST', '/api/tasks', { task_type: 'bad type!' }, 400, 'validation_failed'],
      [
        'POST',
        '/api/tasks',
        { task_type: 'e.x', schedule: { type: 'delayed', due_time: 'tomorrow-ish' } },
        400,
        'validation_failed',
      ],
      [
        'POST',
        '/api/tasks',
        { task_type: 'e.x', schedule: { type: 'cron', cron_expression: '61 * * * *' } },
        400,
        'invalid_cron',
      ],
      [
        'POST',
        '/api/tasks',
        { task_type: 'e.x', schedule: { type: 'cron', cron_expression: '* * * * *', timezone: 'Mars/Olympus' } },
        400,
        'unknown_timezone',
      ],
      ['POST', '/api/tasks', { task_type: 'e.x', payload: 'x'.repeat(4096) }, 413, 'payload_too_large'],
      ['POST', '/api/tasks/batch', { tasks: [{ task_type: 'e.ok' }, { task_type: '' }] }, 400, 'validation_failed'],
      ['GET', '/api/tasks/not-a-uuid', undefined, 400, 'validation_failed'],
      ['GET', '/api/tasks/01a22a51-78a4-791b-b49b-95e4238cdce3', undefined, 404, 'task_not_found'],
      ['DELETE', '/api/tasks/01a22a51-78a4-791b-b49b-95e4238cdce3', undefined, 404, 'task_not_found'],
      [
        'POST',
        '/api/tasks/01a22a51-78a4-791b-b49b-95e4238cdce3/complete',
        { lease_token: 'lt1.1', status: 'succeeded' },
        409,
        'lease_not_held',
      ],
      ['GET', '/api/nothing-here', undefined, 404, 'route_not_found'],
    ];
    for (const [method, path, body, status, code] of cases) {
      const r = await api<{ error: { code: string; message: string; details: unknown } }>(c.url, method, path, body);
      expect({ path, body, status: r.status, code: r.body.error?.code }).toEqual({ path, body, status, code });
      expect(typeof r.body.error.message).toBe('string');
      expect(r.body.error.details).toBeTypeOf('object');
    }
    const written = await c.sql<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE task_type LIKE 'e.%'");
    expect(written[0]!.n).toBe(0);
  });
});

describe('admin routes on a real node', () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode('postgres');
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('shows the wheel partitions, one actor with its state, and the ready queues', async () => {
    await api(c.url, 'POST', '/api/tasks', { task_type: 'adm.view', priority: 2 });
    const actors = await api<{ actors: { kind: string; key: string }[] }>(
      c.url,
      'GET',
      '/admin/actors?kind=wheel&limit=100',
    );
    expect(actors.body.actors.map((a) => a.key).sort((a, b) => Number(a) - Number(b))).toEqual([
      '0',
      '1',
      '2',
      '3',
      '4',
      '5',
      '6',
      '7',
    ]);
    const one = await api<{ kind: string; epoch: number; state: { partition: number } }>(
      c.url,
      'GET',
      '/admin/actors/wheel/3',
    );
    expect(one.body).toMatchObject({ kind: 'wheel', state: { partition: 3 } });
    expect(one.body.epoch).toBeGreaterThanOrEqual(1);
    expect((await api(c.url, 'GET', '/admin/actors/wheel/999')).status).toBe(404);
    const queues = await eventually(async () => {
      const q = await api<{ queues: { task_type: string; priority: number; depth: number }[] }>(
        c.url,
        'GET',
        '/admin/queues',
      );
      return q.body.queues.find((x) => x.task_type === 'adm.view' && x.depth === 1);
    });
    expect(queues.priority).toBe(2);
    const cluster = await api<{ partitions: { partition: number; owner: string }[] }>(c.url, 'GET', '/admin/cluster');
    expect(cluster.body.partitions).toHaveLength(8);
    expect(new Set(cluster.body.partitions.map((p) => p.owner))).toEqual(new Set([c.node.options.nodeId]));
  });
});
