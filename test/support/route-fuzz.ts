/**
 * Requests for fuzzing a node, generated from its route table: every route a node serves (read
 * off a server built with the admin and node-to-node plugins, as test/http/contract.test.ts
 * does, so a new route is fuzzed without anyone listing it), and for each, bodies, query
 * strings and path values made from the route's own schemas — some that match them, most
 * broken in one place, some arbitrary JSON or not JSON at all — with headers from a pool
 * that includes the wrong ones.
 */
import type { RouteOptions } from 'fastify';
import fc from 'fast-check';
import { adminRoutes } from '../../src/http/admin-routes.js';
import { clusterRoutes } from '../../src/http/cluster-routes.js';
import { SHARED_SCHEMAS } from '../../src/http/schemas/index.js';
import { serverWith } from '../http/fake-api.js';

type Schema = Record<string, unknown>;

export interface FuzzRoute {
  method: string;
  /** fastify's pattern: `/api/tasks/:task_id`. */
  url: string;
  body?: Schema;
  params?: Schema;
  querystring?: Schema;
}

/** One request, ready for `inject`. */
export interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
}

/** Every route of a node but HEAD and Swagger UI's files. */
export async function routeTable(): Promise<FuzzRoute[]> {
  const routes: RouteOptions[] = [];
  const { app } = serverWith(
    {},
    {
      extraPlugins: [
        adminRoutes({
          cluster: async () => ({}),
          listActors: async () => ({ actors: [], next: null, nodes: [] }),
          inspectActor: async () => null,
          queues: async () => [],
        }),
        clusterRoutes({
          secret: null,
          accept: async () => undefined,
          onRefresh: () => undefined,
          inspect: () => null,
          presence: () => ({ connected: 0, polling: 0, lastAskedMs: null }),
          listActors: () => [],
        }),
      ],
    },
  );
  app.addHook('onRoute', (route) => {
    routes.push(route);
  });
  await app.ready();
  await app.close();
  const out: FuzzRoute[] = [];
  for (const route of routes) {
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      if (route.url === '/docs' || (route.url.startsWith('/docs/') && route.url !== '/docs/openapi.json')) continue;
      const schema = (route.schema ?? {}) as { body?: Schema; params?: Schema; querystring?: Schema };
      out.push({ method, url: route.url, body: schema.body, params: schema.params, querystring: schema.querystring });
    }
  }
  return out;
}

const SHARED = new Map<string, Schema>(SHARED_SCHEMAS.map((s) => [s.$id, s as unknown as Schema]));

function resolve(schema: Schema): Schema {
  const ref = schema.$ref;
  if (typeof ref !== 'string') return schema;
  const target = SHARED.get(ref.replace(/#$/, ''));
  if (target === undefined) throw new Error(`unknown $ref ${ref}`);
  return resolve(target);
}

/** Values a node has: ids of tasks that exist, lease tokens it handed out, the cluster secret. */
export interface Known {
  taskIds: string[];
  leaseTokens: string[];
  clusterSecret: string | null;
  /** A key the node knows (with every scope), sent on most requests; null when it asks for none. */
  adminKey: string | null;
}

const CRON = [
  '* * * * *',
  '0 * * * *',
  '*/5 * * * * *',
  '0 0 * 2 1#5',
  '0 0 * 2 0#5',
  '0 0 30 2 *',
  '0 0 L * *',
  'H * * * *',
  '*/0 * * * *',
  '61 * * * *',
  '@daily',
  '* * *',
  '0 0 29 2 1#5',
];
const ZONES = ['UTC', 'Europe/Berlin', 'Australia/Lord_Howe', 'Nope/Zone', 'utc', 'UTC\u0000', '../etc'];
const TIMES = [
  '2026-11-30T12:00:00.000Z',
  '2026-11-30',
  '2026-02-30T00:00:00Z',
  '2000-01-01T00:00:00+14:00',
  '+275760-09-13T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '1970-01-01T00:00:00Z',
  'tomorrow',
  '',
];

/** Odd values to put where a field was: types, sizes and characters a schema does not expect. */
export function oddValue(): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom(
      null,
      true,
      0,
      -1,
      1.5,
      2 ** 31,
      2 ** 53 + 2,
      -(2 ** 63),
      1e308,
      '',
      ' ',
      '\u0000',
      'a\u0000b',
      '\uffff',
      '\ud800',
      '%00',
      '../..',
      '{"a":1}',
      [],
      {},
      JSON.parse('{"__proto__":{"polluted":true}}') as unknown,
      { constructor: { prototype: { polluted: true } } },
    ),
    fc.string({ unit: 'binary', maxLength: 40 }),
    fc.constantFrom(70, 1100).map((depth) => nest(depth)),
    fc.constantFrom(1000, 70_000).map((n) => 'x'.repeat(n)),
  );
}

function nest(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

/** A value that matches `schema`; `key` is the member it is for (some get values from pools). */
export function valueFor(schema: Schema, known: Known, key?: string): fc.Arbitrary<unknown> {
  const s = resolve(schema);
  if (Array.isArray(s.anyOf)) return fc.oneof(...(s.anyOf as Schema[]).map((b) => valueFor(b, known, key)));
  if (Array.isArray(s.oneOf)) return fc.oneof(...(s.oneOf as Schema[]).map((b) => valueFor(b, known, key)));
  // A payload is any JSON: odd values there reach the store (NUL, lone surrogates, depth).
  if (key === 'payload') return fc.oneof(fc.jsonValue({ maxDepth: 3 }), oddValue());
  if (s.const !== undefined) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...(s.enum as unknown[]));
  const pooled = pool(key, known);
  if (pooled !== undefined && (s.type === 'string' || (Array.isArray(s.type) && s.type.includes('string')))) {
    return pooled;
  }
  const types = s.type === undefined ? [] : [s.type].flat();
  if (types.length === 0) return fc.jsonValue({ maxDepth: 3 });
  return fc.oneof(...types.map((t) => ofType(t as string, s, known)));
}

function pool(key: string | undefined, known: Known): fc.Arbitrary<string> | undefined {
  switch (key) {
    case 'cron_expression':
      return fc.oneof(fc.constantFrom(...CRON), fc.string({ maxLength: 20 }));
    case 'timezone':
      return fc.constantFrom(...ZONES);
    case 'due_time':
    case 'end_time':
      return fc.constantFrom(...TIMES);
    case 'lease_token':
      return fc.oneof(
        fc.constantFrom('lt1.1', 'lt1.zzzzzz', 'lt1.99999999999999999999', 'lt1.-1', 'x', ...known.leaseTokens),
        fc.string({ minLength: 1, maxLength: 30 }),
      );
    case 'task_id':
    case 'dag_id':
    case 'schedule_id':
      return fc.oneof(
        fc.constantFrom(...known.taskIds),
        fc.uuid(),
        fc.uuid().map((u) => u.toUpperCase()),
      );
    case 'task_type':
      return fc.constantFrom('fuzz', 'fuzz.other', 'wheelhouse.noop', 'a:b-c_d.e');
    case 'kind':
      return fc.constantFrom('fuzz-kind', 'wheel', 'lease', 'cron', 'dag', 'x.y');
    default:
      return undefined;
  }
}

function ofType(type: string, s: Schema, known: Known): fc.Arbitrary<unknown> {
  switch (type) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
      return fc.integer({ min: num(s.minimum, -(2 ** 31)), max: num(s.maximum, 2 ** 31) });
    case 'number':
      return fc.double({
        min: num(s.minimum, -1e9),
        max: num(s.maximum, 1e9),
        noNaN: true,
        noDefaultInfinity: true,
      });
    case 'string': {
      const min = num(s.minLength, 0);
      const max = Math.min(num(s.maxLength, 24), 24);
      if (typeof s.pattern === 'string') {
        return fc
          .stringMatching(new RegExp(s.pattern, 'u'))
          .filter((v) => v.length >= min && v.length <= num(s.maxLength, Infinity));
      }
      return fc.string({ minLength: min, maxLength: Math.max(min, max) });
    }
    case 'array':
      return fc.array(valueFor((s.items ?? {}) as Schema, known), {
        minLength: num(s.minItems, 0),
        maxLength: Math.max(num(s.minItems, 0), Math.min(num(s.maxItems, 3), 3)),
      });
    case 'object': {
      const properties = (s.properties ?? {}) as Record<string, Schema>;
      const required = (s.required ?? []) as string[];
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, member] of Object.entries(properties)) model[name] = valueFor(member, known, name);
      return fc.record(model, { requiredKeys: required.filter((k) => k in model) });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function num(value: unknown, fallback: number): number {
  return typeof value === 'number' ? value : fallback;
}

/** `value` broken in one place: a member dropped, one added, or one (or an item) replaced by an odd value. */
export function broken(value: unknown): fc.Arbitrary<unknown> {
  const spots = containers(value);
  if (spots.length === 0) return oddValue();
  return fc
    .tuple(fc.nat({ max: spots.length - 1 }), fc.nat(), oddValue(), fc.nat({ max: 2 }))
    .map(([at, pick, odd, how]) => {
      const copy = structuredClone(value);
      const target = containers(copy)[at] as Record<string, unknown> | unknown[];
      const keys = Object.keys(target);
      const key = keys.length === 0 ? undefined : keys[pick % keys.length];
      if (how === 0 && key !== undefined) {
        if (Array.isArray(target)) target.splice(Number(key), 1);
        else delete target[key];
      } else if (how === 1 || key === undefined) {
        if (Array.isArray(target)) target.push(odd);
        else target[`unknown_${pick % 7}`] = odd;
      } else {
        (target as Record<string, unknown>)[key] = odd;
      }
      return copy;
    });
}

/** The objects and arrays in `value`, outermost first (at most 30). */
function containers(value: unknown, out: unknown[] = []): unknown[] {
  if (out.length >= 30 || value === null || typeof value !== 'object') return out;
  out.push(value);
  for (const member of Object.values(value)) containers(member, out);
  return out;
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'Application/JSON',
  'application/json; charset=latin1',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  'application/jsonx',
];

/** Text that is not JSON, or is JSON of a kind no route takes. */
const RAW_BODIES = [
  '',
  '   ',
  'null',
  '[]',
  '"text"',
  '{"task_type":',
  '{"a":1}}',
  "{'a':1}",
  '\u0000',
  '[' + '['.repeat(5000),
  '{"a":' + '[{"b":'.repeat(3000) + '1' + '}]'.repeat(3000) + '}',
  '{"__proto__":{"polluted":true}}',
  // A task whose payload nests about 4 200 deep (it overflowed the stack once), alone and in a batch.
  `{"task_type":"fuzz","payload":${'['.repeat(4200)}${']'.repeat(4200)}}`,
  `{"tasks":[{"task_type":"fuzz","idempotency_key":"deep","payload":${'{"a":'.repeat(4200)}1${'}'.repeat(4200)}}]}`,
];

function headersArb(known: Known): fc.Arbitrary<Record<string, string>> {
  return fc
    .record(
      {
        type: fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, fc.constantFrom(...CONTENT_TYPES)),
        auth: fc.oneof(
          { weight: known.adminKey === null ? 0 : 8, arbitrary: fc.constant(`Bearer ${known.adminKey ?? ''}`) },
          {
            weight: 1,
            arbitrary: fc.constantFrom(undefined, 'Bearer x', 'Bearer', 'Basic YTpi', 'Bearer ' + 'a'.repeat(5000)),
          },
        ),
        secret: fc.constantFrom(undefined, 'wrong', ...(known.clusterSecret === null ? [] : [known.clusterSecret])),
        accept: fc.constantFrom(undefined, 'application/json', 'text/html', '*/*'),
        encoding: fc.constantFrom(undefined, undefined, undefined, 'gzip', 'identity', 'br'),
        extra: fc.option(fc.tuple(fc.stringMatching(/^x-[a-z]{1,10}$/), fc.string({ unit: 'grapheme-ascii' }))),
      },
      { requiredKeys: ['type'] },
    )
    .map((h) => {
      const out: Record<string, string> = { 'content-type': h.type };
      if (h.auth !== undefined) out.authorization = h.auth;
      if (h.secret !== undefined) out['x-wheelhouse-cluster-secret'] = h.secret;
      if (h.accept !== undefined) out.accept = h.accept;
      if (h.encoding !== undefined) out['content-encoding'] = h.encoding;
      if (h.extra) out[h.extra[0]] = h.extra[1].replace(/[^\x20-\x7e]/g, '');
      return out;
    });
}

function bodyArb(route: FuzzRoute, known: Known): fc.Arbitrary<string | Buffer | undefined> {
  const shaped = route.body === undefined ? fc.jsonValue({ maxDepth: 2 }) : valueFor(route.body, known);
  return fc.oneof(
    { weight: 3, arbitrary: shaped.map((v) => JSON.stringify(v)) },
    { weight: 6, arbitrary: shaped.chain(broken).map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 1, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.constantFrom(...RAW_BODIES) },
    { weight: 1, arbitrary: fc.constantFrom(undefined, Buffer.from([0xff, 0xfe, 0x7b, 0x7d])) },
  );
}

/** A path value: one that matches, a broken one, or one encoded oddly. */
function pathValueArb(schema: Schema | undefined, known: Known, name: string): fc.Arbitrary<string> {
  const fitting = schema === undefined ? fc.string({ minLength: 1 }) : valueFor(schema, known, name).map(String);
  return fc.oneof(
    { weight: 4, arbitrary: fitting.map((v) => encodeURIComponent(v)) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).map(encodeURIComponent) },
    {
      weight: 1,
      arbitrary: fc.constantFrom('%', '%zz', '%00', '%C0%AF', '..', '%2e%2e', 'a'.repeat(3000), '%E2%80%AE', '*'),
    },
  );
}

function queryArb(route: FuzzRoute, known: Known): fc.Arbitrary<string> {
  const properties = ((route.querystring ? resolve(route.querystring).properties : undefined) ?? {}) as Record<
    string,
    Schema
  >;
  const pairs = Object.entries(properties).map(([name, schema]) =>
    fc.option(
      fc.oneof(
        { weight: 3, arbitrary: valueFor(schema, known, name).map(String) },
        { weight: 1, arbitrary: fc.constantFrom('', '-1', '1e3', 'NaN', '99999999999999999999', '%00', 'true') },
        { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
      ),
    ),
  );
  const tokens = fc.constantFrom(
    Buffer.from('3000000000').toString('base64url'),
    Buffer.from('-5').toString('base64url'),
    Buffer.from(`${known.taskIds[0] ?? ''}:99999999999`).toString('base64url'),
    '%00',
    '',
  );
  return fc
    .tuple(fc.tuple(...pairs), fc.option(tokens), fc.option(fc.constantFrom('&limit=1&limit=2', '&x=1', '&&=', '&%=%')))
    .map(([values, token, extra]) => {
      const parts: string[] = [];
      Object.keys(properties).forEach((name, i) => {
        const value = values[i];
        if (value !== null && value !== undefined) parts.push(`${name}=${encodeURIComponent(value)}`);
      });
      if (token !== null && properties.next_token !== undefined) parts.push(`next_token=${token}`);
      const query = parts.join('&') + (extra ?? '');
      return query.length > 0 ? `?${query}` : '';
    });
}

/** Requests for one route: its method and path shape, with everything else generated. */
export function requestArb(route: FuzzRoute, known: Known): fc.Arbitrary<FuzzRequest> {
  const names = [...route.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1] as string);
  const paramProps = ((route.params ? resolve(route.params).properties : undefined) ?? {}) as Record<string, Schema>;
  const pathValues = fc.tuple(...names.map((n) => pathValueArb(paramProps[n], known, n)));
  const takesBody = route.method === 'POST' || route.method === 'DELETE' || route.method === 'PUT';
  return fc
    .record({
      values: pathValues,
      query: queryArb(route, known),
      headers: headersArb(known),
      body: takesBody ? bodyArb(route, known) : fc.constantFrom(undefined, undefined, undefined, '{"a":1}'),
    })
    .map(({ values, query, headers, body }) => {
      let url = route.url;
      names.forEach((name, i) => {
        url = url.replace(`:${name}`, values[i] ?? '');
      });
      const request: FuzzRequest = { method: route.method, url: `${url}${query}`, headers };
      if (body !== undefined) request.payload = body;
      else delete request.headers['content-type'];
      return request;
    });
}
