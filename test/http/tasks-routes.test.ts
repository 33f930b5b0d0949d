/**
 * UNIT tests of the task routes' HTTP mapping, against a fake SchedulerApi that records its
 * calls (test/http/fake-api.ts). They check status codes, error bodies and response shapes;
 * the real scheduler behind these routes is tested end to end elsewhere.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import type { TaskSpec } from '../../src/domain/specs.js';
import { FakeApi, KNOWN_ID, NOW_MS, record, serverWith } from './fake-api.js';

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let app: FastifyInstance;
let api: FakeApi;

beforeEach(() => {
  ({ app, api } = serverWith());
});
afterEach(async () => {
  await app.close();
});

/** Replaces the server with one built from other options. */
async function rebuild(options: Parameters<typeof serverWith>[0]): Promise<void> {
  await app.close();
  ({ app, api } = serverWith(options));
}

function post(url: string, payload: unknown) {
  return app.inject({ method: 'POST', url, payload: payload as object });
}

function expectError(res: { statusCode: number; json(): unknown }, status: number, code: string, field?: string) {
  expect(res.statusCode).toBe(status);
  const body = res.json() as { error: { code: string; message: string; details: Record<string, unknown> } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  expect(typeof body.error.details).toBe('object');
  if (field !== undefined) {
    expect(body.error.details.field).toBe(field);
    expect(body.error.message.startsWith(`${field}: `)).toBe(true);
  }
  return body.error;
}

describe('POST /api/tasks', () => {
  it('answers 201 with the stored status and an ISO due time', async () => {
    const res = await post('/api/tasks', { task_type: 'email.send', payload: { to: 'a@example.com' } });
    expect(res.statusCode).toBe(201);
    const body = res.json<{ task_id: string; status: string; due_time: string }>();
    expect(Object.keys(body).sort()).toEqual(['due_time', 'status', 'task_id']);
    expect(body.status).toBe('pending');
    expect(body.due_time).toBe(new Date(NOW_MS).toISOString());
    expect(body.due_time).toMatch(ISO_MS);
    const [specs] = api.callsOf('submit')[0] as [TaskSpec[]];
    expect(specs).toHaveLength(1);
    expect(specs[0]).toMatchObject({ taskType: 'email.send', payload: { to: 'a@example.com' }, timeoutSeconds: 60 });
  });

  it('answers 200 for an idempotent replay (created: false)', async () => {
    const first = await post('/api/tasks', { task_type: 't', idempotency_key: 'order-42' });
    const replay = await post('/api/tasks', { task_type: 't', idempotency_key: 'replay-order-42' });
    expect(first.statusCode).toBe(201);
    expect(replay.statusCode).toBe(200);
    expect(replay.json()).toMatchObject({ status: 'pending' });
  });

  it('shows blocked for a task with dependencies and active for cron', async () => {
    const blocked = await post('/api/tasks', { task_type: 't', dependencies: [KNOWN_ID] });
    expect(blocked.json<{ status: string }>().status).toBe('blocked');
    const cron = await post('/api/tasks', { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *' } });
    expect(cron.json<{ status: string }>().status).toBe('active');
  });

  it('passes the configured default timeout', async () => {
    await rebuild({ defaultTimeoutSeconds: 42 });
    await post('/api/tasks', { task_type: 't' });
    const [specs] = api.callsOf('submit')[0] as [TaskSpec[]];
    expect(specs[0]?.timeoutSeconds).toBe(42);
  });

  it.each([
    [{ payload: {} }, 'task_type'],
    [{ task_type: 'bad type!' }, 'task_type'],
    [{ task_type: 't', priority: 11 }, 'priority'],
    [{ task_type: 't', max_retries: 1000 }, 'max_retries'],
    [{ task_type: 't', timeout_seconds: 0 }, 'timeout_seconds'],
    [{ task_type: 't', idempotency_key: '' }, 'idempotency_key'],
    [{ task_type: 't', dependencies: ['not-a-uuid'] }, 'dependencies[0]'],
    [{ task_type: 't', surprise: true }, 'surprise'],
    [{ task_type: 't', schedule: { type: 'later' } }, 'schedule.type'],
    [{ task_type: 't', schedule: { type: 'delayed' } }, 'schedule'],
    [{ task_type: 't', schedule: { type: 'delayed', delay_seconds: 1, due_time: '2030-01-01T00:00:00Z' } }, 'schedule'],
    [{ task_type: 't', schedule: { type: 'delayed', delay_seconds: -5 } }, 'schedule.delay_seconds'],
    [{ task_type: 't', schedule: { type: 'delayed', due_time: 'next tuesday' } }, 'schedule.due_time'],
    [
      { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *', jitter_seconds: -1 } },
      'schedule.jitter_seconds',
    ],
    [
      { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *', misfire_policy: 'x' } },
      'schedule.misfire_policy',
    ],
    [
      { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *', overlap_policy: 'x' } },
      'schedule.overlap_policy',
    ],
    [
      { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *', end_time: 'soon' } },
      'schedule.end_time',
    ],
    [
      { task_type: 't', schedule: { type: 'cron', cron_expression: '0 0 * * *' }, dependencies: [KNOWN_ID] },
      'dependencies',
    ],
  ])('400 validation_failed for %j', async (body, field) => {
    expectError(await post('/api/tasks', body), 400, 'validation_failed', field);
    expect(api.callsOf('submit')).toHaveLength(0);
  });

  it('400 invalid_cron for a bad cron expression', async () => {
    const res = await post('/api/tasks', { task_type: 't', schedule: { type: 'cron', cron_expression: '61 * * * *' } });
    expectError(res, 400, 'invalid_cron', 'schedule.cron_expression');
  });

  it('400 unknown_timezone for an unknown time zone', async () => {
    const res = await post('/api/tasks', {
      task_type: 't',
      schedule: { type: 'cron', cron_expression: '0 0 * * *', timezone: 'Atlantis/Capital' },
    });
    expectError(res, 400, 'unknown_timezone', 'schedule.timezone');
  });

  it('400 when the body is not an object, or missing', async () => {
    expectError(await post('/api/tasks', [1, 2]), 400, 'validation_failed', 'body');
    expectError(await app.inject({ method: 'POST', url: '/api/tasks' }), 400, 'validation_failed', 'body');
  });

  it.each([
    ['unknown_dependency', 400],
    ['dependency_cycle', 400],
    ['idempotency_conflict', 409],
  ] as const)('maps a %s from the service to %d', async (code, status) => {
    api.override('submit', async () => {
      throw new WheelhouseError(code, undefined, { details: { index: 0 } });
    });
    const error = expectError(await post('/api/tasks', { task_type: 't' }), status, code);
    expect(error.details).toEqual({ index: 0 });
  });
});

describe('POST /api/tasks/batch', () => {
  it('answers 201 with the tasks in request order', async () => {
    const res = await post('/api/tasks/batch', {
      tasks: [
        { task_type: 'a', schedule: { type: 'delayed', delay_seconds: 30 } },
        { task_type: 'b', idempotency_key: 'replay-1' },
      ],
    });
    expect(res.statusCode).toBe(201);
    const body = res.json<{ tasks: { task_id: string; status: string; due_time: string }[] }>();
    expect(Object.keys(body)).toEqual(['tasks']);
    expect(body.tasks).toHaveLength(2);
    for (const t of body.tasks) {
      expect(Object.keys(t).sort()).toEqual(['due_time', 'status', 'task_id']);
      expect(t.due_time).toMatch(ISO_MS);
    }
    expect(body.tasks[0]?.due_time).toBe(new Date(NOW_MS + 30_000).toISOString());
    const [specs] = api.callsOf('submit')[0] as [TaskSpec[]];
    expect(specs.map((s) => s.taskType)).toEqual(['a', 'b']);
  });

  it('rejects the whole batch for one bad task, naming its index, and submits nothing', async () => {
    const tasks = Array.from({ length: 10 }, () => ({ task_type: 'ok' }));
    tasks[7] = { task_type: 'ok', priority: -1 } as { task_type: string };
    const error = expectError(await post('/api/tasks/batch', { tasks }), 400, 'validation_failed', 'tasks[7].priority');
    expect(error.details.index).toBe(7);
    expect(api.callsOf('submit')).toHaveLength(0);
  });

  it('names the index of a bad cron in a batch', async () => {
    const res = await post('/api/tasks/batch', {
      tasks: [{ task_type: 'a' }, { task_type: 'b', schedule: { type: 'cron', cron_expression: '* *' } }],
    });
    expect(expectError(res, 400, 'invalid_cron', 'tasks[1].schedule.cron_expression').details.index).toBe(1);
    expect(api.callsOf('submit')).toHaveLength(0);
  });

  it('refuses more than 1000 tasks', async () => {
    const tasks = Array.from({ length: 1001 }, () => ({ task_type: 'a' }));
    expectError(await post('/api/tasks/batch', { tasks }), 400, 'validation_failed', 'tasks');
  });

  it('takes 1000 tasks whose body is larger than a single task limit', async () => {
    await rebuild({ maxPayloadBytes: 4096 });
    const tasks = Array.from({ length: 1000 }, (_, i) => ({
      task_type: 'bench.noop',
      payload: { i, pad: 'x'.repeat(50) },
    }));
    const res = await post('/api/tasks/batch', { tasks });
    expect(res.statusCode).toBe(201);
    expect(res.json<{ tasks: unknown[] }>().tasks).toHaveLength(1000);
  });

  it('413s a task whose payload is over the limit, with its index', async () => {
    await rebuild({ maxPayloadBytes: 2048 });
    const res = await post('/api/tasks/batch', {
      tasks: [{ task_type: 'a' }, { task_type: 'a', payload: 'x'.repeat(3000) }],
    });
    const error = expectError(res, 413, 'payload_too_large', 'tasks[1].payload');
    expect(error.details).toMatchObject({ index: 1, limit_bytes: 2048 });
  });

  it('429 with Retry-After when the service applies admission control', async () => {
    api.override('submit', async () => {
      throw new WheelhouseError('backlog_full', undefined, { retryAfterSeconds: 5 });
    });
    const res = await post('/api/tasks/batch', { tasks: [{ task_type: 'a' }] });
    expectError(res, 429, 'backlog_full');
    expect(res.headers['retry-after']).toBe('5');
  });
});

describe('GET /api/tasks/:id', () => {
  it('answers the task in API.md shape', async () => {
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(200);
    const body = res.json<Record<string, unknown>>();
    expect(body).toMatchObject({
      task_id: KNOWN_ID,
      task_type: 'email.send',
      status: 'running',
      schedule_type: 'delayed',
      due_time: new Date(NOW_MS - 1000).toISOString(),
      created_at: new Date(NOW_MS - 5000).toISOString(),
      started_at: new Date(NOW_MS - 500).toISOString(),
      completed_at: null,
      attempts: 1,
      max_retries: 3,
      priority: 5,
      last_error: null,
      dependencies: [],
      payload: { to: 'a@example.com' },
    });
    for (const key of Object.keys(body)) expect(key).toMatch(/^[a-z_]+$/);
    expect(body).not.toHaveProperty('cron_expression');
  });

  it('shows the cron fields of a cron task', async () => {
    api.override('getTask', async () => ({
      record: record({
        scheduleType: 'cron',
        status: 'active',
        dueMs: NOW_MS + 3_600_000,
        schedule: {
          definition: {
            cronExpression: '0 * * * *',
            timezone: 'Europe/Paris',
            jitterSeconds: 0,
            misfirePolicy: 'fire_once',
            overlapPolicy: 'allow',
            endMs: null,
          },
          generation: 0,
        },
        lastFiredMs: NOW_MS - 60_000,
      }),
      status: 'active',
      dependencies: [],
    }));
    const body = (await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` })).json<Record<string, unknown>>();
    expect(body).toMatchObject({
      status: 'active',
      cron_expression: '0 * * * *',
      timezone: 'Europe/Paris',
      next_due_time: new Date(NOW_MS + 3_600_000).toISOString(),
      last_fired_at: new Date(NOW_MS - 60_000).toISOString(),
    });
  });

  it('404 task_not_found for an unknown id', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/tasks/0192f3a4-5b6c-7d8e-9f00-000000000000' });
    expectError(res, 404, 'task_not_found');
  });

  it.each(['42', 'not-a-uuid', '%E2%82%AC', 'x'.repeat(300), "'; drop table tasks;--"])(
    '400 for the malformed id %s, never 500',
    async (id) => {
      const res = await app.inject({ method: 'GET', url: `/api/tasks/${encodeURIComponent(id)}` });
      expect([400, 404]).toContain(res.statusCode);
      expect(res.json<{ error: { code: string } }>().error.code).toMatch(
        /^(validation_failed|route_not_found|task_not_found)$/,
      );
      expect(api.callsOf('getTask')).toHaveLength(0);
    },
  );

  it('400 for a badly percent-encoded id', async () => {
    expectError(await app.inject({ method: 'GET', url: '/api/tasks/%zz' }), 400, 'validation_failed');
  });

  it('503 with Retry-After when the store is unreachable', async () => {
    api.override('getTask', async () => {
      throw new WheelhouseError('store_unavailable');
    });
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expectError(res, 503, 'store_unavailable');
    expect(res.headers['retry-after']).toBe('1');
  });
});

describe('GET /api/tasks', () => {
  it('passes the filter and answers tasks with next_token', async () => {
    const res = await app.inject({
      method: 'GET',
      url: '/api/tasks?status=ready&task_type=email.send&limit=10&next_token=abc',
    });
    expect(res.statusCode).toBe(200);
    expect(api.callsOf('listTasks')[0]).toEqual([
      { status: 'ready', taskType: 'email.send', limit: 10, nextToken: 'abc' },
    ]);
    const body = res.json<{ next_token: string; tasks: { task_id: string }[] }>();
    expect(body.next_token).toBe('page-2');
    expect(body.tasks[0]?.task_id).toBe(KNOWN_ID);
  });

  it('defaults limit to 50', async () => {
    await app.inject({ method: 'GET', url: '/api/tasks' });
    expect(api.callsOf('listTasks')[0]).toEqual([{ limit: 50 }]);
  });

  it.each([
    'status=finished',
    'limit=0',
    'limit=5000',
    'limit=abc',
    'task_type=a%20b',
    'order=asc',
    'status=ready&status=running',
  ])('400 for ?%s', async (q) => {
    expectError(await app.inject({ method: 'GET', url: `/api/tasks?${q}` }), 400, 'validation_failed');
  });
});

describe('DELETE /api/tasks/:id', () => {
  it('answers ok and the cancelled instances', async () => {
    const res = await app.inject({ method: 'DELETE', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, cancelled_instances: 1 });
    expect(api.callsOf('cancel')[0]).toEqual([KNOWN_ID]);
  });

  it('accepts a JSON content type with an empty body', async () => {
    const res = await app.inject({
      method: 'DELETE',
      url: `/api/tasks/${KNOWN_ID}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
  });

  it('409 task_finished from the service', async () => {
    api.override('cancel', async () => {
      throw new WheelhouseError('task_finished');
    });
    expectError(await app.inject({ method: 'DELETE', url: `/api/tasks/${KNOWN_ID}` }), 409, 'task_finished');
  });

  it('400 for a malformed id', async () => {
    expectError(await app.inject({ method: 'DELETE', url: '/api/tasks/abc' }), 400, 'validation_failed', 'task_id');
  });
});

describe('GET /api/tasks/:id/history', () => {
  it('answers executions in API.md shape', async () => {
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}/history?limit=5&next_token=t` });
    expect(res.statusCode).toBe(200);
    expect(api.callsOf('history')[0]).toEqual([KNOWN_ID, 5, 't']);
    expect(res.json()).toEqual({
      executions: [
        {
          execution_id: '0192f3a4-5b6c-7d8e-9f00-aaaaaaaaaaaa',
          task_id: KNOWN_ID,
          attempt: 1,
          status: 'succeeded',
          due_time: new Date(NOW_MS - 2000).toISOString(),
          started_at: new Date(NOW_MS - 1500).toISOString(),
          completed_at: new Date(NOW_MS - 1000).toISOString(),
          worker_id: 'w-1',
          error: null,
          result: null,
        },
      ],
      next_token: null,
    });
  });

  it('defaults limit to 20 and checks it', async () => {
    await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}/history` });
    expect(api.callsOf('history')[0]).toEqual([KNOWN_ID, 20, undefined]);
    expectError(
      await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}/history?limit=0` }),
      400,
      'validation_failed',
      'query.limit',
    );
  });
});
