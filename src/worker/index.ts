/**
 * The Wheelhouse worker SDK (`wheelhouse/worker`): runs tasks from a Wheelhouse cluster in
 * your own process, over the worker channel (one WebSocket per worker, tasks pushed up to the
 * credit it grants) or, with `transport: 'http'`, over the HTTP worker endpoints (long-poll,
 * heartbeat, complete).
 *
 * ```ts
 * import { createWorker } from 'wheelhouse/worker';
 * const worker = createWorker({ urls: ['http://10.0.0.1:7070', 'http://10.0.0.2:7070'], taskTypes: ['email.send'], handler });
 * worker.start();
 * ```
 */
export { createWorker } from './worker.js';
export {
  LeaseLostError,
  PermanentTaskError,
  TaskCancelledError,
  TaskTimeoutError,
  UpgradeRefusedError,
  WorkerStoppedError,
} from './errors.js';
export { NodeAnswerError } from './http.js';
export { ChannelError } from './channel-wire.js';
export { SpawnError, type ChildTask, type SpawnedChild } from './spawn.js';
export type {
  ChildWaitRequest,
  OnChildFailure,
  TaskChildren,
  TaskInputs,
  WaitForChildrenOptions,
} from './child-wait.js';
export type {
  CompletionBatchOptions,
  ResultOutcome,
  StopOptions,
  TaskContext,
  TaskHandler,
  Worker,
  WorkerOptions,
  WorkerStats,
  WorkerTransport,
} from './types.js';
