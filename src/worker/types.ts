/**
 * Public types of the worker SDK: what a user passes to `createWorker` and what they get
 * back. Everything on the wire (snake_case) lives in `wire.ts`.
 */

import type { ChildTask, SpawnedChild } from './spawn.js';
import type { ChildWaitRequest, TaskChildren, TaskInputs, WaitForChildrenOptions } from './child-wait.js';

/**
 * One task as the handler sees it. Destructure what you need (`({ payload, signal }) => …`);
 * `signal`, `deadline` and the methods are accessors, so a spread copy (`{ ...ctx }`) has the
 * task's fields only.
 */
export interface TaskContext {
  /** The task's id (a UUID). */
  readonly taskId: string;
  readonly taskType: string;
  /** The payload given at submission: any JSON value, `null` when none was given. */
  readonly payload: unknown;
  /** 1 for the first attempt, 2 for the first retry, … */
  readonly attempt: number;
  /**
   * The W3C trace context the node handed with the task (the claim's span when the node traces,
   * else the one the task was submitted with); absent when it has none. The worker's own span
   * (`wheelhouse.worker`) is already its child and active while the handler runs.
   */
  readonly traceparent?: string;
  /**
   * Aborted when this worker no longer holds the task: a heartbeat was answered 409 (the
   * lease ran out and the task was handed on) or reported `cancel_requested`. The reason is
   * a `LeaseLostError` or a `TaskCancelledError`. A handler that does long work should pass
   * it on (to `fetch`, to child processes) or check it between steps.
   *
   * On the channel transport the node pushes `cancel` and `lease_lost` instead of answering
   * heartbeats, with the same reasons. At the attempt's `deadline` it is aborted with a
   * `TaskTimeoutError`. `stop({ timeoutMs })` aborts the handlers still running after the grace
   * with a `WorkerStoppedError`.
   */
  readonly signal: AbortSignal;
  /**
   * When this attempt ends as a timeout (the task's `timeout_seconds` after the claim, or
   * later once extended): the node's `deadline_at`, updated when `extendDeadline` is granted.
   * At it, by this worker's clock, `signal` is aborted with a `TaskTimeoutError`, the task's
   * slot is freed even if the handler goes on, and no result is sent (the node ends the attempt
   * itself). `null` when the node names no deadline (a node older than deadlines): then nothing
   * ends the attempt here. Read it from the context when needed: a destructured copy keeps
   * the value it had.
   */
  readonly deadline: Date | null;
  /**
   * Asks the node to move this attempt's deadline to at least `seconds` (> 0, at most 604 800,
   * 7 days) from now; the node caps it at the task's `max_timeout_seconds` after the attempt
   * started and never moves it earlier. The request goes out at once (on the channel a
   * `progress` frame with `extend_seconds`; over HTTP a heartbeat). Resolves with the deadline
   * the node granted (also `deadline` from then on). Rejects with a `LeaseLostError` when the
   * lease is gone first, a `TaskTimeoutError` when the deadline passes first, a `RangeError`
   * for bad `seconds`, and an `Error` when the node names no deadline. Settles with the
   * deadline last known if the handler finishes before the node answers.
   */
  extendDeadline(seconds: number): Promise<Date>;
  /**
   * Records the task's latest progress (any JSON value, up to `maxResultBytes`), shown by
   * `GET /api/tasks/{id}`. It is sent with the lease's next heartbeat, brought forward to
   * within a second; of several calls before then only the latest is sent. Never throws: a
   * value that cannot be sent (not JSON, too large) is reported to `onError` and dropped.
   */
  progress(value: unknown): void;
  /**
   * Adds children to this task (1–1 000 per call, all or none): each an ordinary task of its
   * own, whose `parent_id` is this one, due as its schedule says and run by whichever worker
   * takes its type. Resolves with them in order, as the node answered. A `childKey` makes the
   * call safe to repeat: a child the task already has under that key is answered, not made
   * again (a retried attempt that spawns again adds nothing). Over the channel a `spawn` frame,
   * over HTTP `POST /api/tasks/{id}/children`. Rejects with a `LeaseLostError` when the lease is
   * gone, a `TaskTimeoutError` past the deadline, a `SpawnError` for a child the node refused
   * (`details.index` names it), a `RangeError` for a count out of bounds, and an `Error` when the
   * channel's socket closed before the answer (spawn again, with keys). To wait for them without
   * holding this worker's slot, `return ctx.waitForChildren()`. A task handed with a
   * `traceparent` sends its attempt span's context with each child: the children's spans nest
   * under this attempt.
   */
  spawn(tasks: readonly ChildTask[]): Promise<SpawnedChild[]>;
  /**
   * `return ctx.waitForChildren()` ends this attempt waiting for the task's children (HTTP:
   * `status: waiting_children` on the complete; channel: the same in a `results` frame): the
   * task holds no slot and no limit permit while they run, and once every child has ended it
   * runs once more (attempt + 1, no retry used) with `children` set. Only what the handler
   * returns counts: calling it without returning the value does nothing. Throws a `RangeError`
   * for an `onChildFailure` other than `fail` or `continue`.
   */
  waitForChildren(options?: WaitForChildrenOptions): ChildWaitRequest;
  /**
   * Set on an attempt that runs after the task waited for its children: how they ended.
   * Their results: `client.children.list(taskId)` (`GET /api/tasks/{id}/children`). Absent otherwise.
   */
  readonly children?: TaskChildren;
  /**
   * Set on a task with predecessors (a DAG dependent, or an attempt after the task waited for
   * its children): their results by task id, bounded — see {@link TaskInputs}. Absent otherwise.
   */
  readonly inputs?: TaskInputs;
}

/**
 * The user's code for a task. Resolving means success, and the resolved value (any JSON
 * value up to `maxResultBytes`; `undefined` for none) is stored as the task's result;
 * throwing means failure. A value that cannot be stored (not JSON, too large) fails the
 * attempt for good, with an error that says why.
 */
export type TaskHandler = (task: TaskContext) => Promise<unknown>;

/** How completions are coalesced into `POST /api/workers/complete` requests. */
export interface CompletionBatchOptions {
  /** How long the first result of a batch waits for others to join it, ms. @default 3 */
  lingerMs?: number;
  /** Most results in one request (the API allows 1 000). @default 1000 */
  maxBatchSize?: number;
  /** Most completion requests in flight at once; past that, results wait and batch up. @default 4 */
  maxRequestsInFlight?: number;
}

/**
 * How the worker talks to the cluster. `channel`: one WebSocket to a node
 * (`GET /api/workers/connect`), tasks pushed up to the credit the worker grants, results and
 * progress back on the same socket, one keep-alive for all leases. `http`: the long-poll,
 * heartbeat and complete endpoints, as workers in other languages use them.
 */
export type WorkerTransport = 'channel' | 'http';

/** Options of `createWorker`. */
export interface WorkerOptions {
  /**
   * Base URL of a node, e.g. `http://127.0.0.1:7070`. A path prefix is kept. Give `url`,
   * `urls` or both (then `url` is tried first).
   */
  url?: string;
  /**
   * Base URLs of several nodes of the cluster. The channel connects to the first that answers
   * and, when its socket is lost, to the next one, with backoff. The HTTP transport uses the
   * first.
   */
  urls?: readonly string[];
  /**
   * `channel` (a WebSocket, the default) or `http` (long-poll). A node too old to offer the
   * channel answers its upgrade with 404: the worker then falls back to HTTP by itself, once,
   * and says so through `onError`. @default 'channel'
   */
  transport?: WorkerTransport;
  /** This worker's id as the cluster records it (1–128 characters). @default `<hostname>-<pid>-<random>` */
  workerId?: string;
  /** The task types this worker runs (at least one). */
  taskTypes: readonly string[];
  /** Most tasks running at once: the worker never asks for more than its free slots. @default 10 */
  concurrency?: number;
  /** Runs one task. */
  handler: TaskHandler;
  /**
   * Largest result, and largest progress value, this worker sends: bytes of JSON. Match the
   * node's `maxResultBytes` if it was changed: a larger one is refused by the node. @default 65536 (64 KiB)
   */
  maxResultBytes?: number;
  /** Bearer token, sent when the node has auth enabled. @default none */
  token?: string;
  /**
   * HTTP transport: how often each running task is heartbeated, ms (on the channel the node
   * keeps every lease alive while the socket lives). @default a third of the lease
   * (computed from each lease's expiry, so it follows the task's `timeout_seconds`)
   */
  heartbeatEveryMs?: number;
  /**
   * Coalesce completions that finish within a few ms into one request (`true`), report each
   * with `POST /api/tasks/{id}/complete` (`false`), or tune the batching. @default true
   */
  batchCompletions?: boolean | CompletionBatchOptions;
  /** How long a poll waits on the node for work before it asks again, ms (≤ 30 000). @default 20000 */
  pollWaitMs?: number;
  /**
   * Polls in flight at once. One is enough for most workers; a very wide worker (thousands
   * of slots, tiny tasks) can overlap two so a claim is always being prepared. @default 1
   */
  pollers?: number;
  /** HTTP connections kept alive to the node (polls, heartbeats and completions share them). @default 8 */
  connections?: number;
  /**
   * Called for every error the worker recovers from by itself (network errors, 5xx, a
   * result that could not be delivered). @default writes one line to stderr
   */
  onError?: (error: unknown, context: string) => void;
  /**
   * Called once for each result this worker reported, when its fate is known: `accepted` (the
   * node stored it), `refused` (the lease was no longer this worker's, or the node rejected the
   * result), `dropped` (never delivered: its lease ran out before a node could be reached, or
   * the worker stopped first), `unacknowledged` (sent, but the worker stopped before the node
   * answered: it may have been stored). For audits that must know which attempt's result
   * counted. @default none
   */
  onResult?: (taskId: string, outcome: ResultOutcome) => void;
}

/** What became of a reported result (`WorkerOptions.onResult`). */
export type ResultOutcome = 'accepted' | 'refused' | 'dropped' | 'unacknowledged';

/** Counters of one worker since it started. A fresh object on every read. */
export interface WorkerStats {
  /** Handlers running now. */
  running: number;
  /** Handlers started. */
  started: number;
  /** Handlers that resolved. */
  succeeded: number;
  /** Handlers that threw. */
  failed: number;
  /** Results the node accepted. */
  reported: number;
  /** Results the node refused (lease no longer held) or that could not be delivered in time. */
  discarded: number;
  /** Results waiting to be sent or in flight. */
  unreported: number;
  /** Leases the node took away from this worker (a heartbeat answered 409, or a `lease_lost` frame). */
  leasesLost: number;
  /** Attempts that reached their deadline here: aborted, slot freed, no result sent (not counted in `failed`). */
  timedOut: number;
  /**
   * Tasks pushed after the worker began to close its socket (channel): not run, and not
   * reported — the node hands them on at once when it reads the close.
   */
  notRun: number;
  /** Poll requests answered (HTTP transport). */
  polls: number;
  /** Completion requests answered, batched or single (HTTP transport). */
  completionRequests: number;
  /** `results` frames sent, resends after a reconnect included (channel). */
  resultFrames: number;
  /** Sockets the node welcomed after the first one: reconnects, to the same node or another (channel). */
  reconnects: number;
}

/** Options of `Worker.stop`. */
export interface StopOptions {
  /**
   * How long running handlers may go on after `stop` is called, ms. Past it their signals are
   * aborted with a `WorkerStoppedError` and they are reported as failed and retryable (so the
   * task runs again elsewhere) without waiting for them any longer. @default no limit
   */
  timeoutMs?: number;
}

/** A worker created by `createWorker`. */
export interface Worker {
  /** The id the worker polls or connects with. */
  readonly workerId: string;
  /** Starts connecting (or polling). Calling it again while running does nothing; a stopped worker cannot restart. */
  start(): void;
  /**
   * Stops gracefully: no new tasks (on the channel a `goodbye` frame; over HTTP the waiting
   * poll is abandoned), every running handler is left to finish — or, past
   * `options.timeoutMs`, aborted and reported as failed and retryable — and its result is
   * reported, then connections close. Resolves when all that is done (on the channel: the
   * results are acknowledged, or the socket is gone). Idempotent: a second call returns the
   * first call's promise.
   */
  stop(options?: StopOptions): Promise<void>;
  /** A snapshot of the worker's counters. */
  readonly stats: WorkerStats;
}
