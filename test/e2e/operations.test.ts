import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import {
  bearer,
  ended,
  failedTasks,
  failPolled,
  startOperation,
  type OperationBody,
  type Polled,
} from '../support/operations.js';
import { eventually } from '../support/waits.js';

/**
 * `POST /api/operations` through a real node, on each backend: each action's effect and
 * counts, each filter field narrowing what is matched, the 4xx answers, the scopes, the list,
 * and cancelling an operation. Pages are a few tasks each (`operationPageTasks`), so every
 * operation here runs in many pages.
 */
const ADMIN = 'an-admin-key-for-the-operations-tests';
const admin = bearer(ADMIN);

interface TaskBody {
  task_id: string;
  status: string;
  attempts: number;
  cancel_requested: boolean;
}
interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

describe.each(BACKENDS)('operations on many tasks, on %s', (backend) => {
  let c: TestCluster;
  /** What the safety nets caught: nothing, while operations hand tasks on as the single routes do. */
  const recovered: unknown[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, {
      logLevel: process.env.TEST_LOG ?? 'silent',
      adminToken: ADMIN,
      operationPageTasks: 7,
    });
    c.node.events.on('safety-net:recovered', (e) => recovered.push(e));
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const url = (): string => c.url;
  const task = async (id: string): Promise<TaskBody> =>
    (await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`, undefined, admin)).body;
  const run = async (body: unknown): Promise<OperationBody> =>
    ended(url, (await startOperation(c.url, body, admin)).operation_id, admin);
  const submit = async (tasks: unknown[]): Promise<string[]> => {
    const r = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', { tasks }, admin);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.tasks.map((t) => t.task_id);
  };
  const later = (seconds: number) => ({ type: 'delayed', delay_seconds: seconds });

  it('retries the failed tasks whose error matches: each runs again as attempt 2, the others stay failed', async () => {
    const type = `ops.retry.${backend}`;
    const timeouts = await failedTasks(c.url, type, 30, 'SMTP timeout after 30 s', admin);
    const refused = await failedTasks(c.url, type, 12, 'mailbox unknown', admin);
    const op = await run({ action: 'retry', filter: { status: 'failed', task_type: type, error_contains: 'timeout' } });
    expect(op).toMatchObject({ action: 'retry', state: 'done', matched: 30, done: 30, failed: 0 });
    expect(op.filter).toEqual({ status: 'failed', task_type: type, error_contains: 'timeout' });
    expect(op.finished_at).not.toBeNull();
    for (const id of refused) expect((await task(id)).status).toBe('failed');
    // Each retried task reaches a worker (through its wheel partition and ready queue) as
    // attempt 2, at once: not after the pending safety net's grace (10 s) found it left behind.
    const again = await failPolled(c.url, type, 30, 'again', admin, 5_000);
    expect(recovered).toEqual([]);
    expect(again.map((t) => t.task_id).sort()).toEqual([...timeouts].sort());
    expect(new Set(again.map((t) => t.attempt))).toEqual(new Set([2]));
  });

  it('error_equals matches the first 1 000 characters of the error exactly, as the failed view groups it', async () => {
    const type = `ops.equals.${backend}`;
    const long = 'x'.repeat(1000);
    const exact = await failedTasks(c.url, type, 2, 'SMTP timeout', admin);
    const longer = await failedTasks(c.url, type, 1, 'SMTP timeout after 30 s', admin);
    const shouting = await failedTasks(c.url, type, 1, 'SMTP TIMEOUT', admin);
    const past1000 = await failedTasks(c.url, type, 2, `${long}, then more`, admin);
    const retry = (errorEquals: string) =>
      run({ action: 'retry', filter: { status: 'failed', task_type: type, error_equals: errorEquals } });
    const first = await retry('SMTP timeout');
    expect(first).toMatchObject({ state: 'done', matched: 2, done: 2 });
    expect(first.filter).toEqual({ status: 'failed', task_type: type, error_equals: 'SMTP timeout' });
    for (const id of exact) expect((await task(id)).status).not.toBe('failed');
    for (const id of [...longer, ...shouting, ...past1000]) expect((await task(id)).status).toBe('failed');
    // Errors alike in their first 1 000 characters are one group.
    expect(await retry(long)).toMatchObject({ state: 'done', matched: 2, done: 2 });
    for (const id of [...longer, ...shouting]) expect((await task(id)).status).toBe('failed');
    // '' is the tasks without an error: here the cancelled one, not the failed ones left.
    const [cancelled] = await submit([{ task_type: type, schedule: later(3600) }]);
    expect((await api(c.url, 'DELETE', `/api/tasks/${cancelled}`, undefined, admin)).status).toBe(200);
    const none = await run({ action: 'retry', filter: { task_type: type, error_equals: '' } });
    expect(none).toMatchObject({ state: 'done', matched: 1, done: 1 });
    expect(['pending', 'ready']).toContain((await task(cancelled!)).status);
    for (const id of [...longer, ...shouting]) expect((await task(id)).status).toBe('failed');
  });

  it('cancels pending, blocked and running tasks as DELETE does; the dependents of a cancelled task are cancelled', async () => {
    const type = `ops.cancel.${backend}`;
    const other = `ops.cancel.other.${backend}`;
    const pending = await submit(Array.from({ length: 9 }, () => ({ task_type: type, schedule: later(3600) })));
    const untouched = await submit([{ task_type: other, schedule: later(3600) }]);
    const [running] = await submit([{ task_type: type }]);
    const polled = await api<Polled>(
      c.url,
      'POST',
      '/api/workers/poll',
      { worker_id: 'w-cancel', task_types: [type], max_tasks: 1, wait_ms: 5000 },
      admin,
    );
    expect(polled.body.tasks.map((t) => t.task_id)).toEqual([running]);
    const graph = await api<{ tasks: { ref: string; task_id: string }[] }>(
      c.url,
      'POST',
      '/api/dags',
      {
        tasks: [
          { ref: 'a', task_type: type, schedule: later(3600) },
          { ref: 'b', task_type: `${type}.after`, depends_on: ['a'] },
        ],
      },
      admin,
    );
    expect(graph.status).toBe(201);
    const a = graph.body.tasks.find((t) => t.ref === 'a')!.task_id;
    const b = graph.body.tasks.find((t) => t.ref === 'b')!.task_id;

    const op = await run({ action: 'cancel', filter: { task_type: type } });
    // 9 pending, the running one, and the graph's first task.
    expect(op).toMatchObject({ state: 'done', matched: 11, done: 11, failed: 0 });
    for (const id of pending) expect((await task(id)).status).toBe('cancelled');
    expect(await task(running!)).toMatchObject({ status: 'running', cancel_requested: true });
    expect((await task(a)).status).toBe('cancelled');
    await eventually(async () => ((await task(b)).status === 'cancelled' ? true : undefined), 10_000, 'b cancelled');
    expect((await task(untouched[0]!)).status).toBe('pending');
  });

  it('deletes finished tasks with their history, and only with the admin scope', async () => {
    const type = `ops.delete.${backend}`;
    const ids = await failedTasks(c.url, type, 10, 'gone', admin);
    const [live] = await submit([{ task_type: type, schedule: later(3600) }]);
    const made = await api<{ token: string }>(
      c.url,
      'POST',
      '/admin/tokens',
      { name: 'producer', scopes: ['submit', 'read'] },
      admin,
    );
    const producer = bearer(made.body.token);
    const refused = await api<ErrorBody>(
      c.url,
      'POST',
      '/api/operations',
      { action: 'delete', filter: { task_type: type } },
      producer,
    );
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('forbidden');
    const reader = bearer(
      (await api<{ token: string }>(c.url, 'POST', '/admin/tokens', { name: 'reader', scopes: ['read'] }, admin)).body
        .token,
    );
    const readOnly = await api(
      c.url,
      'POST',
      '/api/operations',
      { action: 'retry', filter: { task_type: type } },
      reader,
    );
    expect(readOnly.status).toBe(403);
    expect((await api(c.url, 'POST', '/api/operations', {}, bearer('no-such-key'))).status).toBe(401);
    // The submit scope may retry and cancel (here: a retry that finds nothing of another type).
    const allowed = await api<OperationBody>(
      c.url,
      'POST',
      '/api/operations',
      { action: 'retry', filter: { task_type: `${type}.none` } },
      producer,
    );
    expect(allowed.status).toBe(202);

    const op = await run({ action: 'delete', filter: { task_type: type } });
    expect(op).toMatchObject({ state: 'done', matched: 10, done: 10, failed: 0 });
    for (const id of ids) expect((await api(c.url, 'GET', `/api/tasks/${id}`, undefined, admin)).status).toBe(404);
    const left = await c.sql<{ n: number }>(
      'SELECT count(*)::int AS n FROM executions WHERE task_id = ANY($1::uuid[])',
      [ids],
    );
    expect(left[0]!.n).toBe(0);
    expect((await task(live!)).status).toBe('pending');
  });

  it('narrows by each filter field', async () => {
    const type = `ops.filter.${backend}`;
    const limit = `ops-customer-${backend}`;
    expect((await api(c.url, 'PUT', `/api/limits/${limit}`, { concurrency: 5 }, admin)).status).toBe(200);
    const early = await submit([
      { task_type: type, schedule: later(600) },
      { task_type: type, schedule: later(7200) },
    ]);
    // Real time is the subject: the two groups are created 40 ms apart, `between` in the middle.
    const t0 = Date.now();
    await eventually(() => (Date.now() > t0 + 20 ? true : undefined));
    const between = new Date(Date.now()).toISOString();
    await eventually(() => (Date.now() > Date.parse(between) + 20 ? true : undefined));
    const late = await submit([
      { task_type: type, schedule: later(600), limits: [limit] },
      { task_type: type, schedule: later(7200) },
      { task_type: `${type}.x`, schedule: later(600) },
    ]);
    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    // Each probe cancels what its filter matches: later probes see the earlier ones' tasks cancelled.
    const probe = async (filter: Record<string, unknown>): Promise<string[]> => {
      const before = await Promise.all([...early, ...late].map(task));
      const op = await run({ action: 'cancel', filter });
      const after = await Promise.all([...early, ...late].map(task));
      const changed = after.filter((t, i) => t.status === 'cancelled' && before[i]!.status !== 'cancelled');
      expect(op.done).toBe(changed.length);
      return changed.map((t) => t.task_id);
    };
    expect(await probe({ task_type: type, limit })).toEqual([late[0]]);
    expect(await probe({ task_type: type, created_before: between, due_after: inAnHour })).toEqual([early[1]]);
    expect((await probe({ task_type: type, created_after: between })).sort()).toEqual([late[1]].sort());
    expect(await probe({ task_type: `${type}.x`, status: 'running' })).toEqual([]);
    expect(await probe({ task_type: `${type}.x`, status: 'pending' })).toEqual([late[2]]);
    expect(await probe({ task_type: type, due_before: inAnHour })).toEqual([early[0]]);
  });

  it('answers 400 for a filter it cannot run, naming the field, and 404 for an unknown operation', async () => {
    const post = (body: unknown) => api<ErrorBody>(c.url, 'POST', '/api/operations', body, admin);
    const cases: [unknown, string][] = [
      [{ action: 'retry', filter: {} }, 'filter'],
      [{ action: 'retry', filter: { status: null } }, 'filter'],
      [{ action: 'retry' }, 'filter'],
      [{ action: 'explode', filter: { status: 'failed' } }, 'action'],
      [{ action: 'retry', filter: { status: 'pending' } }, 'filter.status'],
      [{ action: 'cancel', filter: { status: 'succeeded' } }, 'filter.status'],
      [{ action: 'delete', filter: { status: 'running' } }, 'filter.status'],
      [{ action: 'retry', filter: { parent_id: 'not-a-task-id' } }, 'filter.parent_id'],
      [{ action: 'retry', filter: { created_after: 'yesterday' } }, 'filter.created_after'],
      [{ action: 'retry', filter: { due_before: '2026-02-30' } }, 'filter.due_before'],
      [{ action: 'retry', filter: { colour: 'red' } }, 'filter.colour'],
      [{ action: 'retry', filter: { task_type: 'has space' } }, 'filter.task_type'],
      [{ action: 'retry', filter: { error_equals: 'x'.repeat(1001) } }, 'filter.error_equals'],
      [{ action: 'retry', filter: { error_equals: 7 } }, 'filter.error_equals'],
    ];
    for (const [body, field] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('validation_failed');
      expect(r.body.error.details.field, JSON.stringify(r.body)).toBe(field);
    }
    const unknown = '0192f3a4-5b6c-7d8e-9f00-112233445566';
    expect((await api<ErrorBody>(c.url, 'GET', `/api/operations/${unknown}`, undefined, admin)).status).toBe(404);
    expect((await api<ErrorBody>(c.url, 'DELETE', `/api/operations/${unknown}`, undefined, admin)).status).toBe(404);
    expect((await api<ErrorBody>(c.url, 'GET', '/api/operations/not-a-uuid', undefined, admin)).status).toBe(400);
  });

  it('cancels an operation: it stops, having done only what it counted, and a finished one is a 409', async () => {
    const type = `ops.stop.${backend}`;
    const ids = await submit(Array.from({ length: 700 }, () => ({ task_type: type, schedule: later(3600) })));
    const started = await startOperation(c.url, { action: 'cancel', filter: { task_type: type } }, admin);
    const stopped = await api<OperationBody>(
      c.url,
      'DELETE',
      `/api/operations/${started.operation_id}`,
      undefined,
      admin,
    );
    expect(stopped.status).toBe(200);
    expect(stopped.body.state).toBe('cancelled');
    const final = await ended(url, started.operation_id, admin);
    expect(final.state).toBe('cancelled');
    expect(final.done).toBeLessThan(700);
    const rows = await c.sql<{ n: number }>(
      "SELECT count(*)::int AS n FROM tasks WHERE id = ANY($1::uuid[]) AND status = 'cancelled'",
      [ids],
    );
    expect(rows[0]!.n).toBe(final.done);
    const again = await api<ErrorBody>(c.url, 'DELETE', `/api/operations/${started.operation_id}`, undefined, admin);
    expect(again.status).toBe(200);
    const done = await run({ action: 'cancel', filter: { task_type: `${type}.none` } });
    const finished = await api<ErrorBody>(c.url, 'DELETE', `/api/operations/${done.operation_id}`, undefined, admin);
    expect(finished.status).toBe(409);
    expect(finished.body.error.code).toBe('invalid_transition');
  });

  it('does no page twice when two nodes run the same operation at once (around a ring change)', async () => {
    const type = `ops.twice.${backend}`;
    await failedTasks(c.url, type, 200, 'down', admin);
    const op = await startOperation(c.url, { action: 'retry', filter: { task_type: type } }, admin);
    // A second owner: the store's pages, run by the test as fast as it can, beside the node's runner.
    const second = (async () => {
      for (;;) {
        const page = await c.node.backend.operations.runPage(op.operation_id, 7, Date.now());
        if (page.kind === 'stopped' || page.operation.state !== 'running') return;
      }
    })();
    const final = await ended(url, op.operation_id, admin);
    await second;
    expect(final).toMatchObject({ state: 'done', matched: 200, done: 200, failed: 0 });
  });

  it('lists operations newest first, in pages', async () => {
    const first = await run({ action: 'retry', filter: { task_type: 'ops.list.a' } });
    const second = await run({ action: 'retry', filter: { task_type: 'ops.list.b' } });
    const page1 = await api<{ operations: OperationBody[]; next_token: string | null }>(
      c.url,
      'GET',
      '/api/operations?limit=1',
      undefined,
      admin,
    );
    expect(page1.body.operations.map((o) => o.operation_id)).toEqual([second.operation_id]);
    expect(page1.body.next_token).not.toBeNull();
    const page2 = await api<{ operations: OperationBody[] }>(
      c.url,
      'GET',
      `/api/operations?limit=1&next_token=${page1.body.next_token}`,
      undefined,
      admin,
    );
    expect(page2.body.operations.map((o) => o.operation_id)).toEqual([first.operation_id]);
  });
});
