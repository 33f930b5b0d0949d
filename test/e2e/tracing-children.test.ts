import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tracingOn } from '../../src/lib/otel.js';
import { createWorker, type TaskContext, type Worker } from '../../src/worker/index.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { exportedSpan, newTraceparent, setTracingEnv, type OtlpSpan, type Receiver } from '../support/otlp-receiver.js';
import { startTracedNode, stopTracedNode } from '../support/traced-node.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * Children of a running task inherit its trace (docs/decisions/0038-tracing.md): a child
 * spawned without a context of its own (no field, no `traceparent` header) gets the parent's
 * stored one — with tracing off as it is, with tracing on as the parent of the child's submit
 * span — and a child spawned by the worker SDK (`ctx.spawn`, over either transport) is the
 * child of the parent's attempt span. A context the request carries wins.
 */

interface Polled {
  tasks: { task_id: string; lease_token: string; traceparent?: string }[];
}

/** A running parent submitted under `traceparent`: its id and lease token (polled over HTTP). */
async function runningParent(url: string, traceparent: string): Promise<{ id: string; token: string }> {
  const type = uniqueType('otel.parent');
  const submitted = await api<{ task_id: string }>(url, 'POST', '/api/tasks', { task_type: type, traceparent });
  expect(submitted.status).toBe(201);
  const polled = await api<Polled>(url, 'POST', '/api/workers/poll', {
    worker_id: 'w-parent',
    task_types: [type],
    max_tasks: 1,
    wait_ms: 5_000,
  });
  const task = polled.body.tasks[0];
  expect(task?.task_id).toBe(submitted.body.task_id);
  return { id: task!.task_id, token: task!.lease_token };
}

/** Spawns one child of `parent` over `POST /api/tasks/{id}/children`; answers its id. */
async function spawnOne(
  url: string,
  parent: { id: string; token: string },
  headers: Record<string, string> = {},
): Promise<string> {
  const r = await api<{ tasks: { task_id: string }[] }>(
    url,
    'POST',
    `/api/tasks/${parent.id}/children`,
    { lease_token: parent.token, tasks: [{ task_type: uniqueType('otel.child') }] },
    headers,
  );
  expect(r.status).toBe(201);
  return r.body.tasks[0]!.task_id;
}

describe.each(BACKENDS)('children inherit their parent’s trace, tracing off, on %s', (backend) => {
  let c: TestCluster;
  beforeAll(async () => {
    setTracingEnv({});
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('stores the parent’s context for a child without one, and the header’s for a child spawned with one', async () => {
    expect(tracingOn()).toBe(false);
    const { traceparent } = newTraceparent();
    const parent = await runningParent(c.url, traceparent);
    const inherited = await spawnOne(c.url, parent);
    const own = newTraceparent().traceparent;
    const headed = await spawnOne(c.url, parent, { traceparent: own });
    const view = async (id: string) =>
      (await api<{ traceparent: string | null }>(c.url, 'GET', `/api/tasks/${id}`)).body.traceparent;
    expect(await view(inherited)).toBe(traceparent);
    expect(await view(headed)).toBe(own);
  });
});

describe.each(BACKENDS)('children inherit their parent’s trace, tracing on, on %s', (backend) => {
  let receiver: Receiver;
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    ({ receiver, node: c } = await startTracedNode(backend));
  });
  afterAll(async () => {
    await stopTracedNode({ receiver, node: c }, workers);
  });

  const spanOf = (taskId: string, name: string): Promise<OtlpSpan> => exportedSpan(receiver, taskId, name);

  it('over the route: a child without a context is the child of the parent’s submit span; a header wins', async () => {
    expect(tracingOn()).toBe(true);
    const { traceId, traceparent } = newTraceparent();
    const parent = await runningParent(c.url, traceparent);
    const parentSubmit = await spanOf(parent.id, 'wheelhouse.submit');
    const inherited = await spawnOne(c.url, parent);
    const own = newTraceparent();
    const headed = await spawnOne(c.url, parent, { traceparent: own.traceparent });
    const inheritedSubmit = await spanOf(inherited, 'wheelhouse.submit');
    expect(inheritedSubmit.traceId).toBe(traceId);
    expect(inheritedSubmit.parentSpanId).toBe(parentSubmit.spanId);
    const headedSubmit = await spanOf(headed, 'wheelhouse.submit');
    expect(headedSubmit.traceId).toBe(own.traceId);
    expect(headedSubmit.parentSpanId).toBe(own.spanId);
  }, 30_000);

  for (const transport of ['channel', 'http'] as const) {
    it(`over ${transport}: ctx.spawn makes children of the parent’s attempt span`, async () => {
      const parentType = uniqueType(`otel.spawner.${transport}`);
      const spawned = new Map<string, string>();
      const w = createWorker({
        url: c.url,
        transport,
        taskTypes: [parentType],
        handler: async (t: TaskContext) => {
          const [child] = await t.spawn([{ taskType: uniqueType('otel.spawned') }]);
          spawned.set(t.taskId, child!.taskId);
          return null;
        },
        onError: () => undefined,
      });
      workers.push(w);
      w.start();
      const { traceId, traceparent } = newTraceparent();
      const parent = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
        task_type: parentType,
        traceparent,
      });
      expect(parent.status).toBe(201);
      const childId = await eventually(async () => spawned.get(parent.body.task_id), 15_000, 'the spawned child');
      const attempt = await spanOf(parent.body.task_id, 'wheelhouse.worker');
      const childSubmit = await spanOf(childId, 'wheelhouse.submit');
      expect(childSubmit.traceId).toBe(traceId);
      expect(childSubmit.parentSpanId).toBe(attempt.spanId);
    }, 30_000);
  }
});
