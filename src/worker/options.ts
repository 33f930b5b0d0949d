import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { TaskHandler, WorkerOptions } from './types.js';

/** Options after defaults and checks: complete, in milliseconds, frozen. */
export interface CompiledWorkerOptions {
  readonly url: string;
  readonly workerId: string;
  readonly taskTypes: readonly string[];
  readonly concurrency: number;
  readonly handler: TaskHandler;
  readonly token: string | undefined;
  /** null: a third of each lease. */
  readonly heartbeatEveryMs: number | null;
  readonly batch: Readonly<CompiledBatchOptions>;
  readonly pollWaitMs: number;
  readonly pollers: number;
  readonly connections: number;
  /** Bytes of JSON. */
  readonly maxResultBytes: number;
  readonly onError: (error: unknown, context: string) => void;
}

export interface CompiledBatchOptions {
  /** false: one `POST /api/tasks/{id}/complete` per result. */
  batched: boolean;
  lingerMs: number;
  maxBatchSize: number;
  maxRequestsInFlight: number;
}

/** Most tasks one poll may ask for, and most results in one batch (API limit). */
export const MAX_TASKS_PER_REQUEST = 1000;
const MAX_POLL_WAIT_MS = 30_000;
const TASK_TYPE = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Fills defaults and validates; throws a `TypeError` naming the bad option. */
export function compileWorkerOptions(o: WorkerOptions): CompiledWorkerOptions {
  if (typeof o.url !== 'string' || !URL.canParse(o.url)) bad('url', 'must be an absolute http(s) URL');
  if (!Array.isArray(o.taskTypes) || o.taskTypes.length === 0) bad('taskTypes', 'must list at least one task type');
  for (const t of o.taskTypes)
    if (typeof t !== 'string' || !TASK_TYPE.test(t)) bad('taskTypes', `"${String(t)}" is not a task type`);
  if (typeof o.handler !== 'function') bad('handler', 'must be a function');
  const workerId = o.workerId ?? defaultWorkerId();
  if (typeof workerId !== 'string' || workerId.length === 0 || workerId.length > 128)
    bad('workerId', 'must be 1–128 characters');
  const batch = o.batchCompletions ?? true;
  const tuned = typeof batch === 'object' ? batch : {};
  return Object.freeze({
    url: o.url,
    workerId,
    taskTypes: Object.freeze([...new Set(o.taskTypes)]),
    concurrency: int('concurrency', o.concurrency, 10, 1, 1_000_000),
    handler: o.handler,
    token: o.token,
    heartbeatEveryMs:
      o.heartbeatEveryMs === undefined ? null : int('heartbeatEveryMs', o.heartbeatEveryMs, 0, 10, 2 ** 31 - 1),
    batch: Object.freeze({
      batched: batch !== false,
      lingerMs: batch === false ? 0 : int('batchCompletions.lingerMs', tuned.lingerMs, 3, 0, 1_000),
      maxBatchSize:
        batch === false
          ? 1
          : int('batchCompletions.maxBatchSize', tuned.maxBatchSize, MAX_TASKS_PER_REQUEST, 1, MAX_TASKS_PER_REQUEST),
      maxRequestsInFlight: int(
        'batchCompletions.maxRequestsInFlight',
        tuned.maxRequestsInFlight,
        batch === false ? 8 : 4,
        1,
        1_000,
      ),
    }),
    pollWaitMs: int('pollWaitMs', o.pollWaitMs, 20_000, 0, MAX_POLL_WAIT_MS),
    pollers: int('pollers', o.pollers, 1, 1, 16),
    connections: int('connections', o.connections, 8, 2, 1_000),
    maxResultBytes: int('maxResultBytes', o.maxResultBytes, 64 * 1024, 1, 64 * 1024 * 1024),
    onError: o.onError ?? writeToStderr,
  });
}

function defaultWorkerId(): string {
  const host = hostname()
    .replace(/[^A-Za-z0-9_.:-]/g, '-')
    .slice(0, 64);
  return `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

function writeToStderr(error: unknown, context: string): void {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`wheelhouse worker: ${context}: ${message}\n`);
}

function int(key: string, value: number | undefined, fallback: number, min: number, max: number): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < min || n > max) bad(key, `must be an integer between ${min} and ${max}`);
  return n;
}

function bad(key: string, message: string): never {
  throw new TypeError(`createWorker: ${key} ${message}`);
}
