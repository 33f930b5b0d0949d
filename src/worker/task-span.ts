import {
  context,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Span,
} from '@opentelemetry/api';
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

/** The API's no-op provider: what the global provider delegates to while no SDK is registered. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/**
 * Whether no SDK is registered in this process: the global provider is the API's proxy and it
 * delegates to the no-op provider. A provider registered through another copy of the API reads
 * as registered (not the same proxy class), which only costs the full path.
 */
function noSdk(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider && provider.getDelegate() === NOOP_PROVIDER;
}

/**
 * An attempt without an SDK: the no-op tracer's span would record nothing and carry the context
 * the task was handed, so that context is kept as it is and nothing else is made (W1 with the
 * node tracing and the workers without an SDK: ~6 µs of the worker's CPU a task in contexts,
 * ids and closures that ended up doing nothing).
 */
class UntracedAttempt implements AttemptSpan {
  constructor(readonly traceparent: string) {}

  run<T>(fn: () => T): T {
    return fn();
  }

  end(): void {}
}

/** The span of the attempt of `task`; null when it came without a (valid) `traceparent`. */
export function attemptSpan(task: WirePolledTask): AttemptSpan | null {
  if (typeof task.traceparent !== 'string') return null;
  if (noSdk()) return TRACEPARENT.test(task.traceparent) ? new UntracedAttempt(task.traceparent) : null;
  const m = TRACEPARENT.exec(task.traceparent);
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
