/**
 * The flow-control routes (API.md "Flow control") over the real `LimitsService` and an
 * in-memory limit store (test/http/fake-limits.ts): the wire shapes, the 400s of bad names and
 * bodies, 404 and 409 on DELETE, pausing and resuming a task type, list paging, and the
 * catalog refresh and change hook each change makes. The SQL store behind them on a real node
 * is tested in test/e2e/limits-api.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { memoryLimits, type MemoryLimitStore } from './fake-limits.js';
import { serverWith } from './fake-api.js';

let app: FastifyInstance;
let store: MemoryLimitStore;
let refreshes: { count: number };
let changed: string[];

beforeEach(() => {
  const limits = memoryLimits();
  ({ store, refreshes, changed } = limits);
  ({ app } = serverWith({}, { limits: limits.service }));
});
afterEach(async () => {
  await app.close();
});

const put = (name: string, payload: unknown) =>
  app.inject({ method: 'PUT', url: `/api/limits/${encodeURIComponent(name)}`, payload: payload as object });
const get = (url: string) => app.inject({ method: 'GET', url });
const del = (name: string) => app.inject({ method: 'DELETE', url: `/api/limits/${encodeURIComponent(name)}` });

function expectError(res: { statusCode: number; json(): unknown }, status: number, code: string, field?: string) {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(status);
  const error = (res.json() as { error: { code: string; details: Record<string, unknown> } }).error;
  expect(error.code).toBe(code);
  if (field !== undefined) expect(error.details.field).toBe(field);
}

describe('PUT /api/limits/{name}', () => {
  it('declares a limit and answers it as stored, in the shape of API.md', async () => {
    const res = await put('stripe-api', {
      concurrency: 5,
      rate: { limit: 100, period_seconds: 60, burst: 10 },
      on_limit: 'queue',
      weight: 1,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      name: 'stripe-api',
      declared_as: 'stripe-api',
      concurrency: 5,
      rate: { limit: 100, period_seconds: 60, burst: 10 },
      on_limit: 'queue',
      weight: 1,
      running: 0,
      waiting: 0,
      starts_last_period: null,
    });
    expect(store.declared.get('stripe-api')).toMatchObject({ rate: { limit: 100, periodMs: 60_000, burst: 10 } });
    expect(refreshes.count).toBe(1);
    expect(changed).toEqual(['stripe-api']);
  });

  it('fills the defaults: unlimited, queue, weight 1, burst 0', async () => {
    const res = await put('customer:*', { rate: { limit: 2, period_seconds: 0.5 } });
    expect(res.json()).toMatchObject({
      name: 'customer:*',
      concurrency: null,
      rate: { limit: 2, period_seconds: 0.5, burst: 0 },
      on_limit: 'queue',
      weight: 1,
      // A family has no figures of its own.
      running: null,
      waiting: null,
    });
    expect((await put('empty', {})).json()).toMatchObject({ concurrency: null, rate: null, weight: 1 });
  });

  it.each([
    ['a concurrency below 0', { concurrency: -1 }, 'concurrency'],
    ['a fractional concurrency', { concurrency: 1.5 }, 'concurrency'],
    ['a concurrency past the bound', { concurrency: 1_000_001 }, 'concurrency'],
    ['a rate without its period', { rate: { limit: 5 } }, 'rate.period_seconds'],
    ['a rate limit of 0', { rate: { limit: 0, period_seconds: 1 } }, 'rate.limit'],
    ['a period of 0', { rate: { limit: 1, period_seconds: 0 } }, 'rate.period_seconds'],
    ['a period past a day', { rate: { limit: 1, period_seconds: 86_401 } }, 'rate.period_seconds'],
    ['a period in fractions of a millisecond', { rate: { limit: 1, period_seconds: 1.0005 } }, 'rate.period_seconds'],
    ['a negative burst', { rate: { limit: 1, period_seconds: 1, burst: -1 } }, 'rate.burst'],
    ['an unknown member of rate', { rate: { limit: 1, period_seconds: 1, per: 's' } }, 'rate.per'],
    ['an unknown on_limit', { on_limit: 'drop' }, 'on_limit'],
    ['a weight of 0', { weight: 0 }, 'weight'],
    ['an unknown field', { concurency: 5 }, 'concurency'],
  ])('answers 400 for %s', async (_what, body, field) => {
    expectError(await put('k', body), 400, 'validation_failed', field);
    expect(store.declared.size).toBe(0);
    expect(refreshes.count).toBe(0);
  });

  it.each([['a*b'], ['*'], ['a:*:b'], ['a b'], ['x'.repeat(201)]])('answers 400 for the name %s', async (name) => {
    const res = await put(name, { concurrency: 1 });
    expectError(res, 400, 'validation_failed');
    expect(store.declared.size).toBe(0);
  });
});

describe('GET /api/limits/{name}', () => {
  it('answers a key declared only by its family with the family values, declared_as the family', async () => {
    await put('customer:*', { concurrency: 5 });
    store.counted.set('customer:42', { running: 5, waiting: 1200 });
    const res = await get('/api/limits/customer:42');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      name: 'customer:42',
      declared_as: 'customer:*',
      concurrency: 5,
      rate: null,
      on_limit: 'queue',
      weight: 1,
      running: 5,
      waiting: 1200,
      starts_last_period: null,
    });
    // The key's own declaration overrides its family's.
    await put('customer:42', { concurrency: 1 });
    expect((await get('/api/limits/customer:42')).json()).toMatchObject({ declared_as: 'customer:42', concurrency: 1 });
  });

  it('answers 404 not_found for a name neither declared nor covered, and 400 for a bad one', async () => {
    expectError(await get('/api/limits/nobody'), 404, 'not_found');
    expectError(await get('/api/limits/a*b'), 400, 'validation_failed');
  });
});

describe('GET /api/limits', () => {
  it('lists in name order, page by page, under a prefix', async () => {
    for (const name of ['b:1', 'a:2', 'a:1', 'a:*', 'c']) await put(name, { concurrency: 1 });
    const first = await get('/api/limits?prefix=a:&limit=2');
    expect(first.statusCode).toBe(200);
    const page1 = first.json<{ limits: { name: string; running: null }[]; next_token: string }>();
    expect(page1.limits.map((l) => l.name)).toEqual(['a:*', 'a:1']);
    expect(page1.limits[0]?.running).toBeNull();
    const second = await get(`/api/limits?prefix=a:&limit=2&next_token=${page1.next_token}`);
    expect(second.json()).toMatchObject({ limits: [{ name: 'a:2' }], next_token: null });
    const all = await get('/api/limits');
    expect(all.json<{ limits: unknown[] }>().limits).toHaveLength(5);
  });

  it('answers 400 for a token it did not issue and a limit out of range', async () => {
    expectError(await get('/api/limits?next_token=%25%25'), 400, 'validation_failed', 'next_token');
    expectError(await get('/api/limits?limit=0'), 400, 'validation_failed', 'query.limit');
  });
});

describe('DELETE /api/limits/{name}', () => {
  it('removes a declaration, answers 404 once it is gone', async () => {
    await put('stripe-api', { concurrency: 1 });
    const res = await del('stripe-api');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect(store.declared.has('stripe-api')).toBe(false);
    expect(changed).toEqual(['stripe-api', 'stripe-api']);
    expectError(await del('stripe-api'), 404, 'not_found');
  });

  it('refuses with 409 limit_in_use while waiting tasks take part in it (a family: in any of its keys)', async () => {
    await put('stripe-api', { concurrency: 1 });
    await put('customer:*', { concurrency: 1 });
    store.inUseNames.add('stripe-api');
    store.inUseNames.add('customer:7');
    expectError(await del('stripe-api'), 409, 'limit_in_use');
    expectError(await del('customer:*'), 409, 'limit_in_use');
    expect([...store.declared.keys()].sort()).toEqual(['customer:*', 'stripe-api']);
  });
});

describe('POST /api/task-types/{task_type}/pause and /resume', () => {
  const pause = (t: string, verb: 'pause' | 'resume') =>
    app.inject({ method: 'POST', url: `/api/task-types/${t}/${verb}` });

  it('pauses a type by its key at concurrency 0, and resuming removes a declaration made only by pausing', async () => {
    const paused = await pause('email.send', 'pause');
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toMatchObject({
      task_type: 'email.send',
      paused: true,
      limit: { name: 'type:email.send', declared_as: 'type:email.send', concurrency: 0 },
    });
    const resumed = await pause('email.send', 'resume');
    expect(resumed.json()).toEqual({ task_type: 'email.send', paused: false, limit: null });
    expect(store.declared.has('type:email.send')).toBe(false);
    expect(changed).toEqual(['type:email.send', 'type:email.send']);
  });

  it('keeps the other values of a declared type, and only drops its concurrency on resume', async () => {
    await put('type:report', { concurrency: 3, rate: { limit: 10, period_seconds: 1 } });
    await pause('report', 'pause');
    expect(store.declared.get('type:report')).toMatchObject({ concurrency: 0, rate: { limit: 10 } });
    const resumed = await pause('report', 'resume');
    expect(resumed.json()).toMatchObject({ paused: false, limit: { concurrency: null, rate: { limit: 10 } } });
    expect(store.declared.get('type:report')).toMatchObject({ concurrency: null, rate: { limit: 10 } });
  });

  it('answers 400 for a task type that is not one', async () => {
    expectError(await pause('a*b', 'pause'), 400, 'validation_failed', 'task_type');
  });
});

describe('scopes', () => {
  it('declaring needs admin: a submit-only key gets 403 on PUT, a read key reads', async () => {
    await app.close();
    const limits = memoryLimits();
    ({ app } = serverWith({ adminToken: 'the-admin-key-of-this-test' }, { limits: limits.service }));
    const admin = { authorization: 'Bearer the-admin-key-of-this-test' };
    const keyOf = async (scope: string) =>
      (
        await app.inject({
          method: 'POST',
          url: '/admin/tokens',
          headers: admin,
          payload: { name: scope, scopes: [scope] },
        })
      ).json<{ token: string }>().token;
    const submit = { authorization: `Bearer ${await keyOf('submit')}` };
    const read = { authorization: `Bearer ${await keyOf('read')}` };
    const body = { concurrency: 1 };
    expectError(
      await app.inject({ method: 'PUT', url: '/api/limits/k', headers: submit, payload: body }),
      403,
      'forbidden',
    );
    expectError(
      await app.inject({ method: 'POST', url: '/api/task-types/x/pause', headers: submit }),
      403,
      'forbidden',
    );
    expect((await app.inject({ method: 'PUT', url: '/api/limits/k', headers: admin, payload: body })).statusCode).toBe(
      200,
    );
    expectError(await app.inject({ method: 'DELETE', url: '/api/limits/k', headers: read }), 403, 'forbidden');
    expect((await app.inject({ method: 'GET', url: '/api/limits/k', headers: read })).statusCode).toBe(200);
    expect((await app.inject({ method: 'GET', url: '/api/limits', headers: read })).statusCode).toBe(200);
  });
});

describe('the OpenAPI document', () => {
  it('has the limit routes, their body and the Limit schema', async () => {
    const doc = (await get('/docs/openapi.json')).json<{
      paths: Record<string, Record<string, { tags: string[]; requestBody?: unknown }>>;
      components: { schemas: Record<string, unknown> };
    }>();
    expect(Object.keys(doc.paths['/api/limits/{name}'] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
    expect(doc.paths['/api/limits/{name}']?.put?.requestBody).toBeDefined();
    expect(Object.keys(doc.paths['/api/limits'] ?? {})).toEqual(['get']);
    expect(doc.paths['/api/task-types/{task_type}/pause']?.post?.tags).toEqual(['limits']);
    expect(doc.paths['/api/task-types/{task_type}/resume']).toBeDefined();
    expect(doc.components.schemas.Limit).toBeDefined();
  });
});
