import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { ResultOutcome, TaskHandler, WorkerOptions, WorkerTransport } from './types.js';

/** Options after defaults and checks: complete, in milliseconds, frozen. */
export interface CompiledWorkerOptions {
  /** The first of `urls`: the node the HTTP transport talks to. */
  readonly url: string;
  /** Every node the channel may connect to, `url` first, without repeats. */
  readonly urls: readonly string[];
  readonly transport: WorkerTransport;
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
  readonly onResult: (taskId: string, outcome: ResultOutcome) => void;
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
  if (o.url !== undefined && !isHttpUrl(o.url)) bad('url', 'must be an absolute http(s) URL');
  const listed: unknown = o.urls ?? [];
  if (!Array.isArray(listed)) bad('urls', 'must be an array of URLs');
  for (const u of o.urls ?? []) if (!isHttpUrl(u)) bad('urls', `"${String(u)}" is not an absolute http(s) URL`);
  const urls = [...new Set([...(o.url === undefined ? [] : [o.url]), ...(o.urls ?? [])])];
  if (urls.length === 0) bad('url', 'or urls must name at least one node');
  const transport = o.transport ?? 'channel';
  if (transport !== 'channel' && transport !== 'http') bad('transport', 'must be "channel" or "http"');
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
    url: urls[0]!,
    urls: Object.freeze(urls),
    transport,
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
    onResult: o.onResult ?? (() => undefined),
  });
}

function isHttpUrl(u: unknown): boolean {
  if (typeof u !== 'string' || !URL.canParse(u)) return false;
  const { protocol } = new URL(u);
  return protocol === 'http:' || protocol === 'https:';
}

/** Reads `stop()`'s grace: undefined (no limit) or whole ms ≥ 0. */
export function stopTimeoutMs(timeoutMs: number | undefined): number | undefined {
  if (timeoutMs === undefined) return undefined;
  if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
    throw new TypeError('worker.stop: timeoutMs must be a number of ms ≥ 0');
  return Math.min(Math.floor(timeoutMs), 2 ** 31 - 1);
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
