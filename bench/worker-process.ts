import { fork, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { trackChild, waitForExit } from './children.js';
import type { BenchWorkerConfig, FromWorker, ToWorker, WorkerResult } from './protocol.js';
import { takeWindow, type Timed } from './stats.js';

/**
 * The harness's handle on a set of benchmark worker processes (`bench/worker.ts`), each its
 * own Node process using the SDK over HTTP, like a user's worker would.
 */
const WORKER_SCRIPT = resolve(import.meta.dirname, 'worker.js');

interface Handle {
  child: ChildProcess;
  started: number;
  reported: number;
  result: Promise<WorkerResult>;
  /** With `streamLags`: the lags streamed and not yet taken, with when each handler started. */
  lags: Timed;
}

export class WorkerFleet {
  private constructor(private readonly handles: Handle[]) {}

  /** Starts `count` worker processes and resolves once each is polling. */
  static start(count: number, config: BenchWorkerConfig): Promise<WorkerFleet> {
    return WorkerFleet.startScript(WORKER_SCRIPT, count, config);
  }

  /**
   * Starts `count` processes of another worker script that speaks the same protocol
   * (`FromWorker`, `ToWorker`), e.g. a peer's worker (bench/peers/bullmq-worker.ts), given
   * `config` as JSON; resolves once each said it is ready.
   */
  static async startScript(script: string, count: number, config: object): Promise<WorkerFleet> {
    const handles = Array.from({ length: count }, () => spawnWorker(script, config));
    await Promise.all(handles.map((h) => h.ready));
    return new WorkerFleet(handles.map((h) => h.handle));
  }

  /** The worker processes' pids (for CPU accounting). */
  get pids(): number[] {
    return this.handles.map((h) => h.child.pid as number);
  }

  /** Handlers started so far, across the fleet (as last reported, ≤ 5 ms old). */
  get started(): number {
    return this.handles.reduce((n, h) => n + h.started, 0);
  }

  /** Results the node accepted so far, across the fleet. */
  get reported(): number {
    return this.handles.reduce((n, h) => n + h.reported, 0);
  }

  /**
   * With `streamLags`: the start lags (ms) of the handlers that started in [fromMs, toMs),
   * across the fleet, with when each started; those started before `toMs` are forgotten, so
   * memory stays bounded.
   */
  takeLags(fromMs: number, toMs: number): Timed {
    const taken: Timed = { startMs: [], lagMs: [] };
    for (const h of this.handles) {
      const split = takeWindow(h.lags, fromMs, toMs);
      taken.startMs.push(...split.taken.startMs);
      taken.lagMs.push(...split.taken.lagMs);
      h.lags = split.kept;
    }
    return taken;
  }

  /** Resolves when `predicate` holds, checked on every progress message; rejects after `timeoutMs`. */
  until(predicate: (fleet: WorkerFleet) => boolean, timeoutMs: number, what: string): Promise<void> {
    if (predicate(this)) return Promise.resolve();
    return new Promise((resolvePromise, reject) => {
      const check = (): void => {
        if (!predicate(this)) return;
        cleanup();
        resolvePromise();
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${what} (started ${this.started}, reported ${this.reported})`,
          ),
        );
      }, timeoutMs);
      const cleanup = (): void => {
        clearTimeout(timer);
        for (const h of this.handles) h.child.off('message', check);
      };
      for (const h of this.handles) h.child.on('message', check);
    });
  }

  /** Stops every worker gracefully and collects what each recorded. */
  async stop(): Promise<WorkerResult[]> {
    for (const h of this.handles) h.child.send({ type: 'stop' } satisfies ToWorker);
    const results = await Promise.all(
      this.handles.map((h) =>
        Promise.race([
          h.result,
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error('a worker did not stop within 60 s')), 60_000).unref(),
          ),
        ]),
      ),
    );
    await Promise.all(this.handles.map((h) => waitForExit(h.child, 5_000)));
    return results;
  }

  /** Kills every worker at once (after a failure). */
  kill(): void {
    for (const h of this.handles) h.child.kill('SIGKILL');
  }
}

function spawnWorker(script: string, config: object): { handle: Handle; ready: Promise<void> } {
  const child = trackChild(
    fork(script, [JSON.stringify(config)], {
      // BENCH_WORKER_ARGS: extra Node.js flags for worker processes only, e.g. "--cpu-prof".
      execArgv: [...process.execArgv, ...(process.env.BENCH_WORKER_ARGS?.split(' ').filter(Boolean) ?? [])],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  let onReady!: () => void;
  let onResult!: (r: WorkerResult) => void;
  let onFail!: (e: Error) => void;
  const ready = new Promise<void>((res, rej) => {
    onReady = res;
    onFail = rej;
  });
  const result = new Promise<WorkerResult>((res, rej) => {
    onResult = res;
    child.once('exit', (code, signal) =>
      rej(new Error(`worker exited (${code ?? signal}) before reporting its results`)),
    );
  });
  result.catch(() => undefined); // observed by stop(); an early exit also fails `ready`
  const handle: Handle = { child, started: 0, reported: 0, result, lags: { startMs: [], lagMs: [] } };
  child.on('message', (message: FromWorker) => {
    if (message.type === 'ready') onReady();
    else if (message.type === 'progress') {
      handle.started = message.started;
      handle.reported = message.reported;
      if (message.lags !== undefined) {
        handle.lags.startMs.push(...message.lags.startMs);
        handle.lags.lagMs.push(...message.lags.lagMs);
      }
    } else if (message.type === 'result') {
      handle.started = message.result.started;
      handle.reported = message.result.reported;
      onResult(message.result);
    }
  });
  child.once('exit', (code, signal) => onFail(new Error(`worker exited (${code ?? signal}) while starting`)));
  return { handle, ready };
}
