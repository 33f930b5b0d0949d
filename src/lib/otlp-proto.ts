import type { AttributeValue, Attributes, HrTime, SpanContext } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';

/**
 * OTLP/protobuf for finished spans: an `ExportTraceServiceRequest` (opentelemetry-proto,
 * `collector/trace/v1`) written straight into one buffer (docs/decisions/0044-hop-records.md).
 * The SDK's serializer walks each span twice — once to size every message, once to write it —
 * through a call per field, and costs ~4.5 µs a span of the node's CPU; at four spans a task
 * that was most of what tracing cost W1. This writes each message once, after a byte left for
 * its length, and moves the message up in the rare case the length needs more than one byte
 * (a span's does; a few hundred bytes moved). Fields go in the SDK's order with its choices
 * (counts and status always written), so the bytes are the SDK's: the test compares them.
 * A span it cannot write (an attribute that is neither a primitive nor an array of them) makes
 * it answer undefined, and the caller falls back to the SDK's serializer for that batch.
 */

const INITIAL_BYTES = 256 * 1024;
/** The flags of a span that says whether its parent is remote (`SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`, `…_IS_REMOTE_MASK`). */
const HAS_IS_REMOTE = 0x100;
const IS_REMOTE = 0x200;

export class Unsupported extends Error {}

/** The value of each hex digit by its character code (ids are written in lower case); anything else reads as 0. */
const NIBBLE = new Uint8Array(128);
for (let c = 0; c < 10; c++) NIBBLE[48 + c] = c;
for (let c = 0; c < 6; c++) NIBBLE[97 + c] = NIBBLE[65 + c] = 10 + c;

function nibble(c: number): number {
  return c < 128 ? (NIBBLE[c] as number) : 0;
}

export class Writer {
  buf: Buffer;
  pos = 0;

  constructor(buf: Buffer) {
    this.buf = buf;
  }

  ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b;
  }

  /** A varint of a non-negative safe integer, or of a negative one as its 64-bit two's complement. */
  varint(value: number): void {
    this.ensure(10);
    if (value < 0) {
      this.bigVarint(BigInt.asUintN(64, BigInt(value)));
      return;
    }
    while (value >= 0x80) {
      this.buf[this.pos++] = (value % 0x80) | 0x80;
      value = Math.floor(value / 0x80);
    }
    this.buf[this.pos++] = value;
  }

  private bigVarint(value: bigint): void {
    while (value >= 0x80n) {
      this.buf[this.pos++] = Number(value & 0x7fn) | 0x80;
      value >>= 7n;
    }
    this.buf[this.pos++] = Number(value);
  }

  tag(field: number, wire: number): void {
    const tag = (field << 3) | wire;
    if (tag < 0x80) this.byte(tag);
    else this.varint(tag); // field 16 on
  }

  /**
   * A string field. A short ASCII string (ids, names, attribute keys: nearly all of them) is
   * copied a character at a time here, which is cheaper than a call into the runtime for each.
   */
  string(field: number, value: string): void {
    this.tag(field, 2);
    const length = value.length;
    if (length < 0x80) {
      this.ensure(1 + length);
      const buf = this.buf;
      const start = this.pos + 1;
      let i = 0;
      for (; i < length; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) break;
        buf[start + i] = c;
      }
      if (i === length) {
        buf[this.pos] = length;
        this.pos = start + length;
        return;
      }
    }
    const bytes = Buffer.byteLength(value);
    this.varint(bytes);
    this.ensure(bytes);
    this.pos += this.buf.write(value, this.pos, 'utf8');
  }

  /** Bytes given as hex (a trace or span id: 16 or 8 bytes). */
  hex(field: number, value: string): void {
    this.hexAt(field, value, 0, value.length >> 1);
  }

  /** `n` bytes given as hex from character `at` of `value` (an id inside a `traceparent`). */
  hexAt(field: number, value: string, at: number, n: number): void {
    this.tag(field, 2);
    this.ensure(1 + n);
    const buf = this.buf;
    buf[this.pos++] = n;
    for (let i = at; i < at + 2 * n; i += 2) {
      buf[this.pos++] = (nibble(value.charCodeAt(i)) << 4) | nibble(value.charCodeAt(i + 1));
    }
  }

  /** `n` bytes copied from `from` at `at` (a span id as drawn). */
  bytes(field: number, from: Buffer, at: number, n: number): void {
    this.tag(field, 2);
    this.ensure(1 + n);
    this.buf[this.pos++] = n;
    from.copy(this.buf, this.pos, at, at + n);
    this.pos += n;
  }

  /** An `HrTime` as unsigned nanoseconds since the epoch, fixed64: two 32-bit halves, no BigInt. */
  fixed64Time(field: number, time: HrTime): void {
    this.fixed64Nanos(field, time[0], time[1]);
  }

  /** Whole seconds and nanoseconds (below 10^9) since the epoch as fixed64 nanoseconds. */
  fixed64Nanos(field: number, seconds: number, nanos: number): void {
    this.tag(field, 1);
    this.ensure(8);
    // seconds · 10^9 + nanos, split at 2^32 exactly: seconds = hi · 2^16 + lo, each product < 2^53.
    const lo = seconds % 0x10000;
    const hi = (seconds - lo) / 0x10000;
    const fromLo = lo * 1e9 + nanos;
    const fromHi = hi * 1e9; // × 2^16
    const fromHiLow16 = fromHi % 0x10000; // its part below 2^32 once shifted: × 2^16
    const low = (fromLo % 0x100000000) + fromHiLow16 * 0x10000;
    const high = Math.floor(fromLo / 0x100000000) + (fromHi - fromHiLow16) / 0x10000 + Math.floor(low / 0x100000000);
    this.buf.writeUInt32LE(low % 0x100000000, this.pos);
    this.buf.writeUInt32LE(high % 0x100000000, this.pos + 4);
    this.pos += 8;
  }

  fixed32(field: number, value: number): void {
    this.tag(field, 5);
    this.ensure(4);
    this.buf.writeUInt32LE(value, this.pos);
    this.pos += 4;
  }

  double(field: number, value: number): void {
    this.tag(field, 1);
    this.ensure(8);
    this.buf.writeDoubleLE(value, this.pos);
    this.pos += 8;
  }

  /** Opens a length-delimited field; {@link end} closes it. Answers where its length goes. */
  begin(field: number): number {
    this.tag(field, 2);
    this.byte(0);
    return this.pos - 1;
  }

  /**
   * Opens a length-delimited field with two bytes kept for its length, for a message that
   * nearly always takes 128 bytes to 16 KiB (a span): {@link end2} closes it, moving it only
   * when its length takes one byte or three.
   */
  begin2(field: number): number {
    this.tag(field, 2);
    this.ensure(2);
    this.pos += 2;
    return this.pos - 2;
  }

  end2(at: number): void {
    const length = this.pos - at - 2;
    if (length >= 0x80 && length < 0x4000) {
      this.buf[at] = (length & 0x7f) | 0x80;
      this.buf[at + 1] = length >>> 7;
      return;
    }
    // One byte or three: as a one-byte field moved up or down by one.
    this.buf.copy(this.buf, at + 1, at + 2, this.pos);
    this.pos -= 1;
    this.end(at);
  }

  end(at: number): void {
    const length = this.pos - at - 1;
    if (length < 0x80) {
      this.buf[at] = length;
      return;
    }
    let extra = 1;
    for (let l = length >> 14; l > 0; l >>= 7) extra++;
    this.ensure(extra);
    this.buf.copy(this.buf, at + 1 + extra, at + 1, this.pos);
    this.pos += extra;
    let p = at;
    let value = length;
    while (value >= 0x80) {
      this.buf[p++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buf[p] = value;
  }
}

function anyValue(w: Writer, field: number, value: AttributeValue | null | undefined): void {
  const at = w.begin(field);
  if (typeof value === 'string') w.string(1, value);
  else if (typeof value === 'boolean') {
    w.tag(2, 0);
    w.byte(value ? 1 : 0);
  } else if (typeof value === 'number') {
    if (Number.isSafeInteger(value)) {
      w.tag(3, 0);
      w.varint(value);
    } else if (Number.isInteger(value))
      throw new Unsupported(); // past 2^53: left to the SDK's writer
    else w.double(4, value);
  } else if (Array.isArray(value)) {
    const array = w.begin(5);
    for (const element of value as unknown[]) {
      if (element !== null && element !== undefined && typeof element === 'object') throw new Unsupported();
      anyValue(w, 1, element as AttributeValue | null | undefined);
    }
    w.end(array);
  } else if (value !== null && value !== undefined) throw new Unsupported();
  w.end(at);
}

export function attributes(w: Writer, field: number, attrs: Attributes): void {
  for (const key in attrs) {
    const at = w.begin(field);
    w.string(1, key);
    anyValue(w, 2, attrs[key]);
    w.end(at);
  }
}

export function spanFlags(context: SpanContext, parentRemote: boolean | undefined): number {
  return (context.traceFlags & 0xff) | HAS_IS_REMOTE | (parentRemote ? IS_REMOTE : 0);
}

function span(w: Writer, s: ReadableSpan): void {
  const at = w.begin2(2);
  const context = s.spanContext();
  w.hex(1, context.traceId);
  w.hex(2, context.spanId);
  const traceState = context.traceState?.serialize();
  if (traceState) w.string(3, traceState);
  if (s.parentSpanContext?.spanId) w.hex(4, s.parentSpanContext.spanId);
  w.string(5, s.name);
  if (s.kind != null) {
    w.tag(6, 0);
    w.varint(s.kind + 1);
  }
  w.fixed64Time(7, s.startTime);
  w.fixed64Time(8, s.endTime);
  if (s.attributes) attributes(w, 9, s.attributes);
  w.tag(10, 0);
  w.varint(s.droppedAttributesCount);
  for (const event of s.events) {
    const e = w.begin(11);
    w.fixed64Time(1, event.time);
    w.string(2, event.name);
    if (event.attributes) attributes(w, 3, event.attributes);
    w.tag(4, 0);
    w.varint(event.droppedAttributesCount || 0);
    w.end(e);
  }
  w.tag(12, 0);
  w.varint(s.droppedEventsCount);
  for (const link of s.links) {
    const l = w.begin(13);
    w.hex(1, link.context.traceId);
    w.hex(2, link.context.spanId);
    const linkState = link.context.traceState?.serialize();
    if (linkState) w.string(3, linkState);
    if (link.attributes) attributes(w, 4, link.attributes);
    w.tag(5, 0);
    w.varint(link.droppedAttributesCount || 0);
    w.fixed32(6, spanFlags(link.context, link.context.isRemote));
    w.end(l);
  }
  w.tag(14, 0);
  w.varint(s.droppedLinksCount);
  const status = w.begin(15);
  if (s.status.message) w.string(2, s.status.message);
  w.tag(3, 0);
  w.varint(s.status.code);
  w.end(status);
  w.fixed32(16, spanFlags(context, s.parentSpanContext?.isRemote));
  w.end2(at);
}

/** A `ResourceSpans`' `resource` field (1). */
export function resourceMessage(w: Writer, resource: ReadableSpan['resource']): void {
  const r = w.begin(1);
  attributes(w, 1, resource.attributes);
  w.tag(2, 0);
  w.varint(0);
  w.end(r);
}

/** A `ScopeSpans`' `scope` field (1). */
export function scopeMessage(w: Writer, scope: ReadableSpan['instrumentationScope']): void {
  const sc = w.begin(1);
  w.string(1, scope.name);
  if (scope.version) w.string(2, scope.version);
  const extra = scope as { attributes?: Attributes; droppedAttributesCount?: number };
  if (extra.attributes) attributes(w, 3, extra.attributes);
  if (extra.droppedAttributesCount) {
    w.tag(4, 0);
    w.varint(extra.droppedAttributesCount);
  }
  w.end(sc);
}

/** The buffer requests are written in, kept between them (each answer is a copy of its part). */
let scratch: Buffer = Buffer.allocUnsafe(INITIAL_BYTES);

/** The spans as an OTLP/protobuf `ExportTraceServiceRequest`; undefined: one it cannot write. */
export function encodeTraceRequest(spans: readonly ReadableSpan[]): Uint8Array | undefined {
  // Grouped by resource, then scope, each by identity, in the order they first appear.
  type ByScope = Map<ReadableSpan['instrumentationScope'], ReadableSpan[]>;
  const byResource = new Map<ReadableSpan['resource'], ByScope>();
  for (const s of spans) {
    let scopes = byResource.get(s.resource);
    if (scopes === undefined) byResource.set(s.resource, (scopes = new Map() as ByScope));
    let list = scopes.get(s.instrumentationScope);
    if (list === undefined) scopes.set(s.instrumentationScope, (list = []));
    list.push(s);
  }
  const w = new Writer(scratch);
  try {
    for (const [resource, scopes] of byResource) {
      const rs = w.begin(1);
      resourceMessage(w, resource);
      for (const [scope, list] of scopes) {
        const ss = w.begin(2);
        scopeMessage(w, scope);
        for (const s of list) span(w, s);
        if (scope.schemaUrl) w.string(3, scope.schemaUrl);
        w.end(ss);
      }
      if (resource.schemaUrl) w.string(3, resource.schemaUrl);
      w.end(rs);
    }
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  } finally {
    scratch = w.buf; // grown, it stays grown
  }
  // A copy: the transport may still hold this request while the next one is written.
  return Uint8Array.prototype.slice.call(w.buf, 0, w.pos);
}
