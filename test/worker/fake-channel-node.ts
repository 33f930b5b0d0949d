import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { eventually } from '../support/waits.js';

/**
 * A scripted fake node for the SDK's channel tests: a `ws` server that accepts the worker's
 * sockets and lets the test read the frames the worker sent, by type and in order, and send
 * frames back. `test/worker/worker-channel.test.ts` and the deadline tests use it; the real
 * node's side is in test/e2e/worker-channel.test.ts.
 */

export type Frame = Record<string, unknown> & { type: string };

/** One socket as the fake node sees it: the frames the worker sent, by type, in order. */
export class FakeConnection {
  private readonly queues = new Map<string, Frame[]>();
  private readonly waiters: { type: string; resolve: (f: Frame) => void }[] = [];
  readonly all: Frame[] = [];
  /** Acknowledge every results frame as it comes (ok), instead of leaving it to the test. */
  autoAck = false;

  constructor(
    readonly socket: WebSocket,
    readonly request: IncomingMessage,
  ) {
    socket.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as Frame;
      this.all.push(frame);
      if (this.autoAck && frame.type === 'results') this.ack(frame.results);
      const waiter = this.waiters.findIndex((w) => w.type === frame.type);
      if (waiter >= 0) return this.waiters.splice(waiter, 1)[0]!.resolve(frame);
      const queue = this.queues.get(frame.type) ?? [];
      queue.push(frame);
      this.queues.set(frame.type, queue);
    });
  }

  /** The next frame of `type` the worker sent (waits for it, failing after `timeoutMs`). */
  next(type: string, timeoutMs = 10_000): Promise<Frame> {
    const queued = this.queues.get(type)?.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const waiter = {
        type,
        resolve: (frame: Frame) => {
          clearTimeout(timer);
          resolve(frame);
        },
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        reject(new Error(`timed out after ${timeoutMs} ms waiting for a ${type} frame`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Whether a frame of `type` is waiting unread. */
  has(type: string): boolean {
    return (this.queues.get(type)?.length ?? 0) > 0;
  }

  send(frame: Frame): void {
    this.socket.send(JSON.stringify(frame));
  }

  welcome(extra: Record<string, unknown> = {}): void {
    this.send({ type: 'welcome', node_id: 'fake', heartbeat_ms: 5_000, ...extra });
  }

  push(...tasks: Record<string, unknown>[]): void {
    this.send({ type: 'tasks', tasks });
  }

  ack(results: unknown, ok = true): void {
    const list = (results as { task_id: string }[]).map((r) => ({ task_id: r.task_id, ok }));
    this.send({ type: 'acks', acks: list });
  }
}

/** A node that speaks the channel (or refuses the upgrade with `refuseWith`). */
export class FakeNode {
  private readonly wss: WebSocketServer;
  private readonly pending: ((c: FakeConnection) => void)[] = [];
  private readonly unclaimed: FakeConnection[] = [];
  readonly connections: FakeConnection[] = [];
  url = '';

  constructor(
    readonly server: Server,
    private readonly refuseWith: number | null = null,
    autoPong = true,
  ) {
    this.wss = new WebSocketServer({ noServer: true, autoPong });
    server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
      if (this.refuseWith !== null || request.url !== '/api/workers/connect') {
        socket.end(`HTTP/1.1 ${this.refuseWith ?? 404} Refused\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      this.wss.handleUpgrade(request, socket, head, (ws) => {
        const connection = new FakeConnection(ws, request);
        this.connections.push(connection);
        const waiter = this.pending.shift();
        if (waiter) waiter(connection);
        else this.unclaimed.push(connection);
      });
    });
  }

  /** The next socket a worker opens. */
  accept(): Promise<FakeConnection> {
    const ready = this.unclaimed.shift();
    if (ready) return Promise.resolve(ready);
    return new Promise((resolve) => this.pending.push(resolve));
  }

  async close(): Promise<void> {
    for (const client of this.wss.clients) client.terminate();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Starts a fake node on a free port of 127.0.0.1 (the caller closes it). */
export async function startFakeNode(
  options: { refuseWith?: number; http?: Parameters<typeof createServer>[1]; autoPong?: boolean } = {},
): Promise<FakeNode> {
  const server = createServer(options.http ?? ((_req, res) => res.writeHead(404).end()));
  const node = new FakeNode(server, options.refuseWith ?? null, options.autoPong ?? true);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  node.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return node;
}

let taskSeq = 0;
/** A task as the node hands it out, with a fresh id and lease token; `extra` adds or replaces fields. */
export function task(extra: Record<string, unknown> = {}): Record<string, unknown> & { task_id: string } {
  taskSeq++;
  return {
    task_id: `0190d4a0-0000-7000-8000-${String(taskSeq).padStart(12, '0')}`,
    task_type: 'fake.type',
    payload: { n: taskSeq },
    attempt: 1,
    lease_token: `tok-${taskSeq}`,
    lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
    ...extra,
  };
}

/** A promise with its resolve function, for handlers the test releases. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** Resolves once `check` holds (polled every 5 ms), failing after 5 s. */
export async function until(check: () => boolean, what: string): Promise<void> {
  await eventually(() => (check() ? true : undefined), 5_000, what, 5);
}
