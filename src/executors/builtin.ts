import type { Assignment, CompletionRequest, SchedulerApi } from '../tasks/types.js';

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

/**
 * Starts the poll loop of one built-in executor. The results of one poll's tasks are
 * reported together, in one batch, once the last of them has finished.
 */
export function startBuiltinExecutor(api: SchedulerApi, nodeId: string, options: BuiltinExecutorOptions): BuiltinExecutor {
  const controller = new AbortController();
  const workerId = `${nodeId}/${options.taskType}`;
  const batches = new Set<Promise<void>>();
  let inFlight = 0;
  let slotFreed: (() => void) | null = null;

  const runBatch = async (tasks: Assignment[]): Promise<void> => {
    const outcomes = await Promise.all(tasks.map((task) => options.run(task)));
    await api.complete(tasks.map((task, i) => ({ taskId: task.id, leaseToken: task.leaseToken, ...(outcomes[i] as ExecutorOutcome) })));
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
        if (tasks.length === 0) continue;
        inFlight += tasks.length;
        const batch = runBatch(tasks)
          .catch(options.onError)
          .finally(() => {
            inFlight -= tasks.length;
            batches.delete(batch);
            slotFreed?.();
            slotFreed = null;
          });
        batches.add(batch);
      } catch (error) {
        if (controller.signal.aborted) break;
        options.onError(error);
        await new Promise((resolve) => setTimeout(resolve, RETRY_POLL_MS));
      }
    }
  };
  const running = loop();
  return {
    async stop() {
      controller.abort();
      slotFreed?.();
      await running;
      // Tasks under way finish and report: their leases are held until then.
      await Promise.all(batches);
    },
  };
}

/** `wheelhouse.noop`: each task succeeds at once. */
export const NOOP_TASK_TYPE = 'wheelhouse.noop';

export function startNoopExecutor(api: SchedulerApi, nodeId: string, onError: (error: unknown) => void): BuiltinExecutor {
  return startBuiltinExecutor(api, nodeId, {
    taskType: NOOP_TASK_TYPE,
    concurrency: 1_000,
    run: async () => ({ outcome: 'succeeded', error: null, retryable: true }),
    onError,
  });
}
