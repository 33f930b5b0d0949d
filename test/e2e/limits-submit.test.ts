import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The `limits` of a submission (API.md "Flow control", "On submit"), on both backends: on
 * POST /api/tasks, the batch route, a graph's tasks and a cron template (whose instances
 * inherit them), stored sorted and each once and shown in the task body; a name neither
 * declared nor covered by a declared family is a 400 `unknown_limit` naming it, and a batch
 * or graph with one is refused whole. The limits are declared through the store, after the
 * node started, as another node would: the node's catalog does not know them yet, so each
 * accepted name also shows that a miss reads the store before refusing.
 */

interface ErrorBody {
  error: { code: string; message: string; details: { field?: string; index?: number; limit?: string } };
}

interface TaskBody {
  task_id: string;
  limits: string[];
}

const SPEC = { concurrency: 5, rate: null, onLimit: 'queue', weight: 1 } as const;

describe.each(BACKENDS)('limits on submit on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestNode(backend);
    // Declared behind the node's back: its catalog (loaded at start) holds neither.
    const now = Date.now();
    await c.node.backend.limits.put('stripe-api', SPEC, now);
    await c.node.backend.limits.put('customer:*', SPEC, now);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const task = async (id: string) => (await api<TaskBody>(c.url, 'GET', `/api/tasks/${id}`)).body;
  const count = async (type: string) =>
    (await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE task_type = $1', [type]))[0]!.n;

  it('stores a task’s limits sorted and each once, and shows them; [] when none', async () => {
    const type = uniqueType('limits');
    const named = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      limits: ['stripe-api', 'customer:42', 'stripe-api'],
    });
    expect(named.status).toBe(201);
    expect((await task(named.body.task_id)).limits).toEqual(['customer:42', 'stripe-api']);
    const rows = await c.sql<{ limits: string[] | null }>('SELECT limits FROM tasks WHERE id = $1', [
      named.body.task_id,
    ]);
    expect(rows[0]!.limits).toEqual(['customer:42', 'stripe-api']);

    const plain = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type, limits: null });
    expect(plain.status).toBe(201);
    expect((await task(plain.body.task_id)).limits).toEqual([]);
  });

  it('refuses a name nobody declared with unknown_limit naming it', async () => {
    const type = uniqueType('limits-unknown');
    const res = await api<ErrorBody>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      limits: ['stripe-api', 'github-api'],
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('unknown_limit');
    expect(res.body.error.message).toContain('"github-api"');
    expect(res.body.error.details).toMatchObject({ field: 'limits', limit: 'github-api' });
    // A key of another family is not covered by `customer:*`.
    const other = await api<ErrorBody>(c.url, 'POST', '/api/tasks', { task_type: type, limits: ['vendor:1'] });
    expect(other.body.error).toMatchObject({ code: 'unknown_limit', details: { limit: 'vendor:1' } });
    expect(await count(type)).toBe(0);
  });

  it.each([
    ['a type’s limit', ['type:email.send'], 'limits[0]', /own type/],
    ['a family', ['customer:*'], 'limits[0]', /is a family/],
    ['a name with a space', ['stripe api'], 'limits[0]', /must match/],
    ['a star inside', ['a*b'], 'limits[0]', /not a limit name/],
    ['nine names', Array.from({ length: 9 }, (_, i) => `customer:${i}`), 'limits', /9|8/],
  ])('refuses %s with validation_failed', async (_what, limits, field, message) => {
    const res = await api<ErrorBody>(c.url, 'POST', '/api/tasks', { task_type: uniqueType('limits-bad'), limits });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.details.field).toBe(field);
    expect(res.body.error.message).toMatch(message);
  });

  it('refuses a whole batch for one task’s unknown limit, naming the task', async () => {
    const type = uniqueType('limits-batch');
    const res = await api<ErrorBody>(c.url, 'POST', '/api/tasks/batch', {
      tasks: [
        { task_type: type, limits: ['stripe-api'] },
        { task_type: type, limits: ['customer:7', 'nope'] },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'unknown_limit',
      details: { field: 'tasks[1].limits', index: 1, limit: 'nope' },
    });
    expect(await count(type)).toBe(0);

    const ok = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: [{ task_type: type, limits: ['customer:7'] }, { task_type: type }],
    });
    expect(ok.status).toBe(201);
    expect((await task(ok.body.tasks[0]!.task_id)).limits).toEqual(['customer:7']);
    expect((await task(ok.body.tasks[1]!.task_id)).limits).toEqual([]);
  });

  it('takes limits on a graph’s tasks, and refuses the whole graph for an unknown one', async () => {
    const type = uniqueType('limits-dag');
    const bad = await api<ErrorBody>(c.url, 'POST', '/api/dags', {
      tasks: [
        { ref: 'a', task_type: type, limits: ['stripe-api'] },
        { ref: 'b', task_type: type, depends_on: ['a'], limits: ['unknown-api'] },
      ],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'unknown_limit', details: { index: 1, limit: 'unknown-api' } });
    expect(await count(type)).toBe(0);

    const ok = await api<{ tasks: { ref: string; task_id: string }[] }>(c.url, 'POST', '/api/dags', {
      tasks: [
        { ref: 'a', task_type: type, limits: ['stripe-api'] },
        { ref: 'b', task_type: type, depends_on: ['a'], limits: ['customer:9', 'stripe-api'] },
      ],
    });
    expect(ok.status).toBe(201);
    expect((await task(ok.body.tasks[0]!.task_id)).limits).toEqual(['stripe-api']);
    expect((await task(ok.body.tasks[1]!.task_id)).limits).toEqual(['customer:9', 'stripe-api']);
  });

  it('gives a cron template’s limits to its instances', async () => {
    const type = uniqueType('limits-cron');
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      limits: ['customer:3'],
      schedule: { type: 'cron', cron_expression: '* * * * * *' },
    });
    expect(res.status).toBe(201);
    expect((await task(res.body.task_id)).limits).toEqual(['customer:3']);
    const instance = await eventually(async () => {
      const rows = await c.sql<{ id: string }>('SELECT id FROM tasks WHERE schedule_id = $1 LIMIT 1', [
        res.body.task_id,
      ]);
      return rows[0]?.id;
    });
    expect((await task(instance)).limits).toEqual(['customer:3']);
    expect((await api(c.url, 'DELETE', `/api/tasks/${res.body.task_id}`)).status).toBe(200);
  });

  it('counts the limits in an idempotent replay: other limits under the same key are a conflict', async () => {
    const body = { task_type: uniqueType('limits-key'), idempotency_key: 'k1', limits: ['stripe-api'] };
    const first = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(first.status).toBe(201);
    const replay = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', body);
    expect(replay.body.task_id).toBe(first.body.task_id);
    const other = await api<ErrorBody>(c.url, 'POST', '/api/tasks', { ...body, limits: ['customer:1'] });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_conflict');
  });
});
