/** Messages between the harness and its worker processes (Node IPC, advanced serialization). */

/** Given to a worker process as its only argument, JSON. */
export interface BenchWorkerConfig {
  url: string;
  taskType: string;
  concurrency: number;
  pollers: number;
}

export type FromWorker =
  | { type: 'ready'; workerId: string }
  /** Sent at most every PROGRESS_EVERY_MS, only when a count changed. */
  | { type: 'progress'; started: number; reported: number; atMs: number }
  | { type: 'result'; result: WorkerResult };

export type ToWorker = { type: 'stop' };

export interface WorkerResult {
  started: number;
  succeeded: number;
  failed: number;
  reported: number;
  discarded: number;
  completionRequests: number;
  polls: number;
  /** For tasks whose payload carried `due_ms`: handler start − due_ms, ms, in start order. */
  lagsMs: number[];
  /** Date.now() when the first / last handler started; NaN if none did. */
  firstStartMs: number;
  lastStartMs: number;
  /** Date.now() when the reported count was last seen to grow (sampled every PROGRESS_EVERY_MS). */
  lastReportedMs: number;
  maxRssMiB: number;
}

export const PROGRESS_EVERY_MS = 5;
