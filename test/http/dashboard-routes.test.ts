/**
 * How the node serves the dashboard's files (src/http/dashboard-routes.ts): the page and its
 * scripts without a key (they hold no data) under a strict CSP, with an ETag, the page naming
 * every script as a modulepreload; a file that is not there is a 404 and a name that is not a
 * dashboard file's a 400, so nothing outside the folder can be asked for. What the page does
 * is tested in a browser (test/e2e/dashboard.test.ts).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverWith } from './fake-api.js';

let app: FastifyInstance;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'wh-dash-files-'));
  writeFileSync(
    join(dir, 'index.html'),
    '<head><!-- modulepreload --><script type="module" src="/admin/assets/app.js"></script></head>',
  );
  writeFileSync(join(dir, 'app.js'), 'import "./dom.js";\n');
  writeFileSync(join(dir, 'dom.js'), 'export const x = 1;\n');
  writeFileSync(join(dir, 'dashboard.css'), 'body { margin: 0 }\n');
  writeFileSync(join(dir, 'secret.txt'), 'not a dashboard file');
  ({ app } = serverWith({ adminToken: 'the-admin-key-of-this-test' }, { dashboardDir: dir }));
  await app.ready();
});
afterAll(async () => {
  await app.close();
});

describe('GET /admin', () => {
  it('serves the page without a key, under a CSP that allows only its own scripts and origin', async () => {
    const res = await app.inject({ method: 'GET', url: '/admin' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(res.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.body).toContain('<link rel="modulepreload" href="/admin/assets/app.js">');
    expect(res.body).toContain('<link rel="modulepreload" href="/admin/assets/dom.js">');
    expect(res.body).not.toContain('<!-- modulepreload -->');
  });

  it('answers 304 to the ETag it gave', async () => {
    const first = await app.inject({ method: 'GET', url: '/admin' });
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    const again = await app.inject({ method: 'GET', url: '/admin', headers: { 'if-none-match': etag } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
  });
});

describe('GET /admin/assets/{file}', () => {
  it('serves the scripts and the style sheet with their types', async () => {
    const js = await app.inject({ method: 'GET', url: '/admin/assets/app.js' });
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.body).toBe('import "./dom.js";\n');
    const css = await app.inject({ method: 'GET', url: '/admin/assets/dashboard.css' });
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
  });

  it('serves only the files the folder held at the start (it is listed once)', async () => {
    writeFileSync(join(dir, 'late.js'), 'export const late = 1;\n');
    expect((await app.inject({ method: 'GET', url: '/admin/assets/late.js' })).statusCode).toBe(404);
  });

  it('is 404 for a file the build did not write, and 400 for a name that is not a dashboard file', async () => {
    const missing = await app.inject({ method: 'GET', url: '/admin/assets/nothing.js' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json<{ error: { code: string } }>().error.code).toBe('not_found');
    for (const name of ['secret.txt', 'index.html', '..%2Fsecret.js', '.hidden.js', 'App.js']) {
      const res = await app.inject({ method: 'GET', url: `/admin/assets/${name}` });
      expect(res.statusCode, name).toBe(400);
      expect(res.json<{ error: { code: string } }>().error.code).toBe('validation_failed');
    }
  });
});
