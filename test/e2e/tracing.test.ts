import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { flushTracing, tracingOn } from '../../src/lib/otel.js';
import { createWorker, type TaskContext, type Worker } from '../../src/worker/index.js';
import { BACKENDS, startTestNode, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import {
  attribute,
  newTraceparent,
  setTracingEnv,
  startReceiver,
  type OtlpSpan,
  type Receiver,
} from '../support/otlp-receiver.js';
import { startTracedNode, stopTracedNode } from '../support/traced-node.js';

/**
 * OpenTelemetry across a task's hops (issue 32; docs/decisions/0038-tracing.md). A local OTLP
 * receiver (a tiny HTTP server here) collects what the node exports: one task submitted under
 * a client's `traceparent`, and a dependent submitted after it with no context, make ONE trace
 * with the submit, fire, claim, worker and complete spans of each and the dependent's release,
 * each parented as the decision says — on both worker paths (the channel and the HTTP
 * long-poll claim) and both backends. Without an endpoint nothing is traced, and the context a
 * task was submitted with is still stored, handed to its worker and copied to a cron
 * schedule's instances.
 */

describe('without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    setTracingEnv({});
    c = await startTestNode('embedded', { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop({ timeoutMs: 0 })));
    await c?.cleanup();
  });

  it('traces nothing, and hands the submitted traceparent to the worker as it came', async () => {
    expect(tracingOn()).toBe(false);
    const taskType = uniqueType('otel.off');
    const seen = new Map<string, string | undefined>();
    const w = createWorker({
      url: c.url,
      transport: 'http',
      taskTypes: [taskType],
      handler: (t: TaskContext) => {
        seen.set(t.taskId, t.traceparent);
        return Promise.resolve(null);
      },
      onError: () => undefined,
    });
    workers.push(w);
    w.start();
    const client = createClient({ url: c.url });
    const { traceparent } = newTraceparent();
    // Over the header (raw HTTP): the client SDK sends the task's field.
    const res = await fetch(`${c.url}/api/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent },
      body: JSON.stringify({ task_type: taskType }),
    });
    expect(res.status).toBe(201);
    const a = ((await res.json()) as { task_id: string }).task_id;
    const plain = await client.submit({ taskType });
    await client.waitFor(a, 'succeeded', { timeoutMs: 20_000 });
    await client.waitFor(plain.taskId, 'succeeded', { timeoutMs: 20_000 });
    expect(seen.get(a)).toBe(traceparent);
    expect(seen.get(plain.taskId)).toBeUndefined();
    const rows = await c.sql<{ traceparent: string | null }>('SELECT traceparent FROM tasks WHERE id = $1', [a]);
    expect(rows[0]?.traceparent).toBe(traceparent);
    // The task view shows the stored context, null when none.
    expect((await client.get(a)).traceparent).toBe(traceparent);
    const plainView = await fetch(`${c.url}/api/tasks/${plain.taskId}`);
    expect(((await plainView.json()) as { traceparent?: unknown }).traceparent).toBeNull();
  }, 30_000);

  it('gives a dependent in the same graph its predecessor’s context', async () => {
    const { traceparent } = newTraceparent();
    const res = await fetch(`${c.url}/api/dags`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        tasks: [
          { ref: 'a', task_type: 'otel.dag', traceparent },
          { ref: 'b', task_type: 'otel.dag', depends_on: ['a'] },
          { ref: 'c', task_type: 'otel.dag' },
        ],
      }),
    });
    expect(res.status).toBe(201);
    const dag = (await res.json()) as { tasks: { ref: string; task_id: string }[] };
    const rows = await c.sql<{ id: string; traceparent: string | null }>(
      'SELECT id, traceparent FROM tasks WHERE id = ANY($1::uuid[])',
      [dag.tasks.map((t) => t.task_id)],
    );
    const of = (ref: string) => rows.find((r) => r.id === dag.tasks.find((t) => t.ref === ref)!.task_id)?.traceparent;
    expect([of('a'), of('b'), of('c')]).toEqual([traceparent, traceparent, null]);
  });

  it('copies a cron schedule’s traceparent to its instances', async () => {
    const { traceparent } = newTraceparent();
    const client = createClient({ url: c.url });
    const schedule = await client.submit({
      taskType: uniqueType('otel.cron'),
      schedule: { type: 'cron', cronExpression: '0 0 1 1 *' },
      traceparent,
    });
    const instance = await eventually(async () => {
      const rows = await c.sql<{ traceparent: string | null }>('SELECT traceparent FROM tasks WHERE schedule_id = $1', [
        schedule.taskId,
      ]);
      return rows[0];
    });
    expect(instance.traceparent).toBe(traceparent);
  }, 30_000);

  it('refuses a body traceparent that is not one (400), and ignores such a header', async () => {
    const bad = await fetch(`${c.url}/api/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ task_type: 'otel.bad', traceparent: `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01` }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
    const ignored = await fetch(`${c.url}/api/tasks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: 'not-a-traceparent' },
      body: JSON.stringify({ task_type: 'otel.bad' }),
    });
    expect(ignored.status).toBe(201);
    const id = ((await ignored.json()) as { task_id: string }).task_id;
    const rows = await c.sql<{ traceparent: string | null }>('SELECT traceparent FROM tasks WHERE id = $1', [id]);
    expect(rows[0]?.traceparent).toBeNull();
  });
});

describe.each(BACKENDS)('with OTLP over http/json, on %s', (backend) => {
  let receiver: Receiver;
  let c: TestCluster;
  const workers: Worker[] = [];
  beforeAll(async () => {
    ({ receiver, node: c } = await startTracedNode(backend));
  });
  afterAll(async () => {
    await stopTracedNode({ receiver, node: c }, workers);
  });

  for (const transport of ['channel', 'http'] as const) {
    it(`over ${transport}: a task and its dependent make one trace, each hop parented`, async () => {
      expect(tracingOn()).toBe(true);
      const taskType = uniqueType(`otel.${transport}`);
      const handed = new Map<string, string | undefined>();
      // The predecessor must not end before its dependent is submitted: a dependent born after
      // it succeeded is pending at once, with no release hop (and no release span) to trace.
      let dependentSubmitted!: () => void;
      const submitted = new Promise<void>((resolve) => (dependentSubmitted = resolve));
      const w = createWorker({
        url: c.url,
        transport,
        taskTypes: [taskType],
        handler: async (t: TaskContext) => {
          handed.set(t.taskId, t.traceparent);
          await submitted;
          return { ok: true };
        },
        onError: () => undefined,
      });
      workers.push(w);
      w.start();
      const client = createClient({ url: c.url });
      const { traceId, spanId: clientSpanId, traceparent } = newTraceparent();
      const a = await client.submit({ taskType, traceparent });
      // No context of its own: it joins its predecessor's trace.
      const b = await client.submit({ taskType, dependencies: [a.taskId] });
      dependentSubmitted();
      await client.waitFor(b.taskId, 'succeeded', { timeoutMs: 20_000 });

      const names = [
        'wheelhouse.submit',
        'wheelhouse.fire',
        'wheelhouse.claim',
        'wheelhouse.worker',
        'wheelhouse.complete',
      ];
      const expected = [
        ...names.map((n) => [a.taskId, n]),
        ...names.map((n) => [b.taskId, n]),
        [b.taskId, 'wheelhouse.release'],
      ];
      const span = (taskId: string, name: string): OtlpSpan | undefined =>
        receiver.spans.find((s) => s.name === name && attribute(s, 'wheelhouse.task.id') === taskId);
      await eventually(
        async () => {
          await flushTracing();
          const missing = expected.filter(([id, name]) => span(id!, name!) === undefined);
          if (missing.length === 0) return true;
          throw new Error(
            `missing ${missing.map(([id, name]) => `${name} of ${id === a.taskId ? 'a' : 'b'}`).join(', ')}`,
          );
        },
        15_000,
        'every span of both tasks exported',
      );
      const one = (taskId: string, name: string): OtlpSpan => {
        const found = receiver.spans.filter((s) => s.name === name && attribute(s, 'wheelhouse.task.id') === taskId);
        expect(found, `${name} of ${taskId}`).toHaveLength(1);
        return found[0]!;
      };
      const [aSubmit, aFire, aClaim, aWorker, aComplete] = names.map((n) => one(a.taskId, n));
      const [bSubmit, bFire, bClaim, bWorker, bComplete] = names.map((n) => one(b.taskId, n));
      const bRelease = one(b.taskId, 'wheelhouse.release');
      const all = [aSubmit, aFire, aClaim, aWorker, aComplete, bSubmit, bFire, bClaim, bWorker, bComplete, bRelease];
      // One trace: the client's.
      expect(new Set(all.map((s) => s!.traceId))).toEqual(new Set([traceId]));
      // The submit span is the client's child; every later hop is the submit's, the worker the claim's.
      expect(aSubmit!.parentSpanId).toBe(clientSpanId);
      expect(aFire!.parentSpanId).toBe(aSubmit!.spanId);
      expect(aClaim!.parentSpanId).toBe(aSubmit!.spanId);
      expect(aWorker!.parentSpanId).toBe(aClaim!.spanId);
      expect(aComplete!.parentSpanId).toBe(aSubmit!.spanId);
      // The dependent: its submit under its predecessor's, the rest under its own submit.
      expect(bSubmit!.parentSpanId).toBe(aSubmit!.spanId);
      expect(bRelease.parentSpanId).toBe(bSubmit!.spanId);
      expect(bFire!.parentSpanId).toBe(bSubmit!.spanId);
      expect(bClaim!.parentSpanId).toBe(bSubmit!.spanId);
      expect(bWorker!.parentSpanId).toBe(bClaim!.spanId);
      expect(bComplete!.parentSpanId).toBe(bSubmit!.spanId);
      // The worker was handed the claim's context, under the name the SDKs read.
      expect(handed.get(a.taskId)).toBe(`00-${traceId}-${aClaim!.spanId}-01`);
      expect(handed.get(b.taskId)).toBe(`00-${traceId}-${bClaim!.spanId}-01`);
      // The attributes of a hop: task id, type, attempt, partition.
      expect(attribute(aClaim!, 'wheelhouse.task.type')).toBe(taskType);
      expect(attribute(aClaim!, 'wheelhouse.task.attempt')).toBe(1);
      expect(attribute(aComplete!, 'wheelhouse.task.attempt')).toBe(1);
      const partition = attribute(aSubmit!, 'wheelhouse.task.partition');
      expect(typeof partition).toBe('number');
      for (const s of [aFire, aClaim, aComplete]) expect(attribute(s!, 'wheelhouse.task.partition')).toBe(partition);
    }, 40_000);
  }
});

describe('with OTLP over http/protobuf', () => {
  let receiver: Receiver;
  let c: TestCluster;
  beforeAll(async () => {
    receiver = await startReceiver();
    setTracingEnv({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_BSP_SCHEDULE_DELAY: '50',
    });
    c = await startTestNode('embedded', { logLevel: process.env.TEST_LOG ?? 'silent' });
  });
  afterAll(async () => {
    await c?.cleanup();
    setTracingEnv({});
    await receiver?.close();
  });

  it('exports the submit span as protobuf to /v1/traces', async () => {
    const { traceId, traceparent } = newTraceparent();
    await createClient({ url: c.url }).submit({ taskType: uniqueType('otel.proto'), traceparent });
    const traceBytes = Buffer.from(traceId, 'hex');
    const request = await eventually(async () => {
      await flushTracing();
      return receiver.requests.find((r) => r.body.includes(traceBytes));
    });
    expect(request.contentType).toBe('application/x-protobuf');
    expect(request.body.includes(Buffer.from('wheelhouse.submit'))).toBe(true);
  }, 30_000);
});
