import type { Db } from './db.js';
import { WriteBatcher } from '../lib/write-batcher.js';
import type { FirstPageRequest } from './sql/partition-pages.js';
import type { ChildPage, ChildrenFilter, SpawnResult } from './children-types.js';
import { cancelChildren, cancelTask } from './sql/cancel.js';
import type { LimitGrantRow } from './limit-types.js';
import { claimTasks, expiredLeases, heartbeatTasks, releaseTasks, runningLease } from './sql/claim.js';
import { completeTasks, expireLease } from './sql/complete.js';
import { listChildren, spawnChildren } from './sql/children.js';
import { waitForChildren } from './sql/waiting.js';
import { listTasks } from './sql/list.js';
import { recordProgress } from './sql/progress.js';
import {
  getTask,
  pendingDueTimes,
  pendingFirstPages,
  pendingInPartition,
  pendingInPartitions,
  runningInPartitions,
  runningInPartitionsMany,
  taskHistory,
} from './sql/read.js';
import { partitionsPastHorizon, removeFinished, recordRetentionHorizon, retentionHorizon } from './sql/retention.js';
import { retryTask } from './sql/retry.js';
import { expireUnstarted } from './sql/start-deadlines.js';
import { purgeExpiredIdempotencyKeys, submitTasks } from './sql/submit.js';
import type {
  BackoffPolicy,
  ChildWait,
  ClaimedTask,
  Completion,
  DueEntry,
  ExecutionRecord,
  NewTask,
  ProgressUpdate,
  SubmitResult,
  TaskRecord,
  Transition,
} from '../domain/model.js';
import type {
  AppliedRetention,
  CancelResult,
  ExtendedLease,
  FinishedBatch,
  LeaseHeartbeat,
  ListFilter,
  PartitionCursor,
  RemoveFinished,
  RetryResult,
  RunningLease,
  TaskListPage,
  TaskStore,
} from './types.js';

/**
 * The task store over SQL: the same statements on Postgres (`pg`) and PGlite. Each method
 * is one statement, or one short transaction for submissions with idempotency keys; the
 * statements live in `src/store/sql/`, one file per concern, next to the function that runs
 * them. Every write is a compare-and-set whose WHERE clause encodes one edge of the state
 * machine in `src/tasks/lifecycle.ts`; every time comes from the `nowMs` argument (the
 * application's clock), never from the database's `now()`.
 *
 * The schema must be migrated first (`migrate` in `src/store/migrate.ts`).
 */
export class SqlTaskStore implements TaskStore {
  /**
   * @param db the durable connection: submissions, cancels, reads
   * @param leases where claims, heartbeats and results are written; may commit
   *   asynchronously (see `PostgresDbOptions.asynchronousCommit`). @default db
   * @param listings where listings run: a pool of their own with a statement timeout, so a
   *   slow listing neither waits behind submissions nor holds their connections. @default db
   */
  constructor(
    private readonly db: Db,
    private readonly leases: Db = db,
    private readonly listings: Db = db,
    /** The priority lane (src/store/priority-lane.ts): one-task submits, which a request waits on. */
    private readonly lane: Db = db,
  ) {
    this.firstPages = new WriteBatcher((requests) => pendingFirstPages(this.db, requests));
    this.running = new WriteBatcher((requests) => runningInPartitionsMany(this.db, requests));
  }

  /** Running tasks asked for in one event-loop turn (wheel partitions activating together): one statement. */
  private readonly running: WriteBatcher<
    readonly number[],
    { taskId: string; version: number; leaseExpiresMs: number }[]
  >;

  /** First pages asked for in one event-loop turn (wheel partitions activating together): one statement. */
  private readonly firstPages: WriteBatcher<FirstPageRequest, DueEntry[]>;

  submit(tasks: NewTask[], nowMs: number): Promise<SubmitResult[]> {
    return submitTasks(tasks.length === 1 ? this.lane : this.db, tasks, nowMs);
  }

  spawnChildren(parentId: string, tokenDigest: Buffer, children: NewTask[], nowMs: number): Promise<SpawnResult> {
    return spawnChildren(this.db, parentId, tokenDigest, children, nowMs);
  }

  listChildren(parentId: string, filter: ChildrenFilter, nowMs: number): Promise<ChildPage> {
    return listChildren(this.listings, parentId, filter, nowMs);
  }

  purgeExpiredIdempotencyKeys(nowMs: number, limit: number): Promise<number> {
    return purgeExpiredIdempotencyKeys(this.db, nowMs, limit);
  }

  removeFinished(batch: RemoveFinished): Promise<FinishedBatch> {
    return removeFinished(this.db, batch);
  }

  partitionsPastHorizon(partitions: readonly number[], horizonMs: number): Promise<number[]> {
    return partitionsPastHorizon(this.db, partitions, horizonMs);
  }

  recordRetentionHorizon(horizonMs: number, retentionMs: number): Promise<void> {
    return recordRetentionHorizon(this.db, horizonMs, retentionMs);
  }

  retentionHorizon(): Promise<AppliedRetention | null> {
    return retentionHorizon(this.db);
  }

  get(id: string): Promise<TaskRecord | null> {
    return getTask(this.db, id);
  }

  list(filter: ListFilter, nowMs: number): Promise<TaskListPage> {
    return listTasks(this.listings, filter, nowMs);
  }

  claim(ids: string[], workerId: string, nowMs: number, grants?: readonly LimitGrantRow[]): Promise<ClaimedTask[]> {
    return claimTasks(this.leases, ids, workerId, nowMs, grants);
  }

  claimForWorkers(
    ids: readonly string[],
    workerIds: readonly string[],
    nowMs: number,
    grants?: readonly LimitGrantRow[],
  ): Promise<ClaimedTask[]> {
    return claimTasks(this.leases, ids, workerIds, nowMs, grants);
  }

  heartbeat(
    taskId: string,
    tokenDigest: Uint8Array,
    nowMs: number,
    extendSeconds?: number,
  ): Promise<ExtendedLease | null> {
    const lease = extendSeconds === undefined ? { taskId, tokenDigest } : { taskId, tokenDigest, extendSeconds };
    return heartbeatTasks(this.leases, [lease], nowMs).then(([extended]) => extended ?? null);
  }

  heartbeats(leases: readonly LeaseHeartbeat[], nowMs: number): Promise<(ExtendedLease | null)[]> {
    return heartbeatTasks(this.leases, leases, nowMs);
  }

  runningLease(taskId: string): Promise<RunningLease | null> {
    return runningLease(this.db, taskId);
  }

  complete(results: Completion[], nowMs: number, backoff: BackoffPolicy): Promise<Transition[]> {
    return completeTasks(this.leases, results, nowMs, backoff);
  }

  waitForChildren(wait: ChildWait, nowMs: number): Promise<Transition | null> {
    return waitForChildren(this.db, wait, nowMs);
  }

  progress(updates: readonly ProgressUpdate[], nowMs: number): Promise<Set<string>> {
    return recordProgress(this.leases, updates, nowMs);
  }

  expireUnstarted(partitions: readonly number[], nowMs: number, limit: number): Promise<Transition[]> {
    return expireUnstarted(this.db, partitions, nowMs, limit);
  }

  expireLease(taskId: string, version: number, nowMs: number, backoff: BackoffPolicy): Promise<Transition | null> {
    return expireLease(this.leases, taskId, version, nowMs, backoff);
  }

  cancel(taskId: string, nowMs: number, reason?: string): Promise<CancelResult> {
    return cancelTask(this.db, taskId, nowMs, reason);
  }

  cancelChildren(parentIds: readonly string[], nowMs: number): Promise<TaskRecord[]> {
    return cancelChildren(this.db, parentIds, nowMs);
  }

  retry(taskId: string, nowMs: number): Promise<RetryResult> {
    return retryTask(this.db, taskId, nowMs);
  }

  history(taskId: string, limit: number, beforeAttempt?: number): Promise<ExecutionRecord[]> {
    return taskHistory(this.db, taskId, limit, beforeAttempt);
  }

  pendingInPartition(
    partition: number,
    after: PartitionCursor | null,
    toMs: number,
    limit: number,
  ): Promise<DueEntry[]> {
    if (after === null) return this.firstPages.submit({ partition, toMs, limit });
    return pendingInPartition(this.db, partition, after, toMs, limit);
  }

  pendingInPartitions(
    partitions: readonly number[],
    toMs: number,
    limit: number,
    after?: ReadonlyMap<number, PartitionCursor>,
  ): Promise<Map<number, DueEntry[]>> {
    return pendingInPartitions(this.db, partitions, toMs, limit, after);
  }

  runningInPartitions(
    partitions: readonly number[],
  ): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]> {
    // One partition at a time is what an activating wheel partition asks: merged with the others.
    if (partitions.length === 1) return this.running.submit(partitions);
    return runningInPartitions(this.db, partitions);
  }

  expiredLeases(
    partitions: readonly number[],
    beforeMs: number,
    limit: number,
  ): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]> {
    return expiredLeases(this.db, partitions, beforeMs, limit);
  }

  pendingDueTimes(ids: readonly string[]): Promise<Map<string, number>> {
    return pendingDueTimes(this.db, ids);
  }

  release(claims: readonly { taskId: string; version: number }[], nowMs: number): Promise<DueEntry[]> {
    return releaseTasks(this.leases, claims, nowMs);
  }
}
