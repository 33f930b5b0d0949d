/**
 * The task vocabulary: statuses, records, due entries and cron definitions, as every layer
 * speaks it. Pure types and the lists they are made of: no I/O, no imports of the stores, the actors or the services.
 */

/** Task statuses as stored. `ready` is never stored: it is `pending` with `due_time <= now`. */
export const STORED_STATUSES = [
  'blocked',
  'pending',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
  'active',
  'paused',
  /** Its attempt ended waiting for its children: no lease, due again once they have ended. */
  'waiting',
] as const;
export type StoredStatus = (typeof STORED_STATUSES)[number];

/** Statuses as clients see them: the stored ones plus the derived `ready`. */
export type TaskStatus = StoredStatus | 'ready';

export type ScheduleType = 'immediate' | 'delayed' | 'cron';

/**
 * A submit's `debounce`: while a task of the same type and `key` is `pending`, the submit
 * replaces its payload and moves its due time to now + `seconds`, never past its first submit
 * + `maxWaitSeconds` (migrations/000013_debounce.sql).
 */
export interface DebounceSpec {
  key: string;
  seconds: number;
  maxWaitSeconds: number;
}

/** A validated task, ready to be written. */
export interface NewTask {
  id: string;
  /** `payload` as JSON, when the submission's validation wrote it already; the insert writes it otherwise. */
  payloadJson?: string;
  taskType: string;
  payload: unknown;
  scheduleType: ScheduleType;
  /** A cron schedule's definition; null for every other task. */
  schedule: CronDefinition | null;
  status: 'pending' | 'blocked' | 'active';
  dueMs: number;
  priority: number;
  maxRetries: number;
  /** The execution deadline of one attempt, seconds after its claim. */
  timeoutSeconds: number;
  /** How far extensions may push an attempt's deadline, seconds after its claim; null (default): `timeoutSeconds`. */
  maxTimeoutSeconds?: number | null;
  /** How long the task may wait to start after its due time before it ends `expired`, seconds; null (default): for ever. */
  startDeadlineSeconds?: number | null;
  partition: number;
  idempotencyKey: string | null;
  /** A hash of the normalised request, to tell a replay from a conflicting reuse. */
  requestHash: string | null;
  /**
   * Predecessors: ids of tasks in the same submission (which must come earlier in it) or of
   * existing tasks. With any, the store decides the status: `blocked`, `pending` when all
   * have succeeded already, `cancelled` when one failed or was cancelled.
   */
  dependsOn?: readonly string[];
  /** The graph (POST /api/dags) the task belongs to, and its ref there. */
  dagId?: string | null;
  dagRef?: string | null;
  /** The limits it takes part in, sorted and without repeats (`normaliseLimits`); null/absent: none. */
  limits?: readonly string[] | null;
  /** Merge into the waiting task of the same type and key (`TaskSpec.debounce`); null/absent: none. */
  debounce?: DebounceSpec | null;
  /** The running task that spawned it (`POST /api/tasks/{id}/children`); null/absent: none. */
  parentId?: string | null;
  /** Its name within its parent: a spawn that names it again answers this task. null/absent: none. */
  childKey?: string | null;
  /** The W3C trace context it is traced under (migrations/000022_traceparent.sql); null/absent: none. */
  traceparent?: string | null;
}

/** A task row as read back. Times are Unix milliseconds. */
export interface TaskRecord {
  id: string;
  taskType: string;
  payload: unknown;
  status: StoredStatus;
  version: number;
  scheduleType: ScheduleType;
  /** A cron schedule's definition and generation; null for every other task. */
  schedule: CronSchedule | null;
  dueMs: number;
  priority: number;
  maxRetries: number;
  timeoutSeconds: number;
  /** null: `timeoutSeconds` (see `NewTask.maxTimeoutSeconds`). */
  maxTimeoutSeconds: number | null;
  startDeadlineSeconds: number | null;
  /** When the task ends `expired` unless it started (its due time + the start deadline); null: never. */
  startByMs: number | null;
  attempts: number;
  leaseExpiresMs: number | null;
  /** The running attempt's execution deadline (Unix ms); meaningful while `running`. */
  deadlineMs: number | null;
  workerId: string | null;
  cancelRequested: boolean;
  partition: number;
  idempotencyKey: string | null;
  createdMs: number;
  updatedMs: number;
  startedMs: number | null;
  completedMs: number | null;
  lastError: string | null;
  /** Set on a cron instance: the schedule that made it. */
  scheduleId: string | null;
  /** Set on a cron instance: the nominal fire time it stands for (`dueMs` adds the jitter). */
  fireMs: number | null;
  /** Set on a cron schedule: the nominal fire time of the latest instance that fired. */
  lastFiredMs: number | null;
  /** Set on a task submitted in a graph (POST /api/dags). */
  dagId: string | null;
  dagRef: string | null;
  /** Predecessors, and how many of them have succeeded (0/0 without any). */
  depsTotal: number;
  depsSatisfied: number;
  /** Some task depends on this one. */
  hasDependents: boolean;
  /** What the succeeded attempt's worker returned (any JSON); null when none. */
  result: unknown;
  /** The latest progress a worker reported (any JSON); null when none. A retry clears it. */
  progress: unknown;
  /** When `progress` was recorded (Unix ms); null when none. */
  progressMs: number | null;
  /** The limits it takes part in (sorted; its type's not among them); absent or [] when none. */
  limits?: readonly string[];
  /** The debounce key it was submitted with (`debounce.key`); null or absent: none. */
  debounceKey?: string | null;
  /** The task that spawned it (a child of a running task); null or absent: none. */
  parentId?: string | null;
  /** Its name within its parent; null or absent: none. */
  childKey?: string | null;
  /** The W3C trace context its hops are traced under (its submit span's); null or absent: none. */
  traceparent?: string | null;
}

/** What the wheel and the ready queue need to know of a task: no payload. */
export interface DueEntry {
  taskId: string;
  taskType: string;
  priority: number;
  dueMs: number;
  /**
   * The limit names the task takes part in (`TaskRecord.limits`: sorted, no repeats, its
   * type's `type:<t>` not among them); absent when it names none.
   */
  limits?: readonly string[];
  /**
   * The task's `traceparent`, for the span of its fire; set only while the node traces, absent
   * when the task has none. The far buckets keep it (a sampled one: src/store/entry-codec.ts),
   * so an entry the cascade or a restarted node reads back is traced too; the ready queue does
   * not (nothing after the fire makes a span from the entry).
   */
  traceparent?: string;
}

/**
 * The task type of a schedule's wake: a due entry whose `taskId` is a cron schedule's id and
 * whose time is the row's `wake_time`. The wheel hands it to the schedule's actor instead of a
 * ready queue (docs/decisions/0016-cron-passivation.md). `#` is never in a task type
 * (`[A-Za-z0-9_.:-]`), so no task can be taken for one.
 */
export const SCHEDULE_WAKE = '#wake';

/** The wake of schedule `scheduleId` at `wakeMs`. */
export function scheduleWake(scheduleId: string, wakeMs: number): DueEntry {
  return { taskId: scheduleId, taskType: SCHEDULE_WAKE, priority: 0, dueMs: wakeMs };
}

/** Whether a due entry wakes a schedule rather than standing for a task. */
export function isScheduleWake(entry: DueEntry): boolean {
  return entry.taskType === SCHEDULE_WAKE;
}

export interface SubmitResult {
  task: TaskRecord;
  /** false when an idempotency key matched an earlier identical submission, or a debounce merged it. */
  created: boolean;
  /**
   * Set for a submit that carried `debounce`: true when it merged into a waiting task (whose
   * payload and due time it changed), false when it made a new task. Absent otherwise.
   */
  debounced?: boolean;
}

export interface ClaimedTask {
  id: string;
  taskType: string;
  payload: unknown;
  attempt: number;
  /** The task's version after the claim: what the lease actor and the hand-back compare. */
  version: number;
  /** The attempt's secret, for the worker that claimed it (see `src/domain/lease-token.ts`). */
  leaseToken: string;
  /**
   * What the task row keeps of the token (its SHA-256), as the claim minted it. A worker session
   * that delivers the task keeps it beside the token, so that a result it receives with that
   * token reaches the store without hashing the token again. Never sent to a worker.
   */
  leaseTokenDigest?: Buffer;
  leaseExpiresMs: number;
  /** The attempt's execution deadline (Unix ms): the lease never runs past it. */
  deadlineMs: number;
  timeoutSeconds: number;
  partition: number;
  /** The due time the attempt was claimed at (Unix ms): its start lag is the claim's time less this. */
  dueMs: number;
  /** A parent resumed after waiting for its children: how they ended (counted at the claim). Absent otherwise. */
  children?: ChildrenSummary;
  /** A task with predecessors (a DAG dependent, a resumed parent): their results. Absent otherwise. */
  inputs?: TaskInputs;
  /**
   * The W3C trace context the worker's span joins: the claim's span when the node traces, else
   * the task's stored one. Absent when the task has none.
   */
  traceparent?: string;
}

/**
 * The results of a task's predecessors handed to it with the task (`inputs` on the wire),
 * bounded (src/store/sql/claim.ts `INPUTS`): the first 100 predecessors by id, each result up
 * to 16 KiB and 64 KiB together inline.
 */
export interface TaskInputs {
  /** Each predecessor's result by its id (null for none: a failed child, say). */
  values: Record<string, unknown>;
  /** Predecessors among the first 100 whose results are too large to go inline: read them from the task. */
  omitted?: string[];
  /** How many predecessors there are beyond the first 100 (a parent pages them: GET /api/tasks/{id}/children). */
  more?: number;
}

/** How a waiting parent's children ended, handed to its next attempt. `cancelled` counts `expired` too. */
export interface ChildrenSummary {
  total: number;
  succeeded: number;
  failed: number;
  cancelled: number;
}

/** What a child that does not succeed does to its waiting parent (`on_child_failure`). */
export type OnChildFailure = 'fail' | 'continue';

/** An attempt that ends waiting for its children (`status: waiting_children` on a completion). */
export interface ChildWait {
  taskId: string;
  /** The digest of the lease token it came with (`leaseTokenDigest`). */
  tokenDigest: Uint8Array;
  onChildFailure: OnChildFailure;
}

export interface Completion {
  taskId: string;
  /** The digest of the lease token the result came with (`leaseTokenDigest`). */
  tokenDigest: Uint8Array;
  outcome: 'succeeded' | 'failed';
  error: string | null;
  /** false: fail for good now, whatever retries are left. */
  retryable: boolean;
  /** A succeeded attempt's result (any JSON value); undefined: none. Ignored on a failure. */
  result?: unknown;
}

/** The latest progress of a running attempt, as a worker reports it. */
export interface ProgressUpdate {
  taskId: string;
  /** The digest of the lease token the update came with (`leaseTokenDigest`). */
  tokenDigest: Uint8Array;
  /** Any JSON value. */
  progress: unknown;
}

/** What a completion, an expiry or a cancel did to a task. */
export interface Transition {
  taskId: string;
  status: StoredStatus;
  version: number;
  /** Set when the task went back to `pending`: its new due entry, for the wheel. */
  requeued: DueEntry | null;
  /**
   * The task ended (succeeded, failed, cancelled) and tasks depend on it: its event is in the
   * outbox (`dag_events`) and the dependents' actors must hear of it.
   */
  notifyDependents: boolean;
  taskType: string;
  /** When the attempt that ended started (Unix ms); null if it never did. */
  startedMs: number | null;
  /** When it ended (Unix ms): the time of the result or of the expiry. */
  endedMs: number;
  /**
   * The attempt ended waiting for the task's children: `waiting`, or `pending` at once when
   * none was unfinished — a wait, not a failure, though the status is a retry's.
   */
  childWait?: true;
  /**
   * The limits it takes part in (sorted; its type's not among them); absent: none. The
   * attempt that ended gives back its permits of these keys and of `type:<taskType>`.
   */
  limits?: readonly string[];
  /** The task's `traceparent`, for the span of its result; absent when it has none. */
  traceparent?: string;
  /** With `traceparent`: the task's partition and the attempt that ended, for that span. */
  partition?: number;
  attempt?: number;
}

/** Retry timing: delay = min(baseMs · 2^(attempt−1), maxMs), scaled by a random 0.5…1. */
export interface BackoffPolicy {
  baseMs: number;
  maxMs: number;
}

export interface ExecutionRecord {
  executionId: string;
  taskId: string;
  attempt: number;
  /** `expired`: the attempt that never started (the task passed its start deadline). */
  /** `waiting`: the attempt ended waiting for the task's children (it ran again after them). */
  status: 'running' | 'succeeded' | 'failed' | 'timed_out' | 'cancelled' | 'expired' | 'waiting';
  dueMs: number;
  startedMs: number | null;
  completedMs: number | null;
  workerId: string | null;
  error: string | null;
  /** A succeeded attempt's result; null for any other attempt or when it returned none. */
  result: unknown;
}

/** A cron schedule's definition, as stored in the schedule row's `schedule` column. */
export interface CronDefinition {
  cronExpression: string;
  /** IANA name. */
  timezone: string;
  jitterSeconds: number;
  misfirePolicy: 'fire_once' | 'skip' | 'fire_all';
  overlapPolicy: 'allow' | 'skip';
  endMs: number | null;
}

/** What a cron schedule's row holds besides its status: its definition and its generation. */
export interface CronSchedule {
  definition: CronDefinition;
  /** Bumped by each resume (see `ScheduleRecord.generation`). */
  generation: number;
}

export type ScheduleStatus = 'active' | 'paused' | 'cancelled' | 'succeeded';

/** What a schedule's actor needs of its row: no payload (instances copy it in SQL). */
export interface ScheduleRecord {
  id: string;
  status: ScheduleStatus;
  /** Every change bumps it; every write is a compare-and-set on it (the actor's fence). */
  version: number;
  definition: CronDefinition;
  /** The nominal fire time of the schedule's current instance (the row's `due_time`). */
  nextFireMs: number;
  lastFiredMs: number | null;
  /**
   * Bumped by each resume, and part of every instance id (`instanceId`): the instance a
   * pause cancelled must not block the instance for the same fire time after a resume.
   */
  generation: number;
  /**
   * When the schedule's actor must next act (the row's `wake_time`): its current instance's
   * handling time, for the wheel to wake it then. A new schedule's is its submission time; it
   * means nothing while the schedule is not active.
   */
  wakeMs: number | null;
}
