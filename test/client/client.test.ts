import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  API_ERROR_CODES,
  AuthError,
  BacklogFullError,
  ConflictError,
  TaskNotFoundError,
  ValidationError,
  WheelhouseApiError,
  WheelhouseNetworkError,
  WheelhouseTimeoutError,
  createClient,
  type RetryInfo,
  type WheelhouseClient,
} from '../../src/client/index.js';
import { ERROR_CODES } from '../../src/lib/errors.js';
import { startNode, type WheelhouseNode } from '../../src/node/start.js';
import { eventually } from '../support/waits.js';

/**
 * The client end to end against a real node (embedded backend, in process): submit, batch,
 * graphs, paging, history, cancel, pause and resume, typed errors, the bearer token; and its
 * retry rules against a tiny loopback server that answers what the test scripts.
 */

let node: WheelhouseNode;
let client: WheelhouseClient;

beforeAll(async () => {
  node = await startNode({ backend: 'embedded', dataDir: 'memory://', port: 0, logLevel: 'silent' });
  client = createClient({ url: node.url });
});

afterAll(async () => {
  await node?.close();
});

/** A task type no other test uses, so a list filtered on it sees only this test's tasks. */
const uniqueType = (name: string): string => `client.${name}.${randomUUID().slice(0, 8)}`;

/** The rejection of `promise`, which must reject. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('client against a node', () => {
  it('submits a task and waits for it to succeed', async () => {
    const submitted = await client.submit({ taskType: 'wheelhouse.noop', payload: { n: 1 } });
    expect(submitted.created).toBe(true);
    expect(['pending', 'ready']).toContain(submitted.status);
    const task = await client.waitFor(submitted.taskId, ['succeeded', 'failed'], { timeoutMs: 10_000, pollMs: 20 });
    expect(task).toMatchObject({
      taskId: submitted.taskId,
      taskType: 'wheelhouse.noop',
      status: 'succeeded',
      scheduleType: 'immediate',
      payload: { n: 1 },
      priority: 5,
      maxRetries: 3,
      dependencies: [],
      cancelRequested: false,
    });
    expect(task.completedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('replays a submission with the same idempotency key, and refuses the key with another body', async () => {
    const task = { taskType: uniqueType('idem'), idempotencyKey: `client-${randomUUID()}`, priority: 2 };
    const first = await client.submit(task);
    const replay = await client.submit(task);
    expect(first.created).toBe(true);
    expect(replay).toMatchObject({ taskId: first.taskId, created: false });
    expect((await client.get(first.taskId)).idempotencyKey).toBe(task.idempotencyKey);
    const other = await rejectionOf(client.submit({ ...task, priority: 3 }));
    expect(other).toBeInstanceOf(ConflictError);
    expect(other).toMatchObject({ status: 409, code: 'idempotency_conflict' });
  });

  it('submits a batch in request order', async () => {
    const taskType = uniqueType('batch');
    const results = await client.submitBatch([
      { taskType, payload: 1 },
      { taskType, payload: 2, schedule: { type: 'delayed', delaySeconds: 3600 } },
    ]);
    expect(results).toHaveLength(2);
    const [a, b] = await Promise.all(results.map((r) => client.get(r.taskId)));
    expect(a?.payload).toBe(1);
    expect(b).toMatchObject({ payload: 2, scheduleType: 'delayed', status: 'pending' });
  });

  it('submits a graph and reads it back', async () => {
    const dag = await client.submitDag({
      tasks: [
        { ref: 'extract', taskType: 'wheelhouse.noop' },
        { ref: 'load', taskType: 'wheelhouse.noop', dependsOn: ['extract'] },
      ],
    });
    expect(dag.created).toBe(true);
    expect(dag.tasks.map((t) => t.ref)).toEqual(['extract', 'load']);
    const load = dag.tasks[1];
    if (load === undefined) throw new Error('no load task');
    await client.waitFor(load.taskId, 'succeeded', { timeoutMs: 10_000, pollMs: 20 });
    const view = await eventually(async () => {
      const d = await client.getDag(dag.dagId);
      return d.status === 'succeeded' ? d : undefined;
    });
    expect(view.tasks.find((t) => t.ref === 'load')).toMatchObject({ dependsOn: ['extract'], status: 'succeeded' });
    const task = await client.get(load.taskId);
    expect(task).toMatchObject({ dagId: dag.dagId, ref: 'load' });
  });

  it('explains a task: why it waits, in camelCase, as the node answers it', async () => {
    const { taskId } = await client.submit({
      taskType: uniqueType('explain'),
      schedule: { type: 'delayed', delaySeconds: 3600 },
    });
    const e = await client.explain(taskId);
    const wire = (await (await fetch(`${node.url}/api/tasks/${taskId}/explain`)).json()) as {
      sentence: string;
      due: { partition: number; owner_node: string };
    };
    expect(e).toMatchObject({ taskId, status: 'pending', state: 'scheduled', lease: null, outcome: null });
    expect(e.sentence).toMatch(/^Due in /);
    expect(wire.sentence).toMatch(/^Due in /);
    expect(e.due).toMatchObject({ partition: wire.due.partition, ownerNode: wire.due.owner_node });
    expect(e.due?.dueInMs).toBeGreaterThan(3_500_000);
    await client.cancel(taskId);
    const ended = await client.explain(taskId);
    expect(ended.state).toBe('cancelled');
    expect(ended.outcome?.reason).toMatch(/\w/);
    expect(await rejectionOf(client.explain(randomUUID()))).toBeInstanceOf(TaskNotFoundError);
  });

  it('lists every page of a filter, following next_token', async () => {
    const taskType = uniqueType('pages');
    const delayed = { type: 'delayed', delaySeconds: 3600 } as const;
    const submitted = await client.submitBatch(
      Array.from({ length: 7 }, (_, i) => ({ taskType, payload: i, schedule: delayed })),
    );
    const first = await client.listPage({ taskType, limit: 3 });
    expect(first.tasks).toHaveLength(3);
    expect(first.nextToken).not.toBeNull();
    const seen: string[] = [];
    for await (const task of client.list({ taskType, limit: 3 })) seen.push(task.taskId);
    expect(seen).toHaveLength(7);
    expect([...seen].sort()).toEqual(submitted.map((s) => s.taskId).sort());
  });

  it('pages through a task’s history', async () => {
    const { taskId } = await client.submit({ taskType: 'wheelhouse.noop' });
    await client.waitFor(taskId, 'succeeded', { timeoutMs: 10_000, pollMs: 20 });
    const executions = [];
    for await (const e of client.history(taskId, { limit: 1 })) executions.push(e);
    expect(executions.length).toBeGreaterThanOrEqual(1);
    expect(executions[0]).toMatchObject({ taskId, attempt: 1, status: 'succeeded', error: null });
  });

  it('cancels a delayed task, and a second cancel is a conflict', async () => {
    const { taskId } = await client.submit({
      taskType: uniqueType('cancel'),
      schedule: { type: 'delayed', delaySeconds: 3600 },
    });
    const result = await client.cancel(taskId);
    expect(result).toEqual({ ok: true, cancelledInstances: expect.any(Number) as number });
    expect((await client.get(taskId)).status).toBe('cancelled');
    const again = await rejectionOf(client.cancel(taskId));
    expect(again).toBeInstanceOf(ConflictError);
    expect((again as ConflictError).status).toBe(409);
  });

  it('retries a cancelled task, and refuses to retry one that is pending again', async () => {
    const { taskId } = await client.submit({
      taskType: uniqueType('retry'),
      schedule: { type: 'delayed', delaySeconds: 3600 },
    });
    await client.cancel(taskId);
    const retried = await client.retry(taskId);
    expect(retried).toMatchObject({ taskId, attempts: 0, cancelRequested: false });
    expect(['pending', 'ready', 'running', 'succeeded']).toContain(retried.status);
    const again = await rejectionOf(client.retry(taskId));
    expect(again).toBeInstanceOf(ConflictError);
    expect(again).toMatchObject({ status: 409, code: 'invalid_transition' });
  });

  it('pauses and resumes a cron schedule', async () => {
    const { taskId, status } = await client.submit({
      taskType: uniqueType('cron'),
      schedule: { type: 'cron', cronExpression: '0 0 1 1 *', timezone: 'Europe/Paris' },
    });
    expect(status).toBe('active');
    const paused = await client.pause(taskId);
    expect(paused).toMatchObject({ status: 'paused', scheduleType: 'cron', cronExpression: '0 0 1 1 *' });
    const resumed = await client.resume(taskId);
    expect(resumed).toMatchObject({ status: 'active', timezone: 'Europe/Paris' });
    expect(resumed.nextDueTime).not.toBeNull();
  });

  it('answers an unknown task with TaskNotFoundError', async () => {
    const error = await rejectionOf(client.get(randomUUID()));
    expect(error).toBeInstanceOf(TaskNotFoundError);
    expect(error).toMatchObject({ status: 404, code: 'task_not_found' });
  });

  it('answers an invalid request with ValidationError naming the field', async () => {
    const single = await rejectionOf(client.submit({ taskType: 'wheelhouse.noop', priority: 42 }));
    expect(single).toBeInstanceOf(ValidationError);
    expect(single).toMatchObject({ status: 400, code: 'validation_failed', field: 'priority' });

    const batch = await rejectionOf(client.submitBatch([{ taskType: 'ok.task' }, { taskType: 'bad type!' }]));
    expect(batch).toMatchObject({ code: 'validation_failed', field: 'tasks[1].task_type', index: 1 });

    const cron = await rejectionOf(
      client.submit({ taskType: 'x.y', schedule: { type: 'cron', cronExpression: 'not a cron' } }),
    );
    expect(cron).toBeInstanceOf(ValidationError);
    expect(cron).toMatchObject({ code: 'invalid_cron', field: 'schedule.cron_expression' });
  });

  it('gives up waiting with WheelhouseTimeoutError', async () => {
    const { taskId } = await client.submit({
      taskType: uniqueType('wait'),
      schedule: { type: 'delayed', delaySeconds: 3600 },
    });
    const error = await rejectionOf(client.waitFor(taskId, 'succeeded', { timeoutMs: 200, pollMs: 20 }));
    expect(error).toBeInstanceOf(WheelhouseTimeoutError);
    expect(error).toMatchObject({ taskId, lastStatus: 'pending', timeoutMs: 200 });
  });
});

describe('client with a bearer token', () => {
  let secured: WheelhouseNode;

  beforeAll(async () => {
    secured = await startNode({
      backend: 'embedded',
      dataDir: 'memory://',
      port: 0,
      logLevel: 'silent',
      adminToken: 'open-sesame-admin-key',
    });
  });

  afterAll(async () => {
    await secured?.close();
  });

  it('is let in with the token and refused without it', async () => {
    const withToken = createClient({ url: secured.url, token: 'open-sesame-admin-key' });
    const { taskId } = await withToken.submit({ taskType: 'wheelhouse.noop' });
    expect((await withToken.get(taskId)).taskId).toBe(taskId);

    const anonymous = await rejectionOf(createClient({ url: secured.url }).get(taskId));
    expect(anonymous).toBeInstanceOf(AuthError);
    expect(anonymous).toMatchObject({ status: 401, code: 'unauthorized' });

    const wrong = await rejectionOf(createClient({ url: secured.url, token: 'nope' }).get(taskId));
    expect(wrong).toMatchObject({ status: 401, code: 'unauthorized' });
  });
});

/** A loopback server whose answers the test scripts, one handler per request in order (the last repeats). */
async function scripted(handlers: ((req: IncomingMessage, res: ServerResponse) => void)[]): Promise<{
  url: string;
  requests: { method: string; url: string; auth: string | undefined }[];
  close(): Promise<void>;
}> {
  const requests: { method: string; url: string; auth: string | undefined }[] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization });
    const handler = handlers[Math.min(requests.length, handlers.length) - 1];
    req.resume();
    req.on('end', () => handler?.(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}) {
  return (_req: IncomingMessage, res: ServerResponse): void => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(body));
  };
}

const errorBody = (code: string, message = code): unknown => ({ error: { code, message, details: {} } });

const TASK_JSON = {
  task_id: '0190a8e2-0000-7000-8000-000000000001',
  task_type: 'x.y',
  status: 'pending',
  schedule_type: 'immediate',
  due_time: null,
  created_at: null,
  started_at: null,
  completed_at: null,
  attempts: 0,
  max_retries: 3,
  priority: 5,
  timeout_seconds: 60,
  last_error: null,
  idempotency_key: null,
  cancel_requested: false,
  dependencies: [],
  payload: null,
};

/** Hangs up without answering. */
const hangUp = (req: IncomingMessage): void => {
  req.socket.destroy();
};

describe('client retries', () => {
  it('waits out Retry-After on a 503, then succeeds, counting its attempts', async () => {
    const server = await scripted([
      json(503, errorBody('store_unavailable'), { 'retry-after': '1' }),
      json(200, TASK_JSON),
    ]);
    try {
      const retries: RetryInfo[] = [];
      const c = createClient({ url: server.url, token: 't0ken', onRetry: (info) => retries.push(info) });
      const started = Date.now();
      const task = await c.get(TASK_JSON.task_id);
      const elapsed = Date.now() - started;
      expect(task.taskId).toBe(TASK_JSON.task_id);
      expect(server.requests).toHaveLength(2);
      expect(server.requests.every((r) => r.auth === 'Bearer t0ken')).toBe(true);
      expect(elapsed).toBeGreaterThanOrEqual(950);
      expect(retries).toHaveLength(1);
      expect(retries[0]).toMatchObject({ method: 'GET', attempt: 1, status: 503 });
      expect(retries[0]?.delayMs).toBeGreaterThanOrEqual(1000);
    } finally {
      await server.close();
    }
  });

  it('retries a 429 on a POST and stops after `retries`, as BacklogFullError', async () => {
    const server = await scripted([json(429, errorBody('backlog_full'), { 'retry-after': '0' })]);
    try {
      const error = await rejectionOf(createClient({ url: server.url, retries: 2 }).submit({ taskType: 'x.y' }));
      expect(error).toBeInstanceOf(BacklogFullError);
      expect(error).toMatchObject({ status: 429, code: 'backlog_full' });
      expect(server.requests).toHaveLength(3);
    } finally {
      await server.close();
    }
  });

  it('never retries another 4xx', async () => {
    const server = await scripted([json(409, errorBody('task_finished'))]);
    try {
      const error = await rejectionOf(createClient({ url: server.url }).cancel(TASK_JSON.task_id));
      expect(error).toBeInstanceOf(ConflictError);
      expect(server.requests).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it('retries a network error only where sending twice is safe', async () => {
    const server = await scripted([hangUp]);
    try {
      const c = createClient({ url: server.url, retries: 2 });
      const get = await rejectionOf(c.get(TASK_JSON.task_id));
      expect(get).toBeInstanceOf(WheelhouseNetworkError);
      expect(server.requests).toHaveLength(3);

      server.requests.length = 0;
      expect(await rejectionOf(c.submit({ taskType: 'x.y' }))).toBeInstanceOf(WheelhouseNetworkError);
      expect(server.requests).toHaveLength(1);

      server.requests.length = 0;
      expect(await rejectionOf(c.submit({ taskType: 'x.y', idempotencyKey: 'k' }))).toBeInstanceOf(
        WheelhouseNetworkError,
      );
      expect(server.requests).toHaveLength(3);
    } finally {
      await server.close();
    }
  });

  it('reads an answer without a known code by its status', async () => {
    const server = await scripted([json(418, { nope: true })]);
    try {
      const error = await rejectionOf(createClient({ url: server.url }).get(TASK_JSON.task_id));
      expect(error).toBeInstanceOf(WheelhouseApiError);
      expect(error).toMatchObject({ status: 418, code: 'validation_failed', rawCode: null });
    } finally {
      await server.close();
    }
  });
});

describe('client error codes', () => {
  it('are the node’s catalogue', () => {
    expect([...API_ERROR_CODES].sort()).toEqual([...ERROR_CODES].sort());
  });
});
