import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Span } from '@opentelemetry/api';
import type { TaskOutcome } from './task-run.js';
import type { WirePolledTask } from './wire.js';

/**
 * The worker's span of one attempt (docs/decisions/0038-tracing.md): started when the node
 * hands the task with a `traceparent` (the claim's span, or the task's context), as that
 * context's child, through `@opentelemetry/api` only. The application registers the SDK (or
 * not: the API's no-op tracer then makes nothing); the handler runs with the span active, so
 * that its own spans are its children when a context manager is registered. A task handed
 * without a `traceparent` costs nothing here.
 */

export const WORKER_SPAN = 'wheelhouse.worker';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** One attempt's span, and how to run the handler under it. */
export interface AttemptSpan {
  /** Calls `fn` with the span as the active one. */
  run<T>(fn: () => T): T;
  /** Ends the span with the attempt's outcome (null: the attempt timed out here). */
  end(outcome: TaskOutcome | null): void;
  /**
   * The span's context as a `traceparent`, for the children the attempt spawns: their submit
   * spans are its children. Without a registered SDK the span records nothing and carries the
   * context the task was handed.
   */
  readonly traceparent: string;
}

/** The span of the attempt of `task`; null when it came without a (valid) `traceparent`. */
export function attemptSpan(task: WirePolledTask): AttemptSpan | null {
  const m = typeof task.traceparent === 'string' ? TRACEPARENT.exec(task.traceparent) : null;
  if (m === null) return null;
  const parent = trace.setSpanContext(ROOT_CONTEXT, {
    traceId: m[1] as string,
    spanId: m[2] as string,
    traceFlags: parseInt(m[3] as string, 16) & TraceFlags.SAMPLED,
    isRemote: true,
  });
  const span = trace.getTracer('wheelhouse-worker').startSpan(
    WORKER_SPAN,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        'wheelhouse.task.id': task.task_id,
        'wheelhouse.task.type': task.task_type,
        'wheelhouse.task.attempt': task.attempt,
      },
    },
    parent,
  );
  const active = trace.setSpan(parent, span);
  const c = span.spanContext();
  return {
    run: (fn) => context.with(active, fn),
    end: (outcome) => endWith(span, outcome),
    traceparent: `00-${c.traceId}-${c.spanId}-${(c.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`,
  };
}

function endWith(span: Span, outcome: TaskOutcome | null): void {
  const status = outcome === null ? 'timed_out' : outcome.outcome.status;
  span.setAttribute('wheelhouse.task.outcome', status);
  if (outcome === null) span.setStatus({ code: SpanStatusCode.ERROR, message: 'the attempt reached its deadline' });
  else if (outcome.outcome.status === 'failed')
    span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.outcome.error ?? 'failed' });
  span.end();
}
