import WebSocket from 'ws';

/**
 * A worker on the channel written with nothing but `ws`, frame by frame as API.md has them, so
 * the tests hold the node to the contract rather than to the SDK's reading of it.
 */

export interface TaskFrame {
  task_id: string;
  task_type: string;
  payload: unknown;
  attempt: number;
  lease_token: string;
  lease_expires_at: string;
}

export type NodeFrameJson =
  | { type: 'welcome'; node_id: string; heartbeat_ms: number; resumed: string[] }
  | { type: 'tasks'; tasks: TaskFrame[] }
  | { type: 'acks'; acks: { task_id: string; ok: boolean; error?: { code: string; message: string } }[] }
  | { type: 'cancel'; task_ids: string[] }
  | { type: 'lease_lost'; task_ids: string[] }
  | { type: 'error'; error: { code: string; message: string } }
  | {
      type: 'spawned';
      request_id: string;
      tasks?: { task_id: string; status: string; due_time: string | null; child_key: string | null }[];
      error?: { code: string; message: string; details?: Record<string, unknown> };
    };

type FrameOf<T extends NodeFrameJson['type']> = Extract<NodeFrameJson, { type: T }>;

export class RawWorker {
  /** Every frame received, in order. */
  readonly frames: NodeFrameJson[] = [];
  /** Tasks received, in order. */
  readonly tasks: TaskFrame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly listeners = new Set<() => void>();
  /** How many frames of each type were taken by `next`. */
  private readonly taken = new Map<string, number>();

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString('utf8')) as NodeFrameJson;
      this.frames.push(frame);
      if (frame.type === 'tasks') this.tasks.push(...frame.tasks);
      for (const listener of this.listeners) listener();
    });
    this.closed = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
        for (const listener of this.listeners) listener();
      });
    });
  }

  static connect(url: string, headers: Record<string, string> = {}): Promise<RawWorker> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/workers/connect`, { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new RawWorker(ws)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`unexpected response ${res.statusCode}`)));
    });
  }

  /** Connects and says hello; resolves with the welcome. */
  static async hello(
    url: string,
    hello: { worker_id: string; task_types: string[]; credits: number; resume?: unknown[] },
  ): Promise<{ worker: RawWorker; welcome: FrameOf<'welcome'> }> {
    const worker = await RawWorker.connect(url);
    worker.send({ type: 'hello', ...hello });
    return { worker, welcome: await worker.next('welcome') };
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next frame of `type` not taken yet (received already or to come). */
  next<T extends NodeFrameJson['type']>(type: T, timeoutMs = 10_000): Promise<FrameOf<T>> {
    return this.until(
      () => {
        const index = this.taken.get(type) ?? 0;
        const found = this.frames.filter((f) => f.type === type)[index];
        if (found === undefined) return undefined;
        this.taken.set(type, index + 1);
        return found as FrameOf<T>;
      },
      `a ${type} frame`,
      timeoutMs,
    );
  }

  /** Waits until `check` answers something, re-checked on every frame. */
  until<R>(check: () => R | undefined, what: string, timeoutMs = 10_000): Promise<R> {
    return new Promise((resolve, reject) => {
      const run = (): void => {
        const value = check();
        if (value === undefined) return;
        done();
        resolve(value);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; got ${JSON.stringify(this.frames)}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        this.listeners.delete(run);
      };
      this.listeners.add(run);
      run();
    });
  }

  /** Waits until `n` tasks in all were received. */
  received(n: number, timeoutMs = 10_000): Promise<TaskFrame[]> {
    return this.until(() => (this.tasks.length >= n ? this.tasks.slice(0, n) : undefined), `${n} tasks`, timeoutMs);
  }

  /** Sends results and resolves with the acks frame that answers them. */
  async results(
    results: { task_id: string; lease_token: string; status?: string; result?: unknown; error?: string }[],
  ): Promise<FrameOf<'acks'>['acks']> {
    this.send({ type: 'results', results: results.map((r) => ({ status: 'succeeded', ...r })) });
    return (await this.next('acks')).acks;
  }

  close(): void {
    this.ws.close();
  }

  /**
   * Sends a close frame, then stops reading: the node sees the worker close, but the
   * connection does not end until the worker reads the node's answer (a close handshake that
   * is slow to finish, as over a congested or dying link). Resolves once that answer is here,
   * i.e. once the node has read the close frame; the socket stays half-closed until
   * `terminate`.
   */
  async closeHeld(timeoutMs = 10_000): Promise<void> {
    this.ws.close();
    this.ws.pause();
    // The socket under ws is not part of its API; a paused one buffers what arrives.
    const tcp = (this.ws as unknown as { _socket: { readableLength: number } })._socket;
    const deadline = Date.now() + timeoutMs;
    while (tcp.readableLength === 0) {
      if (Date.now() > deadline) throw new Error(`the node did not answer a close frame within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  terminate(): void {
    this.ws.terminate();
  }
}
