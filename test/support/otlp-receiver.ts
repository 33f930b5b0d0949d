import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { flushTracing } from '../../src/lib/otel.js';
import { eventually } from './waits.js';

/**
 * A local OTLP/HTTP receiver for the tracing tests (docs/decisions/0038-tracing.md): a tiny HTTP
 * server that collects what a node exports, and the environment that turns a node's tracing on.
 */

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: number | string } }[];
}

export interface Receiver {
  url: string;
  /** Every span of every JSON export. */
  spans: OtlpSpan[];
  /** Every request: its content type and body. */
  requests: { contentType: string | undefined; body: Buffer }[];
  close(): Promise<void>;
}

/** An OTLP/HTTP receiver: answers 200 to `POST /v1/traces` and keeps what it was sent. */
export async function startReceiver(): Promise<Receiver> {
  const spans: OtlpSpan[] = [];
  const requests: Receiver['requests'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = req.headers['content-type'];
      requests.push({ contentType, body });
      if (req.url === '/v1/traces' && contentType?.startsWith('application/json') === true) {
        const parsed = JSON.parse(body.toString('utf8')) as {
          resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[];
        };
        for (const rs of parsed.resourceSpans) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      }
      res.writeHead(200, { 'content-type': contentType ?? 'application/json' });
      res.end(contentType?.startsWith('application/json') === true ? '{}' : '');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export function attribute(span: OtlpSpan, key: string): string | number | undefined {
  const value = span.attributes.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  return value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue));
}

export function newTraceparent(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

export const ENV_KEYS = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_BSP_SCHEDULE_DELAY',
] as const;

export function setTracingEnv(env: Partial<Record<(typeof ENV_KEYS)[number], string>>): void {
  for (const key of ENV_KEYS) {
    const value = env[key];
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
}

/** Turns tracing on for the nodes started next: OTLP over http/json to `receiver`, exported every 50 ms. */
export function traceTo(receiver: Receiver): void {
  setTracingEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
}

/** The one span `name` of task `taskId`, once exported (the exporter is flushed while it waits). */
export async function exportedSpan(receiver: Receiver, taskId: string, name: string): Promise<OtlpSpan> {
  return eventually(
    async () => {
      await flushTracing();
      const found = receiver.spans.filter((s) => s.name === name && attribute(s, 'wheelhouse.task.id') === taskId);
      if (found.length > 1) throw new Error(`${found.length} ${name} spans of ${taskId}`);
      return found[0];
    },
    15_000,
    `the ${name} span of ${taskId}`,
  );
}
