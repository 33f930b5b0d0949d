import { createHash } from 'node:crypto';
import { SpanKind } from '@opentelemetry/api';
import { resourceFromAttributes } from '@opentelemetry/resources';
import * as sdk from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HopRecords } from '../../src/lib/otel-hops.js';
import { samplerFromEnv } from '../../src/lib/otel.js';
import { HopBatch, hopBatchOptions, type EncodedSpans } from '../../src/lib/otlp-hop-batch.js';

/**
 * Hops written as OTLP/protobuf bytes as they are recorded (decision 0045): each request is,
 * byte for byte, what the SDK's serializer writes for the same hops recorded as spans, and the
 * batching keeps the SDK's batch span processor's rules (size, delay, queue, one export at a
 * time). That they reach a receiver in one trace: test/e2e/tracing.test.ts.
 */

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const parent = `00-${traceId}-00f067aa0ba902b7-01`;
const resource = resourceFromAttributes({ 'service.name': 'wheelhouse', 'service.version': '0.6.0' });
const scope = { name: 'wheelhouse', version: '0.6.0' };
const options = { maxExportBatchSize: 512, maxQueueSize: 2048, scheduledDelayMillis: 5_000 };

/** The same ids and times for every recorder made with it: a counter's hash, and a clock that steps. */
function fixed(): { random: (n: number) => Buffer; clock: () => number } {
  let draws = 0;
  let now = 1_733_000_000_123.456;
  return {
    random: (n) => {
      const out = Buffer.alloc(n);
      for (let i = 0; i < n; i += 32) createHash('sha256').update(`${draws++}`).digest().copy(out, i);
      return out;
    },
    clock: () => (now += 0.731),
  };
}

/** Records the same hops: the claims of 300 tasks, three submits (a root, a child, an unsampled child). */
function recordAll(hops: HopRecords): string[] {
  const contexts: string[] = [];
  const sampler = samplerFromEnv(sdk, {});
  const root = hops.open('wheelhouse.submit', SpanKind.PRODUCER, null, { 'wheelhouse.task.id': 'r' }, sampler);
  const child = hops.open(
    'wheelhouse.submit',
    SpanKind.PRODUCER,
    { traceId, spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true },
    { 'wheelhouse.task.id': 'c', n: 1.5 },
    sampler,
  );
  contexts.push(root.traceparent, child.traceparent);
  for (let i = 0; i < 300; i++) {
    const attributes = {
      'wheelhouse.task.id': `0193a4b2-7c1d-7e00-8000-${String(i).padStart(12, '0')}`,
      'wheelhouse.task.type': i % 7 === 0 ? 'e-mail·send ✉' : 'email.send',
      'wheelhouse.task.attempt': 1 + (i % 3),
      'wheelhouse.task.partition': i % 64,
    };
    if (i % 2 === 0) contexts.push(hops.recordContext('wheelhouse.claim', parent, attributes, 1_733_000_000_000 + i));
    else hops.record('wheelhouse.complete', parent, attributes);
  }
  hops.record('h', 'not-a-traceparent', {});
  child.end();
  root.end();
  return contexts;
}

afterEach(() => {
  vi.useRealTimers();
});

describe('hop records written as bytes', () => {
  it('are, request for request, what the SDK writes for the same hops as spans', async () => {
    const spans: ReadableSpan[] = [];
    const a = fixed();
    const asSpans = recordAll(new HopRecords({ onEnd: (s) => spans.push(s) }, resource, scope, a.random, a.clock));
    const sent: EncodedSpans[] = [];
    const batch = new HopBatch(resource, scope, (s, done) => (sent.push(s), done()), options);
    const b = fixed();
    const asBytes = recordAll(new HopRecords(batch, resource, scope, b.random, b.clock));
    await batch.flush();
    expect(asBytes).toEqual(asSpans);
    expect(spans).toHaveLength(302);
    expect(sent.map((s) => s.length)).toEqual([302]);
    const theirs = Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!);
    expect(theirs.length).toBeGreaterThan(16_384);
    expect(Buffer.from(sent[0]!.body).equals(theirs)).toBe(true);
  });

  it('sends a full batch at once, the rest after the delay, one request at a time', async () => {
    vi.useFakeTimers();
    const sent: EncodedSpans[] = [];
    const answers: Array<() => void> = [];
    const batch = new HopBatch(
      resource,
      scope,
      (s, done) => {
        sent.push(s);
        answers.push(done);
      },
      { maxExportBatchSize: 10, maxQueueSize: 100, scheduledDelayMillis: 1_000 },
    );
    const hops = new HopRecords(batch, resource, scope);
    for (let i = 0; i < 25; i++) hops.record('h', parent, {});
    // The first batch is on its way; the second waits for its answer, the last five for the delay.
    expect(sent.map((s) => s.length)).toEqual([10]);
    answers.shift()!();
    expect(sent.map((s) => s.length)).toEqual([10, 10]);
    answers.shift()!();
    await vi.advanceTimersByTimeAsync(999);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.map((s) => s.length)).toEqual([10, 10, 5]);
    answers.shift()!();
  });

  it('drops hops beyond the queue while an export is slow, and flushes what it kept', async () => {
    const sent: EncodedSpans[] = [];
    let answer: (() => void) | undefined;
    const batch = new HopBatch(
      resource,
      scope,
      (s, done) => {
        sent.push(s);
        answer = done;
      },
      { maxExportBatchSize: 10, maxQueueSize: 30, scheduledDelayMillis: 60_000 },
    );
    const hops = new HopRecords(batch, resource, scope);
    for (let i = 0; i < 100; i++) hops.record('h', parent, {});
    // 10 on their way, 30 queued behind them; 60 dropped.
    const flushed = batch.flush();
    while (answer !== undefined) {
      const done = answer;
      answer = undefined;
      done();
    }
    await flushed;
    expect(sent.map((s) => s.length)).toEqual([10, 10, 10, 10]);
    await batch.shutdown();
    hops.record('h', parent, {});
    await batch.flush();
    expect(sent).toHaveLength(4);
  });

  it('reads the batch span processor’s settings from the environment', () => {
    expect(hopBatchOptions({})).toEqual(options);
    expect(
      hopBatchOptions({
        OTEL_BSP_SCHEDULE_DELAY: '200',
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096',
        OTEL_BSP_MAX_QUEUE_SIZE: '1000',
      }),
    ).toEqual({ maxExportBatchSize: 1000, maxQueueSize: 1000, scheduledDelayMillis: 200 });
    expect(hopBatchOptions({ OTEL_BSP_SCHEDULE_DELAY: 'soon' }).scheduledDelayMillis).toBe(5_000);
  });
});
