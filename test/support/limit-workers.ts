/**
 * Workers for the flow-control cluster test (test/e2e/limits-cluster.slow.test.ts, `npm run test:slow`), all in the test
 * process so that the count of a key's tasks running at once is exact: every handler, whatever
 * its transport, counts its task's keys (named in its payload) as running from its first line
 * to its last. A handler ends before its result reaches the node, and the node gives the
 * permit back only once it recorded the result: the count is conservative.
 */
import { createWorker, type Worker, type WorkerTransport } from '../../src/worker/index.js';
import { call, type ProcessCluster } from './cluster.js';
import { RawWorker } from './raw-worker.js';
import { sleep } from './waits.js';

/** A task as a worker got it: the payload names the keys it takes part in. */
export interface LimitPayload {
  keys: string[];
}

/** How many tasks of each key run at once, counted by the handlers of every worker. */
export class RunningCount {
  readonly running = new Map<string, number>();
  readonly max = new Map<string, number>();
  /** Tasks whose handler finished at least once. */
  readonly finished = new Set<string>();
  /** Every handler start, in order: the task, its keys and when (ms since the epoch). */
  readonly starts: { taskId: string; keys: string[]; atMs: number }[] = [];
  /** Handler runs by path ("channel", "http-sdk", "http-raw"). */
  readonly byPath = new Map<string, number>();

  /** Runs `work` counted as one running task of each of `keys`. */
  async run(taskId: string, payload: unknown, path: string, work: () => Promise<void>): Promise<null> {
    const keys = (payload as LimitPayload).keys;
    this.starts.push({ taskId, keys, atMs: Date.now() });
    this.byPath.set(path, (this.byPath.get(path) ?? 0) + 1);
    for (const k of keys) {
      const n = (this.running.get(k) ?? 0) + 1;
      this.running.set(k, n);
      if (n > (this.max.get(k) ?? 0)) this.max.set(k, n);
    }
    try {
      await work();
    } finally {
      for (const k of keys) this.running.set(k, (this.running.get(k) ?? 1) - 1);
      this.finished.add(taskId);
    }
    return null;
  }
}

/** Sleeps 20–100 ms: the handler's work (real time is the subject: tasks that take time). */
export const shortWork = (): Promise<void> => sleep(20 + Math.floor(Math.random() * 80));

/** An SDK worker (channel or HTTP long-poll) whose handler is counted. */
export function sdkWorker(
  count: RunningCount,
  options: { urls: string[]; transport: WorkerTransport; types: string[]; work?: () => Promise<void> },
): Worker {
  const work = options.work ?? shortWork;
  const path = options.transport === 'channel' ? 'channel' : 'http-sdk';
  const worker = createWorker({
    urls: options.urls,
    transport: options.transport,
    taskTypes: options.types,
    concurrency: 20,
    pollWaitMs: 1_000,
    onError: () => undefined, // a node killed or paused under it: the SDK recovers by itself
    handler: ({ taskId, payload }) => count.run(taskId, payload, path, work),
  });
  worker.start();
  return worker;
}

export interface PollerOptions {
  types: string[];
  /** Node ids polled in turn. */
  targets: string[];
  /** Polls in flight at once. @default 2 */
  loops?: number;
  /** @default 10 */
  maxTasks?: number;
  /** @default 500 */
  waitMs?: number;
  /**
   * Keep polling the targets while they are paused (the request waits in the paused node's
   * socket and is answered when it resumes). @default false: skip paused and dead nodes
   */
  sticky?: boolean;
  work?: () => Promise<void>;
}

/**
 * A worker written with `fetch` on `POST /api/workers/poll` and `/complete`: each poll claims
 * up to `maxTasks` (one claim statement), runs them at once, and reports them in one request
 * through the node that handed them out, or another one if that one is gone.
 */
export class Poller {
  private running = false;
  private loops: Promise<void>[] = [];
  private turn = 0;
  errors = 0;

  constructor(
    private readonly cluster: ProcessCluster,
    private readonly count: RunningCount,
    private readonly options: PollerOptions,
  ) {}

  start(): this {
    this.running = true;
    this.loops = Array.from({ length: this.options.loops ?? 2 }, () => this.loop());
    return this;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private target(): string | undefined {
    const usable = this.options.targets.filter((id) => {
      const n = this.cluster.node(id);
      return n.alive && (this.options.sticky === true || !n.paused);
    });
    return usable.length === 0 ? undefined : usable[this.turn++ % usable.length];
  }

  private async loop(): Promise<void> {
    const waitMs = this.options.waitMs ?? 500;
    while (this.running) {
      const via = this.target();
      if (via === undefined) {
        await sleep(50); // real time is the subject: every target is down; look again shortly
        continue;
      }
      let tasks: { task_id: string; payload: unknown; lease_token: string }[];
      try {
        const r = await call<{ tasks: typeof tasks }>(
          this.cluster.node(via).url,
          'POST',
          '/api/workers/poll',
          {
            worker_id: `raw-${via}`,
            task_types: this.options.types,
            max_tasks: this.options.maxTasks ?? 10,
            wait_ms: waitMs,
          },
          waitMs + 30_000,
        );
        if (r.status !== 200) throw new Error(`poll ${via}: ${r.status}`);
        tasks = r.body.tasks;
      } catch {
        this.errors++;
        await sleep(50); // real time is the subject: a node killed under the poll; retry shortly
        continue;
      }
      if (tasks.length === 0) continue;
      const work = this.options.work ?? shortWork;
      await Promise.all(tasks.map((t) => this.count.run(t.task_id, t.payload, 'http-raw', work)));
      await this.complete(
        tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' })),
        via,
      );
    }
  }

  /** Reports through `first`, else through any running node; a result never delivered is left to the lease. */
  private async complete(results: unknown[], first: string): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const via = attempt === 0 ? first : this.cluster.ids()[attempt % this.cluster.ids().length];
      if (via === undefined) break;
      try {
        const r = await call(this.cluster.node(via).url, 'POST', '/api/workers/complete', { results }, 30_000);
        if (r.status === 200) return;
      } catch {
        // the node went away: another one
      }
      await sleep(100); // real time is the subject: a node process that failed a report; retry shortly
    }
    this.errors++;
  }
}

/**
 * A worker that drops its leases: one long-poll through `via` that claims up to `n` tasks, and
 * no heartbeat nor result ever after. Their permits come back when their leases run out.
 * Answers the tasks it took (retries until it took some, or `timeoutMs`).
 */
export async function dropLeasesHttp(
  cluster: ProcessCluster,
  via: string,
  types: string[],
  n: number,
  timeoutMs = 10_000,
): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const r = await call<{ tasks: { task_id: string }[] }>(
      cluster.node(via).url,
      'POST',
      '/api/workers/poll',
      { worker_id: 'w-drops-leases', task_types: types, max_tasks: n, wait_ms: 1_000 },
      10_000,
    );
    if (r.status === 200 && r.body.tasks.length > 0) return r.body.tasks.map((t) => t.task_id);
  }
  return [];
}

/**
 * A channel worker that disconnects without results: it says hello with `n` credits, takes
 * the first tasks pushed to it and drops its socket (no close frame). The node hands them back.
 */
export async function dropSocket(url: string, types: string[], n: number, timeoutMs = 10_000): Promise<string[]> {
  const { worker } = await RawWorker.hello(url, { worker_id: 'w-drops-socket', task_types: types, credits: n });
  try {
    const frame = await worker.next('tasks', timeoutMs);
    return frame.tasks.map((t) => t.task_id);
  } catch {
    return [];
  } finally {
    worker.ws.terminate();
  }
}
