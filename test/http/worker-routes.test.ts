/**
 * UNIT tests of the worker routes' HTTP mapping, against a fake SchedulerApi
 * (test/http/fake-api.ts). The disconnect test listens on a real port, because fastify's
 * `inject` cannot drop a connection mid-request.
 */
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import type { CompletionRequest, PollRequest } from '../../src/services/types.js';
import { FakeApi, KNOWN_ID, NOW_MS, serverWith } from './fake-api.js';

let app: FastifyInstance;
let api: FakeApi;

beforeEach(() => {
  ({ app, api } = serverWith());
});
afterEach(async () => {
  await app.close();
});

function post(url: string, payload: unknown) {
  return app.inject({ method: 'POST', url, payload: payload as object });
}

function errorOf(res: { statusCode: number; json(): unknown }) {
  return (res.json() as { error: { code: string; message: string; details: Record<string, unknown> } }).error;
}

/** Resolves when `signal` aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

describe('POST /api/workers/poll', () => {
  it('answers claimed tasks in API.md shape', async () => {
    const res = await post('/api/workers/poll', {
      worker_id: 'w-1',
      task_types: ['email.send'],
      max_tasks: 10,
      wait_ms: 1000,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      tasks: [
        {
          task_id: KNOWN_ID,
          task_type: 'email.send',
          payload: { n: 1 },
          attempt: 1,
          lease_token: 'lt1.2',
          lease_expires_at: new Date(NOW_MS + 60_000).toISOString(),
          deadline_at: new Date(NOW_MS + 60_000).toISOString(),
          timeout_seconds: 60,
        },
      ],
    });
    const [request, signal] = api.callsOf('poll')[0] as [PollRequest, AbortSignal];
    expect(request).toEqual({ workerId: 'w-1', taskTypes: ['email.send'], maxTasks: 10, waitMs: 1000 });
    expect(signal).toBeInstanceOf(AbortSignal);
    expect(signal.aborted).toBe(false);
  });

  it('clamps wait_ms to the configured maximum', async () => {
    await app.close();
    ({ app, api } = serverWith({ pollMaxWaitSeconds: 2 }));
    await post('/api/workers/poll', { worker_id: 'w', task_types: ['a'] });
    expect((api.callsOf('poll')[0] as [PollRequest])[0].waitMs).toBe(2000);
  });

  it.each([
    [{ task_types: ['a'] }, 'worker_id'],
    [{ worker_id: 'w', task_types: [] }, 'task_types'],
    [{ worker_id: 'w', task_types: ['no spaces'] }, 'task_types[0]'],
    [{ worker_id: 'w', task_types: ['a'], max_tasks: 0 }, 'max_tasks'],
    [{ worker_id: 'w', task_types: ['a'], wait_ms: 60_000 }, 'wait_ms'],
  ])('400 for %j', async (body, field) => {
    const res = await post('/api/workers/poll', body);
    expect(res.statusCode).toBe(400);
    expect(errorOf(res)).toMatchObject({ code: 'validation_failed', details: { field } });
    expect(api.callsOf('poll')).toHaveLength(0);
  });

  it('aborts the signal it passed when the client disconnects', async () => {
    let pollSignal: AbortSignal | undefined;
    let entered!: () => void;
    const inPoll = new Promise<void>((resolve) => (entered = resolve));
    api.override('poll', async (_request, signal) => {
      pollSignal = signal;
      entered();
      if (signal) await aborted(signal);
      return [];
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const req = httpRequest({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/api/workers/poll',
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', () => undefined); // the socket is destroyed on purpose
    req.end(JSON.stringify({ worker_id: 'w', task_types: ['a'], wait_ms: 30_000 }));
    await inPoll;
    expect(pollSignal?.aborted).toBe(false);
    req.destroy();
    await aborted(pollSignal as AbortSignal);
    expect(pollSignal?.aborted).toBe(true);
  });

  it('does not abort the signal of a poll that answers normally', async () => {
    await post('/api/workers/poll', { worker_id: 'w', task_types: ['a'] });
    expect(api.pollSignals[0]?.aborted).toBe(false);
  });

  it('aborts polls in flight when the server closes', async () => {
    let entered!: () => void;
    const inPoll = new Promise<void>((resolve) => (entered = resolve));
    api.override('poll', async (_request, signal) => {
      entered();
      if (signal) await aborted(signal);
      return [];
    });
    const pending = post('/api/workers/poll', { worker_id: 'w', task_types: ['a'], wait_ms: 30_000 });
    await inPoll;
    const closing = app.close();
    const res = await pending;
    await closing;
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ tasks: [] });
  });
});

describe('POST /api/tasks/:id/heartbeat', () => {
  it('answers ok, the new expiry and cancel_requested', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      ok: true,
      lease_expires_at: new Date(NOW_MS + 60_000).toISOString(),
      deadline_at: new Date(NOW_MS + 60_000).toISOString(),
      cancel_requested: false,
    });
    expect(api.callsOf('heartbeat')[0]).toEqual([KNOWN_ID, 'lt1.2']);
  });

  it('passes extend_seconds on, and refuses one that is not a positive number of seconds up to a week', async () => {
    expect(
      (await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2', extend_seconds: 30 })).statusCode,
    ).toBe(200);
    expect(api.callsOf('heartbeat')[0]).toEqual([KNOWN_ID, 'lt1.2', 30]);
    for (const bad of [0, -1, 7 * 86_400 + 1, 'soon']) {
      const res = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2', extend_seconds: bad });
      expect(res.statusCode).toBe(400);
      expect(errorOf(res)).toMatchObject({ code: 'validation_failed', details: { field: 'extend_seconds' } });
    }
  });

  it('409 lease_not_held when the lease was lost', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lost' });
    expect(res.statusCode).toBe(409);
    expect(errorOf(res).code).toBe('lease_not_held');
  });

  it('400 without a lease token or with a malformed id', async () => {
    expect((await post(`/api/tasks/${KNOWN_ID}/heartbeat`, {})).statusCode).toBe(400);
    const res = await post('/api/tasks/abc/heartbeat', { lease_token: 't' });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details.field).toBe('task_id');
  });
});

describe('results and progress (extensions)', () => {
  it('a heartbeat with progress extends the lease first, then records the progress', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2', progress: { done: 3, of: 10 } });
    expect(res.statusCode).toBe(200);
    expect(api.calls.map((c) => c.method)).toEqual(['heartbeat', 'progress']);
    expect(api.callsOf('progress')[0]).toEqual([
      [{ taskId: KNOWN_ID, leaseToken: 'lt1.2', progress: { done: 3, of: 10 } }],
    ]);
  });

  it('a heartbeat without progress records none; progress null is a value', async () => {
    await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2' });
    expect(api.callsOf('progress')).toHaveLength(0);
    await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lt1.2', progress: null });
    expect(api.callsOf('progress')[0]).toEqual([[{ taskId: KNOWN_ID, leaseToken: 'lt1.2', progress: null }]]);
  });

  it('a heartbeat whose lease is lost records no progress', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'lost', progress: 1 });
    expect(res.statusCode).toBe(409);
    expect(api.callsOf('progress')).toHaveLength(0);
  });

  it('passes a result with the completion', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/complete`, {
      lease_token: 'lt1.2',
      status: 'succeeded',
      result: { rows: [1, 2] },
    });
    expect(res.statusCode).toBe(200);
    expect(api.callsOf('complete')[0]).toEqual([
      [
        {
          taskId: KNOWN_ID,
          leaseToken: 'lt1.2',
          outcome: 'succeeded',
          error: null,
          retryable: true,
          result: { rows: [1, 2] },
        },
      ],
    ]);
  });

  it('400 naming the field for a result or progress over maxResultBytes, and calls nothing', async () => {
    await app.close();
    ({ app, api } = serverWith({ maxResultBytes: 1024 }));
    const big = 'x'.repeat(1100);
    const single = await post(`/api/tasks/${KNOWN_ID}/complete`, {
      lease_token: 't',
      status: 'succeeded',
      result: big,
    });
    expect(single.statusCode).toBe(400);
    expect(errorOf(single)).toMatchObject({
      code: 'validation_failed',
      details: { field: 'result', limit_bytes: 1024 },
    });
    const batch = await post('/api/workers/complete', {
      results: [
        { task_id: KNOWN_ID, lease_token: 't', status: 'succeeded', result: 'small' },
        { task_id: KNOWN_ID, lease_token: 't', status: 'succeeded', result: [big] },
      ],
    });
    expect(batch.statusCode).toBe(400);
    expect(errorOf(batch).details).toMatchObject({ field: 'results[1].result', index: 1, limit_bytes: 1024 });
    const beat = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 't', progress: { big } });
    expect(beat.statusCode).toBe(400);
    expect(errorOf(beat).details).toMatchObject({ field: 'progress', limit_bytes: 1024 });
    // Multi-byte text is counted in bytes of UTF-8, not characters.
    const wide = await post(`/api/tasks/${KNOWN_ID}/complete`, {
      lease_token: 't',
      status: 'succeeded',
      result: 'é'.repeat(600),
    });
    expect(wide.statusCode).toBe(400);
    expect(api.calls).toHaveLength(0);
  });

  it('400 for a result or progress the store cannot keep (U+0000, a lone surrogate)', async () => {
    const nul = await post(`/api/tasks/${KNOWN_ID}/complete`, {
      lease_token: 't',
      status: 'succeeded',
      result: 'a\u0000',
    });
    expect(nul.statusCode).toBe(400);
    expect(errorOf(nul).details.field).toBe('result');
    const lone = await post(`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 't', progress: { ['\ud800']: 1 } });
    expect(lone.statusCode).toBe(400);
    expect(errorOf(lone).details.field).toBe('progress');
    expect(api.calls).toHaveLength(0);
  });
});

describe('POST /api/tasks/:id/complete', () => {
  it('answers ok and passes the result', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/complete`, {
      lease_token: 'lt1.2',
      status: 'failed',
      error: 'boom',
      retryable: false,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    expect(api.callsOf('complete')[0]).toEqual([
      [{ taskId: KNOWN_ID, leaseToken: 'lt1.2', outcome: 'failed', error: 'boom', retryable: false }],
    ]);
  });

  it('409 lease_not_held when the service reports the lease lost', async () => {
    const res = await post(`/api/tasks/${KNOWN_ID}/complete`, { lease_token: 'lost', status: 'succeeded' });
    expect(res.statusCode).toBe(409);
    expect(errorOf(res).code).toBe('lease_not_held');
  });

  it('409 lease_not_held when the service throws it', async () => {
    api.override('complete', async () => {
      throw new WheelhouseError('lease_not_held');
    });
    const res = await post(`/api/tasks/${KNOWN_ID}/complete`, { lease_token: 'x', status: 'succeeded' });
    expect(res.statusCode).toBe(409);
    expect(errorOf(res).code).toBe('lease_not_held');
  });

  it.each([
    [{ status: 'succeeded' }, 'lease_token'],
    [{ lease_token: 't' }, 'status'],
    [{ lease_token: 't', status: 'ok' }, 'status'],
    [{ lease_token: 't', status: 'failed', error: 42 }, 'error'],
    [{ lease_token: 't', status: 'failed', retryable: 'yes' }, 'retryable'],
  ])('400 for %j', async (body, field) => {
    const res = await post(`/api/tasks/${KNOWN_ID}/complete`, body);
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details.field).toBe(field);
  });
});

describe('POST /api/workers/complete (batch extension)', () => {
  it('records many results and answers ok per task', async () => {
    const other = '0192f3a4-5b6c-7d8e-9f00-000000000002';
    const res = await post('/api/workers/complete', {
      results: [
        { task_id: KNOWN_ID, lease_token: 'lt1.2', status: 'succeeded' },
        { task_id: other, lease_token: 'lost', status: 'failed', error: 'x' },
      ],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      results: [
        { task_id: KNOWN_ID, ok: true },
        { task_id: other, ok: false },
      ],
    });
    const [results] = api.callsOf('complete')[0] as [CompletionRequest[]];
    expect(results).toHaveLength(2);
    expect(results[1]).toEqual({ taskId: other, leaseToken: 'lost', outcome: 'failed', error: 'x', retryable: true });
  });

  it('reports a single lost lease as ok: false even if the service throws for it', async () => {
    api.override('complete', async () => {
      throw new WheelhouseError('lease_not_held');
    });
    const res = await post('/api/workers/complete', {
      results: [{ task_id: KNOWN_ID, lease_token: 'x', status: 'succeeded' }],
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ results: [{ task_id: KNOWN_ID, ok: false }] });
  });

  it('takes 1000 results', async () => {
    const results = Array.from({ length: 1000 }, () => ({
      task_id: KNOWN_ID,
      lease_token: 'lt1.2',
      status: 'succeeded',
    }));
    const res = await post('/api/workers/complete', { results });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ results: unknown[] }>().results).toHaveLength(1000);
  });

  it('rejects the batch for one bad item, with its index, and records nothing', async () => {
    const res = await post('/api/workers/complete', {
      results: [
        { task_id: KNOWN_ID, lease_token: 'a', status: 'succeeded' },
        { task_id: KNOWN_ID, lease_token: 'a', status: 'maybe' },
      ],
    });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details).toMatchObject({ field: 'results[1].status', index: 1 });
    expect(api.callsOf('complete')).toHaveLength(0);
  });

  it('rejects more than 1000 results', async () => {
    const results = Array.from({ length: 1001 }, () => ({ task_id: KNOWN_ID, lease_token: 'a', status: 'succeeded' }));
    expect((await post('/api/workers/complete', { results })).statusCode).toBe(400);
  });
});
