import { isUuid, nameUuid } from '../../lib/ids.js';
import type { Db } from '../db.js';
import type { DueEntry, ExecutionRecord, TaskRecord } from '../../domain/model.js';
import type { PartitionCursor } from '../types.js';
import { byPart, partitionPages, type FirstPageRequest } from './partition-pages.js';
import {
  dueColumns,
  msOf,
  statusIn,
  statusIs,
  taskColumns,
  toDueEntry,
  toTaskRecord,
  validIds,
  type DueRow,
  type TaskRow,
} from './columns.js';

/**
 * Reading tasks: one task, listings, execution history, and the partition scans used to
 * rebuild the wheel and recover leases after a restart.
 */

const GET = `SELECT ${taskColumns('t')} FROM tasks t WHERE t.id = $1`;

/** See `TaskStore.get`. */
export async function getTask(db: Db, id: string): Promise<TaskRecord | null> {
  if (!isUuid(id)) return null;
  const { rows } = await db.query<TaskRow>(GET, [id], 'wh_read_task');
  const row = rows[0];
  return row === undefined ? null : toTaskRecord(row);
}

/** The largest `limit` a history page honours. */
const MAX_LIST = 1000;

/**
 * Executions newest first. The running attempt has no row yet, and the attempt that ended
 * the task has none either (completion writes rows only for attempts the task outlives), so
 * both are made up from the task row; so is the result, which only a succeeded attempt has
 * and a succeeded attempt always ends the task (execution rows hold none). An expired task
 * shows the attempt that never started (attempts + 1, `expired`, no start). Execution ids are
 * not stored; each is derived from (task id, attempt) below, the same for the running attempt
 * and for its row once written. `$2` is the exclusive upper bound on the attempt, for paging.
 */
export const HISTORY = `
  SELECT h.* FROM (
    SELECT t.id AS task_id, t.attempts AS attempt, 'running' AS status,
           ${msOf('t.due_time')} AS due_ms, ${msOf('t.started_at')} AS started_ms,
           NULL::float8 AS completed_ms, t.worker_id, NULL::text AS error, NULL::jsonb AS result
    FROM tasks t
    WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')}
    UNION ALL
    SELECT t.id, t.attempts,
           CASE t.status WHEN 'succeeded' THEN 'succeeded' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
           ${msOf('t.due_time')}, ${msOf('t.started_at')}, ${msOf('t.completed_at')}, t.worker_id,
           CASE WHEN t.status = 'succeeded' THEN NULL ELSE t.last_error END,
           CASE WHEN t.status = 'succeeded' THEN t.result END
    FROM tasks t
    WHERE t.id = ANY($1::uuid[]) AND ${statusIn('t', ['succeeded', 'failed', 'cancelled'])} AND t.attempts > 0
      AND t.started_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM executions x WHERE x.task_id = t.id AND x.attempt = t.attempts)
    UNION ALL
    SELECT t.id, t.attempts + 1, 'expired', ${msOf('t.due_time')}, NULL::float8, ${msOf('t.completed_at')},
           NULL::text, t.last_error, NULL::jsonb
    FROM tasks t
    WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'expired')}
    UNION ALL
    SELECT e.task_id, e.attempt, e.status,
           ${msOf('e.due_time')}, ${msOf('e.started_at')}, ${msOf('e.completed_at')}, e.worker_id, e.error, NULL::jsonb
    FROM executions e
    WHERE e.task_id = ANY($1::uuid[]) AND e.attempt < $2
  ) h
  WHERE h.attempt < $2
  ORDER BY h.task_id DESC, h.attempt DESC
  LIMIT $3`;

interface HistoryRow {
  task_id: string;
  attempt: number;
  status: ExecutionRecord['status'];
  due_ms: number;
  started_ms: number | null;
  completed_ms: number | null;
  worker_id: string | null;
  error: string | null;
  result: unknown;
}

/** Attempts are below this (max_retries ≤ 100): "before the first page". */
export const MAX_ATTEMPT = 2_147_483_647;

/** See `TaskStore.history`. */
export async function taskHistory(
  db: Db,
  taskId: string,
  limit: number,
  beforeAttempt?: number,
): Promise<ExecutionRecord[]> {
  const max = Math.max(0, Math.min(MAX_LIST, Math.floor(limit)));
  if (!isUuid(taskId) || max === 0) return [];
  // An attempt is a Postgres integer: a bound past it would fail the statement, and means "all".
  const before = beforeAttempt === undefined ? MAX_ATTEMPT : Math.min(MAX_ATTEMPT, Math.floor(beforeAttempt));
  if (!(before >= 0)) return [];
  return historyOf(db, [taskId], before, max);
}

/**
 * Executions of several tasks (a cron schedule's instances), newest task first, each task's
 * attempts newest first; attempts below `beforeAttempt`, at most `limit`.
 */
export async function historyOf(
  db: Db,
  taskIds: string[],
  beforeAttempt: number,
  limit: number,
): Promise<ExecutionRecord[]> {
  const { rows } = await db.query<HistoryRow>(HISTORY, [taskIds, beforeAttempt, limit], 'wh_history');
  return rows.map((r) => ({
    executionId: nameUuid(`${r.task_id}:${r.attempt}`),
    taskId: r.task_id,
    attempt: r.attempt,
    status: r.status,
    dueMs: r.due_ms,
    startedMs: r.started_ms,
    completedMs: r.completed_ms,
    workerId: r.worker_id,
    error: r.error,
    result: r.result,
  }));
}

/** A partition's pending tasks due before `to`: the partial index (partition, due_time, id) WHERE status = 'pending'. */
const PENDING_PAGES = partitionPages({
  name: 'wh_pending_in_partition',
  columns: dueColumns('t'),
  where: "t.status = 'pending'",
  time: 't.due_time',
});

/** See `TaskStore.pendingInPartition`. */
export async function pendingInPartition(
  db: Db,
  partition: number,
  after: PartitionCursor | null,
  toMs: number,
  limit: number,
): Promise<DueEntry[]> {
  return (await PENDING_PAGES.read<DueRow>(db, partition, after, toMs, limit)).map(toDueEntry);
}

/** First pages of several partitions' pending tasks in one statement; answers in the requests' order (see `PartitionPages.readFirst`). */
export async function pendingFirstPages(db: Db, requests: readonly FirstPageRequest[]): Promise<DueEntry[][]> {
  const pages = await PENDING_PAGES.readFirst<DueRow>(db, requests);
  return pages.map((rows) => rows.map(toDueEntry));
}

/** See `TaskStore.pendingInPartitions`. */
export async function pendingInPartitions(
  db: Db,
  partitions: readonly number[],
  toMs: number,
  limit: number,
  after?: ReadonlyMap<number, PartitionCursor>,
): Promise<Map<number, DueEntry[]>> {
  return byPart(await PENDING_PAGES.readAcross<DueRow>(db, partitions, toMs, limit, after), toDueEntry);
}

/** A partition's running tasks: the partial index (partition) WHERE status = 'running'. */
const RUNNING_IN_PARTITION = `
  SELECT t.id, t.version, ${msOf('t.lease_expires_at')} AS lease_expires_ms
  FROM tasks t
  WHERE t.partition = ANY($1::int[]) AND t.status = 'running'`;

/** See `TaskStore.runningInPartitions`. */
export async function runningInPartitions(
  db: Db,
  partitions: readonly number[],
): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]> {
  if (partitions.length === 0) return [];
  const { rows } = await db.query<{ id: string; version: number; lease_expires_ms: number }>(
    RUNNING_IN_PARTITION,
    [partitions],
    'wh_running_in_partitions',
  );
  return rows.map((r) => ({ taskId: r.id, version: r.version, leaseExpiresMs: r.lease_expires_ms }));
}

/** `RUNNING_IN_PARTITION` with each row's partition, to answer several askers at once. */
const RUNNING_IN_PARTITIONS_BY_PART = `
  SELECT t.partition AS part, t.id, t.version, ${msOf('t.lease_expires_at')} AS lease_expires_ms
  FROM tasks t
  WHERE t.partition = ANY($1::int[]) AND t.status = 'running'`;

/**
 * Several `runningInPartitions` asked together (each wheel partition as it activates, 64 at a
 * node's start) in one statement; answers in the requests' order.
 */
export async function runningInPartitionsMany(
  db: Db,
  requests: readonly (readonly number[])[],
): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[][]> {
  const partitions = [...new Set(requests.flat())];
  if (partitions.length === 0) return requests.map(() => []);
  const { rows } = await db.query<{ part: number; id: string; version: number; lease_expires_ms: number }>(
    RUNNING_IN_PARTITIONS_BY_PART,
    [partitions],
    'wh_running_in_partitions_by_part',
  );
  const byPartition = byPart(rows, (r) => ({ taskId: r.id, version: r.version, leaseExpiresMs: r.lease_expires_ms }));
  return requests.map((asked) => asked.flatMap((p) => byPartition.get(p) ?? []));
}

/** The pending tasks among some ids, with their due times: the primary key. */
const PENDING_DUE = `
  SELECT t.id, ${msOf('t.due_time')} AS due_ms
  FROM tasks t
  WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'pending')}`;

/** See `TaskStore.pendingDueTimes`. */
export async function pendingDueTimes(db: Db, ids: readonly string[]): Promise<Map<string, number>> {
  const wanted = validIds(ids);
  if (wanted.length === 0) return new Map();
  const { rows } = await db.query<{ id: string; due_ms: number }>(PENDING_DUE, [wanted], 'wh_pending_due');
  return new Map(rows.map((r) => [r.id, r.due_ms]));
}
