import { WorkerStoppedError } from './errors.js';
import type { TaskContext, TaskHandler } from './types.js';

/**
 * One handler call, from start to the outcome the worker reports, shared by both transports.
 * The outcome is the handler's unless `stop({ timeoutMs })` runs out of grace first: then the
 * task's signal is aborted with a `WorkerStoppedError` and the outcome is "failed, retryable"
 * at once, whether or not the handler heeds its signal (a handler that never settles must not
 * hold the worker's stop forever).
 */

/** What the worker reports for one attempt. */
export type TaskOutcome = { status: 'succeeded' } | { status: 'failed'; error: string; retryable: boolean };

/** Most of an error message sent to the node (it keeps 4 KiB). */
const MAX_ERROR_CHARS = 4096;

/** Calls `handler` and resolves with its outcome; never rejects. */
export function runToOutcome(handler: TaskHandler, task: TaskContext): Promise<TaskOutcome> {
  return new Promise((resolve) => {
    const { signal } = task;
    const onAbort = (): void => {
      if (signal.reason instanceof WorkerStoppedError) resolve(failed(signal.reason));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    let call: Promise<void>;
    try {
      call = Promise.resolve(handler(task));
    } catch (error) {
      call = Promise.reject(error);
    }
    call.then(
      () => resolve({ status: 'succeeded' }),
      (error: unknown) => resolve(failed(error)),
    );
    void call.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => undefined);
  });
}

/**
 * Arms `stop({ timeoutMs })`'s grace over the running tasks: when it runs out, each task still
 * in `running` has its controller aborted with a `WorkerStoppedError`. Returns the disarm.
 */
export function abortAfterGrace(running: ReadonlyMap<string, AbortController>, timeoutMs: number): () => void {
  const timer = setTimeout(() => {
    for (const [taskId, controller] of running) controller.abort(new WorkerStoppedError(taskId, timeoutMs));
  }, timeoutMs);
  return () => clearTimeout(timer);
}

function failed(error: unknown): TaskOutcome {
  return { status: 'failed', error: messageOf(error), retryable: !isPermanent(error) };
}

function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text;
}

/** An error that says `retryable: false` fails the task for good. */
function isPermanent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { retryable?: unknown }).retryable === false;
}
