/**
 * UNIT tests of the request log: the routes workers call all the time (poll, heartbeat,
 * complete, batch complete) write no request lines at `info`, every other route does, and a
 * failure on a worker route is still logged at its own level.
 */
import type { FastifyBaseLogger, FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import { FakeApi, KNOWN_ID, serverWith } from './fake-api.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
type Level = (typeof LEVELS)[number];

interface Entry {
  level: Level;
  msg: unknown;
}

/**
 * A logger that keeps what it would print, honouring its level and the level fastify gives a
 * route's child logger (`child(bindings, { level })`), as pino does.
 */
function leveledLogger(level: Level = 'info'): { logger: FastifyBaseLogger; entries: Entry[] } {
  const entries: Entry[] = [];
  const make = (level: Level | 'silent'): FastifyBaseLogger => {
    const threshold = level === 'silent' ? LEVELS.length : LEVELS.indexOf(level);
    const at =
      (name: Level) =>
      (objOrMsg: unknown, msg?: unknown): void => {
        if (LEVELS.indexOf(name) >= threshold) entries.push({ level: name, msg: msg ?? objOrMsg });
      };
    return {
      level,
      trace: at('trace'),
      debug: at('debug'),
      info: at('info'),
      warn: at('warn'),
      error: at('error'),
      fatal: at('fatal'),
      silent: () => undefined,
      child: (_bindings: unknown, options?: { level?: Level }) => make(options?.level ?? level),
    };
  };
  return { logger: make(level), entries };
}

const apps: FastifyInstance[] = [];
function server(api = new FakeApi(), level: Level = 'info'): { app: FastifyInstance; api: FakeApi; entries: Entry[] } {
  const { logger, entries } = leveledLogger(level);
  const { app } = serverWith({}, { api, logger });
  apps.push(app);
  return { app, api, entries };
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

function post(app: FastifyInstance, url: string, body: unknown): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: body as object });
}

const infoLines = (entries: Entry[]): Entry[] => entries.filter((e) => e.level === 'info');

describe('request log', () => {
  it('logs a GET /api/tasks/:id at info (incoming request and request completed)', async () => {
    const { app, entries } = server();
    const res = await app.inject({ method: 'GET', url: `/api/tasks/${KNOWN_ID}` });
    expect(res.statusCode).toBe(200);
    expect(infoLines(entries).map((e) => e.msg)).toEqual(['incoming request', 'request completed']);
  });

  it.each([
    ['/api/workers/poll', { worker_id: 'w-1', task_types: ['email.send'], wait_ms: 10 }],
    [`/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'tok' }],
    [`/api/tasks/${KNOWN_ID}/complete`, { lease_token: 'tok', status: 'succeeded' }],
    ['/api/workers/complete', { results: [{ task_id: KNOWN_ID, lease_token: 'tok', status: 'succeeded' }] }],
  ])('logs nothing at info for POST %s', async (url, body) => {
    const { app, entries } = server();
    const res = await post(app, url, body);
    expect(res.statusCode, res.body).toBe(200);
    expect(entries).toEqual([]);
  });

  it('still logs a failure on a worker route at its level', async () => {
    const api = new FakeApi();
    api.override('poll', () => Promise.reject(new Error('boom')));
    const { app, entries } = server(api);
    const res = await post(app, '/api/workers/poll', { worker_id: 'w-1', task_types: ['a'], wait_ms: 10 });
    expect(res.statusCode).toBe(500);
    expect(infoLines(entries)).toEqual([]);
    expect(entries.some((e) => e.level === 'error')).toBe(true);
  });

  it('logs worker requests like any other at debug', async () => {
    const { app, entries } = server(new FakeApi(), 'debug');
    const res = await post(app, `/api/tasks/${KNOWN_ID}/heartbeat`, { lease_token: 'tok' });
    expect(res.statusCode).toBe(200);
    expect(infoLines(entries).map((e) => e.msg)).toEqual(['incoming request', 'request completed']);
  });

  it('does not make worker routes louder than a stricter server level', async () => {
    const api = new FakeApi();
    api.override('poll', () => Promise.reject(new WheelhouseError('store_unavailable')));
    const { app, entries } = server(api, 'error');
    const res = await post(app, '/api/workers/poll', { worker_id: 'w-1', task_types: ['a'], wait_ms: 10 });
    expect(res.statusCode).toBe(503);
    expect(entries).toEqual([]);
  });
});
