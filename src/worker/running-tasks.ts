import { attemptSpan, type AttemptSpan } from './task-span.js';
import { LeaseLostError, TaskTimeoutError, WorkerStoppedError } from './errors.js';
import type { CompiledWorkerOptions } from './options.js';
import {
  failed,
  HandlerContext,
  runToOutcome,
  sendProgress,
  type AttemptAccess,
  type newCounters,
  type TaskOutcome,
} from './task-run.js';
import { MAX_SPAWN, type ChildTask, type SpawnedChild } from './spawn.js';
import { deadlineOf, type WirePolledTask } from './wire.js';

/**
 * The tasks a worker runs, by task id, on either transport: each takes a slot from `add` until
 * its handler has settled or its deadline has passed, and the worker's `stop` waits for them
 * (`idle`) or aborts them after its grace (`abortAfter`). The transport carries progress and
 * extensions to the node and decides what becomes of an outcome (`AttemptHooks`).
 *
 * Deadlines (`deadline_at`, by this worker's clock): at it the task's signal is aborted with a
 * `TaskTimeoutError` and the attempt is over at once — its slot is freed whether or not the
 * handler heeds the signal (as `stop({ timeoutMs })` does), and the transport is told there is
 * nothing to report: the node ends the attempt as a timeout by itself.
 */

/** Most seconds one extension may ask for (the API's bound: 7 days). */
const MAX_EXTEND_SECONDS = 86_400 * 7;
/**
 * A lease the node takes back this close to the deadline (or after it), by this worker's clock,
 * is the deadline coming: the attempt ends as a timeout, not as a lost lease. The node's clock
 * and the worker's differ a little, and its `lease_lost` and the worker's timer race.
 */
const DEADLINE_MARGIN_MS = 1_000;
/** Longest `setTimeout` (a longer wait is re-armed when it fires). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How one attempt reaches the node, given by its transport. */
export interface AttemptHooks {
  /** Takes a checked `ctx.progress` value on to the node. */
  progress(value: unknown): void;
  /**
   * Asks the node to move the deadline to at least now + `seconds`; resolves with the deadline
   * granted, Unix ms. The transport calls `moveDeadline` with every deadline the node names,
   * this one included, before it resolves.
   */
  extend(seconds: number): Promise<number>;
  /**
   * Adds children to the task (checked here first); resolves with them as the node answered.
   * `traceparent`: the attempt's span, for the children to join (absent: the task has none).
   */
  spawn(tasks: readonly ChildTask[], traceparent: string | undefined): Promise<SpawnedChild[]>;
  /** The attempt is over and its slot free: the outcome to report, or null when it reached its deadline (nothing to report). */
  finished(outcome: TaskOutcome | null): void;
}

/** What `RunningTasks.start` gives an attempt: its transport, and where its end goes. */
interface Started {
  hooks: AttemptHooks;
  span: AttemptSpan | null;
  o: Pick<CompiledWorkerOptions, 'maxResultBytes' | 'onError'>;
  /** Called once, when the attempt is over (its outcome; null at its deadline). */
  over(outcome: TaskOutcome | null): void;
}

/**
 * One attempt this worker runs, and what its handler's context reads and asks through. It is
 * over exactly once (`settle`): its handler's outcome, its deadline or the end of a stop's grace,
 * whichever comes first; what comes after is ignored.
 */
export class RunningTask implements AttemptAccess {
  /** The node said the lease is no longer this worker's: the result would be refused. */
  lost = false;
  /** Set when the deadline passed while it ran. */
  timeout: TaskTimeoutError | null = null;
  /**
   * Its handler's `signal`, made when first read: an `AbortController` and a listener on it cost
   * the worker ~3–6 µs a task, most of a no-op task's share of the SDK, and most handlers never
   * read `signal`. An abort before that is kept and handed to the signal when it is made.
   */
  private controller: AbortController | null = null;
  private abortedWith: { reason: unknown } | null = null;
  private deadline: number | null;
  private timer: NodeJS.Timeout | undefined;
  private started: Started | null = null;
  /** Over: the outcome it ended with, kept for a `start` that comes after (null: at its deadline). */
  private ended: { outcome: TaskOutcome | null } | null = null;

  constructor(readonly task: WirePolledTask) {
    this.deadline = deadlineOf(task);
    this.arm();
  }

  /** The handler's `signal`, aborted already if the attempt was. */
  get signal(): AbortSignal {
    if (this.controller === null) {
      this.controller = new AbortController();
      if (this.abortedWith !== null) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  /** Aborts the handler's signal with `reason`; as for an `AbortController`, the first abort's reason stays. */
  abort(reason: unknown): void {
    if (this.abortedWith !== null) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }

  /** The attempt's deadline (Unix ms) as the worker knows it; null when the node names none. */
  get deadlineMs(): number | null {
    return this.deadline;
  }

  /** The node named a (new) deadline: the timer follows it. */
  moveDeadline(deadlineMs: number): void {
    if (this.timeout !== null) return;
    this.deadline = deadlineMs;
    this.arm();
  }

  /** Starts its handler: `over` is called once, when the attempt is over. */
  start(handler: CompiledWorkerOptions['handler'], started: Started): void {
    this.started = started;
    if (this.ended !== null) return started.over(this.ended.outcome);
    const { span, o } = started;
    const context = new HandlerContext(this.task, this);
    const outcome =
      span === null
        ? runToOutcome(handler, context, o.maxResultBytes)
        : span.run(() => runToOutcome(handler, context, o.maxResultBytes));
    void outcome.then((ran) => this.settle(ran));
  }

  /**
   * The attempt is over, with `outcome` (null: at its deadline), unless it was already: no timer
   * is left armed, and `over` is called. Settled before any abort that goes with it, so that what
   * the handler does on abort cannot win the race.
   */
  private settle(outcome: TaskOutcome | null): void {
    if (this.ended !== null) return;
    this.ended = { outcome };
    clearTimeout(this.timer);
    this.started?.over(outcome);
  }

  /**
   * `stop({ timeoutMs })`'s grace ran out: the attempt is over now, failed and retryable, and its
   * signal is aborted. Settled here rather than by the abort, which does nothing to a signal a
   * cancel or a lost lease aborted already (a handler that ignored that abort held `stop` for ever).
   */
  stop(error: WorkerStoppedError): void {
    this.settle(failed(error));
    this.abort(error);
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.deadline === null) return;
    const deadline = this.deadline;
    const waitMs = Math.min(Math.max(0, deadline - Date.now()), MAX_TIMER_MS);
    this.timer = setTimeout(() => {
      if (Date.now() < deadline) return this.arm(); // a timer may fire a little early, or was clamped
      this.timeOut(deadline);
    }, waitMs);
  }

  /**
   * The node took the lease back: at (or within `DEADLINE_MARGIN_MS` of) the deadline that is
   * the deadline, and the attempt ends as a timeout now; answers whether it did.
   */
  timedOutByNode(): boolean {
    if (this.timeout !== null) return true;
    if (this.deadline === null || Date.now() < this.deadline - DEADLINE_MARGIN_MS) return false;
    this.timeOut(this.deadline);
    return true;
  }

  private timeOut(deadline: number): void {
    clearTimeout(this.timer);
    this.timeout = new TaskTimeoutError(this.task.task_id, new Date(deadline));
    this.settle(null);
    this.abort(this.timeout);
  }

  /** `ctx.progress`: checked here, then handed to the transport while the attempt is this worker's. */
  progress(value: unknown): void {
    const started = this.started;
    if (started === null) return;
    sendProgress(this.task.task_id, value, started.o, (checked) => started.hooks.progress(checked));
  }

  /** `ctx.spawn`: refused here when the attempt is over or the count is out of bounds, else asked of the node. */
  async spawn(tasks: readonly ChildTask[]): Promise<SpawnedChild[]> {
    if (!Array.isArray(tasks) || tasks.length === 0 || tasks.length > MAX_SPAWN)
      throw new RangeError(
        `spawn: 1 to ${MAX_SPAWN} children per call, got ${Array.isArray(tasks) ? tasks.length : typeof tasks}`,
      );
    if (this.timeout !== null) throw this.timeout;
    if (this.lost || this.ended !== null || this.started === null) throw new LeaseLostError(this.task.task_id);
    return this.started.hooks.spawn(tasks, this.started.span?.traceparent);
  }

  /** `ctx.extendDeadline`: checks what can be answered here, then asks the node through the transport. */
  async extendDeadline(seconds: number): Promise<Date> {
    const taskId = this.task.task_id;
    if (typeof seconds !== 'number' || !(seconds > 0 && seconds <= MAX_EXTEND_SECONDS))
      throw new RangeError(`extendDeadline: seconds must be a number > 0 and ≤ ${MAX_EXTEND_SECONDS}, got ${seconds}`);
    if (this.timeout !== null) throw this.timeout;
    if (this.lost) throw new LeaseLostError(taskId);
    if (this.deadline === null)
      throw new Error(`extendDeadline: the node named no deadline for task ${taskId} (it is older than deadlines)`);
    if (this.ended !== null || this.started === null) return new Date(this.deadline); // over already
    // The transport has moved the timer to the node's answer (`moveDeadline`) before this resolves.
    return new Date(await this.started.hooks.extend(seconds));
  }
}

export class RunningTasks {
  private readonly byId = new Map<string, RunningTask>();
  /** `idle`'s callers, told when the last attempt is over. */
  private idleWaiters: (() => void)[] = [];

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

  /** Takes a slot for `task` and starts its deadline; its handler is called by `start`, once its hooks are ready. */
  add(task: WirePolledTask): RunningTask {
    const running = new RunningTask(task);
    this.byId.set(task.task_id, running);
    this.counters.started++;
    return running;
  }

  /**
   * Calls the handler of `running`. When it settles, or its deadline passes first, the outcome
   * is counted, the slot freed, and `hooks.finished` called.
   */
  start(running: RunningTask, hooks: AttemptHooks): void {
    const { task } = running;
    const span = task.traceparent === undefined ? null : attemptSpan(task);
    running.start(this.o.handler, {
      hooks,
      span,
      o: this.o,
      over: (outcome) => {
        span?.end(outcome);
        if (outcome === null) this.counters.timedOut++;
        else if (outcome.outcome.status === 'failed') this.counters.failed++;
        // An attempt that ends waiting for its children counts as a success of its handler.
        else this.counters.succeeded++;
        this.byId.delete(task.task_id);
        hooks.finished(outcome);
        if (this.byId.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      },
    });
  }

  /** Resolves once no handler runs, those started meanwhile included. */
  async idle(): Promise<void> {
    while (this.byId.size > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Arms `stop({ timeoutMs })`'s grace: when it runs out, each task still running is over at once,
   * failed and retryable, its signal aborted with a `WorkerStoppedError` (see `RunningTask.stop`).
   * Returns the disarm; without a grace, nothing is armed.
   */
  abortAfter(graceMs: number | undefined): () => void {
    if (graceMs === undefined) return () => undefined;
    const timer = setTimeout(() => {
      for (const [taskId, running] of [...this.byId]) running.stop(new WorkerStoppedError(taskId, graceMs));
    }, graceMs);
    return () => clearTimeout(timer);
  }
}
