/**
 * UNIT tests of the operations routes against a fake SchedulerApi (test/http/fake-api.ts).
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeApi, serverWith } from './fake-api.js';

const apps: FastifyInstance[] = [];
function server(...args: Parameters<typeof serverWith>): ReturnType<typeof serverWith> {
  const built = serverWith(...args);
  apps.push(built.app);
  return built;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

describe('health and readiness', () => {
  it('/healthz answers 200 whatever the readiness', async () => {
    const api = new FakeApi();
    api.ready = false;
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true });
  });

  it('/readyz answers 200 when ready, 503 not_ready with Retry-After otherwise', async () => {
    const { app, api } = server();
    expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    api.ready = false;
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('not_ready');
    expect(res.headers['retry-after']).toBe('1');
  });

  it('/readyz answers 503 when the readiness check itself throws', async () => {
    const api = new FakeApi().override('isReady', async () => {
      throw new Error('connection refused');
    });
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(503);
    expect(res.json<{ error: { code: string } }>().error.code).toBe('not_ready');
  });
});

describe('/metrics', () => {
  it('serves the renderer it was given as Prometheus text', async () => {
    const { app } = server({}, { metrics: () => '# TYPE x counter\nx 3\n' });
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain; version=0.0.4');
    expect(res.body).toBe('# TYPE x counter\nx 3\n');
  });

  it('serves a minimal set without one', async () => {
    const { app } = server();
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/^wheelhouse_up 1$/m);
    expect(res.body).toMatch(/^wheelhouse_ready 1$/m);
    expect(res.body).toMatch(/^process_resident_memory_bytes \d+$/m);
  });
});

describe('/docs', () => {
  it('serves an OpenAPI 3.1 document naming every route, the batch completion extension included', async () => {
    const { app } = server();
    const res = await app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json<{
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: Record<string, Record<string, unknown>>;
    }>();
    expect(doc.openapi).toBe('3.1.0');
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    for (const route of [
      'POST /api/tasks',
      'GET /api/tasks',
      'POST /api/tasks/batch',
      'GET /api/tasks/{task_id}',
      'DELETE /api/tasks/{task_id}',
      'GET /api/tasks/{task_id}/history',
      'POST /api/workers/poll',
      'POST /api/tasks/{task_id}/heartbeat',
      'POST /api/tasks/{task_id}/complete',
      'POST /api/workers/complete',
      'GET /healthz',
      'GET /readyz',
      'GET /metrics',
    ]) {
      expect(routes).toContain(route);
    }
    // Every $ref points at something defined.
    const text = res.body;
    for (const [, kind, name] of text.matchAll(/"\$ref":"#\/components\/(schemas|responses)\/([A-Za-z0-9]+)"/g)) {
      expect(doc.components[kind as string]?.[name as string], `${kind}/${name}`).toBeDefined();
    }
  });

  it('serves Swagger UI from the node itself, with no script, style or font from elsewhere', async () => {
    const { app } = server();
    const res = await app.inject({ method: 'GET', url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/html');
    expect(res.body).toContain('swagger-ui');
    expect(res.body).not.toMatch(/(src|href)="(https?:)?\/\//);
    const assets = [...res.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1] as string);
    expect(assets.length).toBeGreaterThan(3);
    for (const asset of assets) {
      const file = await app.inject({ method: 'GET', url: asset });
      expect(file.statusCode, asset).toBe(200);
      expect(file.body, asset).not.toMatch(
        /(src|href|url)\(?["']?https?:\/\/(?!localhost)[a-z0-9.-]*(cdn|unpkg|jsdelivr|googleapis)/i,
      );
    }
    // The page loads the document the node generates.
    const init = await app.inject({ method: 'GET', url: '/docs/static/swagger-initializer.js' });
    expect(init.body).toContain("resolveUrl('./json')");
    const json = await app.inject({ method: 'GET', url: '/docs/json' });
    expect(json.json<{ openapi: string }>().openapi).toBe('3.1.0');
  });
});
