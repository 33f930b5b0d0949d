/**
 * The reasons a task's `signal` is aborted with, so a handler (or the code it calls) can
 * tell "the task was cancelled" from "this worker lost the task" from its own timeouts.
 */

/** The node answered a heartbeat with 409: the lease ran out and the task may already run elsewhere. */
export class LeaseLostError extends Error {
  constructor(readonly taskId: string) {
    super(`lease on task ${taskId} is no longer held by this worker`);
    this.name = 'LeaseLostError';
  }
}

/** A heartbeat reported `cancel_requested`: someone cancelled the task while it ran. */
export class TaskCancelledError extends Error {
  constructor(readonly taskId: string) {
    super(`task ${taskId} was cancelled`);
    this.name = 'TaskCancelledError';
  }
}

/**
 * The attempt reached its deadline (`deadline` is the node's `deadline_at`, as last extended;
 * the worker's clock decides when it is reached). The node ends the attempt as a timeout by
 * itself — a retry with backoff, or `failed` when retries are spent — so the worker sends no
 * result for it and frees its slot at once, whether or not the handler heeds its signal.
 */
export class TaskTimeoutError extends Error {
  readonly retryable = true;
  constructor(
    readonly taskId: string,
    readonly deadline: Date,
  ) {
    super(`task ${taskId} reached its deadline (${deadline.toISOString()})`);
    this.name = 'TaskTimeoutError';
  }
}

/**
 * Throw this (or any error with `retryable: false`) from a handler to fail the task for
 * good at once, without using its remaining retries.
 */
export class PermanentTaskError extends Error {
  readonly retryable = false;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'PermanentTaskError';
  }
}

/** `stop({ timeoutMs })` ran out of grace while the task still ran: it is reported failed and retryable. */
export class WorkerStoppedError extends Error {
  constructor(
    readonly taskId: string,
    readonly timeoutMs: number,
  ) {
    super(`worker stopped: task ${taskId} was aborted after the stop grace of ${timeoutMs} ms`);
    this.name = 'WorkerStoppedError';
  }
}

/** The node answered the upgrade with an HTTP status instead of switching protocols. */
export class UpgradeRefusedError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
  ) {
    super(`GET ${url} answered ${status} instead of upgrading to a WebSocket`);
    this.name = 'UpgradeRefusedError';
  }
}
