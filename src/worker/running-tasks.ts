import { WorkerStoppedError } from './errors.js';
import type { CompiledWorkerOptions } from './options.js';
import { contextOf, progressSender, runToOutcome, type newCounters, type TaskOutcome } from './task-run.js';
import type { WirePolledTask } from './wire.js';

/**
 * The tasks a worker runs, by task id, on either transport: each takes a slot from `add` until
 * its handler has settled, and the worker's `stop` waits for them (`idle`) or aborts them after
 * its grace (`abortAfter`). The transport decides what becomes of an outcome (`finished`).
 */

/** One attempt this worker runs. */
export interface RunningTask {
  readonly task: WirePolledTask;
  /** Its handler's `signal`. */
  readonly controller: AbortController;
  /** The node said the lease is no longer this worker's: the result would be refused. */
  lost: boolean;
}

export class RunningTasks {
  private readonly byId = new Map<string, RunningTask>();
  /** The handlers' runs, until their outcome is handed on. */
  private readonly runs = new Set<Promise<void>>();

  constructor(
    private readonly o: Pick<CompiledWorkerOptions, 'handler' | 'maxResultBytes' | 'onError'>,
    private readonly counters: ReturnType<typeof newCounters>,
  ) {}

  /** Tasks holding a slot. */
  get size(): number {
    return this.byId.size;
  }

  get(taskId: string): RunningTask | undefined {
    return this.byId.get(taskId);
  }

  values(): IterableIterator<RunningTask> {
    return this.byId.values();
  }

  /** Takes a slot for `task`; its handler is called by `start`, once what it reports to is ready. */
  add(task: WirePolledTask): RunningTask {
    const running: RunningTask = { task, controller: new AbortController(), lost: false };
    this.byId.set(task.task_id, running);
    this.counters.started++;
    return running;
  }

  /**
   * Calls the handler of `running`, its `ctx.progress` handing checked values to
   * `deliverProgress`. When it settles, the outcome is counted, the slot freed, and the outcome
   * handed to `finished`.
   */
  start(
    running: RunningTask,
    deliverProgress: (value: unknown) => void,
    finished: (outcome: TaskOutcome) => void,
  ): void {
    const { task, controller } = running;
    const progress = progressSender(task.task_id, this.o, deliverProgress);
    const run = (async () => {
      const outcome = await runToOutcome(
        this.o.handler,
        contextOf(task, controller.signal, progress),
        this.o.maxResultBytes,
      );
      if (outcome.outcome.status === 'succeeded') this.counters.succeeded++;
      else this.counters.failed++;
      this.byId.delete(task.task_id);
      finished(outcome);
    })();
    this.runs.add(run);
    void run.finally(() => this.runs.delete(run));
  }

  /** Resolves once no handler runs, those started meanwhile included. */
  async idle(): Promise<void> {
    while (this.runs.size > 0) await Promise.all(this.runs);
  }

  /**
   * Arms `stop({ timeoutMs })`'s grace: when it runs out, each task still running has its signal
   * aborted with a `WorkerStoppedError` (and `runToOutcome` settles it at once). Returns the
   * disarm; without a grace, nothing is armed.
   */
  abortAfter(graceMs: number | undefined): () => void {
    if (graceMs === undefined) return () => undefined;
    const timer = setTimeout(() => {
      for (const [taskId, { controller }] of this.byId) controller.abort(new WorkerStoppedError(taskId, graceMs));
    }, graceMs);
    return () => clearTimeout(timer);
  }
}
