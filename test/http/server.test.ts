/**
 * UNIT tests of the server's error mapping, body parsing and bearer auth, against a fake
 * SchedulerApi (test/http/fake-api.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE, WheelhouseError, type ErrorCode } from '../../src/lib/errors.js';
import type { WheelhouseOptions } from '../../src/lib/config.js';
import { FakeApi, KNOWN_ID, captureLogger, serverWith } from './fake-api.js';

const apps: FastifyInstance[] = [];
function server(...args: Parameters<typeof serverWith>): ReturnType<typeof serverWith> {
  const built = serverWith(...args);
  apps.push(built.app);
  return built;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

function errorOf(res: { json(): unknown }): { code: string; message: string; details: Record<string, unknown> } {
  const body = res.json() as { error: { code: string; message: string; details: Record<string, unknown> } };
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error).sort()).toEqual(['code', 'details', 'message']);
  return body.error;
}

describe('body parsing', () => {
  it('400 malformed_json for a body that is not JSON', async () => {
    const { app, api } = server();
    for (const raw of ['{"task_type": "a",', '{task_type: a}', 'nope', '{"a":1}}']) {
      const res = await app.inject({
        method: 'POST',
        url: '/api/tasks',
        headers: { 'content-type': 'application/json' },
        payload: raw,
      });
      expect(res.statusCode, raw).toBe(400);
      const error = errorOf(res);
      expect(error.code).toBe('malformed_json');
      expect(error.message).toContain('not valid JSON');
    }
    expect(api.callsOf('submit')).toHaveLength(0);
  });

  it('413 payload_too_large for a body over the configured limit, never 5xx', async () => {
    const { app, api } = server({ maxPayloadBytes: 2048 });
    const res = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      payload: { task_type: 'a', payload: 'x'.repeat(4096) },
    });
    expect(res.statusCode).toBe(413);
    const error = errorOf(res);
    expect(error.code).toBe('payload_too_large');
    expect(error.details.limit_bytes).toBe(2048);
    expect(api.callsOf('submit')).toHaveLength(0);
  });

  it('415 unsupported_media_type for a body that is not application/json', async () => {
    const { app } = server();
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await app.inject({
        method: 'POST',
        url: '/api/tasks',
        headers: { 'content-type': type },
        payload: 'task_type=a',
      });
      expect(res.statusCode, type).toBe(415);
      expect(errorOf(res).code).toBe('unsupported_media_type');
    }
  });

  it('accepts application/json with a charset', async () => {
    const { app } = server();
    const res = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      payload: '{"task_type":"a"}',
    });
    expect(res.statusCode).toBe(201);
  });

  it('treats a __proto__ member as an unknown field, not as a prototype', async () => {
    const { app } = server();
    const res = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      headers: { 'content-type': 'application/json' },
      payload: '{"task_type":"a","__proto__":{"priority":0}}',
    });
    expect(res.statusCode).toBe(400);
    expect(errorOf(res).details.field).toBe('__proto__');
  });
});

describe('routing', () => {
  it('404 route_not_found for an unknown route, in the catalogue shape', async () => {
    const { app } = server();
    for (const [method, url] of [
      ['GET', '/nope'],
      ['GET', '/api/taskz'],
      ['PUT', `/api/tasks/${KNOWN_ID}`],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode, url).toBe(404);
      const error = errorOf(res);
      expect(error.code).toBe('route_not_found');
      expect(error.details).toMatchObject({ method });
    }
  });
});

describe('shutdown', () => {
  it('answers 503 not_ready with Retry-After to requests that arrive while the server closes', async () => {
    const { app } = server();
    let release!: () => void;
    let closingStarted!: () => void;
    const started = new Promise<void>((resolve) => (closingStarted = resolve));
    await app.register(async (a) => {
      // Holds the close open so a request can arrive meanwhile.
      a.addHook('preClose', async () => {
        closingStarted();
        await new Promise<void>((resolve) => (release = resolve));
      });
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const { port } = app.server.address() as AddressInfo;
    const closed = app.close();
    await started;
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_ready');
    release();
    await closed;
  });
});

describe('errors from the service', () => {
  const codes: ErrorCode[] = [
    'task_not_found',
    'idempotency_conflict',
    'lease_not_held',
    'task_finished',
    'backlog_full',
    'store_unavailable',
    'ask_timeout',
    'mailbox_full',
    'unknown_dependency',
  ];

  it.each(codes)('maps %s to its catalogue status and body', async (code) => {
    const api = new FakeApi().override('getTask', async () => {
      throw new WheelhouseError(code, `it went ${code}`, { details: { why: code }, retryAfterSeconds: 2.2 });
    });
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(ERROR_CATALOGUE[code].status);
    const status = ERROR_CATALOGUE[code].status;
    if (status === 503) {
      // What is unavailable, not where: the catalogue's sentence and a request id, not the inner text.
      expect(errorOf(res)).toEqual({
        code,
        message: ERROR_CATALOGUE[code].message,
        details: { request_id: expect.any(String) as string },
      });
    } else {
      expect(errorOf(res)).toEqual({ code, message: `it went ${code}`, details: { why: code } });
    }
    expect(res.headers['retry-after']).toBe(status === 429 || status === 503 ? '3' : undefined);
  });

  it('names the store of a 503, never its address', async () => {
    const api = new FakeApi().override('getTask', async () => {
      throw new WheelhouseError(
        'store_unavailable',
        'Redis is unavailable (take): connect ECONNREFUSED 10.0.0.7:6379',
        {
          details: { host: '10.0.0.7' },
        },
      );
    });
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(503);
    expect(errorOf(res).message).toBe('The node cannot reach its Redis right now.');
    expect(res.body).not.toContain('10.0.0.7');
  });

  it('defaults Retry-After to 1 second', async () => {
    const api = new FakeApi().override('getTask', async () => {
      throw new WheelhouseError('backlog_full');
    });
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
  });

  it('500 internal for an unexpected error, logged with its cause and not shown', async () => {
    const { logger, entries } = captureLogger();
    const boom = new TypeError('secret internals: cannot read x of undefined');
    const api = new FakeApi().override('getTask', async () => {
      throw boom;
    });
    const { app } = server({}, { api, logger });
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(500);
    const error = errorOf(res);
    expect(error.code).toBe('internal');
    expect(error.message).not.toContain('secret');
    expect(typeof error.details.request_id).toBe('string');
    const logged = entries.find((e) => e.level === 'error');
    expect(logged?.obj).toMatchObject({ err: boom });
  });

  it('500 internal when the service throws something that is not an Error', async () => {
    const api = new FakeApi().override('cancel', async () => {
      // eslint-disable-next-line @typescript-eslint/only-throw-error -- the case under test
      throw 'a string';
    });
    const { app } = server({}, { api });
    const res = await app.inject({ method: 'DELETE', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(500);
    expect(errorOf(res).code).toBe('internal');
  });
});

describe('API keys', () => {
  const admin = 'an-admin-key-of-some-length';
  const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });

  it('401 without a key, with WWW-Authenticate', async () => {
    const { app, api } = server({ adminToken: admin });
    for (const headers of [{}, { authorization: 'Basic czNjcmV0' }, { authorization: 'Bearer ' }]) {
      const res = await app.inject({ method: 'POST', url: '/api/tasks', payload: { task_type: 'a' }, headers });
      expect(res.statusCode).toBe(401);
      expect(errorOf(res).code).toBe('unauthorized');
      expect(res.headers['www-authenticate']).toBe('Bearer');
    }
    expect(api.calls).toHaveLength(0);
  });

  it('401 with a key the cluster does not know, whatever its shape', async () => {
    const { app, api } = server({ adminToken: admin });
    for (const wrong of [`${admin}x`, admin.toUpperCase(), 'whk_guess', 'x'.repeat(400)]) {
      const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}`, headers: bearer(wrong) });
      expect(res.statusCode, wrong).toBe(401);
      expect(errorOf(res).code).toBe('unauthorized');
    }
    expect(api.calls).toHaveLength(0);
  });

  it('refuses the former authToken option, naming the admin key it is not', () => {
    expect(() => server({ authToken: admin } as WheelhouseOptions)).toThrow(/authToken: is no longer read.*adminToken/);
  });

  it('lets the admin key through on every scope', async () => {
    const { app } = server({ adminToken: admin });
    const headers = bearer(admin);
    expect((await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}`, headers })).statusCode).toBe(200);
    expect(
      (await app.inject({ method: 'POST', url: '/api/tasks', payload: { task_type: 'a' }, headers })).statusCode,
    ).toBe(201);
    const poll = { worker_id: 'w', task_types: ['a'], wait_ms: 0 };
    expect((await app.inject({ method: 'POST', url: '/api/workers/poll', payload: poll, headers })).statusCode).toBe(
      200,
    );
    expect((await app.inject({ method: 'GET', url: '/metrics', headers })).statusCode).toBe(200);
  });

  it('makes a key with scopes, shows its secret once, and revokes it', async () => {
    const { app, api } = server({ adminToken: admin });
    const made = await app.inject({
      method: 'POST',
      url: '/admin/tokens',
      headers: bearer(admin),
      payload: { name: 'dashboards', scopes: ['read'] },
    });
    expect(made.statusCode).toBe(201);
    const key = made.json<{ token_id: string; name: string; scopes: string[]; token: string }>();
    expect(key).toMatchObject({ name: 'dashboards', scopes: ['read'] });
    expect(key.token).toMatch(/^whk_[A-Za-z0-9_-]{43}$/);

    const listed = await app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer(admin) });
    expect(listed.json<{ tokens: { token_id: string }[] }>().tokens.map((t) => t.token_id)).toEqual([key.token_id]);
    expect(listed.body).not.toContain(key.token);

    const read = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}`, headers: bearer(key.token) });
    expect(read.statusCode).toBe(200);
    const submit = await app.inject({
      method: 'POST',
      url: '/api/tasks',
      payload: { task_type: 'a' },
      headers: bearer(key.token),
    });
    expect(submit.statusCode).toBe(403);
    expect(errorOf(submit)).toMatchObject({ code: 'forbidden', details: { scope: 'submit' } });
    expect(api.callsOf('submit')).toHaveLength(0);
    const admin403 = await app.inject({ method: 'GET', url: '/admin/tokens', headers: bearer(key.token) });
    expect(admin403.statusCode).toBe(403);

    const revoked = await app.inject({
      method: 'DELETE',
      url: `/admin/tokens/${key.token_id}`,
      headers: bearer(admin),
    });
    expect(revoked.statusCode).toBe(200);
    const after = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}`, headers: bearer(key.token) });
    expect(after.statusCode).toBe(401);
    const again = await app.inject({
      method: 'DELETE',
      url: `/admin/tokens/${key.token_id}`,
      headers: bearer(admin),
    });
    expect(again.statusCode).toBe(404);
  });

  it('refuses a key request with no scope or an unknown one', async () => {
    const { app } = server({ adminToken: admin });
    for (const scopes of [[], ['root'], ['read', 'read']]) {
      const res = await app.inject({
        method: 'POST',
        url: '/admin/tokens',
        headers: bearer(admin),
        payload: { name: 'k', scopes },
      });
      expect(res.statusCode, JSON.stringify(scopes)).toBe(400);
      expect(errorOf(res).details.field).toMatch(/^scopes/);
    }
  });

  it('closes /admin routes added as extra plugins without a scope', async () => {
    const { app } = server({ adminToken: admin });
    await app.register(async (a) => {
      a.get('/admin/extra', async () => ({ ok: true }));
    });
    expect((await app.inject({ method: 'GET', url: '/admin/extra' })).statusCode).toBe(401);
    expect((await app.inject({ method: 'GET', url: '/admin/extra', headers: bearer(admin) })).statusCode).toBe(200);
  });

  it('leaves /healthz, /readyz and /docs open, and closes /metrics', async () => {
    const { app } = server({ adminToken: admin });
    for (const url of ['/healthz', '/readyz', '/docs', '/docs/openapi.json']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(200);
    }
    expect((await app.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
  });

  it('refuses an empty or short admin key at configuration', () => {
    expect(() => server({ adminToken: '' })).toThrow(/adminToken: is empty/);
    expect(() => server({ adminToken: 'short' })).toThrow(/at least 16 bytes/);
  });

  it('asks for nothing when no key is configured', async () => {
    const { app } = server();
    expect((await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` })).statusCode).toBe(200);
  });
});
