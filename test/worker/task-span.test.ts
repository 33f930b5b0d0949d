import { afterEach, describe, expect, it } from 'vitest';
import { context, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { attemptSpan } from '../../src/worker/task-span.js';
import type { WirePolledTask } from '../../src/worker/wire.js';

/**
 * The worker's span of an attempt (src/worker/task-span.ts): with an SDK registered, a
 * recorded child of the context the task was handed; without one, that context carried on as
 * it is and nothing made for it.
 */

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

function task(traceparent?: string): WirePolledTask {
  return {
    task_id: '6f1c2a57-8d3e-4b2a-9f0e-2d1c3b4a5e6f',
    task_type: 'email.send',
    payload: null,
    attempt: 1,
    lease_token: 'token',
    lease_expires_at: new Date().toISOString(),
    ...(traceparent === undefined ? {} : { traceparent }),
  };
}

afterEach(() => {
  trace.disable();
});

describe('an attempt span without an SDK registered', () => {
  it('hands on the task’s context as it came and runs the handler as it is', () => {
    const span = attemptSpan(task(PARENT));
    expect(span).not.toBeNull();
    expect(span?.traceparent).toBe(PARENT);
    expect(span?.run(() => 42)).toBe(42);
    span?.end(null);
  });

  it('is none for a task without a context or with one that is not valid', () => {
    expect(attemptSpan(task())).toBeNull();
    expect(attemptSpan(task('00-xyz'))).toBeNull();
  });
});

describe('an attempt span with an SDK registered', () => {
  it('records a child of the task’s context, active while the handler runs', () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    const span = attemptSpan(task(PARENT));
    expect(span?.traceparent).not.toBe(PARENT);
    expect(span?.traceparent.slice(0, 36)).toBe(PARENT.slice(0, 36));
    const active = span?.run(() => trace.getSpanContext(context.active()));
    span?.end(null);
    const [recorded] = exporter.getFinishedSpans();
    expect(recorded?.name).toBe('wheelhouse.worker');
    expect(recorded?.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(`00-${recorded?.spanContext().traceId}-${recorded?.spanContext().spanId}-01`).toBe(span?.traceparent);
    // No context manager is registered here, so nothing is active: the SDK's own choice.
    expect(active).toBeUndefined();
  });
});
