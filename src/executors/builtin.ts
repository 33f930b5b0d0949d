import type { Clock } from '../runtime/clock.js';
import type { SchedulerApi } from '../tasks/types.js';

/**
 * Built-in executors for tasks that need no code of the user's. They are ordinary workers
 * that live inside the node: they poll, hold leases and report like any other, so their
 * tasks show in the same places.
 */
export const NOOP_TASK_TYPE = 'wheelhouse.noop';

export interface BuiltinExecutor {
  stop(): Promise<void>;
}

/** Runs `wheelhouse.noop` tasks: each succeeds at once. */
export function startNoopExecutor(api: SchedulerApi, nodeId: string, onError: (error: unknown) => void, clock: Clock): BuiltinExecutor {
  const controller = new AbortController();
  const workerId = `${nodeId}/noop`;
  const loop = async (): Promise<void> => {
    while (!controller.signal.aborted) {
      try {
        const tasks = await api.poll(
          { workerId, taskTypes: [NOOP_TASK_TYPE], maxTasks: 100, waitMs: 5_000 },
          controller.signal,
        );
        if (tasks.length === 0) continue;
        await api.complete(
          tasks.map((t) => ({ taskId: t.id, leaseToken: t.leaseToken, outcome: 'succeeded', error: null, retryable: true })),
        );
      } catch (error) {
        if (controller.signal.aborted) break;
        onError(error);
        await new Promise<void>((resolve) => clock.setTimer(1_000, resolve));
      }
    }
  };
  const running = loop();
  return {
    async stop() {
      controller.abort();
      await running;
    },
  };
}
