import { isUuid, nameUuid } from '../../ids.js';
import type { Db } from '../db.js';
import type { DueEntry, ExecutionRecord, ListFilter, TaskRecord } from '../types.js';
import { msOf, taskColumns, toDueEntry, toTaskRecord, tsParam, type DueRow, type TaskRow } from './columns.js';

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

/** The largest `limit` a listing honours. */
const MAX_LIST = 1000;

/**
 * Lists newest first: `ORDER BY id DESC` (UUID v7 ids sort by creation time), paging with
 * `id < beforeId`. Without a status filter this walks the primary key backwards; with one
 * it walks the (status, id) index. `ready` and `pending` are both stored `pending` and are
 * told apart by the due time. A task-type filter is applied to the rows walked (no index
 * of its own: each index write-amplifies the hot path).
 */
export async function listTasks(db: Db, filter: ListFilter, nowMs: number): Promise<TaskRecord[]> {
  const limit = Math.max(0, Math.min(MAX_LIST, Math.floor(filter.limit)));
  if (limit === 0) return [];
  const where: string[] = [];
  const params: unknown[] = [];
  const param = (value: unknown): number => params.push(value);
  if (filter.status === 'ready') {
    where.push(`t.status = 'pending' AND t.due_time <= ${tsParam(param(nowMs))}`);
  } else if (filter.status === 'pending') {
    where.push(`t.status = 'pending' AND t.due_time > ${tsParam(param(nowMs))}`);
  } else if (filter.status !== undefined) {
    where.push(`t.status = $${param(filter.status)}`);
  }
  if (filter.taskType !== undefined) where.push(`t.task_type = $${param(filter.taskType)}`);
  if (filter.beforeId !== undefined) {
    if (!isUuid(filter.beforeId)) return [];
    where.push(`t.id < $${param(filter.beforeId)}::uuid`);
  }
  const text = `SELECT ${taskColumns('t')} FROM tasks t
    ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
    ORDER BY t.id DESC LIMIT $${param(limit)}`;
  const { rows } = await db.query<TaskRow>(text, params);
  return rows.map(toTaskRecord);
}

/**
 * Executions newest first. The running attempt has no row yet, so it is made up from the
 * task. Execution ids are not stored; each is derived from (task id, attempt) below, the
 * same for the running attempt and for its row once written. `$2` is the exclusive upper
 * bound on the attempt, for paging.
 */
const HISTORY = `
  SELECT h.* FROM (
    SELECT t.id AS task_id, t.attempts AS attempt, 'running' AS status,
           ${msOf('t.due_time')} AS due_ms, ${msOf('t.started_at')} AS started_ms,
           NULL::float8 AS completed_ms, t.worker_id, NULL::text AS error
    FROM tasks t
    WHERE t.id = $1 AND t.status = 'running'
    UNION ALL
    SELECT e.task_id, e.attempt, e.status,
           ${msOf('e.due_time')}, ${msOf('e.started_at')}, ${msOf('e.completed_at')}, e.worker_id, e.error
    FROM executions e
    WHERE e.task_id = $1 AND e.attempt < $2
  ) h
  WHERE h.attempt < $2
  ORDER BY h.attempt DESC
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
}

/** See `TaskStore.history`. */
export async function taskHistory(
  db: Db,
  taskId: string,
  limit: number,
  beforeAttempt?: number,
): Promise<ExecutionRecord[]> {
  const max = Math.max(0, Math.min(MAX_LIST, Math.floor(limit)));
  if (!isUuid(taskId) || max === 0) return [];
  const before = beforeAttempt === undefined ? 2_147_483_647 : Math.floor(beforeAttempt);
  const { rows } = await db.query<HistoryRow>(HISTORY, [taskId, before, max], 'wh_history');
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
  }));
}

/**
 * A partition's pending tasks due in [from, to), in due order: a range scan of the partial
 * index (partition, due_time) WHERE status = 'pending', stopping after `limit` rows. Ties
 * in due time have no defined order, so a caller paging by due time should restart at the
 * last due time it saw (inclusive) and drop the ids it already has.
 */
const PENDING_IN_PARTITION = `
  SELECT t.id, t.task_type, t.priority, ${msOf('t.due_time')} AS due_ms
  FROM tasks t
  WHERE t.partition = $1 AND t.status = 'pending'
    AND t.due_time >= ${tsParam(2)} AND t.due_time < ${tsParam(3)}
  ORDER BY t.due_time
  LIMIT $4`;

/** See `TaskStore.pendingInPartition`. */
export async function pendingInPartition(
  db: Db,
  partition: number,
  fromMs: number,
  toMs: number,
  limit: number,
): Promise<DueEntry[]> {
  if (limit <= 0 || toMs <= fromMs) return [];
  const { rows } = await db.query<DueRow>(
    PENDING_IN_PARTITION,
    [partition, fromMs, toMs, Math.floor(limit)],
    'wh_pending_in_partition',
  );
  return rows.map(toDueEntry);
}

/** A partition's running tasks: the partial index (partition) WHERE status = 'running'. */
const RUNNING_IN_PARTITION = `
  SELECT t.id, t.version, ${msOf('t.lease_expires_at')} AS lease_expires_ms
  FROM tasks t
  WHERE t.partition = $1 AND t.status = 'running'`;

/** See `TaskStore.runningInPartition`. */
export async function runningInPartition(
  db: Db,
  partition: number,
): Promise<{ taskId: string; version: number; leaseExpiresMs: number }[]> {
  const { rows } = await db.query<{ id: string; version: number; lease_expires_ms: number }>(
    RUNNING_IN_PARTITION,
    [partition],
    'wh_running_in_partition',
  );
  return rows.map((r) => ({ taskId: r.id, version: r.version, leaseExpiresMs: r.lease_expires_ms }));
}
