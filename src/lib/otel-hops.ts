import { randomBytes } from 'node:crypto';
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type HrTime,
  type SpanContext,
} from '@opentelemetry/api';
import type { ReadableSpan, Sampler, SpanProcessor } from '@opentelemetry/sdk-trace-base';

/**
 * Finished hop spans built in one step (`recordHop` in otel.ts; docs/decisions/0044-hop-records.md).
 * A hop after the submit has a parent that is known (the task's stored `traceparent`), sampled
 * and remote, and it has ended by the time it is recorded: what the SDK's tracer would do for
 * it — ask the sampler, build a context, check every attribute, fill a live span, then end it
 * and hand it to the span processor — comes down to the record the processor receives. W1 with
 * every task traced spent ~6 µs of the node's CPU a hop in the tracer, four hops a task.
 */

/** The span ids of this many records come from one call to the random source. */
const IDS_PER_DRAW = 512;
const ZERO_SPAN = '0'.repeat(16);
const ZERO_TRACE = '0'.repeat(32);
/** `SamplingDecision.RECORD_AND_SAMPLED` (the SDK's enum, not imported: this module loads without the SDK). */
const RECORD_AND_SAMPLED = 2;
const UNSET = Object.freeze({ code: SpanStatusCode.UNSET });
const NONE: never[] = Object.freeze([]) as unknown as never[];

export class HopRecords {
  private ids = Buffer.alloc(0);
  private nextId = 0;

  constructor(
    private readonly processor: Pick<SpanProcessor, 'onEnd'>,
    private readonly resource: ReadableSpan['resource'],
    private readonly scope: ReadableSpan['instrumentationScope'],
  ) {}

  /**
   * Hands the processor a finished INTERNAL span named `name`, child of `traceparent`, from
   * `startMs` (default: now) to now. Answers its `traceparent`; an invalid parent records
   * nothing and is answered as it is.
   */
  record(name: string, traceparent: string, attributes: Attributes, startMs?: number): string {
    const parent = parentOf(traceparent);
    if (parent === null) return traceparent;
    const nowMs = performance.timeOrigin + performance.now();
    const endMs = startMs === undefined ? nowMs : Math.max(nowMs, startMs);
    const context: SpanContext = { traceId: parent.traceId, spanId: this.spanId(), traceFlags: TraceFlags.SAMPLED };
    this.processor.onEnd(
      new HopSpan(
        name,
        context,
        parent,
        hrTime(startMs ?? endMs),
        hrTime(endMs),
        attributes,
        this.resource,
        this.scope,
      ),
    );
    return `00-${context.traceId}-${context.spanId}-01`;
  }

  /**
   * Opens a span that starts now, child of `parent` (a new trace when null), which the sampler
   * decides on as the tracer's would: the submit, whose parent may be absent, not sampled, or
   * one the ratio sampler refuses. Answers its `traceparent` (flags 00 when not sampled: its
   * task carries the trace on, and nothing is recorded), and `end`, which records it finished.
   * The submit cost ~9 µs of the node's CPU a task through the tracer (W1 traced, issue 32).
   */
  open(
    name: string,
    kind: SpanKind,
    parent: SpanContext | null,
    attributes: Attributes,
    sampler: Pick<Sampler, 'shouldSample'>,
  ): OpenHop {
    const traceId = parent?.traceId ?? this.traceId();
    const spanId = this.spanId();
    const context = parent === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
    const result = sampler.shouldSample(context, traceId, name, kind, attributes, []);
    const sampled = (result.decision as number) === RECORD_AND_SAMPLED;
    const traceparent = `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
    if (!sampled) return { traceparent, end: () => undefined };
    if (result.attributes !== undefined) Object.assign(attributes, result.attributes);
    const startMs = performance.timeOrigin + performance.now();
    const own: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED };
    return {
      traceparent,
      end: () => {
        const endMs = Math.max(startMs, performance.timeOrigin + performance.now());
        this.processor.onEnd(
          new HopSpan(
            name,
            own,
            parent ?? undefined,
            hrTime(startMs),
            hrTime(endMs),
            attributes,
            this.resource,
            this.scope,
            kind,
          ),
        );
      },
    };
  }

  /** A new span id: 8 random bytes as hex, never all zeros. */
  private spanId(): string {
    const id = this.draw(8);
    return id === ZERO_SPAN ? this.spanId() : id;
  }

  /** A new trace id: 16 random bytes as hex, never all zeros. */
  private traceId(): string {
    const id = this.draw(16);
    return id === ZERO_TRACE ? this.traceId() : id;
  }

  private draw(bytes: number): string {
    if (this.nextId + bytes > this.ids.length) {
      this.ids = randomBytes(8 * IDS_PER_DRAW);
      this.nextId = 0;
    }
    return this.ids.toString('hex', this.nextId, (this.nextId += bytes));
  }
}

/** A span {@link HopRecords.open} opened: the context its task stores, and its end. */
export interface OpenHop {
  readonly traceparent: string;
  end(): void;
}

/**
 * The remote, sampled parent a stored `traceparent` names. Stored contexts were checked when
 * their task was submitted (`isTraceparent`); version 00's fixed layout is read by position, and
 * a later version's first four fields, which keep that layout, the same way.
 */
function parentOf(traceparent: string): SpanContext | null {
  if (traceparent.length < 55 || traceparent.charCodeAt(2) !== 45 || traceparent.charCodeAt(35) !== 45) return null;
  const traceId = traceparent.slice(3, 35);
  const spanId = traceparent.slice(36, 52);
  return { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true };
}

function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6))];
}

/** A finished span as span processors and exporters read it (`ReadableSpan`). */
class HopSpan implements ReadableSpan {
  readonly status = UNSET;
  readonly links = NONE;
  readonly events = NONE;
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;

  constructor(
    readonly name: string,
    private readonly context: SpanContext,
    readonly parentSpanContext: SpanContext | undefined,
    readonly startTime: HrTime,
    readonly endTime: HrTime,
    readonly attributes: Attributes,
    readonly resource: ReadableSpan['resource'],
    readonly instrumentationScope: ReadableSpan['instrumentationScope'],
    readonly kind: SpanKind = SpanKind.INTERNAL,
  ) {}

  get duration(): HrTime {
    let seconds = this.endTime[0] - this.startTime[0];
    let nanos = this.endTime[1] - this.startTime[1];
    if (nanos < 0) {
      seconds -= 1;
      nanos += 1e9;
    }
    return [seconds, nanos];
  }

  spanContext(): SpanContext {
    return this.context;
  }
}
