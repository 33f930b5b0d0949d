import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, type Worker } from '../../src/worker/index.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * How the SDK's HTTP transport treats a node that pushes back or is gone, against a scripted fake node:
 * `Retry-After` on 429/503 is waited out, network errors back off, and nothing loops
 * tightly. (The real node cannot be made to answer 503 on cue.)
 */
type Route = (
  req: IncomingMessage,
  body: unknown,
) => { status: number; body?: unknown; headers?: Record<string, string> } | null;

let server: Server | undefined;
let worker: Worker | undefined;

afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
});

/** A fake node: `route` answers each request (null: leave it hanging until the server closes). */
async function fakeNode(route: Route): Promise<string> {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const answer = route(req, raw ? JSON.parse(raw) : null);
      if (answer === null) return;
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const TASK = {
  task_id: '0190d4a0-0000-7000-8000-000000000001',
  task_type: 'fake.type',
  payload: { a: 1 },
  attempt: 1,
  lease_token: 'tok-1',
  lease_expires_at: new Date(Date.now() + 600_000).toISOString(),
};

describe('worker SDK against a node that pushes back', () => {
  it('waits out Retry-After on 503 (poll) and 429 (complete), and sends the token', async () => {
    const pollTimes: number[] = [];
    const completeTimes: number[] = [];
    const auth: (string | undefined)[] = [];
    let handed = false;
    const url = await fakeNode((req, body) => {
      auth.push(req.headers.authorization);
      if (req.url === '/api/workers/poll') {
        pollTimes.push(Date.now());
        if (pollTimes.length === 1)
          return {
            status: 503,
            headers: { 'retry-after': '0.3' },
            body: { error: { code: 'store_unavailable', message: 'down' } },
          };
        if (!handed) {
          handed = true;
          return { status: 200, body: { tasks: [TASK] } };
        }
        return null; // a long-poll with nothing to give
      }
      if (req.url === '/api/workers/complete') {
        completeTimes.push(Date.now());
        if (completeTimes.length === 1)
          return {
            status: 429,
            headers: { 'retry-after': '0.2' },
            body: { error: { code: 'backlog_full', message: 'later' } },
          };
        const results = (body as { results: { task_id: string }[] }).results;
        return { status: 200, body: { results: results.map((r) => ({ task_id: r.task_id, ok: true })) } };
      }
      return { status: 404 };
    });
    const payloads: unknown[] = [];
    worker = createWorker({
      url,
      transport: 'http',
      token: 's3cret',
      taskTypes: ['fake.type'],
      onError: () => undefined,
      handler: async ({ payload }) => void payloads.push(payload),
    });
    worker.start();
    await eventually(() => (worker!.stats.reported >= 1 ? true : undefined), 5_000, 'the result reported', 10);

    expect(payloads).toEqual([{ a: 1 }]);
    expect(worker.stats.reported).toBe(1);
    expect(pollTimes[1]! - pollTimes[0]!).toBeGreaterThanOrEqual(295);
    expect(completeTimes).toHaveLength(2);
    expect(completeTimes[1]! - completeTimes[0]!).toBeGreaterThanOrEqual(195);
    expect(new Set(auth)).toEqual(new Set(['Bearer s3cret']));
  });

  it('backs off on network errors instead of looping, and stops promptly', async () => {
    const url = await fakeNode(() => ({ status: 200 }));
    await new Promise<void>((resolve) => server!.close(() => resolve())); // nothing listens there now
    server = undefined;
    let errors = 0;
    worker = createWorker({
      url,
      transport: 'http',
      taskTypes: ['fake.type'],
      onError: () => void errors++,
      handler: async () => undefined,
    });
    worker.start();
    await sleep(1_500); // real time is the subject: the window in which the backoff's attempts are counted
    // Backoff steps of 100, 200, 400, 800 ms (each halved at worst by jitter): at most ~6 tries in 1.5 s.
    expect(errors).toBeGreaterThanOrEqual(2);
    expect(errors).toBeLessThanOrEqual(7);
    const stopAt = Date.now();
    await worker.stop();
    expect(Date.now() - stopAt).toBeLessThan(500);
  });

  it('drops a result whose lease ran out while the node was unreachable', async () => {
    let completes = 0;
    let handed = false;
    const url = await fakeNode((req) => {
      if (req.url === '/api/workers/poll') {
        if (handed) return null;
        handed = true;
        return {
          status: 200,
          body: { tasks: [{ ...TASK, lease_expires_at: new Date(Date.now() - 10_000).toISOString() }] },
        };
      }
      completes++;
      return { status: 503, headers: { 'retry-after': '0.1' } };
    });
    worker = createWorker({
      url,
      transport: 'http',
      taskTypes: ['fake.type'],
      onError: () => undefined,
      handler: async () => undefined,
    });
    worker.start();
    await eventually(() => (worker!.stats.started >= 1 ? true : undefined), 5_000, 'the handler to start', 10);
    await worker.stop();
    // Tried once; the retry would land past the lease (and its grace), so it was dropped.
    expect(completes).toBe(1);
    expect(worker.stats).toMatchObject({ reported: 0, discarded: 1, unreported: 0 });
  });
});
