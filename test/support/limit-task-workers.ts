import { expect } from 'vitest';
import { createWorker, type Worker, type WorkerTransport } from '../../src/worker/index.js';
import { api } from './nodes.js';

/**
 * What the flow-control tests (test/e2e/limits-*.test.ts) share: declaring limits, submitting
 * in batches, and workers that watch the limits from their own side — per key, how many run
 * at once and when each task started — so a test holds the node to what a worker saw.
 */

export async function declareLimit(url: string, name: string, body: Record<string, unknown>): Promise<void> {
  const res = await api(url, 'PUT', `/api/limits/${encodeURIComponent(name)}`, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** Submits in batches of 1 000; answers the ids in order. */
export async function submitMany(url: string, tasks: Record<string, unknown>[]): Promise<string[]> {
  const ids: string[] = [];
  for (let at = 0; at < tasks.length; at += 1000) {
    const res = await api<{ tasks: { task_id: string }[] }>(url, 'POST', '/api/tasks/batch', {
      tasks: tasks.slice(at, at + 1000),
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    ids.push(...res.body.tasks.map((t) => t.task_id));
  }
  return ids;
}

export async function submitOne(url: string, task: Record<string, unknown>): Promise<string> {
  const res = await api<{ task_id: string }>(url, 'POST', '/api/tasks', task);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.task_id;
}

export async function taskOf(url: string, id: string): Promise<{ status: string; last_error: string | null }> {
  const res = await api<{ status: string; last_error: string | null }>(url, 'GET', `/api/tasks/${id}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** What a watching worker saw. Keys come from the payload's `keys` (none: the key `all`). */
export class LimitWatch {
  readonly running = new Map<string, number>();
  readonly max = new Map<string, number>();
  /** Start times (Unix ms, worker clock) in order, with the task. */
  readonly starts: { taskId: string; atMs: number }[] = [];
  readonly done = new Set<string>();
  readonly cancelled = new Set<string>();
  /** Tasks running now. */
  readonly live = new Set<string>();

  enter(taskId: string, keys: readonly string[]): void {
    this.starts.push({ taskId, atMs: Date.now() });
    this.live.add(taskId);
    for (const k of keys) {
      const n = (this.running.get(k) ?? 0) + 1;
      this.running.set(k, n);
      this.max.set(k, Math.max(this.max.get(k) ?? 0, n));
    }
  }

  leave(taskId: string, keys: readonly string[]): void {
    this.live.delete(taskId);
    for (const k of keys) this.running.set(k, (this.running.get(k) ?? 1) - 1);
    this.done.add(taskId);
  }

  maxOf(key: string): number {
    return this.max.get(key) ?? 0;
  }

  startedIds(): string[] {
    return this.starts.map((s) => s.taskId);
  }
}

export function keysOf(payload: unknown): string[] {
  const keys = (payload as { keys?: string[] } | null)?.keys;
  return keys && keys.length > 0 ? keys : ['all'];
}

export interface WatchingWorkerOptions {
  url: string;
  taskTypes: string[];
  transport?: WorkerTransport;
  concurrency?: number;
  /** The work of one task: a sleep, or a wait the test ends (`release`). */
  work?: (taskId: string, signal: AbortSignal) => Promise<void>;
}

/** An SDK worker that records into `watch`; a cancelled task's handler ends when told (its signal). */
export function watchingWorker(watch: LimitWatch, o: WatchingWorkerOptions): Worker {
  const w = createWorker({
    url: o.url,
    transport: o.transport ?? 'channel',
    taskTypes: o.taskTypes,
    concurrency: o.concurrency ?? 50,
    onError: () => undefined,
    handler: async ({ taskId, payload, signal }) => {
      const keys = keysOf(payload);
      watch.enter(taskId, keys);
      try {
        if (o.work) await o.work(taskId, signal);
      } catch (error) {
        if (signal.aborted) watch.cancelled.add(taskId);
        throw error;
      } finally {
        watch.leave(taskId, keys);
      }
      return null;
    },
  });
  w.start();
  return w;
}

/** Work that lasts until the test releases the task (or its signal aborts). */
export class Holds {
  private readonly waiting = new Map<string, () => void>();
  private readonly released = new Set<string>();
  private open = false;

  work = (taskId: string, signal: AbortSignal): Promise<void> =>
    new Promise((resolve, reject) => {
      if (this.open || this.released.has(taskId)) return resolve();
      this.waiting.set(taskId, resolve);
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
    });

  release(taskId: string): void {
    this.released.add(taskId);
    this.waiting.get(taskId)?.();
    this.waiting.delete(taskId);
  }

  /** Releases every task held, and lets every later one through at once. */
  releaseAll(): void {
    this.open = true;
    for (const id of [...this.waiting.keys()]) this.release(id);
  }
}
