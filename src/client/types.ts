/**
 * The client's view of the HTTP contract (API.md), in camelCase. Each type here has a
 * snake_case twin on the wire (`wire.ts` maps one to the other); times stay ISO-8601 UTC
 * strings as the node sends them, and a time you send may also be a `Date`.
 */

/** A task's status as the node shows it (`ready` is `pending` and due; cron tasks are `active` or `paused`). */
export type TaskStatus =
  | 'blocked'
  | 'pending'
  | 'ready'
  | 'running'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'expired'
  | 'active'
  | 'paused'
  | 'waiting';

export type ScheduleType = 'immediate' | 'delayed' | 'cron';

/** Due now. */
export interface ImmediateSchedule {
  type: 'immediate';
}

/** Due at `dueTime` or after `delaySeconds`: give exactly one. A time in the past means now. */
export interface DelayedSchedule {
  type: 'delayed';
  dueTime?: string | Date;
  delaySeconds?: number;
}

/** Fires on a cron expression (5 fields, or 6 with seconds first). */
export interface CronSchedule {
  type: 'cron';
  cronExpression: string;
  /** IANA name; the node's default is `UTC`. */
  timezone?: string;
  /** Each firing is moved by a random 0…jitter seconds. */
  jitterSeconds?: number;
  misfirePolicy?: 'fire_once' | 'skip' | 'fire_all';
  overlapPolicy?: 'allow' | 'skip';
  endTime?: string | Date;
}

export type Schedule = ImmediateSchedule | DelayedSchedule | CronSchedule;

/** A task to submit (`POST /api/tasks`, and each item of a batch). Left-out fields take the node's defaults. */
export interface NewTask {
  /** 1–128 characters of `[A-Za-z0-9_.:-]`. */
  taskType: string;
  /** Any JSON value; default null. */
  payload?: unknown;
  /** Default immediate. */
  schedule?: Schedule;
  /** Task ids that must all succeed first. */
  dependencies?: string[];
  /** Within 24 h the same key and body give back the first task; a different body is a 409. */
  idempotencyKey?: string;
  /** 0–9, lower runs first; default 5. */
  priority?: number;
  /** 0–100; default 3. */
  maxRetries?: number;
  /** The execution deadline of one attempt, seconds (1–86 400): at it the attempt ends as a timeout. Node default 60. */
  timeoutSeconds?: number;
  /** How far a worker may push an attempt's deadline, seconds after its start; default `timeoutSeconds`. */
  maxTimeoutSeconds?: number;
  /** Not started this long after its due time, the task ends `expired`, seconds; default the node's (none). */
  startDeadlineSeconds?: number;
  /**
   * The W3C trace context to trace the task under (`00-<trace id>-<parent id>-<flags>`): the
   * node's spans of its hops and the worker's span join that trace. Default: the active span's,
   * when the application traces with `@opentelemetry/api`; none otherwise.
   */
  traceparent?: string;
}

/** What a submission answers, for each task. */
export interface Submitted {
  taskId: string;
  /** `pending`, `blocked` or, for cron, `active`. */
  status: TaskStatus;
  dueTime: string | null;
}

/** `submit`'s answer: `created` is false when an idempotency key matched an earlier identical request. */
export interface SubmitResult extends Submitted {
  created: boolean;
}

/** One task of a graph: a task plus its local `ref` and the refs (or existing task ids) it depends on. */
export interface NewDagTask extends Omit<NewTask, 'dependencies' | 'idempotencyKey' | 'schedule'> {
  ref: string;
  dependsOn?: string[];
  /** Not cron: a graph's tasks run once. */
  schedule?: ImmediateSchedule | DelayedSchedule;
}

/** A graph to submit whole (`POST /api/dags`), all or nothing. */
export interface NewDag {
  tasks: NewDagTask[];
  idempotencyKey?: string;
}

export interface DagSubmitResult {
  dagId: string;
  /** false for an idempotent replay. */
  created: boolean;
  /** In request order. */
  tasks: (Submitted & { ref: string })[];
}

/** One task of `getDag`. */
export interface DagTask {
  ref: string;
  taskId: string;
  taskType: string;
  status: TaskStatus;
  /** Refs in the graph, or ids of tasks outside it. */
  dependsOn: string[];
  dueTime: string | null;
  startedAt: string | null;
  completedAt: string | null;
  attempts: number;
  lastError: string | null;
}

/** `GET /api/dags/{id}`. */
export interface Dag {
  dagId: string;
  /** `running` while any task can still run. */
  status: 'running' | 'succeeded' | 'failed' | 'cancelled';
  counts: Partial<Record<TaskStatus, number>>;
  tasks: DagTask[];
}

/** `GET /api/tasks/{id}`: a task and, for cron tasks, their schedule. */
export interface Task {
  taskId: string;
  taskType: string;
  status: TaskStatus;
  scheduleType: ScheduleType;
  dueTime: string | null;
  createdAt: string | null;
  startedAt: string | null;
  completedAt: string | null;
  attempts: number;
  maxRetries: number;
  priority: number;
  timeoutSeconds: number;
  maxTimeoutSeconds: number;
  startDeadlineSeconds: number | null;
  /** A waiting task with a start deadline: not started by then, it ends `expired`. */
  startBy: string | null;
  /** A running task: when its attempt ends as a timeout unless extended. */
  deadlineAt: string | null;
  lastError: string | null;
  idempotencyKey: string | null;
  cancelRequested: boolean;
  dependencies: string[];
  /** The running task that spawned it (a child, `client.children`); null: none. */
  parentId: string | null;
  /** A child's name within its parent, when it was given one. */
  childKey: string | null;
  /**
   * The W3C trace context its hops are traced under, as the node stores it (its submit span's
   * when the node traces); null: none.
   */
  traceparent: string | null;
  payload: unknown;
  /** What the succeeded attempt's worker returned (any JSON); null when none. */
  result: unknown;
  /** The latest progress a worker reported (any JSON); null when none. A retry clears it. */
  progress: unknown;
  /** When `progress` was recorded; null when none. */
  progressAt: string | null;
  /** On a task with predecessors: how many have succeeded. */
  dependenciesSatisfied?: number;
  /** On a task submitted in a graph. */
  dagId?: string;
  ref?: string | null;
  /** On a cron task. */
  cronExpression?: string | null;
  timezone?: string | null;
  jitterSeconds?: number | null;
  misfirePolicy?: string | null;
  overlapPolicy?: string | null;
  endTime?: string | null;
  nextDueTime?: string | null;
  lastFiredAt?: string | null;
  /** On a cron instance: its schedule and its nominal fire time (`dueTime` adds the jitter). */
  scheduleId?: string;
  fireTime?: string | null;
}

/** `GET /api/tasks` filter. */
export interface ListFilter {
  status?: TaskStatus;
  taskType?: string;
  /** The instances of one cron schedule. */
  scheduleId?: string;
  /** Page size, 1–1000; the node's default is 50. */
  limit?: number;
  /** Where to start: a page's `nextToken`. */
  nextToken?: string | null;
}

/** One page of `GET /api/tasks`, newest first. */
export interface TaskPage {
  tasks: Task[];
  /** null on the last page. */
  nextToken: string | null;
}

/** One attempt of a task (or of a cron schedule's instance). */
export interface Execution {
  executionId: string;
  taskId: string;
  attempt: number;
  /** `expired`: the attempt that never started (the task passed its start deadline). */
  status: 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'expired' | 'waiting';
  dueTime: string | null;
  startedAt: string | null;
  completedAt: string | null;
  workerId: string | null;
  error: string | null;
  /** A succeeded attempt's result; null for any other attempt or when none. */
  result: unknown;
}

export interface HistoryOptions {
  /** Page size, 1–1000; the node's default is 20. */
  limit?: number;
  nextToken?: string | null;
}

/** One page of `GET /api/tasks/{id}/history`, newest first. */
export interface HistoryPage {
  executions: Execution[];
  nextToken: string | null;
}

/** `DELETE /api/tasks/{id}`. */
export interface CancelResult {
  ok: true;
  /** For a cron task, its pending instance; otherwise the task and its cancelled dependents. */
  cancelledInstances: number;
}

export interface WaitOptions {
  /** Give up after this long, ms (default 60 000): rejects with `WheelhouseTimeoutError`. */
  timeoutMs?: number;
  /** First pause between polls, ms (default 200); it grows by half each poll up to `maxPollMs`. */
  pollMs?: number;
  /** Longest pause between polls, ms (default 2 000). */
  maxPollMs?: number;
  /** Stops waiting: rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** What `onRetry` is told before the client waits and tries a request again. */
export interface RetryInfo {
  method: string;
  path: string;
  /** The attempt that failed, from 1. */
  attempt: number;
  /** How long the client waits before the next attempt, ms. */
  delayMs: number;
  /** The HTTP status that is retried, or null for a network error. */
  status: number | null;
  error: Error;
}

export interface ClientOptions {
  /** The node's base URL, `http://127.0.0.1:7070` (a path prefix is kept). */
  url: string;
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Most retries of one request (default 3): after 429 and 503, and network errors where that is safe. */
  retries?: number;
  /** Each attempt's time limit, ms (default 30 000); running out is a `WheelhouseNetworkError`. */
  timeoutMs?: number;
  /** A `fetch` to use instead of the global one (a proxy agent, a test double). */
  fetch?: typeof globalThis.fetch;
  /** Called before each retry, for logs and metrics. */
  onRetry?: (info: RetryInfo) => void;
}

/** What a key does when its concurrency is reached (API.md "Flow control"). */
export type OnLimit = 'queue' | 'cancel_running' | 'cancel_new' | 'keep_latest_waiting';

/** Task starts per period (GCRA), `burst` more allowed at once. */
export interface LimitRate {
  limit: number;
  /** Seconds, in whole milliseconds (0.001 to 86 400). */
  periodSeconds: number;
  burst: number;
}

/** `PUT /api/limits/{name}`: what is left out takes the node's default. */
export interface LimitDeclaration {
  /** Tasks of the key running at once; 0 pauses it. null or left out: unlimited. */
  concurrency?: number | null;
  /** null or left out: unlimited. `burst` defaults to 0. */
  rate?: (Omit<LimitRate, 'burst'> & { burst?: number }) | null;
  /** Default `queue`. */
  onLimit?: OnLimit;
  /** The key's share among its family's keys (> 0, default 1). */
  weight?: number;
}

/** A limit as the node answers it. */
export interface Limit {
  name: string;
  /** The name whose declaration applies: this one, or its family (`customer:*`). */
  declaredAs: string;
  concurrency: number | null;
  rate: LimitRate | null;
  onLimit: OnLimit;
  weight: number;
  /** Tasks of the key running now; null for a family and in a list. */
  running: number | null;
  /** Tasks of the key pending now; null for a family and in a list. */
  waiting: number | null;
  /** Starts within the rate's last period; null while the node does not count them. */
  startsLastPeriod: number | null;
}

/** `GET /api/limits` filter. */
export interface LimitListFilter {
  /** Names starting with this. */
  prefix?: string;
  /** Page size, 1–1000; the node's default is 100. */
  limit?: number;
  nextToken?: string | null;
}

/** One page of `GET /api/limits`, in name order. */
export interface LimitPage {
  limits: Limit[];
  nextToken: string | null;
}

/** What pausing or resuming a task type answers. */
export interface TaskTypePause {
  taskType: string;
  /** Whether the type's key now resolves to concurrency 0. */
  paused: boolean;
  /** The values its key `type:<task_type>` now resolves to; null when nothing is declared. */
  limit: Limit | null;
}
