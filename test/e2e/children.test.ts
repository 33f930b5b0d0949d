import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { ended, startOperation, type OperationBody, type Polled } from '../support/operations.js';
import { uniqueType } from '../support/tasks.js';

/**
 * Children of a running task (docs/api.md, "Children of a running task") through the HTTP
 * routes of a real node, on each backend: spawned by the parent's worker with its lease token,
 * paged back, idempotent by `child_key`, all or none per request, refused without the lease,
 * run like any task, and an operation filtered by `parent_id`.
 */

interface Spawned {
  task_id: string;
  status: string;
  due_time: string | null;
  child_key: string | null;
}
interface ChildJson {
  task_id: string;
  child_key: string | null;
  status: string;
  result: unknown;
  last_error: string | null;
}
interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

describe.each(BACKENDS)('children of a running task, on %s', (backend) => {
  let c: TestCluster;
  /** What the safety nets caught: nothing, while children are placed on the wheel as submitted tasks are. */
  const recovered: unknown[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent', operationPageTasks: 50 });
    c.node.events.on('safety-net:recovered', (e) => recovered.push(e));
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  /** A running parent: submitted and polled, with its lease token. */
  const runningParent = async (): Promise<{ id: string; token: string; type: string }> => {
    const type = uniqueType('parent');
    const submitted = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type });
    expect(submitted.status).toBe(201);
    const polled = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-parent',
      task_types: [type],
      max_tasks: 1,
      wait_ms: 5_000,
    });
    const task = polled.body.tasks[0];
    expect(task?.task_id).toBe(submitted.body.task_id);
    return { id: task!.task_id, token: task!.lease_token, type };
  };
  const spawn = (parentId: string, body: unknown) =>
    api<{ tasks: Spawned[] } & Partial<ErrorBody>>(c.url, 'POST', `/api/tasks/${parentId}/children`, body);
  const children = async (parentId: string, query = ''): Promise<ChildJson[]> => {
    const all: ChildJson[] = [];
    let token: string | null = null;
    do {
      const q: string = `?limit=1000${query}${token === null ? '' : `&next_token=${token}`}`;
      const page: { status: number; body: { children: ChildJson[]; next_token: string | null } } = await api<{
        children: ChildJson[];
        next_token: string | null;
      }>(c.url, 'GET', `/api/tasks/${parentId}/children${q}`);
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      all.push(...page.body.children);
      token = page.body.next_token;
    } while (token !== null);
    return all;
  };
  const childType = uniqueType('child');
  const many = (n: number, from: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: n }, (_, i) => ({ task_type: childType, child_key: `page-${from + i}`, ...extra }));

  it('spawns 2 500 children in three requests and lists them all, paged, in the order spawned', async () => {
    const parent = await runningParent();
    const sizes = [1000, 1000, 500];
    const ids: string[] = [];
    let from = 0;
    for (const n of sizes) {
      const r = await spawn(parent.id, {
        lease_token: parent.token,
        tasks: many(n, from, { schedule: { type: 'delayed', delay_seconds: 3600 } }),
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect(r.body.tasks).toHaveLength(n);
      expect(r.body.tasks[0]).toMatchObject({ status: 'pending', child_key: `page-${from}` });
      ids.push(...r.body.tasks.map((t) => t.task_id));
      from += n;
    }
    const listed = await children(parent.id);
    expect(listed.map((l) => l.task_id)).toEqual(ids);
    expect(listed[2499]).toEqual({
      task_id: ids[2499],
      child_key: 'page-2499',
      status: 'pending',
      result: null,
      last_error: null,
    });
    // Small pages walk the same children.
    const first = await api<{ children: ChildJson[]; next_token: string }>(
      c.url,
      'GET',
      `/api/tasks/${parent.id}/children?limit=2`,
    );
    expect(first.body.children.map((l) => l.task_id)).toEqual(ids.slice(0, 2));
    const second = await api<{ children: ChildJson[] }>(
      c.url,
      'GET',
      `/api/tasks/${parent.id}/children?limit=2&next_token=${first.body.next_token}`,
    );
    expect(second.body.children.map((l) => l.task_id)).toEqual(ids.slice(2, 4));
    // A child's body names its parent and key; the parent's names none.
    const child = await api<{ parent_id: string | null; child_key: string | null }>(
      c.url,
      'GET',
      `/api/tasks/${ids[17]}`,
    );
    expect(child.body).toMatchObject({ parent_id: parent.id, child_key: 'page-17' });
    const own = await api<{ parent_id: string | null; child_key: string | null }>(
      c.url,
      'GET',
      `/api/tasks/${parent.id}`,
    );
    expect(own.body).toMatchObject({ parent_id: null, child_key: null });
  });

  it('answers the same child for the same child_key, and a new one for a child without a key', async () => {
    const parent = await runningParent();
    const body = {
      lease_token: parent.token,
      tasks: [{ task_type: childType, child_key: 'page-17' }, { task_type: childType }],
    };
    const first = await spawn(parent.id, body);
    expect(first.status).toBe(201);
    const again = await spawn(parent.id, {
      ...body,
      tasks: [...body.tasks, { task_type: childType, child_key: 'page-17', priority: 1 }],
    });
    expect(again.status).toBe(201);
    expect(again.body.tasks[0]!.task_id).toBe(first.body.tasks[0]!.task_id);
    expect(again.body.tasks[2]!.task_id).toBe(first.body.tasks[0]!.task_id);
    expect(again.body.tasks[1]!.task_id).not.toBe(first.body.tasks[1]!.task_id);
    expect((await children(parent.id)).map((l) => l.child_key)).toEqual(['page-17', null, null]);
  });

  it('inserts none of a request with one bad child, and says which', async () => {
    const parent = await runningParent();
    const tasks = many(10, 0);
    tasks[7] = { ...tasks[7]!, schedule: { type: 'cron', cron_expression: '* * * * *' } } as (typeof tasks)[number];
    const r = await spawn(parent.id, { lease_token: parent.token, tasks });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'validation_failed', details: { field: 'tasks[7].schedule.type' } });
    const badPriority = many(10, 0);
    badPriority[3] = { ...badPriority[3]!, priority: 42 } as (typeof badPriority)[number];
    const r2 = await spawn(parent.id, { lease_token: parent.token, tasks: badPriority });
    expect(r2.status).toBe(400);
    expect(r2.body.error?.details.field).toBe('tasks[3].priority');
    expect(await children(parent.id)).toEqual([]);
  });

  it('refuses a token that is not the lease: 409 lease_not_held, nothing inserted; an unknown parent is 404', async () => {
    const parent = await runningParent();
    const wrong = await spawn(parent.id, { lease_token: 'lt2.' + '0'.repeat(32), tasks: many(3, 0) });
    expect(wrong.status).toBe(409);
    expect(wrong.body.error?.code).toBe('lease_not_held');
    const garbage = await spawn(parent.id, { lease_token: 'nonsense', tasks: many(3, 0) });
    expect(garbage.status).toBe(409);
    // The attempt ended: its token is no lease any more.
    const done = await api(c.url, 'POST', `/api/tasks/${parent.id}/complete`, {
      lease_token: parent.token,
      status: 'succeeded',
    });
    expect(done.status).toBe(200);
    const late = await spawn(parent.id, { lease_token: parent.token, tasks: many(3, 0) });
    expect(late.status).toBe(409);
    expect(await children(parent.id)).toEqual([]);
    const unknown = '0192f3a4-5b6c-7d8e-9f00-112233445566';
    expect((await spawn(unknown, { lease_token: parent.token, tasks: many(1, 0) })).status).toBe(404);
    expect((await api(c.url, 'GET', `/api/tasks/${unknown}/children`)).status).toBe(404);
  });

  it('refuses more than 1 000 children in one request, and none at all', async () => {
    const parent = await runningParent();
    const over = await spawn(parent.id, { lease_token: parent.token, tasks: many(1001, 0) });
    expect(over.status).toBe(400);
    expect(over.body.error?.details.field).toBe('tasks');
    expect((await spawn(parent.id, { lease_token: parent.token, tasks: [] })).status).toBe(400);
    expect(await children(parent.id)).toEqual([]);
  });

  it('runs the children: a worker claims and completes them, and the listing shows their results', async () => {
    const parent = await runningParent();
    const type = uniqueType('runs');
    const r = await spawn(parent.id, {
      lease_token: parent.token,
      tasks: [0, 1, 2].map((i) => ({ task_type: type, child_key: `k${i}`, payload: { i }, max_retries: 0 })),
    });
    expect(r.status).toBe(201);
    const ran: string[] = [];
    // At once, through the wheel and the ready queue: not after the pending safety net's grace (10 s).
    const deadline = Date.now() + 5_000;
    while (ran.length < 3 && Date.now() < deadline) {
      const polled = await api<Polled & { tasks: { payload: { i: number } }[] }>(c.url, 'POST', '/api/workers/poll', {
        worker_id: 'w-children',
        task_types: [type],
        max_tasks: 3,
        wait_ms: 1_000,
      });
      for (const t of polled.body.tasks) {
        const ok = t.payload.i !== 2;
        const done = await api(c.url, 'POST', `/api/tasks/${t.task_id}/complete`, {
          lease_token: t.lease_token,
          status: ok ? 'succeeded' : 'failed',
          ...(ok ? { result: { doubled: t.payload.i * 2 } } : { error: 'page gone' }),
        });
        expect(done.status).toBe(200);
        ran.push(t.task_id);
      }
    }
    expect(ran.sort()).toEqual(r.body.tasks.map((t) => t.task_id).sort());
    expect(recovered).toEqual([]);
    expect(await children(parent.id)).toEqual([
      {
        task_id: r.body.tasks[0]!.task_id,
        child_key: 'k0',
        status: 'succeeded',
        result: { doubled: 0 },
        last_error: null,
      },
      {
        task_id: r.body.tasks[1]!.task_id,
        child_key: 'k1',
        status: 'succeeded',
        result: { doubled: 2 },
        last_error: null,
      },
      { task_id: r.body.tasks[2]!.task_id, child_key: 'k2', status: 'failed', result: null, last_error: 'page gone' },
    ]);
    expect((await children(parent.id, '&status=failed')).map((l) => l.child_key)).toEqual(['k2']);
  });

  it('cancels just the children of one parent with an operation filtered by parent_id', async () => {
    const later = { schedule: { type: 'delayed', delay_seconds: 3600 } };
    const [one, other] = [await runningParent(), await runningParent()];
    const mine = await spawn(one.id, { lease_token: one.token, tasks: many(120, 0, later) });
    const theirs = await spawn(other.id, { lease_token: other.token, tasks: many(30, 0, later) });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    const started = await startOperation(c.url, { action: 'cancel', filter: { parent_id: one.id } });
    const op: OperationBody = await ended(() => c.url, started.operation_id);
    expect(op).toMatchObject({ state: 'done', matched: 120, done: 120, filter: { parent_id: one.id } });
    expect(new Set((await children(one.id)).map((l) => l.status))).toEqual(new Set(['cancelled']));
    expect(new Set((await children(other.id)).map((l) => l.status))).toEqual(new Set(['pending']));
    // The parents themselves are not their own children: both still run.
    for (const p of [one, other]) {
      expect((await api<{ status: string }>(c.url, 'GET', `/api/tasks/${p.id}`)).body.status).toBe('running');
    }
  });
});
