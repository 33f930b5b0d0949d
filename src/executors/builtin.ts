import { retryDelayMs } from '../runtime/supervision.js';
import type { Assignment, CompletionRequest, WorkersApi } from '../services/types.js';

/**
 * Built-in executors for tasks that need no code of the user's. Each is an ordinary worker
 * that lives inside the node: it polls for as many tasks as it has free slots, holds their
 * leases and reports their results, so its tasks show in the same places as any other.
 */
export interface BuiltinExecutor {
  stop(): Promise<void>;
}

/** A task's result, as an executor decides it. */
export type ExecutorOutcome = Pick<CompletionRequest, 'outcome' | 'error' | 'retryable'>;

export interface BuiltinExecutorOptions {
  taskType: string;
  /** Tasks run at once. */
  concurrency: number;
  /** Runs one task; must finish well inside its lease (no heartbeats are sent). */
  run(task: Assignment): Promise<ExecutorOutcome>;
  onError(error: unknown): void;
}

/** Wait after a failed poll before the next. */
const RETRY_POLL_MS = 1_000;
/** How a result the store did not take is sent again (until its lease would have run out). */
const RESULT_RETRY = { baseMs: 100, maxMs: 2_000 };

/**
 * Starts the poll loop of one built-in executor. Each task's result is reported as soon as
 * it has finished — results that finish in the same turn of the event loop go together, in
 * one batch — so a slow task never holds back the others past their leases. A report that
 * fails (a store blip) is sent again with backoff while the task's lease lasts.
 */
export function startBuiltinExecutor(
  api: WorkersApi,
  nodeId: string,
  options: BuiltinExecutorOptions,
): BuiltinExecutor {
  const controller = new AbortController();
  const workerId = `${nodeId}/${options.taskType}`;
  const running = new Set<Promise<void>>();
  let inFlight = 0;
  let slotFreed: (() => void) | null = null;
  let batch: { request: CompletionRequest; deadlineMs: number; done: () => void }[] = [];

  const report = async (items: typeof batch): Promise<void> => {
    for (let attempt = 1; items.length > 0; attempt++) {
      try {
        await api.complete(items.map((item) => item.request));
        break;
      } catch (error) {
        options.onError(error);
        const delayMs = retryDelayMs(attempt, RESULT_RETRY);
        // A result past its task's lease would be refused anyway: the lease hands the task on.
        items = items.filter((item) => Date.now() + delayMs < item.deadlineMs);
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
    }
  };
  const enqueue = (request: CompletionRequest, deadlineMs: number): Promise<void> =>
    new Promise<void>((done) => {
      if (batch.length === 0) {
        setImmediate(() => {
          const items = batch;
          batch = [];
          void report(items).finally(() => {
            for (const item of items) item.done();
          });
        });
      }
      batch.push({ request, deadlineMs, done });
    });

  const runOne = async (task: Assignment): Promise<void> => {
    // The lease as a duration on this process's clock (its expiry is on the node's).
    const deadlineMs = Date.now() + task.timeoutSeconds * 1000;
    const outcome = await options.run(task);
    await enqueue({ taskId: task.id, leaseToken: task.leaseToken, ...outcome }, deadlineMs);
  };

  const loop = async (): Promise<void> => {
    while (!controller.signal.aborted) {
      if (inFlight >= options.concurrency) {
        await new Promise<void>((resolve) => (slotFreed = resolve));
        continue;
      }
      try {
        const tasks = await api.poll(
          { workerId, taskTypes: [options.taskType], maxTasks: options.concurrency - inFlight, waitMs: 5_000 },
          controller.signal,
        );
        for (const task of tasks) {
          inFlight++;
          const one: Promise<void> = runOne(task)
            .catch(options.onError)
            .finally(() => {
              inFlight--;
              running.delete(one);
              slotFreed?.();
              slotFreed = null;
            });
          running.add(one);
        }
      } catch (error) {
        if (controller.signal.aborted) break;
        options.onError(error);
        await new Promise((resolve) => setTimeout(resolve, RETRY_POLL_MS));
      }
    }
  };
  const polling = loop();
  return {
    async stop() {
      controller.abort();
      slotFreed?.();
      await polling;
      // Tasks under way finish and report: their leases are held until then.
      await Promise.all(running);
    },
  };
}

/** `wheelhouse.noop`: each task succeeds at once. */
export const NOOP_TASK_TYPE = 'wheelhouse.noop';

export function startNoopExecutor(api: WorkersApi, nodeId: string, onError: (error: unknown) => void): BuiltinExecutor {
  return startBuiltinExecutor(api, nodeId, {
    taskType: NOOP_TASK_TYPE,
    concurrency: 1_000,
    run: async () => ({ outcome: 'succeeded', error: null, retryable: true }),
    onError,
  });
}
