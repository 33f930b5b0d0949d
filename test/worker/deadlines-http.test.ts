import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createWorker, TaskTimeoutError, type Worker, type WorkerOptions } from '../../src/worker/index.js';
import { gate, task, until } from './fake-channel-node.js';

/**
 * Execution deadlines in the SDK over HTTP, against a fake node (node:http) that speaks the
 * contract of ../notes/DEADLINES-WIRE.md (the node's side is not built yet): poll answers carry
 * `deadline_at`, heartbeat answers name the deadline, `extend_seconds` moves it, and a
 * heartbeat or completion at or after it is answered 409. A handler that hangs is aborted
 * with a `TaskTimeoutError` at its deadline, its slot polled for again at once, no result
 * sent, and its heartbeats stop before the deadline; `extendDeadline` goes out in a heartbeat
 * at once. Deadlines are real and short (hundreds of ms): the timers race real sockets.
 */

interface Heartbeat {
  taskId: string;
  atMs: number;
  body: Record<string, unknown>;
}

/** A node that hands out the tasks it is given, one poll at a time, and records what workers send. */
class FakeHttpNode {
  readonly heartbeats: Heartbeat[] = [];
  readonly completed: Record<string, unknown>[] = [];
  /** The node's deadline of each task handed out, Unix ms. */
  readonly deadlines = new Map<string, number>();
  private readonly offered: Record<string, unknown>[] = [];
  private parked: { res: ServerResponse; maxTasks: number; timer: NodeJS.Timeout } | null = null;
  private readonly onHeartbeat: (() => void)[] = [];
  url = '';

  constructor(readonly server: Server) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      let raw = '';
      req.on('data', (chunk: Buffer) => (raw += chunk.toString()));
      req.on('end', () => this.answer(req.url ?? '', JSON.parse(raw || '{}') as Record<string, unknown>, res));
    });
  }

  /** Hands `t` to the next poll (at once to one waiting). */
  offer(t: Record<string, unknown>): void {
    if (typeof t.deadline_at === 'string') this.deadlines.set(t.task_id as string, Date.parse(t.deadline_at));
    this.offered.push(t);
    if (this.parked !== null) {
      const { res, maxTasks, timer } = this.parked;
      this.parked = null;
      clearTimeout(timer);
      this.hand(res, maxTasks);
    }
  }

  /** Resolves at the `n`th heartbeat of `taskId`. */
  heartbeatOf(taskId: string, n: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (this.heartbeats.filter((h) => h.taskId === taskId).length >= n) resolve();
        else this.onHeartbeat.push(check);
      };
      check();
    });
  }

  async close(): Promise<void> {
    if (this.parked !== null) clearTimeout(this.parked.timer);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private answer(path: string, body: Record<string, unknown>, res: ServerResponse): void {
    const now = Date.now();
    if (path === '/api/workers/poll') {
      if (this.offered.length > 0) return this.hand(res, body.max_tasks as number);
      const timer = setTimeout(() => {
        this.parked = null;
        json(res, 200, { tasks: [] });
      }, body.wait_ms as number);
      this.parked = { res, maxTasks: body.max_tasks as number, timer };
      return;
    }
    const heartbeat = /^\/api\/tasks\/([^/]+)\/heartbeat$/.exec(path);
    if (heartbeat !== null) {
      const taskId = decodeURIComponent(heartbeat[1]!);
      const h = { taskId, atMs: now, body };
      this.heartbeats.push(h);
      for (const wake of this.onHeartbeat.splice(0)) wake();
      const deadline = this.deadlines.get(taskId);
      if (deadline === undefined) {
        // A node older than deadlines: the lease moves on, and no deadline_at.
        return json(res, 200, { ok: true, lease_expires_at: iso(now + 60_000), cancel_requested: false });
      }
      if (now >= deadline) return json(res, 409, { error: { code: 'lease_not_held', message: 'past its deadline' } });
      const extend = body.extend_seconds;
      const moved = typeof extend === 'number' ? Math.max(deadline, now + extend * 1000) : deadline;
      this.deadlines.set(taskId, moved);
      return json(res, 200, {
        ok: true,
        lease_expires_at: iso(moved),
        deadline_at: iso(moved),
        cancel_requested: false,
      });
    }
    if (path === '/api/workers/complete') {
      const results = body.results as { task_id: string }[];
      this.completed.push(...results);
      return json(res, 200, { results: results.map((r) => ({ task_id: r.task_id, ok: true })) });
    }
    json(res, 404, { error: { code: 'not_found', message: path } });
  }

  private hand(res: ServerResponse, maxTasks: number): void {
    json(res, 200, { tasks: this.offered.splice(0, maxTasks) });
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

const nodes: FakeHttpNode[] = [];
const workers: Worker[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
  await Promise.all(nodes.splice(0).map((n) => n.close()));
});

async function fakeHttpNode(): Promise<FakeHttpNode> {
  const node = new FakeHttpNode(createServer());
  await new Promise<void>((resolve) => node.server.listen(0, '127.0.0.1', resolve));
  node.url = `http://127.0.0.1:${(node.server.address() as AddressInfo).port}`;
  nodes.push(node);
  return node;
}

function httpWorker(url: string, options: Partial<WorkerOptions> & Pick<WorkerOptions, 'handler'>): Worker {
  const w = createWorker({
    url,
    transport: 'http',
    taskTypes: ['fake.type'],
    pollWaitMs: 2_000,
    onError: () => undefined,
    ...options,
  });
  workers.push(w);
  w.start();
  return w;
}

describe('deadlines over HTTP', () => {
  it('aborts a handler that hangs at its deadline, polls for its slot again at once, sends no result, and its heartbeats stop before the deadline', async () => {
    const node = await fakeHttpNode();
    let abort: { reason: unknown; atMs: number } | undefined;
    let heartbeatsAtAbort = -1;
    const next = task({ payload: 'next' });
    const nextHeld = gate();
    const w = httpWorker(node.url, {
      concurrency: 1,
      heartbeatEveryMs: 50,
      handler: async ({ payload, signal }) => {
        if (payload === 'next') return nextHeld.promise.then(() => 'done');
        signal.addEventListener(
          'abort',
          () => {
            abort = { reason: signal.reason as unknown, atMs: Date.now() };
            heartbeatsAtAbort = node.heartbeats.length;
          },
          { once: true },
        );
        return new Promise(() => undefined); // ignores its signal and never settles
      },
    });
    // Far enough that its heartbeats (none within 250 ms of the deadline) have room on a busy machine.
    const deadline = Date.now() + 1_000;
    const hung = task({ payload: 'hang', deadline_at: iso(deadline), lease_expires_at: iso(deadline) });
    node.offer(hung);
    node.offer(next); // waits for the one slot

    // The next task runs only once the hung one's slot is free: at its deadline.
    await node.heartbeatOf(next.task_id, 3); // 150 ms of the next task's heartbeats after the deadline
    nextHeld.open();
    await until(() => w.stats.reported === 1, 'the next task reported');
    expect(node.completed).toEqual([expect.objectContaining({ task_id: next.task_id, status: 'succeeded' })]);
    expect(abort?.reason).toBeInstanceOf(TaskTimeoutError);
    expect(abort?.reason).toMatchObject({ taskId: hung.task_id, deadline: new Date(deadline) });
    expect(abort?.atMs).toBeGreaterThanOrEqual(deadline);
    const hungBeats = node.heartbeats.filter((h) => h.taskId === hung.task_id);
    expect(hungBeats.length).toBeGreaterThan(0);
    expect(hungBeats.every((h) => h.atMs < deadline)).toBe(true);
    expect(node.heartbeats.slice(heartbeatsAtAbort).filter((h) => h.taskId === hung.task_id)).toEqual([]);
    expect(w.stats).toMatchObject({ started: 2, timedOut: 1, succeeded: 1, failed: 0, leasesLost: 0, reported: 1 });
  });

  it('extendDeadline goes out in a heartbeat at once with extend_seconds, resolves with the answer’s deadline, and the abort moves to it', async () => {
    const node = await fakeHttpNode();
    let abort: { reason: unknown; atMs: number } | undefined;
    let granted: Date | undefined;
    const w = httpWorker(node.url, {
      heartbeatEveryMs: 60_000, // no heartbeat of its own before the deadline
      handler: async (ctx) => {
        ctx.signal.addEventListener(
          'abort',
          () => (abort = { reason: ctx.signal.reason as unknown, atMs: Date.now() }),
          {
            once: true,
          },
        );
        granted = await ctx.extendDeadline(1);
        return new Promise(() => undefined);
      },
    });
    const first = Date.now() + 300;
    const t = task({ deadline_at: iso(first), lease_expires_at: iso(first) });
    node.offer(t);

    await until(() => granted !== undefined, 'the extension granted');
    expect(node.heartbeats).toEqual([
      {
        taskId: t.task_id,
        atMs: expect.any(Number) as unknown,
        body: { lease_token: t.lease_token, extend_seconds: 1 },
      },
    ]);
    const moved = node.deadlines.get(t.task_id)!;
    expect(moved).toBeGreaterThan(first);
    expect(granted).toEqual(new Date(moved));
    await until(() => abort !== undefined, 'the abort at the granted deadline');
    expect(abort?.atMs).toBeGreaterThanOrEqual(moved);
    expect(abort?.reason).toMatchObject({ name: 'TaskTimeoutError', deadline: new Date(moved) });
    expect(w.stats).toMatchObject({ timedOut: 1, leasesLost: 0 });
    expect(node.completed).toEqual([]);
  });
});
