/** Messages between the harness and its worker processes (Node IPC, advanced serialization). */

/** Given to a worker process as its only argument, JSON. */
export interface BenchWorkerConfig {
  url: string;
  taskType: string;
  concurrency: number;
  pollers: number;
  /**
   * Poll these nodes (of one cluster) instead of `url`: one SDK worker per URL, each with
   * `ceil(concurrency / urls.length)` slots and `pollers` long-polls, so the process's slots
   * stay about `concurrency` in all. A worker completes through the node it polled.
   */
  urls?: string[];
  /** Record every handler start (task id, attempt, which URL) and send it with the result. */
  recordStarts?: boolean;
  /**
   * Send each start lag (of tasks whose payload carries `due_ms`) with the progress messages,
   * as it is measured, instead of keeping them all for the result (its `lagsMs` is then empty).
   */
  streamLags?: boolean;
  /**
   * Each handler sleeps this long before it returns (W6: so a concurrency limit binds on the
   * handlers, not on the node's round trip). Omitted: no-op handlers.
   */
  handlerSleepMs?: number;
}

/** Every handler start of one worker process, in start order (parallel arrays). */
export interface StartRecord {
  taskIds: string[];
  startMs: number[];
  attempts: number[];
  /** Index into the worker's URLs of the node the task was polled from. */
  via: number[];
}

/** What one of a process's SDK workers (one per URL) counted. */
export interface PerUrlStats {
  url: string;
  /** The worker id it polled with (`executions.worker_id`, `tasks.worker_id`). */
  workerId: string;
  started: number;
  reported: number;
  discarded: number;
  polls: number;
  completionRequests: number;
}

export type FromWorker =
  | { type: 'ready'; workerId: string }
  /** Sent at most every PROGRESS_EVERY_MS, only when a count changed. */
  | {
      type: 'progress';
      started: number;
      reported: number;
      atMs: number;
      /** With `streamLags`: the lags measured since the last message, with when each handler started. */
      lags?: { startMs: number[]; lagMs: number[] };
    }
  | { type: 'result'; result: WorkerResult };

export type ToWorker = { type: 'stop' };

export interface WorkerResult {
  started: number;
  succeeded: number;
  failed: number;
  reported: number;
  discarded: number;
  completionRequests: number;
  /** `results` frames sent over the worker channel (0 on HTTP). */
  resultFrames?: number;
  /** Sockets welcomed after the first (channel). */
  reconnects?: number;
  polls: number;
  /** For tasks whose payload carried `due_ms`: handler start − due_ms, ms, in start order. */
  lagsMs: number[];
  /** Date.now() when the first / last handler started; NaN if none did. */
  firstStartMs: number;
  lastStartMs: number;
  /** Date.now() when the reported count was last seen to grow (sampled every PROGRESS_EVERY_MS). */
  lastReportedMs: number;
  maxRssMiB: number;
  /** With `recordStarts`: every handler start. */
  starts?: StartRecord;
  /** With `urls`: each SDK worker's counts, in URL order. */
  perUrl?: PerUrlStats[];
}

export const PROGRESS_EVERY_MS = 5;
