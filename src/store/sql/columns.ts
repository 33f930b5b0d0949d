import { cronScheduleOf } from './cron-json.js';
import { isUuid } from '../../lib/ids.js';
import { tracingOn } from '../../lib/otel.js';
import type { DueEntry, ScheduleType, StoredStatus, TaskRecord } from '../../domain/model.js';

/**
 * SQL fragments and row mappings shared by the task-store statements.
 *
 * Times cross the driver boundary as Unix milliseconds in `float8`, never as `Date`:
 * parameters become timestamptz with {@link tsParam}, columns come back with {@link msOf}.
 * Every time the store writes is a whole millisecond, so the round trip is exact.
 */

/** SQL: parameter `$n` (Unix ms) as a timestamptz, rounded to the whole millisecond. */
export function tsParam(n: number): string {
  return `to_timestamp(round($${n}::float8) / 1000)`;
}

/**
 * SQL: a timestamptz expression as Unix ms. `date_part` answers float8 seconds (cheaper than
 * `extract`, which answers numeric); rounding removes the binary-fraction noise.
 */
export function msOf(expression: string): string {
  return `round(date_part('epoch', ${expression}) * 1000)`;
}

/** Milliseconds as stored: whole, so that what is written reads back equal. */
export function wholeMs(ms: number): number {
  return Math.round(ms);
}

/**
 * SQL: `<task alias>.status = '<status>'`, written so that the planner finds the rows
 * through the primary key only. Hot compare-and-set statements (claim, complete, expire)
 * test the status this way.
 *
 * Why: status skews hard and moves fast. At a midnight spike 300 K rows turn `pending` and
 * due within a second, long before autovacuum's next ANALYZE. With statistics saying
 * "hardly any pending rows", the planner answers `id = ANY($ids) AND status = 'pending'` by
 * walking the pending partial index (or the (status, id) index) and filtering on id:
 * measured on Postgres 15, a 500-id claim then read 300 K rows and took 460 ms instead of
 * 10 ms. With `COLLATE "C"` the test matches neither the partial-index predicates nor the
 * (status, id) index (both use the database collation), so the only index left is the
 * primary key on the given ids, however stale the statistics. For equality "C" and any
 * deterministic collation agree, so the test means the same.
 */
export function statusIs(alias: string, status: StoredStatus): string {
  return `${alias}.status = '${status}' COLLATE "C"`;
}

/**
 * SQL: `<task alias>.status IN (…)`, fenced as {@link statusIs} is, for the statements that
 * act on tasks named by id. Unfenced, the test matched `tasks_ended_idx`'s predicate (failed,
 * cancelled, expired): on a table never analysed, a bulk retry's page of 20 ids walked that
 * whole index for them, 45–60 ms on PGlite with 100 000 failed tasks instead of ~3 (issue 30).
 */
export function statusIn(alias: string, statuses: readonly StoredStatus[]): string {
  return `${alias}.status COLLATE "C" IN (${statuses.map((status) => `'${status}'`).join(', ')})`;
}

/**
 * SQL: the SET items of an UPDATE of task `t` that moves its due time to `due`: `due_time`,
 * and `start_by` with it — the due time plus the start deadline, NULL without one
 * (migrations/000011_deadlines.sql). Every statement that moves a due time sets both: a row
 * trigger did, but Postgres locks each row a BEFORE UPDATE trigger may see, whatever its column
 * list and WHEN clause, so every update of every task — claims, results, heartbeats — wrote a
 * lock record of its own (migrations/000025_start_by_without_trigger.sql). `due` appears twice,
 * so it must give the same value both times: nothing volatile (a retry's jitter comes from a
 * column the statement computed once).
 */
export function dueTimeSet(due: string): string {
  return `due_time = ${due},
        start_by = (${due}) + t.start_deadline_seconds * interval '1 second'`;
}

/** The 24 h window of an idempotency key. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** Every column of a task as {@link TaskRow}, for `SELECT … FROM tasks t` and `RETURNING`. */
export function taskColumns(t = 't'): string {
  return `${t}.id, ${t}.task_type, ${t}.payload, ${t}.status, ${t}.version, ${t}.schedule_type,
    ${t}.schedule, ${msOf(`${t}.due_time`)} AS due_ms, ${t}.priority, ${t}.max_retries,
    ${t}.timeout_seconds, ${t}.attempts, ${msOf(`${t}.lease_expires_at`)} AS lease_expires_ms,
    ${t}.worker_id, ${t}.cancel_requested, ${t}.partition, ${t}.idempotency_key,
    ${msOf(`${t}.created_at`)} AS created_ms, ${msOf(`${t}.updated_at`)} AS updated_ms,
    ${msOf(`${t}.started_at`)} AS started_ms, ${msOf(`${t}.completed_at`)} AS completed_ms,
    ${t}.last_error, ${t}.schedule_id, ${msOf(`${t}.fire_time`)} AS fire_ms,
    ${msOf(`${t}.last_fired_at`)} AS last_fired_ms, ${t}.dag_id, ${t}.dag_ref, ${t}.deps_total,
    ${t}.deps_satisfied, ${t}.has_dependents, ${t}.result, ${t}.progress,
    ${msOf(`${t}.progress_at`)} AS progress_ms, ${t}.max_timeout_seconds, ${t}.start_deadline_seconds,
    ${msOf(`${t}.start_by`)} AS start_by_ms, ${msOf(`${t}.deadline_at`)} AS deadline_ms, ${t}.limits,
    ${t}.debounce_key, ${t}.parent_id, ${t}.child_key, ${t}.traceparent`;
}

/** A task row as {@link taskColumns} selects it. */
export interface TaskRow {
  id: string;
  task_type: string;
  payload: unknown;
  status: StoredStatus;
  version: number;
  schedule_type: ScheduleType;
  schedule: Record<string, unknown> | null;
  due_ms: number;
  priority: number;
  max_retries: number;
  timeout_seconds: number;
  attempts: number;
  lease_expires_ms: number | null;
  worker_id: string | null;
  cancel_requested: boolean;
  partition: number;
  idempotency_key: string | null;
  created_ms: number;
  updated_ms: number;
  started_ms: number | null;
  completed_ms: number | null;
  last_error: string | null;
  schedule_id: string | null;
  fire_ms: number | null;
  last_fired_ms: number | null;
  dag_id: string | null;
  dag_ref: string | null;
  deps_total: number;
  deps_satisfied: number;
  has_dependents: boolean;
  result: unknown;
  progress: unknown;
  progress_ms: number | null;
  max_timeout_seconds: number | null;
  start_deadline_seconds: number | null;
  start_by_ms: number | null;
  deadline_ms: number | null;
  /** NULL for a task that names no limit (almost all of them). */
  limits: string[] | null;
  debounce_key: string | null;
  parent_id: string | null;
  child_key: string | null;
  traceparent: string | null;
}

export function toTaskRecord(row: TaskRow): TaskRecord {
  const record: TaskRecord = {
    id: row.id,
    taskType: row.task_type,
    payload: row.payload,
    status: row.status,
    version: row.version,
    scheduleType: row.schedule_type,
    schedule: row.schedule === null ? null : cronScheduleOf(row.schedule),
    dueMs: row.due_ms,
    priority: row.priority,
    maxRetries: row.max_retries,
    timeoutSeconds: row.timeout_seconds,
    maxTimeoutSeconds: row.max_timeout_seconds,
    startDeadlineSeconds: row.start_deadline_seconds,
    startByMs: row.start_by_ms,
    attempts: row.attempts,
    leaseExpiresMs: row.lease_expires_ms,
    deadlineMs: row.deadline_ms,
    workerId: row.worker_id,
    cancelRequested: row.cancel_requested,
    partition: row.partition,
    idempotencyKey: row.idempotency_key,
    createdMs: row.created_ms,
    updatedMs: row.updated_ms,
    startedMs: row.started_ms,
    completedMs: row.completed_ms,
    lastError: row.last_error,
    scheduleId: row.schedule_id,
    fireMs: row.fire_ms,
    lastFiredMs: row.last_fired_ms,
    dagId: row.dag_id,
    dagRef: row.dag_ref,
    depsTotal: row.deps_total,
    depsSatisfied: row.deps_satisfied,
    hasDependents: row.has_dependents,
    result: row.result,
    progress: row.progress,
    progressMs: row.progress_ms,
    ...(row.debounce_key === null || row.debounce_key === undefined ? {} : { debounceKey: row.debounce_key }),
    limits: row.limits ?? [],
    parentId: row.parent_id ?? null,
    childKey: row.child_key ?? null,
    traceparent: row.traceparent ?? null,
  };
  return record;
}

/**
 * SQL: the columns of a due entry of the task row aliased `t` ({@link DueRow}). `limits` is
 * NULL for almost every task, so reading it costs nothing they would notice.
 */
export function dueColumns(t = 't'): string {
  return `${t}.id, ${t}.task_type, ${t}.priority, ${msOf(`${t}.due_time`)} AS due_ms, ${t}.limits, ${t}.traceparent`;
}

/** A due entry as selected by {@link dueColumns}. */
export interface DueRow {
  id: string;
  task_type: string;
  priority: number;
  due_ms: number;
  /** The task's limits (sorted, no repeats); NULL when it names none. */
  limits: string[] | null;
  /** The task's `traceparent`; NULL (nearly always) or not selected: none. */
  traceparent?: string | null;
}

/** The entry of a row; `limits` only when the task names some, as an entry without them has none. */
export function toDueEntry(row: DueRow): DueEntry {
  const entry: DueEntry = { taskId: row.id, taskType: row.task_type, priority: row.priority, dueMs: row.due_ms };
  if (row.limits !== null && row.limits.length > 0) entry.limits = row.limits;
  // Only a fire's span reads it: a node that does not trace keeps entries as they were.
  if (row.traceparent != null && tracingOn()) entry.traceparent = row.traceparent;
  return entry;
}

/** Ids as Postgres will accept them: a malformed id names no task, so it is dropped, not an error. */
export function validIds(ids: readonly string[]): string[] {
  return [...new Set(ids.filter(isUuid).map((id) => id.toLowerCase()))];
}
