/**
 * The route schemas are the contract: every route has one, and the OpenAPI document the node
 * serves says exactly what the routes are. Built on the fake services (test/http/fake-api.ts)
 * with the admin and node-to-node plugins a real node adds, so every route of a node is here.
 * (That answers keep to their schemas is checked on every answer of the whole suite: vitest
 * runs with WHEELHOUSE_CHECK_RESPONSES=1, see src/http/validation/responses.ts.)
 */
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { TSchema } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRoutes } from '../../src/http/admin-routes.js';
import { statsRoutes } from '../../src/http/stats-routes.js';
import { emptyCounts } from '../../src/domain/task-stats.js';
import { clusterRoutes } from '../../src/http/cluster-routes.js';
import { consoleRoutes } from '../../src/http/console-routes.js';
import { ERROR_CATALOGUE, ERROR_CODES } from '../../src/lib/errors.js';
import { serializerOf } from '../../src/http/serializer.js';
import { validatorOf } from '../../src/http/validation/ajv.js';
import { serverWith } from './fake-api.js';

interface RouteSchema {
  hide?: boolean;
  security?: Record<string, string[]>[];
  body?: unknown;
  params?: { properties?: Record<string, unknown> };
  querystring?: unknown;
  response?: Record<string, unknown>;
}

interface Operation {
  parameters?: { in: string; name: string }[];
  requestBody?: unknown;
  responses: Record<string, { description: string; content?: Record<string, { schema: { $ref?: string } }> }>;
}

interface Document {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown> };
}

const ADMIN = 'the-admin-key-of-this-test';

/** Routes that take no body: they act on the task in their path, or on nothing. */
const BODILESS_POSTS = new Set([
  '/api/tasks/:task_id/pause',
  '/api/tasks/:task_id/resume',
  '/api/tasks/:task_id/retry',
  '/api/task-types/:task_type/pause',
  '/api/task-types/:task_type/resume',
  '/internal/cluster/refresh',
]);

let app: FastifyInstance;
const routes: RouteOptions[] = [];
let doc: Document;
let docText: string;

beforeAll(async () => {
  ({ app } = serverWith(
    { adminToken: ADMIN },
    {
      extraPlugins: [
        adminRoutes({
          cluster: async () => ({ nodes: [] }),
          listActors: async () => ({ actors: [], next: null, nodes: [] }),
          inspectActor: async () => null,
          queues: async () => [],
        }),
        // The schema and the scopes are under test here; what it reads, in test/e2e/task-stats.test.ts.
        statsRoutes({
          activity: async (q) => ({
            taskType: q.taskType,
            fromMs: 0,
            toMs: 60_000,
            stepMs: 60_000,
            totals: { startMs: 0, counts: emptyCounts(), failureRate: null, lagP50Ms: null, lagP99Ms: null },
            series: [],
            now: { ready: 0, running: 0, runningCapped: false },
            taskTypes: [],
          }),
        }),
        clusterRoutes({
          secret: null,
          accept: async () => undefined,
          onRefresh: () => undefined,
          inspect: () => null,
          presence: () => ({ connected: 0, polling: 0, lastAskedMs: null }),
          listActors: () => [],
          workers: () => ({ workers: [], more: 0 }),
        }),
        consoleRoutes(
          {
            failures: async () => ({ groups: [], scanned: 0, groupCount: 0 }),
            workers: async () => ({ workers: [], more: 0, unanswered: [] }),
            graphs: async () => [],
          },
          { enabled: () => true },
        ),
      ],
    },
  ));
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  await app.ready();
  const res = await app.inject({ method: 'GET', url: '/docs/openapi.json' });
  expect(res.statusCode).toBe(200);
  docText = res.body;
  doc = res.json<Document>();
});
afterAll(async () => {
  await app.close();
});

/** The routes of the node itself: not HEAD (fastify adds one per GET), not Swagger UI's files. */
function ownRoutes(): { method: string; url: string; schema: RouteSchema | undefined }[] {
  const out: { method: string; url: string; schema: RouteSchema | undefined }[] = [];
  for (const route of routes) {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      if (route.url === '/docs' || (route.url.startsWith('/docs/') && route.url !== '/docs/openapi.json')) continue;
      out.push({ method, url: route.url, schema: route.schema as RouteSchema | undefined });
    }
  }
  return out;
}

describe('the route schemas', () => {
  it('cover every route: a 2xx answer, each path parameter, and the body of a POST', () => {
    const own = ownRoutes();
    expect(own.length).toBeGreaterThan(20);
    const problems: string[] = [];
    for (const { method, url, schema } of own) {
      const name = `${method} ${url}`;
      if (schema === undefined) {
        problems.push(`${name} has no schema`);
        continue;
      }
      // A route that upgrades to a WebSocket answers 101 instead (GET /api/workers/connect).
      if (!Object.keys(schema.response ?? {}).some((status) => /^(2\d\d|101)$/.test(status))) {
        problems.push(`${name} has no 2xx response schema`);
      }
      for (const [, param] of url.matchAll(/:([A-Za-z_]+)/g)) {
        if (schema.params?.properties?.[param as string] === undefined) problems.push(`${name} leaves :${param} out`);
      }
      if (method === 'POST' && !BODILESS_POSTS.has(url) && schema.body === undefined) {
        problems.push(`${name} has no body schema`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  // Fastify is handed compilers that compile a schema on its route's first use (decision 0047):
  // a schema Ajv or fast-json-stringify refuses would otherwise fail a request, not a start.
  it('compile, every one: request parts by Ajv, each listed answer by fast-json-stringify', () => {
    const problems: string[] = [];
    let compiled = 0;
    const attempt = (name: string, compile: () => unknown): void => {
      try {
        compile();
        compiled++;
      } catch (error) {
        problems.push(`${name}: ${(error as Error).message}`);
      }
    };
    for (const { method, url, schema } of ownRoutes()) {
      const name = `${method} ${url}`;
      const parts = [
        ['body', schema?.body],
        ['query', schema?.querystring],
        ['params', schema?.params],
      ] as const;
      for (const [part, partSchema] of parts) {
        if (partSchema !== undefined) attempt(`${name} ${part}`, () => validatorOf(partSchema as TSchema, part));
      }
      for (const [status, answer] of Object.entries(schema?.response ?? {})) {
        attempt(`${name} ${status}`, () => serializerOf(answer));
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
    expect(compiled).toBeGreaterThan(100);
  });

  it('name every member of every public answer in snake_case (the node-to-node routes aside)', () => {
    const camel: string[] = [];
    const walk = (schema: unknown, where: string): void => {
      if (Array.isArray(schema)) schema.forEach((s, i) => walk(s, `${where}[${i}]`));
      if (schema === null || typeof schema !== 'object') return;
      const properties = (schema as { properties?: Record<string, unknown> }).properties;
      for (const [name, member] of Object.entries(properties ?? {})) {
        if (!/^[a-z0-9_]+$/.test(name)) camel.push(`${where}.${name}`);
        walk(member, `${where}.${name}`);
      }
      for (const key of ['items', 'anyOf', 'oneOf', 'allOf', 'additionalProperties']) {
        const inner = (schema as Record<string, unknown>)[key];
        if (inner !== undefined) walk(inner, where);
      }
    };
    for (const { method, url, schema } of ownRoutes()) {
      if (url.startsWith('/internal/') || url.startsWith('/docs')) continue;
      for (const [status, answer] of Object.entries(schema?.response ?? {})) {
        if (/^2\d\d$/.test(status)) walk(answer, `${method} ${url} ${status}`);
      }
    }
    expect(camel, camel.join('\n')).toEqual([]);
  });
});

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 and lists exactly the routes that are not hidden', () => {
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths)
      .flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`))
      .sort();
    const served = ownRoutes()
      .filter((r) => r.schema?.hide !== true)
      .map((r) => `${r.method} ${r.url.replace(/:([A-Za-z_]+)/g, '{$1}')}`)
      .sort();
    expect(documented).toEqual(served);
    for (const route of ['POST /api/tasks', 'POST /api/workers/complete', 'GET /admin/actors/{kind}/{key}']) {
      expect(documented).toContain(route);
    }
    expect(documented.some((r) => r.includes('/internal/'))).toBe(false);
  });

  it('names every path parameter and gives every POST with a body its request schema', () => {
    for (const [path, ops] of Object.entries(doc.paths)) {
      const inPath = [...path.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries(ops)) {
        const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
        expect(declared.sort(), `${method} ${path}`).toEqual([...inPath].sort());
        if (method === 'post' && !BODILESS_POSTS.has(path.replace(/\{([a-z_]+)\}/g, ':$1'))) {
          expect(op.requestBody, `${method} ${path}`).toBeDefined();
        }
      }
    }
  });

  it('resolves every $ref to a component', () => {
    const refs = [...docText.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1] as string);
    expect(refs.length).toBeGreaterThan(10);
    for (const name of new Set(refs)) expect(doc.components.schemas[name], name).toBeDefined();
    expect(docText).not.toMatch(/"\$ref":"(?!#\/components\/)/);
    for (const name of ['Task', 'TaskRequest', 'Schedule', 'Error', 'Execution', 'Assignment', 'Submitted']) {
      expect(doc.components.schemas[name], name).toBeDefined();
    }
  });

  it('lists, under each error response, the codes of its status in the catalogue', () => {
    const wrong: string[] = [];
    let seen = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, response] of Object.entries(op.responses)) {
          if (Number(status) < 400) continue;
          seen++;
          const listed = [...response.description.matchAll(/`([a-z_]+)`/g)].map((m) => m[1] as string);
          const expected = ERROR_CODES.filter((code) => ERROR_CATALOGUE[code].status === Number(status));
          if (listed.sort().join() !== [...expected].sort().join()) {
            wrong.push(`${method} ${path} ${status} lists ${listed.join(', ')}`);
          }
          const schema = response.content?.['application/json']?.schema;
          if (schema?.$ref !== '#/components/schemas/Error') wrong.push(`${method} ${path} ${status} is not an Error`);
        }
      }
    }
    expect(seen).toBeGreaterThan(50);
    expect(wrong, wrong.join('\n')).toEqual([]);
  });
});

describe('the scopes', () => {
  const SCOPES = ['submit', 'read', 'work', 'metrics', 'ops', 'admin'];

  /** What each route's schema names: `open`, `cluster`, or the scopes that open it (any one is enough). */
  function scopesOf(schema: RouteSchema | undefined): 'open' | 'cluster' | string[] | undefined {
    const security = schema?.security;
    if (security === undefined) return undefined;
    if (security.length === 0) return 'open';
    if (security.some((requirement) => 'cluster' in requirement)) return 'cluster';
    return security.flatMap((requirement) => requirement.bearer ?? []);
  }

  it('are named by every route, so a new route cannot be left unguarded', () => {
    const unnamed = ownRoutes()
      .filter((r) => {
        const scopes = scopesOf(r.schema);
        if (scopes === 'open' || scopes === 'cluster') return false;
        return scopes === undefined || scopes.length === 0 || scopes.some((s) => !SCOPES.includes(s));
      })
      .map((r) => `${r.method} ${r.url}`);
    expect(unnamed, unnamed.join('\n')).toEqual([]);
    const open = ownRoutes()
      .filter((r) => scopesOf(r.schema) === 'open')
      .map((r) => `${r.method} ${r.url}`)
      .sort();
    // The dashboard's page and files hold no data (docs/decisions/0014-dashboard.md).
    expect(open).toEqual([
      'GET /admin',
      'GET /admin/assets/:file',
      'GET /docs/openapi.json',
      'GET /healthz',
      'GET /readyz',
    ]);
  });

  it('give the operator routes of issue 16 the scopes of their contract', () => {
    const scopes = new Map(ownRoutes().map((r) => [`${r.method} ${r.url}`, scopesOf(r.schema)]));
    expect(scopes.get('POST /api/tasks/:task_id/retry')).toEqual(['submit']);
    expect(scopes.get('GET /api/tasks/:task_id/explain')).toEqual(['read']);
    expect(scopes.get('GET /internal/workers/presence')).toBe('cluster');
  });

  it('open /metrics to metrics, ops and admin, the operator reads to ops and admin, and keys to admin alone', () => {
    const scopes = new Map(ownRoutes().map((r) => [`${r.method} ${r.url}`, scopesOf(r.schema)]));
    expect(scopes.get('GET /metrics')).toEqual(['metrics', 'ops', 'admin']);
    for (const route of [
      'GET /admin/cluster',
      'GET /admin/actors',
      'GET /admin/actors/:kind/:key',
      'GET /admin/queues',
      'GET /admin/stats',
    ]) {
      expect(scopes.get(route), route).toEqual(['ops', 'admin']);
    }
    for (const route of ['GET /admin/tokens', 'POST /admin/tokens', 'DELETE /admin/tokens/:token_id']) {
      expect(scopes.get(route), route).toEqual(['admin']);
    }
  });

  it('answer 401 without a key, 403 with a key of another scope, and let each scope that opens it through', async () => {
    const keys: Record<string, string> = {};
    for (const scope of SCOPES) {
      const made = await app.inject({
        method: 'POST',
        url: '/admin/tokens',
        headers: { authorization: `Bearer ${ADMIN}` },
        payload: { name: `only ${scope}`, scopes: [scope] },
      });
      expect(made.statusCode).toBe(201);
      keys[scope] = made.json<{ token: string }>().token;
    }
    const table: string[] = [];
    let checked = 0;
    const seen = new Set<string>();
    for (const route of ownRoutes()) {
      const needed = scopesOf(route.schema);
      if (needed === 'open' || needed === 'cluster' || needed === undefined) continue;
      const url = route.url
        .replace(/:(task_id|dag_id|token_id)/g, '0192f3a4-5b6c-7d8e-9f00-112233445566')
        .replace(':kind', 'wheel')
        .replace(':key', '1');
      const send = (secret?: string) =>
        app.inject({
          method: route.method as 'GET',
          url,
          ...(secret === undefined ? {} : { headers: { authorization: `Bearer ${secret}` } }),
          ...(route.method === 'GET' || route.method === 'DELETE' ? {} : { payload: {} }),
        });
      const none = await send();
      if (none.statusCode !== 401) table.push(`${route.method} ${route.url} without a key: ${none.statusCode}`);
      for (const scope of SCOPES) {
        const status = (await send(keys[scope])).statusCode;
        const expected = needed.includes(scope) ? 'through' : 403;
        const got = status === 401 || status === 403 ? status : 'through';
        if (got !== expected) table.push(`${route.method} ${route.url} with a ${scope} key: ${status}`);
        if (got === 'through') seen.add(scope);
      }
      checked++;
    }
    expect(checked).toBeGreaterThan(15);
    // Every scope opens some route: the matrix above covered each.
    expect([...seen].sort()).toEqual([...SCOPES].sort());
    expect(table, table.join('\n')).toEqual([]);
  });
});
