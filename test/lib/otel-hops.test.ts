import { SpanKind, SpanStatusCode, TraceFlags } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import * as sdk from '@opentelemetry/sdk-trace-base';
import { HopRecords } from '../../src/lib/otel-hops.js';
import { samplerFromEnv } from '../../src/lib/otel.js';

/**
 * The finished hop spans handed straight to the span processor (decision 0044): what an
 * exporter reads of them. That they reach a receiver, parented, in one trace, over both
 * protocols: test/e2e/tracing.test.ts.
 */
describe('hop records', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parentId = '00f067aa0ba902b7';
  const resource = { attributes: {} } as unknown as ReadableSpan['resource'];
  const scope = { name: 'wheelhouse', version: 'test' };
  const recorder = (): { spans: ReadableSpan[]; hops: HopRecords } => {
    const spans: ReadableSpan[] = [];
    return { spans, hops: new HopRecords({ onEnd: (span) => spans.push(span) }, resource, scope) };
  };

  it('is a finished, sampled INTERNAL child of the stored context, answered as its own traceparent', () => {
    const { spans, hops } = recorder();
    const startMs = Date.now() - 25;
    const answered = hops.recordContext('wheelhouse.claim', `00-${traceId}-${parentId}-01`, { a: 1 }, startMs);
    expect(spans).toHaveLength(1);
    const span = spans[0]!;
    const context = span.spanContext();
    expect(answered).toBe(`00-${traceId}-${context.spanId}-01`);
    expect(context.traceId).toBe(traceId);
    expect(context.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(context.spanId).not.toBe(parentId);
    expect(context.traceFlags & TraceFlags.SAMPLED).toBe(TraceFlags.SAMPLED);
    expect(span.parentSpanContext).toEqual({ traceId, spanId: parentId, traceFlags: 1, isRemote: true });
    expect(span.name).toBe('wheelhouse.claim');
    expect(span.kind).toBe(SpanKind.INTERNAL);
    expect(span.attributes).toEqual({ a: 1 });
    expect(span.status.code).toBe(SpanStatusCode.UNSET);
    expect(span.ended).toBe(true);
    expect([span.events, span.links]).toEqual([[], []]);
    expect(span.resource).toBe(resource);
    expect(span.instrumentationScope).toBe(scope);
    // From startMs to now, in [seconds, nanoseconds].
    const ms = (t: readonly [number, number]): number => t[0] * 1000 + t[1] / 1e6;
    expect(ms(span.startTime)).toBeCloseTo(startMs, 3);
    expect(ms(span.endTime)).toBeGreaterThanOrEqual(ms(span.startTime));
    expect(ms(span.endTime)).toBeLessThanOrEqual(Date.now() + 1);
    expect(ms(span.duration)).toBeCloseTo(ms(span.endTime) - ms(span.startTime), 3);
    for (const t of [span.startTime, span.endTime, span.duration]) {
      expect(t[1]).toBeGreaterThanOrEqual(0);
      expect(t[1]).toBeLessThan(1e9);
    }
  });

  it('starts and ends at once without a start, and never ends before a start ahead of its clock', () => {
    const { spans, hops } = recorder();
    hops.record('wheelhouse.fire', `00-${traceId}-${parentId}-01`, {});
    hops.record('wheelhouse.complete', `00-${traceId}-${parentId}-01`, {}, Date.now() + 5_000);
    expect(spans[0]!.startTime).toEqual(spans[0]!.endTime);
    expect(spans[1]!.endTime).toEqual(spans[1]!.startTime);
  });

  it('gives every record a span id of its own, across draws of the random source', () => {
    const { spans, hops } = recorder();
    for (let i = 0; i < 1_500; i++) hops.record('h', `00-${traceId}-${parentId}-01`, {});
    expect(new Set(spans.map((s) => s.spanContext().spanId)).size).toBe(1_500);
  });

  it('reads a later version by the fields it shares with 00, and records nothing for a malformed context', () => {
    const { spans, hops } = recorder();
    hops.record('h', `01-${traceId}-${parentId}-01-more`, {});
    expect(spans[0]!.parentSpanContext?.spanId).toBe(parentId);
    expect(hops.recordContext('h', 'not-a-traceparent', {})).toBe('not-a-traceparent');
    expect(spans).toHaveLength(1);
  });

  describe("opened submit spans (sampled by the provider's sampler, recorded at their end)", () => {
    const defaults = samplerFromEnv(sdk, {});
    const parentOf = (flags: string) => ({
      traceId,
      spanId: parentId,
      traceFlags: parseInt(flags, 16),
      isRemote: true,
    });

    it('a root: a new trace, sampled by default, a PRODUCER span with no parent, recorded only when it ends', () => {
      const { spans, hops } = recorder();
      const open = hops.open('wheelhouse.submit', SpanKind.PRODUCER, null, { b: 2 }, defaults);
      expect(open.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(open.traceparent.slice(3, 35)).not.toBe('0'.repeat(32));
      expect(spans).toHaveLength(0);
      open.end();
      expect(spans).toHaveLength(1);
      const span = spans[0]!;
      expect(`00-${span.spanContext().traceId}-${span.spanContext().spanId}-01`).toBe(open.traceparent);
      expect(span.parentSpanContext).toBeUndefined();
      expect(span.kind).toBe(SpanKind.PRODUCER);
      expect(span.attributes).toEqual({ b: 2 });
    });

    it('a child of a sampled context joins its trace; of an unsampled one, carries it on unsampled and records nothing', () => {
      const { spans, hops } = recorder();
      const child = hops.open('s', SpanKind.PRODUCER, parentOf('01'), {}, defaults);
      expect(child.traceparent.slice(0, 36)).toBe(`00-${traceId}-`);
      child.end();
      expect(spans[0]!.parentSpanContext?.spanId).toBe(parentId);
      const quiet = hops.open('s', SpanKind.PRODUCER, parentOf('00'), {}, defaults);
      expect(quiet.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
      quiet.end();
      expect(spans).toHaveLength(1);
    });

    it('decides without a sampler (null) as the default sampler does: a root and a sampled parent in, an unsampled one out', () => {
      const { spans, hops } = recorder();
      for (const parent of [null, parentOf('01'), parentOf('00')]) {
        const theirs = hops.open('s', SpanKind.PRODUCER, parent, {}, defaults).traceparent.slice(-2);
        const ours = hops.open('s', SpanKind.PRODUCER, parent, {}, null).traceparent.slice(-2);
        expect(ours).toBe(theirs);
      }
      expect(spans).toHaveLength(0);
    });

    it('follows OTEL_TRACES_SAMPLER as the SDK reads it: off, ratio, and parent-based with an unsampled root', () => {
      const { spans, hops } = recorder();
      const off = samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'always_off' });
      const opened = hops.open('s', SpanKind.PRODUCER, parentOf('01'), {}, off);
      expect(opened.traceparent.endsWith('-00')).toBe(true);
      opened.end();
      const none = samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' });
      expect(hops.open('s', SpanKind.PRODUCER, null, {}, none).traceparent.endsWith('-00')).toBe(true);
      const rootOff = samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'parentbased_always_off' });
      expect(hops.open('s', SpanKind.PRODUCER, null, {}, rootOff).traceparent.endsWith('-00')).toBe(true);
      expect(hops.open('s', SpanKind.PRODUCER, parentOf('01'), {}, rootOff).traceparent.endsWith('-01')).toBe(true);
      expect(spans).toHaveLength(0);
      // Half of many new traces under a ratio of 0.5 (the ratio sampler reads the trace id).
      const half = samplerFromEnv(sdk, {
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.5',
      });
      let sampled = 0;
      for (let i = 0; i < 2_000; i++)
        if (hops.open('s', SpanKind.PRODUCER, null, {}, half).traceparent.endsWith('-01')) sampled++;
      expect(sampled).toBeGreaterThan(800);
      expect(sampled).toBeLessThan(1_200);
      // An unknown name, or a ratio out of range, is the SDK's default.
      expect(samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'jaeger_remote' }).toString()).toBe(defaults.toString());
      expect(
        samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '7' }).toString(),
      ).toBe('TraceIdRatioBased{1}');
    });
  });
});
