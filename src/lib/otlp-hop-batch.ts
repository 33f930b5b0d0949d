import { diag, TraceFlags, type Attributes, type SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { attributes, resourceMessage, scopeMessage, spanFlags, Unsupported, Writer } from './otlp-proto.js';

/**
 * Hop records written as OTLP/protobuf spans the moment they are recorded, batched as bytes
 * and exported by the SDK's transport (docs/decisions/0045-hop-bytes.md). With `http/protobuf`
 * a hop never becomes an object: its span goes straight into a buffer that becomes the next
 * request's body, behind the resource and scope every hop shares, written once. The bytes are
 * those {@link encodeTraceRequest} writes for the same span (a test compares them).
 *
 * Batching follows the SDK's batch span processor and reads its settings
 * (`OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, `OTEL_BSP_MAX_QUEUE_SIZE`): a
 * request at most every delay or as soon as a batch is full, one export at a time, and hops
 * beyond the queue dropped (counted, warned once a streak) rather than held without bound.
 */

const SAMPLED = { traceId: '', spanId: '', traceFlags: TraceFlags.SAMPLED };
/** The span flags of a sampled hop: no parent, or a remote one (every parent a hop has). */
const SAMPLED_ROOT = spanFlags(SAMPLED, false);
const SAMPLED_REMOTE_CHILD = spanFlags(SAMPLED, true);

/** Spans already written as protobuf: a request's body, and how many spans it holds. */
export interface EncodedSpans {
  readonly length: number;
  readonly body: Uint8Array;
}

/** Sends one request; `done` is called once it has been answered, or has failed. */
export type EncodedExport = (spans: EncodedSpans, done: () => void) => void;

export interface HopBatchOptions {
  maxExportBatchSize: number;
  maxQueueSize: number;
  scheduledDelayMillis: number;
}

/** The batch span processor's settings from the environment, with its defaults. */
export function hopBatchOptions(env: NodeJS.ProcessEnv = process.env): HopBatchOptions {
  const read = (name: string, fallback: number): number => {
    const value = Number(env[name]?.trim() || Number.NaN);
    return Number.isFinite(value) && value > 0 ? value : fallback;
  };
  const maxQueueSize = read('OTEL_BSP_MAX_QUEUE_SIZE', 2048);
  return {
    maxQueueSize,
    maxExportBatchSize: Math.min(read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512), maxQueueSize),
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY', 5000),
  };
}

/** Bytes a varint of `n` (< 2^35) takes. */
function varintLength(n: number): number {
  let bytes = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 0x80);
    bytes++;
  }
  return bytes;
}

function varintAt(buf: Buffer, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n % 0x80) | 0x80;
    n = Math.floor(n / 0x80);
  }
  buf[at++] = n;
  return at;
}

export class HopBatch {
  /** The spans written since the last request was sealed. */
  private readonly spans = new Writer(Buffer.allocUnsafe(64 * 1024));
  private written = 0;
  private readonly sealed: EncodedSpans[] = [];
  private sealedSpans = 0;
  private exporting = false;
  private timer: NodeJS.Timeout | undefined;
  private dropped = 0;
  private closed = false;
  private readonly idle: Array<() => void> = [];
  /** The request's fields before the spans: the resource, then the scope. */
  private readonly resource: Buffer;
  private readonly scope: Buffer;

  constructor(
    resource: ReadableSpan['resource'],
    scope: ReadableSpan['instrumentationScope'],
    private readonly send: EncodedExport,
    private readonly o: HopBatchOptions = hopBatchOptions(),
  ) {
    const w = new Writer(Buffer.allocUnsafe(1024));
    resourceMessage(w, resource);
    this.resource = Buffer.from(w.buf.subarray(0, w.pos));
    w.pos = 0;
    scopeMessage(w, scope);
    this.scope = Buffer.from(w.buf.subarray(0, w.pos));
    // Schema URLs come after the spans; a hop's resource and scope have none (see `seal`).
    if (resource.schemaUrl || scope.schemaUrl)
      throw new Error('hop records take a resource and scope without a schema URL');
  }

  /**
   * Writes one finished span (see {@link writeHop} for the arguments). A hop beyond the queue,
   * after shutdown, or with an attribute the writer does not take, is dropped.
   */
  add(
    name: string,
    kind: SpanKind,
    trace: string,
    traceAt: number,
    ids: Buffer,
    idAt: number,
    parent: string | null,
    parentAt: number,
    startMs: number,
    endMs: number,
    attrs: Attributes,
  ): void {
    if (this.closed || this.written + this.sealedSpans >= this.o.maxQueueSize) {
      if (this.dropped++ === 0 && !this.closed) diag.debug('hop records: the queue is full, dropping spans');
      return;
    }
    const w = this.spans;
    const at = w.pos;
    try {
      writeHop(w, name, kind, trace, traceAt, ids, idAt, parent, parentAt, startMs, endMs, attrs);
    } catch (error) {
      w.pos = at;
      if (error instanceof Unsupported) {
        // The node's hops carry strings and numbers only: this is a caller's mistake, said where
        // OpenTelemetry's own diagnostics go.
        diag.debug(`hop records: dropped a ${name} span with an attribute it cannot write`);
        return;
      }
      throw error;
    }
    if (this.dropped > 0 && !this.closed) {
      diag.warn(`Dropped ${this.dropped} hop spans because maxQueueSize was reached`);
      this.dropped = 0;
    }
    if (++this.written >= this.o.maxExportBatchSize) {
      this.seal();
      this.next();
    } else if (this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.seal();
        this.next();
      }, this.o.scheduledDelayMillis);
      this.timer.unref();
    }
  }

  /** Sends every span written so far; resolves once each request has been answered. */
  async flush(): Promise<void> {
    this.seal();
    this.next();
    while (this.exporting || this.sealed.length > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
  }

  /** Sends what is left and takes no more. */
  async shutdown(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  /** Turns the written spans into a request's body: `ExportTraceServiceRequest{resource_spans{…}}`. */
  private seal(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.written === 0) return;
    const spans = this.spans;
    const scopeSpans = this.scope.length + spans.pos;
    const resourceSpans = this.resource.length + 1 + varintLength(scopeSpans) + scopeSpans;
    const body = Buffer.allocUnsafe(1 + varintLength(resourceSpans) + resourceSpans);
    let at = 0;
    body[at++] = 0x0a; // resource_spans, field 1
    at = varintAt(body, at, resourceSpans);
    at += this.resource.copy(body, at);
    body[at++] = 0x12; // scope_spans, field 2
    at = varintAt(body, at, scopeSpans);
    at += this.scope.copy(body, at);
    spans.buf.copy(body, at, 0, spans.pos);
    this.sealed.push({ length: this.written, body });
    this.sealedSpans += this.written;
    spans.pos = 0;
    this.written = 0;
  }

  /** Sends the oldest sealed request, unless one is on its way. */
  private next(): void {
    if (this.exporting) return;
    const request = this.sealed.shift();
    if (request === undefined) {
      for (const resolve of this.idle.splice(0)) resolve();
      return;
    }
    this.sealedSpans -= request.length;
    this.exporting = true;
    this.send(request, () => {
      this.exporting = false;
      this.next();
    });
  }
}

/**
 * One finished span as a `ScopeSpans`' `spans` field (2), in the fields and order of
 * `span` in otlp-proto.ts: trace id (hex at `traceAt` of `trace`), span id (8 bytes at `idAt`
 * of `ids`), parent span id (hex at `parentAt` of `parent`, remote; none when null), name,
 * kind, times from `startMs` to `endMs` as `HrTime` would hold them, attributes, no events
 * or links, status unset, sampled.
 */
export function writeHop(
  w: Writer,
  name: string,
  kind: SpanKind,
  trace: string,
  traceAt: number,
  ids: Buffer,
  idAt: number,
  parent: string | null,
  parentAt: number,
  startMs: number,
  endMs: number,
  attrs: Attributes,
): void {
  const at = w.begin2(2);
  w.hexAt(1, trace, traceAt, 16);
  w.bytes(2, ids, idAt, 8);
  if (parent !== null) w.hexAt(4, parent, parentAt, 8);
  w.string(5, name);
  w.tag(6, 0);
  w.varint(kind + 1);
  time(w, 7, startMs);
  time(w, 8, endMs);
  attributes(w, 9, attrs);
  w.tag(10, 0);
  w.byte(0);
  w.tag(12, 0);
  w.byte(0);
  w.tag(14, 0);
  w.byte(0);
  const status = w.begin(15);
  w.tag(3, 0);
  w.byte(0);
  w.end(status);
  w.fixed32(16, parent === null ? SAMPLED_ROOT : SAMPLED_REMOTE_CHILD);
  w.end2(at);
}

/** Milliseconds since the epoch as the `HrTime` of otel-hops.ts's `hrTime` would write them. */
function time(w: Writer, field: number, ms: number): void {
  const seconds = Math.floor(ms / 1000);
  w.fixed64Nanos(field, seconds, Math.min(999_999_999, Math.round((ms - seconds * 1000) * 1e6)));
}
