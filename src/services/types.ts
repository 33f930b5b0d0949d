import type { ExtendedLease } from '../store/types.js';
import type { ChildRecord as StoreChildRecord } from '../store/children-types.js';
import type { ApiKeysApi } from './api-keys.js';
import type {
  ClaimedTask,
  ExecutionRecord,
  OnChildFailure,
  SubmitResult,
  TaskRecord,
  TaskStatus,
} from '../domain/model.js';
import type { ChildSpec, DagSpec, TaskSpec } from '../domain/specs.js';
import type { Explanation } from './explanation.js';
import type { LimitsApi } from './limits-service.js';
import type { OperationAction, OperationFilter, OperationRecord } from '../domain/operations.js';

/** One task of a graph as clients see it. */
export interface DagNodeView {
  ref: string;
  record: TaskRecord;
  status: TaskStatus;
  /** Refs of the graph's tasks, or ids of tasks outside it. */
  dependsOn: string[];
}

export interface DagView {
  dagId: string;
  /** `running` while any task can still run; then `succeeded`, `failed` or `cancelled`. */
  status: 'running' | 'succeeded' | 'failed' | 'cancelled';
  counts: Partial<Record<TaskStatus, number>>;
  tasks: DagNodeView[];
}

export interface DagSubmitResult {
  /** false: an idempotency key matched an earlier identical graph. */
  created: boolean;
  dag: DagView;
}

/** A task as clients see it: the record plus its derived status. */
export interface TaskView {
  record: TaskRecord;
  /** `ready` when stored `pending` and due. */
  status: TaskStatus;
  dependencies: string[];
}

export interface CompletionRequest {
  taskId: string;
  leaseToken: string;
  /**
   * The token's digest, set only by the worker session that holds the lease and has compared
   * the token with the one it was given (held-leases.ts); never read from a request. Unset, the
   * token is hashed.
   */
  tokenDigest?: Buffer;
  /** `waiting_children`: the attempt ends waiting for the task's children (docs/api.md, "Children of a running task"). */
  outcome: 'succeeded' | 'failed' | 'waiting_children';
  /** With `waiting_children`: what a child that does not succeed does to the parent. @default 'fail' */
  onChildFailure?: OnChildFailure;
  error: string | null;
  retryable: boolean;
  /**
   * A succeeded attempt's result: any JSON value, already held to `maxResultBytes` by the
   * caller. undefined: none. Ignored on a failure.
   */
  result?: unknown;
}

/** The latest progress of a running task, as its worker reports it. */
export interface ProgressRequest {
  taskId: string;
  leaseToken: string;
  progress: unknown;
}

/** One update of a channel `progress` frame: the latest progress, an extension of the deadline, or both. */
export interface ChannelProgress {
  taskId: string;
  leaseToken: string;
  /** undefined: no progress sent. */
  progress?: unknown;
  /** Push the deadline to at least now + this, seconds; undefined: leave it. */
  extendSeconds?: number;
}

export interface PollRequest {
  workerId: string;
  taskTypes: string[];
  maxTasks: number;
  waitMs: number;
}

/** A claimed task with its lease and lease token, as a worker receives it. */
export type Assignment = ClaimedTask;

/**
 * What the HTTP layer asks of the services, one interface per route group. Every failure is a
 * `WheelhouseError`.
 */
export interface TasksApi {
  /**
   * Writes the tasks (all or nothing) and places them on the wheel. 429 past the backlog limit;
   * 400 `unknown_limit` for a limit nobody declared. `one`: the request is `POST /api/tasks`
   * (errors name `limits`, not `tasks[0].limits`).
   */
  submit(specs: TaskSpec[], one?: boolean): Promise<SubmitResult[]>;
  getTask(taskId: string): Promise<TaskView>;
  listTasks(filter: TaskListFilter): Promise<{ tasks: TaskView[]; nextToken: string | null }>;
  /**
   * A cron schedule's cancel deletes the schedule (see `SchedulesApi`). `reason`: the task's
   * `last_error` (a limit's `on_limit` strategy); none for DELETE.
   */
  cancel(taskId: string, reason?: string): Promise<{ cancelledInstances: number }>;
  history(
    taskId: string,
    limit: number,
    nextToken?: string,
  ): Promise<{ executions: ExecutionRecord[]; nextToken: string | null }>;
  /**
   * Runs a failed or cancelled task again (a new attempt, history kept) and places it on its
   * wheel partition. 409 `invalid_transition` for any other status; 404 `task_not_found`.
   */
  retry(taskId: string): Promise<TaskView>;
}

/** Children of a running task (`POST` and `GET /api/tasks/{id}/children`, the channel's `spawn`). */
export interface ChildrenApi {
  /**
   * Adds children to a running task, all or none; 409 `lease_not_held` unless `leaseToken` is
   * its lease's, 404 for an unknown task. Results in request order.
   */
  spawnChildren(parentId: string, leaseToken: string, children: ChildSpec[]): Promise<SubmitResult[]>;
  /** 404 for an unknown task. */
  listChildren(
    parentId: string,
    filter: ChildListFilter,
  ): Promise<{ children: ChildRecord[]; nextToken: string | null }>;
}

export interface ChildListFilter {
  status?: TaskStatus;
  limit: number;
  nextToken?: string;
}

/** One child as its parent's listing shows it: the status as visible (`ready` when pending and due). */
export interface ChildRecord extends Omit<StoreChildRecord, 'status'> {
  status: TaskStatus;
}

/** `GET /api/tasks/{id}/explain`: why a task is where it is. */
export interface ExplainApi {
  /** 404 `task_not_found` for an unknown id. */
  explain(taskId: string): Promise<Explanation>;
}

export interface TaskListFilter {
  status?: TaskStatus;
  taskType?: string;
  scheduleId?: string;
  limit: number;
  nextToken?: string;
}

export interface SchedulesApi {
  /** Cron schedules only (409 `invalid_transition` otherwise); 409 `task_finished` once deleted or ended. */
  pause(taskId: string): Promise<TaskView>;
  resume(taskId: string): Promise<TaskView>;
}

export interface DagsApi {
  /** Writes a whole graph (all or nothing) and places its ready roots on the wheel. */
  submitDag(spec: DagSpec): Promise<DagSubmitResult>;
  getDag(dagId: string): Promise<DagView>;
}

export interface WorkersApi {
  /** Long-poll: resolves as soon as at least one task is claimed, or with [] after `waitMs` or on `signal`. */
  poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]>;
  /**
   * Hands back claims that never reached their worker (its long-poll went away before the
   * answer was written): the tasks go back to pending at once, their attempt not counted,
   * instead of waiting out a lease nobody holds. Never rejects.
   */
  release(assignments: readonly Pick<Assignment, 'id' | 'version'>[]): Promise<void>;
  /**
   * Extends the lease of a running task (never past its deadline; `extendSeconds` first pushes
   * the deadline to at least now + that, within `max_timeout_seconds` of the attempt's start).
   * Throws `lease_not_held` when the lease is not the caller's or the deadline has passed.
   */
  heartbeat(taskId: string, leaseToken: string, extendSeconds?: number): Promise<ExtendedLease>;
  /**
   * Records results in one batch. A result whose lease is no longer held is reported with
   * `ok: false` and discarded; the single-result route turns that into 409 `lease_not_held`.
   */
  complete(results: CompletionRequest[]): Promise<{ taskId: string; ok: boolean }[]>;
  /**
   * Records the latest progress of running tasks in one batch (any JSON, already held to
   * `maxResultBytes` by the caller), each a compare-and-set on the running attempt's lease
   * token; it does not extend the lease. `ok: false` for an update whose lease is not held, and
   * for one that a later update of the same task in the batch replaced. Never throws for a
   * lost lease.
   */
  progress(updates: ProgressRequest[]): Promise<{ taskId: string; ok: boolean }[]>;
}

export interface HealthApi {
  /** true once the node has started and reaches its stores. */
  isReady(): Promise<boolean>;
}

/** Every service the HTTP face calls. */
/** What the operations routes call (`/api/operations`). */
export interface OperationsApi {
  /** Records a running operation; a node of the cluster runs it in the background. */
  start(action: OperationAction, filter: OperationFilter): Promise<OperationRecord>;
  get(operationId: string): Promise<OperationRecord>;
  /** Newest first. */
  list(limit: number, nextToken?: string): Promise<{ operations: OperationRecord[]; nextToken: string | null }>;
  /** Stops a running operation (the page under way may finish); 409 when it has already ended. */
  cancel(operationId: string): Promise<OperationRecord>;
}

export interface Services {
  tasks: TasksApi;
  children: ChildrenApi;
  schedules: SchedulesApi;
  dags: DagsApi;
  workers: WorkersApi;
  health: HealthApi;
  explain: ExplainApi;
  /** Flow control: declaring limits, pausing task types. */
  limits: LimitsApi;
  /** API keys: who may call which route. */
  keys: ApiKeysApi;
  /** Operations on many tasks. */
  operations: OperationsApi;
}
