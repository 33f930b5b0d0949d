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
import { HopBatch } from './otlp-hop-batch.js';

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
const ZERO_TRACE = '0'.repeat(32);
/** `SamplingDecision.RECORD_AND_SAMPLED` (the SDK's enum, not imported: this module loads without the SDK). */
const RECORD_AND_SAMPLED = 2;
const UNSET = Object.freeze({ code: SpanStatusCode.UNSET });
const NONE: never[] = Object.freeze([]) as unknown as never[];

export class HopRecords {
  private ids: Buffer = Buffer.alloc(0);
  private nextId = 0;

  /**
   * Hops go to `sink`: a span processor, as finished spans, or a {@link HopBatch}, written
   * straight as OTLP/protobuf (`http/protobuf`, decision 0045). `random` and `clock` are the
   * source of ids and of the time (tests fix them).
   */
  constructor(
    private readonly sink: Pick<SpanProcessor, 'onEnd'> | HopBatch,
    private readonly resource: ReadableSpan['resource'],
    private readonly scope: ReadableSpan['instrumentationScope'],
    private readonly random: (bytes: number) => Buffer = randomBytes,
    private readonly clock: () => number = () => performance.timeOrigin + performance.now(),
  ) {}

  /**
   * Records a finished INTERNAL span named `name`, child of `traceparent`, from `startMs`
   * (default: now) to now. An invalid parent records nothing.
   */
  record(name: string, traceparent: string, attributes: Attributes, startMs?: number): void {
    this.write(name, traceparent, attributes, startMs);
  }

  /** {@link record}, answering the span's own `traceparent` (a claim's, handed to the worker); an invalid parent's as it is. */
  recordContext(name: string, traceparent: string, attributes: Attributes, startMs?: number): string {
    const at = this.write(name, traceparent, attributes, startMs);
    return at < 0 ? traceparent : `00-${traceparent.slice(3, 35)}-${this.ids.toString('hex', at, at + 8)}-01`;
  }

  /** Writes a record; answers where its span id is in `ids`, or -1 for an invalid parent. */
  private write(name: string, traceparent: string, attributes: Attributes, startMs: number | undefined): number {
    if (!validParent(traceparent)) return -1;
    const nowMs = this.clock();
    const endMs = startMs === undefined ? nowMs : Math.max(nowMs, startMs);
    const at = this.spanId();
    const sink = this.sink;
    if (sink instanceof HopBatch) {
      sink.add(
        name,
        SpanKind.INTERNAL,
        traceparent,
        3,
        this.ids,
        at,
        traceparent,
        36,
        startMs ?? endMs,
        endMs,
        attributes,
      );
      return at;
    }
    const parent: SpanContext = {
      traceId: traceparent.slice(3, 35),
      spanId: traceparent.slice(36, 52),
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    };
    const context: SpanContext = {
      traceId: parent.traceId,
      spanId: this.ids.toString('hex', at, at + 8),
      traceFlags: TraceFlags.SAMPLED,
    };
    sink.onEnd(
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
    return at;
  }

  /**
   * Opens a span that starts now, child of `parent` (a new trace when null), which the sampler
   * decides on as the tracer's would (null: the SDK's default, `parentbased_always_on`, decided
   * here without a context made for it: sampled for a root, else as its parent was): the submit, whose parent may be absent, not sampled, or
   * one the ratio sampler refuses. Answers its `traceparent` (flags 00 when not sampled: its
   * task carries the trace on, and nothing is recorded), and `end`, which records it finished.
   * The submit cost ~9 µs of the node's CPU a task through the tracer (W1 traced, issue 32).
   */
  open(
    name: string,
    kind: SpanKind,
    parent: SpanContext | null,
    attributes: Attributes,
    sampler: Pick<Sampler, 'shouldSample'> | null,
  ): OpenHop {
    const traceId = parent?.traceId ?? this.traceId();
    const at = this.spanId();
    const spanId = this.ids.toString('hex', at, at + 8);
    let sampled: boolean;
    if (sampler === null) sampled = parent === null || (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
    else {
      const context = parent === null ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent);
      const result = sampler.shouldSample(context, traceId, name, kind, attributes, []);
      sampled = (result.decision as number) === RECORD_AND_SAMPLED;
      if (sampled && result.attributes !== undefined) Object.assign(attributes, result.attributes);
    }
    const traceparent = `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`;
    if (!sampled) return { traceparent, end: () => undefined };
    const startMs = this.clock();
    const sink = this.sink;
    const ids = this.ids;
    const end =
      sink instanceof HopBatch
        ? () => {
            const endMs = Math.max(startMs, this.clock());
            const parentId = parent === null ? null : parent.spanId;
            sink.add(name, kind, traceparent, 3, ids, at, parentId, 0, startMs, endMs, attributes);
          }
        : () => {
            const endMs = Math.max(startMs, this.clock());
            const own: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED };
            const span = new HopSpan(
              name,
              own,
              parent ?? undefined,
              hrTime(startMs),
              hrTime(endMs),
              attributes,
              this.resource,
              this.scope,
              kind,
            );
            sink.onEnd(span);
          };
    return { traceparent, end };
  }

  /** A new span id: 8 random bytes, never all zeros; answers where they are in `ids`. */
  private spanId(): number {
    const at = this.draw(8);
    return this.ids.readUInt32BE(at) === 0 && this.ids.readUInt32BE(at + 4) === 0 ? this.spanId() : at;
  }

  /** A new trace id: 16 random bytes as hex, never all zeros. */
  private traceId(): string {
    const at = this.draw(16);
    const id = this.ids.toString('hex', at, at + 16);
    return id === ZERO_TRACE ? this.traceId() : id;
  }

  /** Where the next `bytes` random bytes are in `ids`, drawing more when they run out. */
  private draw(bytes: number): number {
    if (this.nextId + bytes > this.ids.length) {
      this.ids = this.random(8 * IDS_PER_DRAW);
      this.nextId = 0;
    }
    const at = this.nextId;
    this.nextId += bytes;
    return at;
  }
}

/** A span {@link HopRecords.open} opened: the context its task stores, and its end. */
export interface OpenHop {
  readonly traceparent: string;
  end(): void;
}

/**
 * Whether a stored `traceparent` can be a hop's parent. Stored contexts were checked when their
 * task was submitted (`isTraceparent`); version 00's fixed layout is read by position, and a
 * later version's first four fields, which keep that layout, the same way.
 */
function validParent(traceparent: string): boolean {
  return traceparent.length >= 55 && traceparent.charCodeAt(2) === 45 && traceparent.charCodeAt(35) === 45;
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
