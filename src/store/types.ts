/**
 * The storage interfaces. Each has two real implementations: Postgres + Redis for
 * production, PGlite + in-process structures for the embedded default. One conformance
 * suite (`test/store/*.conformance.test.ts`) runs against both.
 */
import type {
  BackoffPolicy,
  ClaimedTask,
  Completion,
  DueEntry,
  ExecutionRecord,
  NewTask,
  ProgressUpdate,
  ScheduleRecord,
  ScheduleStatus,
  SubmitResult,
  TaskRecord,
  TaskStatus,
  Transition,
  ChildWait,
} from '../domain/model.js';
import type { ChildPage, ChildrenFilter, SpawnResult } from './children-types.js';
import type { LimitGrantRow } from './limit-types.js';

/** A position in a partition's pending tasks: the last entry a page returned. */
export interface PartitionCursor {
  dueMs: number;
  taskId: string;
}

export interface ListFilter {
  status?: TaskStatus;
  taskType?: string;
  /** A cron schedule's instances only: the (schedule_id, id) index, newest first. */
  scheduleId?: string;
  limit: number;
  /** Exclusive: list tasks older than this id (ids are time-ordered UUID v7). */
  beforeId?: string;
  /** With a status or task-type filter: the most rows of the index walk one page reads. @default all */
  scanRows?: number;
  /** The page stops once its tasks pass this many bytes of JSON (it keeps at least one). @default unbounded */
  maxBytes?: number;
}

/** One page of a listing. */
export interface TaskListPage {
  tasks: TaskRecord[];
  /**
   * Where the next page starts (exclusive), or null when this one reached the end. Set when the
   * page is full, stopped at its bytes, or walked its `scanRows` with fewer matches.
   */
  nextBeforeId: string | null;
}

/** One heartbeat: the task, and the digest of the lease token the worker presented. */
export interface LeaseHeartbeat {
  taskId: string;
  tokenDigest: Uint8Array;
  /**
   * Push the attempt's deadline to at least now + this many seconds (never past its start +
   * `max_timeout_seconds`). Left out: the deadline stays.
   */
  extendSeconds?: number;
}

/** A lease a heartbeat extended. */
export interface ExtendedLease {
  /** The lease's new expiry: never past `deadlineMs`. */
  leaseExpiresMs: number;
  /** The attempt's execution deadline (Unix ms), moved by an extension. */
  deadlineMs: number;
  /** A cancel was requested: the worker should stop and report. */
  cancelRequested: boolean;
}

/** A running task's lease as stored. */
export interface RunningLease {
  version: number;
  leaseExpiresMs: number;
  /** null for a claim made before lease tokens were random (matches no token). */
  tokenDigest: Uint8Array | null;
}

export type CancelResult =
  | { kind: 'cancelled'; task: TaskRecord }
  | { kind: 'cancel_requested'; task: TaskRecord }
  | { kind: 'finished'; task: TaskRecord }
  | { kind: 'not_found' };

/** What a retry did: `refused` when the task is in no state that retries (its status says which). */
export type RetryResult =
  { kind: 'retried'; task: TaskRecord } | { kind: 'refused'; task: TaskRecord } | { kind: 'not_found' };

/** A position in a partition's finished tasks: the last one a retention batch looked at. */
export interface RetentionCursor {
  /** Its completion time in whole microseconds since the epoch (the column's resolution). */
  completedUs: number;
  taskId: string;
}

/** One bounded batch of retention in one partition (see `TaskStore.removeFinished`). */
export interface RemoveFinished {
  partition: number;
  /** Tasks that finished before this time go. */
  horizonMs: number;
  /** Idempotency keys that expire after this time are live. */
  nowMs: number;
  /** Where the previous batch of this pass stopped (exclusive); null: from the oldest. */
  after: RetentionCursor | null;
  /** The most tasks looked at, and so removed. */
  limit: number;
}

/** What one retention batch did. */
export interface FinishedBatch {
  /** Tasks removed (with their executions and their own dependency edges). */
  removed: number;
  /** Tasks past the horizon looked at; those not removed must stay for now (see `removeFinished`). */
  examined: number;
  /** Where the next batch starts; null when this one reached the last task past the horizon. */
  next: RetentionCursor | null;
}

/** The latest retention a sweep applied: finished tasks that ended before `horizonMs` may be gone. */
export interface AppliedRetention {
  horizonMs: number;
  retentionMs: number;
}

/** The system of record for tasks and their executions (Postgres or PGlite). */
export interface TaskStore {
  /**
   * Writes tasks in one transaction, honouring idempotency keys (24 h window): an earlier
   * identical request is returned with `created: false`; a key reused with a different
   * request throws `idempotency_conflict` with `details.index`, and nothing is written.
   */
  submit(tasks: NewTask[], nowMs: number): Promise<SubmitResult[]>;
  /**
   * Deletes up to `limit` idempotency keys whose 24 h window ended before `nowMs`; returns
   * how many. A later submission with such a key creates a new task either way; this only
   * keeps the table from growing forever.
   */
  purgeExpiredIdempotencyKeys(nowMs: number, limit: number): Promise<number>;
  /**
   * Removes up to `limit` finished tasks (succeeded, failed, cancelled) of one partition that
   * ended before `horizonMs`, with their executions and their own dependency edges, in one
   * statement. Looks at them in completion order after `after`; passes over (and counts as
   * examined) those that must stay: a task of a graph that still has a task unfinished or
   * within retention, a task with such a dependent or with an undelivered outbox event, a
   * task whose idempotency key is still live at `nowMs`. Unfinished tasks and live schedules
   * are never looked at.
   */
  removeFinished(batch: RemoveFinished): Promise<FinishedBatch>;
  /**
   * Those of `partitions` holding a finished task that ended before `horizonMs` (one that may
   * have to stay counts too): where a retention pass has batches to run. One statement, one
   * index probe a partition, so a pass that finds nothing costs one round trip.
   */
  partitionsPastHorizon(partitions: readonly number[], horizonMs: number): Promise<number[]>;
  /** Records the horizon a retention sweep applies (a later one wins; an earlier one is ignored). */
  recordRetentionHorizon(horizonMs: number, retentionMs: number): Promise<void>;
  /** The latest horizon recorded; null before any sweep. */
  retentionHorizon(): Promise<AppliedRetention | null>;
  get(id: string): Promise<TaskRecord | null>;
  /** A page newest first (see src/store/sql/list.ts for what bounds it). */
  list(filter: ListFilter, nowMs: number): Promise<TaskListPage>;
  /**
   * Adds children to a running task whose lease token has digest `tokenDigest`, all or none,
   * in one transaction (src/store/sql/children.ts): a `childKey` the parent already has answers
   * that child (`created: false`), every other child is inserted as a submission is.
   */
  spawnChildren(parentId: string, tokenDigest: Buffer, children: NewTask[], nowMs: number): Promise<SpawnResult>;
  /** A page of a task's children, in the order they were spawned. */
  listChildren(parentId: string, filter: ChildrenFilter, nowMs: number): Promise<ChildPage>;
  /**
   * Claims in one statement: each id that is `pending` and due becomes `running` with
   * attempts + 1, version + 1, a lease of its timeout, `workerId`, and a new lease token
   * (`ClaimedTask.leaseToken`) of which only the digest is stored. Ids that are not
   * claimable are left out of the answer.
   */
  claim(ids: string[], workerId: string, nowMs: number, grants?: readonly LimitGrantRow[]): Promise<ClaimedTask[]>;
  /**
   * `claim` for many workers in the same one statement: `workerIds[i]` becomes the worker of
   * `ids[i]` (the two are aligned; an error if their lengths differ).
   */
  claimForWorkers(
    ids: readonly string[],
    workerIds: readonly string[],
    nowMs: number,
    grants?: readonly LimitGrantRow[],
  ): Promise<ClaimedTask[]>;
  /**
   * Extends the lease of a running task whose token has digest `tokenDigest`, by its timeout
   * but never past the attempt's deadline (pushed later first by `extendSeconds`). null when it
   * is not running, the digest is not its lease's, or its deadline has passed. One heartbeat of
   * {@link heartbeats}.
   */
  heartbeat(
    taskId: string,
    tokenDigest: Uint8Array,
    nowMs: number,
    extendSeconds?: number,
  ): Promise<ExtendedLease | null>;
  /**
   * Many heartbeats in one statement, each as {@link heartbeat} judges it: one answer per
   * lease, in order. Two for one task with its lease's digest both extend it (once).
   */
  heartbeats(leases: readonly LeaseHeartbeat[], nowMs: number): Promise<(ExtendedLease | null)[]>;
  /** The lease of a running task, with its token digest: what a lease actor starts from. null when not running. */
  runningLease(taskId: string): Promise<RunningLease | null>;
  /**
   * Records results in one statement, each a compare-and-set on (`running`, token digest),
   * and writes one execution row per result. A success's `result` is stored with the task
   * (kept only when it ends `succeeded`); a retry clears the attempt's progress. A failure with retries left goes back to `pending`
   * after a backoff; a task with cancel requested ends `cancelled`. Results whose lease is
   * no longer held are left out of the answer.
   */
  complete(results: Completion[], nowMs: number, backoff: BackoffPolicy): Promise<Transition[]>;
  /**
   * Ends a running attempt waiting for the task's children, in one transaction
   * (src/store/sql/waiting.ts): a compare-and-set on (`running`, token digest) as for a result;
   * the unfinished children become its predecessors and the task `waiting` (`pending`, due now,
   * when none is unfinished; `cancelled` when its cancel was requested). null: the lease is not held.
   */
  waitForChildren(wait: ChildWait, nowMs: number): Promise<Transition | null>;
  /**
   * Records the latest progress of running attempts in one statement, each a compare-and-set on
   * (`running`, token digest); of several updates for one task the last is written. Answers the
   * (lower-case) ids whose progress was written. The lease is left as it is.
   */
  progress(updates: readonly ProgressUpdate[], nowMs: number): Promise<Set<string>>;
  /**
   * Ends `expired` the pending tasks of these partitions whose start deadline (`startByMs`)
   * passed by `nowMs`, at most `limit` per partition, oldest deadline first, in one statement;
   * those with dependents write their outbox event with it. Answers what changed.
   */
  expireUnstarted(partitions: readonly number[], nowMs: number, limit: number): Promise<Transition[]>;
  /**
   * Ends a lease that ran out — at the attempt's deadline, or earlier when its worker went
   * silent: back to `pending` (backoff) or `failed`. null if not held or not yet expired.
   */
  expireLease(taskId: string, version: number, nowMs: number, backoff: BackoffPolicy): Promise<Transition | null>;
  /**
   * Cancels a pending/blocked task at once, or marks a running one. `reason`, when given,
   * becomes its `last_error` (a limit's `on_limit` strategy says why).
   */
  cancel(taskId: string, nowMs: number, reason?: string): Promise<CancelResult>;
  /**
   * Cancels the unfinished descendants of cancelled tasks, as `cancel` cancels one: a cancelled
   * parent takes its children with it. Answers what changed (running ones with `cancelRequested`).
   */
  cancelChildren(parentIds: readonly string[], nowMs: number): Promise<TaskRecord[]>;
  /**
   * Runs a failed or cancelled task again: `pending` due at `nowMs`, attempts kept (the next
   * claim is attempt + 1), last error kept, result, progress and cancel request cleared, the
   * ended attempt kept in the history. Refused for any other status, for a cron schedule and
   * for a task whose predecessors have not all succeeded.
   */
  retry(taskId: string, nowMs: number): Promise<RetryResult>;
  /** Executions of a task, newest first; a running attempt is included. */
  history(taskId: string, limit: number, beforeAttempt?: number): Promise<ExecutionRecord[]>;
  /**
   * Pending tasks of a partition due before `toMs`, ordered by (due time, id), after the
   * entry `after` (exclusive; null: from the start), at most `limit`. Keyset paging, so a
   * page boundary inside one millisecond — a herd — neither skips nor repeats a task.
   * For rebuilds.
   */
  pendingInPartition(
    partition: number,
    after: PartitionCursor | null,
    toMs: number,
    limit: number,
  ): Promise<DueEntry[]>;
  /**
   * The first `limit` pending tasks due before `toMs` of each of `partitions` (after its
   * cursor in `after`, if it has one), in one statement, by partition (only those that have
   * some). For the safety net.
   */
  pendingInPartitions(
    partitions: readonly number[],
    toMs: number,
    limit: number,
    after?: ReadonlyMap<number, PartitionCursor>,
  ): Promise<Map<number, DueEntry[]>>;
  /**
   * Running tasks of these partitions, for lease recovery: after a restart (one partition at
   * its activation), after a ring change (every partition, in one statement).
   */
  runningInPartitions(
    partitions: readonly number[],
  ): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]>;
  /**
   * Running tasks of these partitions whose lease ran out before `beforeMs`, oldest expiry
   * first, at most `limit`: for the safety net under lease expiry.
   */
  expiredLeases(
    partitions: readonly number[],
    beforeMs: number,
    limit: number,
  ): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]>;
  /** Which of these tasks are `pending`, with their due times. */
  pendingDueTimes(ids: readonly string[]): Promise<Map<string, number>>;
  /**
   * Hands back claims no worker received (a long-poll that went away): each task still
   * `running` at that version goes back to `pending` as if unclaimed — attempt not counted,
   * due time kept, version + 1, the token digest cleared (the lease token dies). A task whose cancel was requested is
   * left to its lease. Answers the due entries of the tasks released.
   */
  release(claims: readonly { taskId: string; version: number }[], nowMs: number): Promise<DueEntry[]>;
}

/** An instance to create: an ordinary task whose template is its schedule's row. */
export interface NewInstance {
  id: string;
  fireMs: number;
  dueMs: number;
  partition: number;
  /**
   * `blocked`: held until its fire time, when the actor releases it or, while an earlier
   * instance still runs, skips it (overlap policy `skip`). `pending`: on the wheel now.
   */
  status: 'pending' | 'blocked';
}

/**
 * One change to one schedule, applied in one transaction with the others of its batch. It
 * happens only if the row is still at `version` (then version + 1); otherwise nothing of it
 * is written.
 */
export interface ScheduleWrite {
  scheduleId: string;
  version: number;
  status: ScheduleStatus;
  /** The new nominal fire time of the current instance; null keeps it. */
  nextFireMs: number | null;
  /** null keeps it. */
  lastFiredMs: number | null;
  /** null keeps it. */
  generation: number | null;
  /** The schedule's new wake time (see `ScheduleRecord.wakeMs`); null keeps it. */
  wakeMs: number | null;
  /**
   * The schedule's current instance, created (before this write's cancel and release) unless
   * it exists: an activation's first write makes sure of it, since nothing else had created
   * a new schedule's first instance. null: none.
   */
  ensure: NewInstance | null;
  /**
   * A held instance whose fire time has come: it becomes `pending` — or `cancelled` when an
   * earlier instance of the schedule is still pending or running.
   */
  release: string | null;
  /** Created unless an instance with the same id exists (never twice). */
  instances: NewInstance[];
  /** Cancels one pending or held instance (`instanceId`), or all of them (null). */
  cancel: { instanceId: string | null; reason: string } | null;
}

export interface ScheduleWriteResult {
  /** false: the row was not at the expected version (or is gone); nothing was written. */
  ok: boolean;
  /** The row's version after the write (when ok). */
  version: number;
  /** Instances now `pending` that the wheel must take: created ones and a released one. */
  due: DueEntry[];
  /** The released instance was skipped because an earlier one still runs. */
  skipped: boolean;
  /** Instances cancelled by `cancel`. */
  cancelled: number;
}

/** A position in a schedule's history: the last execution a page returned. */
export interface HistoryCursor {
  taskId: string;
  attempt: number;
}

/** Cron schedules in the system of record (the `tasks` table, Postgres or PGlite). */
export interface ScheduleStore {
  get(id: string): Promise<ScheduleRecord | null>;
  /** The schedules of these ids, in order (null: no such schedule), in one statement. */
  getMany(ids: readonly string[]): Promise<(ScheduleRecord | null)[]>;
  /**
   * The wakes (`scheduleWake`) of the partition's active schedules due before `toMs`, after
   * `after` (exclusive), in (wake time, id) order, at most `limit`: for a wheel partition's
   * rebuild, and for the overdue ones a node takes over or the safety net finds.
   */
  wakesInPartition(partition: number, after: PartitionCursor | null, toMs: number, limit: number): Promise<DueEntry[]>;
  /** The first `limit` wakes before `toMs` of each of `partitions`, in one statement, by partition. */
  wakesInPartitions(partitions: readonly number[], toMs: number, limit: number): Promise<Map<number, DueEntry[]>>;
  /** Applies the writes in one transaction; each is all or nothing on its own. */
  write(writes: ScheduleWrite[], nowMs: number): Promise<ScheduleWriteResult[]>;
  /** Executions of the schedule's instances, newest first, after `before` (exclusive). */
  history(scheduleId: string, limit: number, before?: HistoryCursor): Promise<ExecutionRecord[]>;
}
