import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { tracingOn } from '../../src/lib/otel.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import {
  exportedSpan,
  newTraceparent,
  setTracingEnv,
  traceTo,
  startReceiver,
  type OtlpSpan,
  type Receiver,
} from '../support/otlp-receiver.js';
import { pollNext } from '../support/fake-clock-poll.js';

/**
 * The hops of a task whose due entry went through the store (docs/decisions/0038-tracing.md):
 * a delayed task's entry waits in a far bucket (Redis, or the embedded buckets) and is read
 * back by the cascade, or by a node that restarted, and its fire and claim spans are still the
 * submit span's children. Time is a FakeClock, so that minutes pass in milliseconds. Also:
 * `GET /api/tasks/{id}` shows the stored context.
 */

const MINUTE = 60_000;

describe.each(BACKENDS)('traced hops of entries read back from the store, on %s', (backend) => {
  let receiver: Receiver;
  let c: TestCluster | undefined;
  beforeAll(async () => {
    receiver = await startReceiver();
    traceTo(receiver);
  });
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });
  afterAll(async () => {
    setTracingEnv({});
    await receiver?.close();
  });

  const spanOf = (taskId: string, name: string): Promise<OtlpSpan> => exportedSpan(receiver, taskId, name);

  const submitDelayed = async (url: string, type: string, dueMs: number, traceparent: string): Promise<string> => {
    const r = await api<{ task_id: string }>(url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
      traceparent,
    });
    expect(r.status).toBe(201);
    return r.body.task_id;
  };

  /** The task's fire and claim spans are its submit span's children, in the client's trace. */
  const expectJoined = async (taskId: string, traceId: string): Promise<void> => {
    const submit = await spanOf(taskId, 'wheelhouse.submit');
    const fire = await spanOf(taskId, 'wheelhouse.fire');
    const claim = await spanOf(taskId, 'wheelhouse.claim');
    expect([submit.traceId, fire.traceId, claim.traceId]).toEqual([traceId, traceId, traceId]);
    expect(fire.parentSpanId).toBe(submit.spanId);
    expect(claim.parentSpanId).toBe(submit.spanId);
  };

  it('a delayed task whose entry waited in a far bucket: its fire and claim join the submit’s trace', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 11, 59, 30));
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    expect(tracingOn()).toBe(true);
    const type = `otel.far.${backend}`;
    const { traceId, traceparent } = newTraceparent();
    const far = await submitDelayed(c.url, type, clock.now() + 5 * MINUTE + 7, traceparent);
    await clock.advance(5 * MINUTE + 7);
    expect((await pollNext(c.url, type, clock)).map((t) => t.task_id)).toEqual([far]);
    await expectJoined(far, traceId);
  }, 40_000);

  it('a delayed task placed before a restart: its fire and claim join the submit’s trace', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 11, 0, 0));
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const type = `otel.restart.${backend}`;
    const t0 = clock.now();
    const { traceId, traceparent } = newTraceparent();
    const later = await submitDelayed(c.url, type, t0 + 10 * MINUTE, traceparent);
    const after = new FakeClock(t0 + 2 * MINUTE);
    await c.restart({ clock: after });
    expect(tracingOn()).toBe(true);
    await after.advanceTo(t0 + 10 * MINUTE);
    expect((await pollNext(c.url, type, after)).map((t) => t.task_id)).toEqual([later]);
    await expectJoined(later, traceId);
  }, 40_000);

  it('GET /api/tasks/{id} shows the stored context: the submit span’s', async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
    const { traceId, traceparent } = newTraceparent();
    const client = createClient({ url: c.url });
    const { taskId } = await client.submit({ taskType: `otel.view.${backend}`, traceparent });
    const submit = await spanOf(taskId, 'wheelhouse.submit');
    const stored = `00-${traceId}-${submit.spanId}-01`;
    const got = await api<{ traceparent: string | null }>(c.url, 'GET', `/api/tasks/${taskId}`);
    expect(got.body.traceparent).toBe(stored);
    expect((await client.get(taskId)).traceparent).toBe(stored);
  }, 30_000);
});
