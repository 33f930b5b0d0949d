import type { FastifyPluginAsync } from 'fastify';
import { WheelhouseError } from '../lib/errors.js';
import type { HealthApi } from '../services/types.js';
import { opsRoutesSchemas as schemas } from './schemas/operations.js';

/**
 * Operations routes: liveness, readiness, Prometheus metrics and the OpenAPI document at
 * `/docs/openapi.json` (Swagger UI on `/docs` and the same document at `/docs/json` come from
 * src/http/docs.ts). None of them needs the bearer token.
 */

/** Renders Prometheus text exposition (version 0.0.4). */
export type MetricsRenderer = () => string | Promise<string>;

export interface OpsRoutesOptions {
  api: HealthApi;
  /** The node's metrics; without one a minimal process set is rendered. */
  metrics?: MetricsRenderer;
}

const PROMETHEUS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export const opsRoutes: FastifyPluginAsync<OpsRoutesOptions> = async (app, opts) => {
  const { api } = opts;
  const startedMs = Date.now();

  /** 200 while the process lives: no store round trip. */
  app.get('/healthz', { schema: schemas.healthz }, async () => ({ ok: true }));

  /** 200 once the node reaches its stores, else 503 `not_ready` with Retry-After. */
  app.get('/readyz', { schema: schemas.readyz }, async (request) => {
    let ready = false;
    try {
      ready = await api.isReady();
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      throw new WheelhouseError('not_ready', 'The readiness check failed.', { cause: error });
    }
    if (!ready) throw new WheelhouseError('not_ready');
    return { ok: true as const };
  });

  app.get('/metrics', { schema: schemas.metrics }, async (_request, reply) => {
    const text = opts.metrics ? await opts.metrics() : await minimalMetrics(api, startedMs);
    return reply.type(PROMETHEUS_TYPE).send(text);
  });

  app.get('/docs/openapi.json', { schema: schemas.document }, async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(JSON.stringify(app.swagger())),
  );
};

/** The fallback metrics: process liveness, uptime, memory and readiness. */
async function minimalMetrics(api: HealthApi, startedMs: number): Promise<string> {
  const memory = process.memoryUsage();
  let ready = 0;
  try {
    ready = (await api.isReady()) ? 1 : 0;
  } catch {
    ready = 0; // not ready is what the gauge reports; /readyz logs the reason
  }
  const lines: string[] = [];
  const gauge = (name: string, help: string, value: number): void => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`, `${name} ${value}`);
  };
  gauge('wheelhouse_up', '1 while the process serves HTTP.', 1);
  gauge('wheelhouse_ready', '1 when the node reaches its stores.', ready);
  gauge('process_uptime_seconds', 'Seconds since the HTTP server was built.', (Date.now() - startedMs) / 1000);
  gauge('process_resident_memory_bytes', 'Resident set size.', memory.rss);
  gauge('nodejs_heap_used_bytes', 'V8 heap in use.', memory.heapUsed);
  return lines.join('\n') + '\n';
}
