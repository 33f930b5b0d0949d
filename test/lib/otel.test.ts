import { describe, expect, it } from 'vitest';
import {
  isSampled,
  isTraceparent,
  otlpEndpoint,
  otlpProtocol,
  spanContextOf,
  startTracing,
  tracingOn,
} from '../../src/lib/otel.js';

/**
 * The W3C `traceparent` as the node reads it, and the environment that turns tracing on
 * (docs/decisions/0038-tracing.md). The spans themselves: test/e2e/tracing.test.ts.
 */
describe('traceparent', () => {
  const trace = '4bf92f3577b34da6a3ce929d0e0e4736';
  const parent = '00f067aa0ba902b7';

  it('reads version 00, sampled or not, as a remote span context', () => {
    expect(spanContextOf(`00-${trace}-${parent}-01`)).toEqual({
      traceId: trace,
      spanId: parent,
      traceFlags: 1,
      isRemote: true,
    });
    expect(spanContextOf(`00-${trace}-${parent}-00`)?.traceFlags).toBe(0);
  });

  it('refuses all-zero ids, version ff, extra fields on version 00, and anything malformed', () => {
    for (const bad of [
      `00-${'0'.repeat(32)}-${parent}-01`,
      `00-${trace}-${'0'.repeat(16)}-01`,
      `ff-${trace}-${parent}-01`,
      `00-${trace}-${parent}-01-extra`,
      `00-${trace.toUpperCase()}-${parent}-01`,
      `00-${trace}-${parent}`,
      '',
      'traceparent',
    ]) {
      expect(isTraceparent(bad), bad).toBe(false);
    }
  });

  it('accepts a later version with fields it ignores', () => {
    expect(isTraceparent(`01-${trace}-${parent}-01-whatever`)).toBe(true);
  });
});

describe('the environment', () => {
  it('is off without an endpoint: nothing is loaded and nothing traces', async () => {
    expect(otlpEndpoint({})).toBeUndefined();
    expect(otlpEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: '' })).toBeUndefined();
    expect(await startTracing({})).toBe(false);
    expect(tracingOn()).toBe(false);
  });

  it('takes the traces endpoint over the general one', () => {
    expect(
      otlpEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b/v1/traces',
      }),
    ).toBe('http://b/v1/traces');
  });

  it('speaks http/protobuf by default and http/json on request, and refuses grpc naming the variable', () => {
    expect(otlpProtocol({})).toBe('http/protobuf');
    expect(otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBe('http/json');
    expect(
      otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }),
    ).toBe('http/protobuf');
    expect(() => otlpProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL is "grpc"/,
    );
  });
});

describe('isSampled', () => {
  it('reads the sampled bit of the flags', () => {
    const ids = '4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7';
    expect(isSampled(`00-${ids}-01`)).toBe(true);
    expect(isSampled(`00-${ids}-03`)).toBe(true);
    expect(isSampled(`00-${ids}-00`)).toBe(false);
    expect(isSampled(`00-${ids}-02`)).toBe(false);
  });
});
