import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Link } from '@opentelemetry/api';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { HopRecords } from '../../src/lib/otel-hops.js';
import { encodeTraceRequest } from '../../src/lib/otlp-proto.js';

/**
 * The OTLP/protobuf request the node exports (decision 0044) is byte for byte the one the
 * SDK's serializer writes for the same spans: SDK spans of every shape the SDK records and the
 * node's hop records, from two resources and two scopes.
 */
describe('OTLP/protobuf requests', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const long = 'x'.repeat(200);
  const unicode = 'tâche → 完了 🚀';

  function sdkSpans(service: string): ReadableSpan[] {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': service, 'deployment.tier': 3 }),
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    const tracer = provider.getTracer('wheelhouse', '1.2.3');
    const other = provider.getTracer('other');
    const parent = trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
    });
    const link: Link = {
      context: { traceId, spanId: '1111111111111111', traceFlags: 1, isRemote: true },
      attributes: { why: 'follows' },
    };
    const a = tracer.startSpan(
      'wheelhouse.submit',
      {
        kind: SpanKind.PRODUCER,
        links: [link],
        attributes: {
          s: 'short',
          long,
          unicode,
          t: true,
          f: false,
          n: 42,
          big: 2 ** 40,
          neg: -7,
          d: 1.5,
          list: ['a', 'b'],
          nums: [1, 2.5, -3],
          flags: [true, false],
        },
      },
      parent,
    );
    a.addEvent('exception', { 'exception.message': long }, [1_733_000_000, 123_456_789]);
    a.setStatus({ code: SpanStatusCode.ERROR, message: unicode });
    a.end();
    const b = other.startSpan('root', { kind: SpanKind.SERVER });
    b.setStatus({ code: SpanStatusCode.OK });
    b.end();
    const c = tracer.startSpan('no-attrs', {}, trace.setSpan(ROOT_CONTEXT, b));
    c.end();
    return exporter.getFinishedSpans();
  }

  function hopSpans(): ReadableSpan[] {
    const spans: ReadableSpan[] = [];
    const resource = resourceFromAttributes({ 'service.name': 'wheelhouse' });
    const hops = new HopRecords({ onEnd: (s) => spans.push(s) }, resource, { name: 'wheelhouse', version: '0.6.0' });
    for (let i = 0; i < 300; i++) {
      hops.record(
        'wheelhouse.claim',
        `00-${traceId}-00f067aa0ba902b7-01`,
        {
          'wheelhouse.task.id': `0193a4b2-7c1d-7e00-8000-${String(i).padStart(12, '0')}`,
          'wheelhouse.task.type': 'email.send',
          'wheelhouse.task.attempt': 1 + (i % 3),
          'wheelhouse.task.partition': i % 64,
        },
        Date.now() - i,
      );
    }
    return spans;
  }

  const same = (spans: ReadableSpan[]): void => {
    const ours = encodeTraceRequest(spans);
    expect(ours).toBeDefined();
    expect(Buffer.from(ours!).equals(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!))).toBe(true);
  };

  it('writes what the SDK writes for its own spans: links, events, status, every attribute type', () => {
    same(sdkSpans('one'));
  });

  it('writes what the SDK writes for hop records, and for a batch of both from two resources', () => {
    same(hopSpans());
    same([...sdkSpans('one'), ...hopSpans(), ...sdkSpans('two')]);
  });

  it('writes a message whose length takes three bytes (a request over 16 KiB) as the SDK does', () => {
    const spans = hopSpans();
    expect(ProtobufTraceSerializer.serializeRequest(spans)!.length).toBeGreaterThan(16_384);
    same(spans);
  });

  it('answers undefined for an attribute it does not write, for the SDK serializer to take the batch', () => {
    const spans: ReadableSpan[] = [];
    const hops = new HopRecords({ onEnd: (s) => spans.push(s) }, resourceFromAttributes({}), { name: 'w' });
    hops.record('h', `00-${traceId}-00f067aa0ba902b7-01`, { nested: { a: 1 } as unknown as string });
    expect(encodeTraceRequest(spans)).toBeUndefined();
  });
});
