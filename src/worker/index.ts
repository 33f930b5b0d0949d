/**
 * The Wheelhouse worker SDK (`wheelhouse/worker`): runs tasks from a Wheelhouse cluster in
 * your own process, over the HTTP worker endpoints (long-poll, heartbeat, complete).
 *
 * ```ts
 * import { createWorker } from 'wheelhouse/worker';
 * const worker = createWorker({ url: 'http://127.0.0.1:7070', taskTypes: ['email.send'], handler });
 * worker.start();
 * ```
 */
export { createWorker } from './worker.js';
export { LeaseLostError, PermanentTaskError, TaskCancelledError } from './errors.js';
export { NodeAnswerError } from './http.js';
export type { CompletionBatchOptions, TaskContext, TaskHandler, Worker, WorkerOptions, WorkerStats } from './types.js';
