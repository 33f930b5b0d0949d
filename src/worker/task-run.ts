import {
  ChildWaitRequest,
  childrenOf,
  inputsOf,
  waitForChildren,
  type TaskChildren,
  type TaskInputs,
  type WaitForChildrenOptions,
} from './child-wait.js';
import { encodeWorkerJson } from './completions.js';
import { PermanentTaskError } from './errors.js';
import type { ChildTask, SpawnedChild } from './spawn.js';
import type { TaskContext, TaskHandler, WorkerStats } from './types.js';
import type { WirePolledTask, WireResult } from './wire.js';

/**
 * One handler call, from start to the outcome the worker reports, shared by both transports.
 * The outcome is the handler's unless `stop({ timeoutMs })` runs out of grace first: then the
 * task's signal is aborted with a `WorkerStoppedError` and the outcome is "failed, retryable"
 * at once, whether or not the handler heeds its signal (a handler that never settles must not
 * hold the worker's stop forever). The handler's value becomes the result; one that cannot be
 * stored (not JSON, too large) fails the attempt for good, saying why; the value of
 * `ctx.waitForChildren()` ends it waiting for the task's children.
 */

/** What the worker reports for one attempt, and the bytes of its result's JSON (0 without one). */
export interface TaskOutcome {
  outcome: Omit<WireResult, 'task_id' | 'lease_token'>;
  resultBytes: number;
}

/** Most of an error message sent to the node (it keeps 4 KiB). */
const MAX_ERROR_CHARS = 4096;

/** A worker's counters at start (`WorkerStats` without what is read live). */
export function newCounters(): Omit<WorkerStats, 'running' | 'unreported'> {
  return {
    started: 0,
    succeeded: 0,
    failed: 0,
    reported: 0,
    discarded: 0,
    leasesLost: 0,
    timedOut: 0,
    notRun: 0,
    polls: 0,
    completionRequests: 0,
    resultFrames: 0,
    reconnects: 0,
  };
}

/** What a handler's context reads and asks through: its attempt (`RunningTask`). */
export interface AttemptAccess {
  readonly signal: AbortSignal;
  readonly deadlineMs: number | null;
  progress(value: unknown): void;
  extendDeadline(seconds: number): Promise<Date>;
  spawn(tasks: readonly ChildTask[]): Promise<SpawnedChild[]>;
}

/**
 * What the handler sees of a task the node handed out (by poll or push). A class rather than an
 * object literal with getters: one small object a task, its accessors on the prototype.
 * `signal` and `deadline` are read live. `progress`, `extendDeadline` and `spawn` are made
 * when first read, bound, so that they may be destructured as the fields are.
 */
export class HandlerContext implements TaskContext {
  readonly taskId: string;
  readonly taskType: string;
  readonly payload: unknown;
  readonly attempt: number;
  readonly children?: TaskChildren;
  readonly inputs?: TaskInputs;
  readonly traceparent?: string;
  readonly #run: AttemptAccess;
  #progress: ((value: unknown) => void) | undefined;
  #extend: ((seconds: number) => Promise<Date>) | undefined;
  #spawn: ((tasks: readonly ChildTask[]) => Promise<SpawnedChild[]>) | undefined;

  constructor(task: WirePolledTask, run: AttemptAccess) {
    this.taskId = task.task_id;
    this.taskType = task.task_type;
    this.payload = task.payload ?? null;
    this.attempt = task.attempt;
    this.#run = run;
    const children = childrenOf(task.children);
    if (children !== undefined) this.children = children;
    const inputs = inputsOf(task);
    if (inputs !== undefined) this.inputs = inputs;
    if (typeof task.traceparent === 'string') this.traceparent = task.traceparent;
  }

  get signal(): AbortSignal {
    return this.#run.signal;
  }

  get deadline(): Date | null {
    const ms = this.#run.deadlineMs;
    return ms === null ? null : new Date(ms);
  }

  get progress(): (value: unknown) => void {
    const run = this.#run;
    return (this.#progress ??= (value) => run.progress(value));
  }

  get extendDeadline(): (seconds: number) => Promise<Date> {
    const run = this.#run;
    return (this.#extend ??= (seconds) => run.extendDeadline(seconds));
  }

  get spawn(): (tasks: readonly ChildTask[]) => Promise<SpawnedChild[]> {
    const run = this.#run;
    return (this.#spawn ??= (tasks) => run.spawn(tasks));
  }

  waitForChildren(options?: WaitForChildrenOptions): ChildWaitRequest {
    return waitForChildren(options);
  }
}

/**
 * Calls `handler` and resolves with its outcome; never rejects. A stop's grace running out is
 * raced beside it by the caller (`RunningTask.halted`), so the task's signal is not listened to
 * here (reading it would make it: see `RunningTask.signal`).
 */
export function runToOutcome(handler: TaskHandler, task: TaskContext, maxResultBytes: number): Promise<TaskOutcome> {
  let call: Promise<unknown>;
  try {
    call = Promise.resolve(handler(task));
  } catch (error) {
    call = Promise.reject(error);
  }
  return call.then(
    (value) => succeeded(value, maxResultBytes),
    (error: unknown) => failed(error),
  );
}

/**
 * `ctx.progress` of one task: checks `value` as the node will take it and hands a copy to
 * `deliver` (what the handler changes after the call is not sent); never throws — a value
 * that cannot be sent is reported to `onError` and dropped.
 */
export function sendProgress(
  taskId: string,
  value: unknown,
  o: { maxResultBytes: number; onError: (error: unknown, context: string) => void },
  deliver: (value: unknown) => void,
): void {
  try {
    const encoded = encodeWorkerJson(value, o.maxResultBytes);
    if ('problem' in encoded) {
      o.onError(new TypeError(`progress ${encoded.problem}`), `progress of task ${taskId}, dropped`);
    } else {
      deliver(JSON.parse(encoded.json));
    }
  } catch (error) {
    o.onError(error, `progress of task ${taskId}`);
  }
}

function succeeded(value: unknown, maxResultBytes: number): TaskOutcome {
  if (value === undefined) return { outcome: { status: 'succeeded' }, resultBytes: 0 };
  if (value instanceof ChildWaitRequest) {
    return { outcome: { status: 'waiting_children', on_child_failure: value.onChildFailure }, resultBytes: 0 };
  }
  const encoded = encodeWorkerJson(value, maxResultBytes);
  if ('problem' in encoded) return failed(new PermanentTaskError(`the handler's result ${encoded.problem}`));
  return { outcome: { status: 'succeeded', result: value }, resultBytes: encoded.bytes };
}

/** The outcome of an attempt that failed with `error` (retryable unless it says `retryable: false`). */
export function failed(error: unknown): TaskOutcome {
  return { outcome: { status: 'failed', error: messageOf(error), retryable: !isPermanent(error) }, resultBytes: 0 };
}

function messageOf(error: unknown): string {
  const text = error instanceof Error ? error.message || error.name : String(error);
  return text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text;
}

/** An error that says `retryable: false` fails the task for good. */
function isPermanent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { retryable?: unknown }).retryable === false;
}
