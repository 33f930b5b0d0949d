import type { FastifyPluginAsync } from 'fastify';
import { WheelhouseError } from '../lib/errors.js';
import type { HealthApi } from '../services/types.js';
import { OPENAPI_DOCUMENT } from './openapi.js';

/**
 * Operations routes: liveness, readiness, Prometheus metrics and the API documentation.
 * None of them needs the bearer token.
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
  app.get('/healthz', async () => ({ ok: true }));

  /** 200 once the node reaches its stores, else 503 `not_ready` with Retry-After. */
  app.get('/readyz', async (request) => {
    let ready = false;
    try {
      ready = await api.isReady();
    } catch (error) {
      request.log.warn({ err: error }, 'readiness check failed');
      throw new WheelhouseError('not_ready', 'The readiness check failed.', { cause: error });
    }
    if (!ready) throw new WheelhouseError('not_ready');
    return { ok: true };
  });

  app.get('/metrics', async (_request, reply) => {
    const text = opts.metrics ? await opts.metrics() : await minimalMetrics(api, startedMs);
    return reply.type(PROMETHEUS_TYPE).send(text);
  });

  const documentJson = JSON.stringify(OPENAPI_DOCUMENT);
  app.get('/docs/openapi.json', async (_request, reply) =>
    reply.type('application/json; charset=utf-8').send(documentJson),
  );

  const page = docsPage();
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(page));
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

/** A small static page: a link to the document and the list of routes. No script, no CDN. */
function docsPage(): string {
  const rows: string[] = [];
  for (const [path, operations] of Object.entries(OPENAPI_DOCUMENT.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      rows.push(
        `<tr><td><code>${method.toUpperCase()}</code></td><td><code>${escapeHtml(path)}</code></td>` +
          `<td>${escapeHtml(typeof op.summary === 'string' ? op.summary : '')}</td></tr>`,
      );
    }
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Wheelhouse API</title>
<style>body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:60rem;padding:0 1rem}
table{border-collapse:collapse;width:100%}td{border-bottom:1px solid #ddd;padding:.3rem .6rem}</style></head>
<body><h1>Wheelhouse API</h1>
<p>The OpenAPI 3.1 document: <a href="/docs/openapi.json">/docs/openapi.json</a>.
Errors answer <code>{"error":{"code","message","details"}}</code>.</p>
<table><tbody>
${rows.join('\n')}
</tbody></table></body></html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
