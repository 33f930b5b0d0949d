/**
 * UNIT tests of the bounds on one request's work that the HTTP face enforces, against a fake
 * SchedulerApi (test/http/fake-api.ts): JSON nesting, task types per poll, long-polls held at
 * once, bytes of a poll answer, dependencies per task, and text Postgres cannot store. Each
 * is a 4xx of the catalogue (or a shorter answer), and the service is not called.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { clusterRoutes } from '../../src/http/cluster-routes.js';
import { nestsDeeperThan } from '../../src/http/json-body.js';
import { CANONICAL_MAX_DEPTH, canonicalJson } from '../../src/http/validation/fields.js';
import { isWheelhouseError } from '../../src/lib/errors.js';
import type { Assignment, CompletionRequest, PollRequest } from '../../src/services/types.js';
import { FakeApi, KNOWN_ID, NOW_MS, serverWith } from './fake-api.js';

const apps: FastifyInstance[] = [];
function server(...args: Parameters<typeof serverWith>): ReturnType<typeof serverWith> {
  const built = serverWith(...args);
  apps.push(built.app);
  return built;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

interface ErrorJson {
  code: string;
  message: string;
  details: Record<string, unknown>;
}

function errorOf(res: { json(): unknown }): ErrorJson {
  const body = res.json() as { error: ErrorJson };
  expect(Object.keys(body)).toEqual(['error']);
  return body.error;
}

function postJson(app: FastifyInstance, url: string, payload: string, headers: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json', ...headers }, payload });
}

/** `depth` arrays one inside the other. */
function nested(depth: number): string {
  return '['.repeat(depth) + ']'.repeat(depth);
}

function uuid(n: number): string {
  return `0192f3a4-5b6c-7d8e-9f00-${String(n).padStart(12, '0')}`;
}

describe('JSON nesting (maxJsonDepth)', () => {
  it('refuses a body nested past the bound with 400 validation_failed, before the service is called', async () => {
    const { app, api } = server({ maxJsonDepth: 8 });
    // The body is one level, the payload the other seven.
    const ok = await postJson(app, '/api/tasks', `{"task_type":"a","payload":${nested(7)}}`);
    expect(ok.statusCode).toBe(201);
    const deep = await postJson(app, '/api/tasks', `{"task_type":"a","payload":${nested(8)}}`);
    expect(deep.statusCode).toBe(400);
    expect(errorOf(deep)).toMatchObject({ code: 'validation_failed', details: { field: 'body', max_depth: 8 } });
    expect(errorOf(deep).message).toContain('maxJsonDepth');
    expect(api.callsOf('submit')).toHaveLength(1);
  });

  it('answers a payload nested about 4 200 deep with a 400, not a 500 (default bound 64)', async () => {
    const { app, api } = server();
    for (const payload of [nested(4200), `${'{"a":'.repeat(4200)}1${'}'.repeat(4200)}`]) {
      for (const extra of ['', ',"idempotency_key":"k"']) {
        const res = await postJson(app, '/api/tasks', `{"task_type":"a"${extra},"payload":${payload}}`);
        expect(res.statusCode).toBe(400);
        expect(errorOf(res).code).toBe('validation_failed');
      }
    }
    const batch = await postJson(app, '/api/tasks/batch', `{"tasks":[{"task_type":"a","payload":${nested(4200)}}]}`);
    expect(batch.statusCode).toBe(400);
    const dag = await postJson(app, '/api/dags', `{"tasks":[{"ref":"a","task_type":"a","payload":${nested(4200)}}]}`);
    expect(dag.statusCode).toBe(400);
    expect(api.calls.filter((c) => c.method === 'submit' || c.method === 'submitDag')).toHaveLength(0);
  });

  it('counts brackets inside strings as text, escaped quotes included', async () => {
    expect(nestsDeeperThan('{"a":"[[[[[[[[[[\\"[[[[[[["}', 1)).toBe(false);
    expect(nestsDeeperThan('{"a":"\\\\"}', 1)).toBe(false);
    expect(nestsDeeperThan('{"a":"\\\\",  "b":[[1]]}', 2)).toBe(true);
    const { app } = server({ maxJsonDepth: 2 });
    const res = await postJson(app, '/api/tasks', JSON.stringify({ task_type: 'a', payload: '['.repeat(5000) }));
    expect(res.statusCode).toBe(201);
  });

  it('holds the cluster routes to a nesting bound too', async () => {
    const secret = 's'.repeat(32);
    const plugin = clusterRoutes({
      secret,
      maxJsonDepth: 16,
      accept: () => Promise.resolve(null),
      onRefresh: () => undefined,
      inspect: () => null,
      presence: () => ({ connected: 0, polling: 0, lastAskedMs: null }),
      listActors: () => [],
    });
    const { app } = server({}, { extraPlugins: [plugin] });
    const body = `{"from":"n1","envelopes":[{"kind":"k","key":"a","deadline":1,"ask":false,"message":{"v":${nested(4200)}}}]}`;
    const res = await postJson(app, '/internal/actors', body, { 'x-wheelhouse-cluster-secret': secret });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).code).toBe('validation_failed');
  });

  it('canonical JSON refuses a value nested past its bound with the catalogue error, not a stack overflow', () => {
    let value: unknown = 1;
    for (let i = 0; i < CANONICAL_MAX_DEPTH + 10; i++) value = [value];
    let thrown: unknown;
    try {
      canonicalJson(value);
    } catch (error) {
      thrown = error;
    }
    expect(isWheelhouseError(thrown, 'validation_failed')).toBe(true);
  });
});

describe('task types per poll (pollMaxTaskTypes)', () => {
  const poll = (types: number) => ({
    worker_id: 'w',
    task_types: Array.from({ length: types }, (_, i) => `t${i}`),
    wait_ms: 0,
  });

  it('takes 100 by default and refuses 101 with 400 naming task_types', async () => {
    const { app, api } = server();
    expect((await app.inject({ method: 'POST', url: '/api/workers/poll', payload: poll(100) })).statusCode).toBe(200);
    const res = await app.inject({ method: 'POST', url: '/api/workers/poll', payload: poll(101) });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res)).toMatchObject({ code: 'validation_failed', details: { field: 'task_types', limit: 100 } });
    expect(errorOf(res).message).toBe('task_types: holds 101 items; the most is 100 (pollMaxTaskTypes)');
    expect(api.callsOf('poll')).toHaveLength(1);
  });

  it('follows the option, and the schema holds every node to 1 000', async () => {
    const { app } = server({ pollMaxTaskTypes: 3 });
    expect((await app.inject({ method: 'POST', url: '/api/workers/poll', payload: poll(4) })).statusCode).toBe(400);
    const { app: wide } = server({ pollMaxTaskTypes: 1000 });
    const res = await wide.inject({ method: 'POST', url: '/api/workers/poll', payload: poll(1001) });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details.field).toBe('task_types');
  });
});

describe('long-polls held at once (pollMaxConcurrent)', () => {
  it('answers the poll past the bound 429 too_many_polls with Retry-After, and takes polls again once one ends', async () => {
    const api = new FakeApi();
    const waiting: (() => void)[] = [];
    api.override(
      'poll',
      (_request: PollRequest) =>
        new Promise<Assignment[]>((resolve) => {
          waiting.push(() => resolve([]));
        }),
    );
    const { app } = server({ pollMaxConcurrent: 2 }, { api });
    const body = { worker_id: 'w', task_types: ['a'], wait_ms: 1000 };
    const first = app.inject({ method: 'POST', url: '/api/workers/poll', payload: body });
    const second = app.inject({ method: 'POST', url: '/api/workers/poll', payload: body });
    await expect.poll(() => waiting.length).toBe(2);

    const refused = await app.inject({ method: 'POST', url: '/api/workers/poll', payload: body });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(errorOf(refused)).toMatchObject({ code: 'too_many_polls', details: { limit: 2 } });
    expect(api.callsOf('poll')).toHaveLength(2);

    waiting.shift()?.();
    expect((await first).statusCode).toBe(200);
    const third = app.inject({ method: 'POST', url: '/api/workers/poll', payload: body });
    await expect.poll(() => waiting.length).toBe(2);
    for (const release of waiting.splice(0)) release();
    expect((await second).statusCode).toBe(200);
    expect((await third).statusCode).toBe(200);
  });
});

describe('bytes of a poll answer (maxPageBytes)', () => {
  function assignments(n: number, payloadBytes: number): Assignment[] {
    return Array.from({ length: n }, (_, i) => ({
      id: uuid(i + 1),
      taskType: 'a',
      payload: { blob: 'x'.repeat(payloadBytes) },
      attempt: 1,
      version: 1,
      leaseExpiresMs: NOW_MS + 60_000,
      deadlineMs: NOW_MS + 60_000,
      timeoutSeconds: 60,
      partition: 0,
      leaseToken: `lt1.${i}`,
      dueMs: NOW_MS,
    }));
  }

  it('answers the tasks that fit and hands the rest back at once', async () => {
    const api = new FakeApi();
    const claimed = assignments(5, 3000);
    api.override('poll', () => Promise.resolve(claimed));
    const { app } = server({ maxPageBytes: 8000 }, { api });
    const res = await app.inject({
      method: 'POST',
      url: '/api/workers/poll',
      payload: { worker_id: 'w', task_types: ['a'], max_tasks: 5, wait_ms: 0 },
    });
    expect(res.statusCode).toBe(200);
    const { tasks } = res.json<{ tasks: { task_id: string }[] }>();
    expect(tasks.map((t) => t.task_id)).toEqual([uuid(1), uuid(2)]);
    expect(res.body.length).toBeLessThanOrEqual(8000);
    // (The fake's response ends without `writableFinished`, so it also hands the answered ones back.)
    expect(api.callsOf('release')[0]).toEqual([claimed.slice(2)]);
  });

  it('answers one task larger than the bound alone', async () => {
    const api = new FakeApi();
    const claimed = assignments(2, 20_000);
    api.override('poll', () => Promise.resolve(claimed));
    const { app } = server({ maxPageBytes: 8000 }, { api });
    const res = await app.inject({
      method: 'POST',
      url: '/api/workers/poll',
      payload: { worker_id: 'w', task_types: ['a'], max_tasks: 2, wait_ms: 0 },
    });
    expect(res.json<{ tasks: unknown[] }>().tasks).toHaveLength(1);
    expect(api.callsOf('release')[0]).toEqual([claimed.slice(1)]);
  });
});

describe('dependencies per task (maxDependencies)', () => {
  const ids = (n: number) => Array.from({ length: n }, (_, i) => uuid(i + 1));

  it('refuses a task with more dependencies than the bound, naming the field and the batch index', async () => {
    const { app, api } = server({ maxDependencies: 3 });
    const ok = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      payload: { task_type: 'a', dependencies: ids(3) },
    });
    expect(ok.statusCode).toBe(201);
    const one = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      payload: { task_type: 'a', dependencies: ids(4) },
    });
    expect(one.statusCode).toBe(400);
    expect(errorOf(one)).toMatchObject({ code: 'validation_failed', details: { field: 'dependencies', limit: 3 } });
    const batch = await app.inject({
      method: 'POST',
      url: '/api/tasks/batch',
      payload: { tasks: [{ task_type: 'a' }, { task_type: 'a', dependencies: ids(4) }] },
    });
    expect(batch.statusCode).toBe(400);
    expect(errorOf(batch).details).toMatchObject({ field: 'tasks[1].dependencies', index: 1 });
    expect(api.callsOf('submit')).toHaveLength(1);
  });

  it('refuses a graph task with more depends_on than the bound', async () => {
    const { app, api } = server({ maxDependencies: 2 });
    const res = await app.inject({
      method: 'POST',
      url: '/api/dags',
      payload: { tasks: [{ ref: 'x', task_type: 'a', depends_on: ids(3) }] },
    });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details).toMatchObject({ field: 'tasks[0].depends_on', index: 0, limit: 2 });
    expect(api.callsOf('submitDag')).toHaveLength(0);
  });

  it('holds every node to the schema ceiling of 10 000', async () => {
    const { app } = server({ maxDependencies: 10_000, maxPayloadBytes: 1024 * 1024 });
    const res = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      payload: { task_type: 'a', dependencies: ids(10_001) },
    });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details.field).toBe('dependencies');
  });
});

describe('text the store cannot hold (U+0000, lone surrogates)', () => {
  it('refuses a NUL in a payload string or key, naming payload', async () => {
    const { app, api } = server();
    for (const payload of ['a\u0000b', { 'k\u0000': 1 }, [{ deep: ['\u0000'] }], 'lone \ud800', { '\udc00': 1 }]) {
      for (const key of [{}, { idempotency_key: 'k' }]) {
        const res = await app.inject({
          method: 'POST',
          url: '/api/tasks',
          payload: { task_type: 'a', payload, ...key },
        });
        expect(res.statusCode).toBe(400);
        expect(errorOf(res).details.field).toBe('payload');
      }
    }
    // A backslash and the text `u0000` is no NUL; a surrogate pair is one character.
    for (const payload of ['\\u0000', '\\ud800', '\ud83d\ude00']) {
      const text = await app.inject({ method: 'POST', url: '/api/tasks', payload: { task_type: 'a', payload } });
      expect(text.statusCode).toBe(201);
    }
    expect(api.callsOf('submit')).toHaveLength(3);
  });

  it('refuses a NUL in the fields that reach a text column, naming each', async () => {
    const { app } = server();
    const cases: [string, string, unknown, string][] = [
      ['POST', '/api/tasks', { task_type: 'a', idempotency_key: 'k\u0000' }, 'idempotency_key'],
      ['POST', '/api/tasks', { task_type: 'a', idempotency_key: '\ud800' }, 'idempotency_key'],
      ['POST', '/api/workers/poll', { worker_id: 'w\u0000', task_types: ['a'], wait_ms: 0 }, 'worker_id'],
      ['POST', '/api/dags', { tasks: [{ ref: 'a\u0000', task_type: 'a' }] }, 'tasks[0].ref'],
      [
        'POST',
        '/api/dags',
        { tasks: [{ ref: 'a', task_type: 'a', depends_on: ['\u0000'] }] },
        'tasks[0].depends_on[0]',
      ],
      ['POST', '/api/dags', { tasks: [{ ref: 'a', task_type: 'a' }], idempotency_key: '\u0000' }, 'idempotency_key'],
    ];
    for (const [method, url, payload, field] of cases) {
      const res = await app.inject({ method: method as 'POST', url, payload: payload as object });
      expect(res.statusCode, field).toBe(400);
      expect(errorOf(res).details.field, field).toBe(field);
    }
  });

  it("keeps a worker's error text, a NUL in it made U+FFFD", async () => {
    const { app, api } = server();
    const res = await app.inject({
      method: 'POST',
      url: `/api/tasks/${KNOWN_ID}/complete`,
      payload: { lease_token: 'lt1.2', status: 'failed', error: 'boom\u0000here' },
    });
    expect(res.statusCode).toBe(200);
    const [results] = api.callsOf('complete')[0] as [CompletionRequest[]];
    expect(results[0]?.error).toBe('boom\uFFFDhere');
  });
});
