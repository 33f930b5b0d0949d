/**
 * A benchmark worker process as a worker in another language would be written: no SDK, only
 * the HTTP routes of API.md. `pollers` loops, each with `slots` tasks in hand at most, each
 * long-polls `POST /api/workers/poll` for as many tasks as it has free slots, and completes
 * every task it gets with its own `POST /api/tasks/{id}/complete` at once (no-op handler),
 * over kept-alive connections. A result that fails (an answer other than 200 or 409, or no
 * answer) is not sent again: its lease runs out and the task comes back, as it would for a
 * worker that gave up on it. Started by `bench/http-workers.ts` with `fork`; sends one
 * `HttpWorkerResult` when `tasks` results were accepted (or it gave up).
 */
import { Pool } from 'undici';
import { authHeaders } from './auth.js';

export interface HttpWorkerConfig {
  url: string;
  taskType: string;
  /** Results to record before stopping. */
  tasks: number;
  pollers: number;
  slots: number;
  /** Give up after this long, ms. */
  timeoutMs: number;
}

export interface HttpWorkerResult {
  /** Date.now() when the first poll answered with tasks / the last result was accepted. */
  firstTaskMs: number;
  lastResultMs: number;
  accepted: number;
  /** Results answered 409 (lease not held). */
  refused: number;
  /** Answers other than 200 and 409 (polls included), and requests that failed, by status or error name. */
  errors: Record<string, number>;
  polls: number;
  completeRequests: number;
}

const config = JSON.parse(process.argv[2] ?? '{}') as HttpWorkerConfig;
const headers = { 'content-type': 'application/json', ...authHeaders() };
const pool = new Pool(config.url, {
  connections: config.pollers * (config.slots + 1),
  pipelining: 1,
  keepAliveTimeout: 60_000,
});

const result: HttpWorkerResult = {
  firstTaskMs: Number.NaN,
  lastResultMs: Number.NaN,
  accepted: 0,
  refused: 0,
  errors: {},
  polls: 0,
  completeRequests: 0,
};
let finished = false;

function countError(what: string): void {
  result.errors[what] = (result.errors[what] ?? 0) + 1;
}

async function post(path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await pool.request({ method: 'POST', path, headers, body: JSON.stringify(body) });
  const text = await res.body.text();
  return { status: res.statusCode, body: text.length > 0 ? (JSON.parse(text) as unknown) : null };
}

async function complete(taskId: string, leaseToken: string): Promise<void> {
  result.completeRequests++;
  const res = await post(`/api/tasks/${taskId}/complete`, { lease_token: leaseToken, status: 'succeeded' });
  if (res.status === 200) {
    result.accepted++;
    result.lastResultMs = Date.now();
  } else if (res.status === 409) result.refused++;
  else countError(String(res.status));
}

async function poller(index: number): Promise<void> {
  let free = config.slots;
  let wake: (() => void) | null = null;
  while (!finished) {
    if (free === 0) await new Promise<void>((resolve) => (wake = resolve));
    if (finished) return;
    result.polls++;
    const res = await post('/api/workers/poll', {
      worker_id: `http-${process.pid}-${index}`,
      task_types: [config.taskType],
      max_tasks: free,
      wait_ms: 1_000,
    });
    if (res.status !== 200) {
      countError(`poll ${res.status}`);
      continue;
    }
    const tasks = (res.body as { tasks: { task_id: string; lease_token: string }[] }).tasks;
    if (tasks.length > 0 && Number.isNaN(result.firstTaskMs)) result.firstTaskMs = Date.now();
    for (const task of tasks) {
      free--;
      complete(task.task_id, task.lease_token)
        .catch((error: unknown) => countError(error instanceof Error ? error.name : 'error'))
        .finally(() => {
          free++;
          if (result.accepted >= config.tasks) finished = true;
          const w = wake;
          wake = null;
          w?.();
        });
    }
  }
}

const giveUp = setTimeout(() => (finished = true), config.timeoutMs);
process.send?.({ type: 'ready' });
await Promise.all(Array.from({ length: config.pollers }, (_, i) => poller(i)));
clearTimeout(giveUp);
await pool.close();
process.send?.({ type: 'result', result }, undefined, {}, () => process.disconnect?.());
