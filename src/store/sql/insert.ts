import { cronScheduleJson } from './cron-json.js';
import type { DbTx } from '../db.js';
import type { NewTask, TaskRecord } from '../../domain/model.js';
import { tsParam, wholeMs } from './columns.js';

/**
 * Inserts tasks in one statement: each column travels as one array parameter and
 * `unnest` zips them back into rows, so the statement text (and its prepared plan) is the
 * same for 1 or 1 000 tasks. JSON travels as text[] and is cast per row, which both
 * drivers pass through untouched. Nothing is returned: the caller knows every value.
 * A cron schedule's wake is its submission time: its actor must create its first instance
 * (000009_cron_wake). Schedules have no dependencies, so the graph statement has no wake.
 * A task's limits travel as one text per task, the names joined by a space (a limit name has
 * none): unnest cannot zip an array of arrays, and NULL stays NULL through `string_to_array`.
 * A child of a running task (src/store/sql/children.ts) carries its parent and key in the last
 * two arrays before its `traceparent` (migrations/000022); every other task, NULLs there.
 */
const INSERT_TASKS = `
  INSERT INTO tasks (id, task_type, payload, status, schedule_type, schedule, due_time, priority,
                     max_retries, timeout_seconds, partition, idempotency_key, created_at, updated_at,
                     max_timeout_seconds, start_deadline_seconds, wake_time, limits, parent_id, child_key,
                     traceparent)
  SELECT u.id, u.task_type, u.payload::jsonb, u.status, u.schedule_type, u.schedule::jsonb,
         to_timestamp(u.due_ms / 1000), u.priority, u.max_retries, u.timeout_seconds, u.partition,
         u.idempotency_key, ${tsParam(13)}, ${tsParam(13)}, u.max_timeout_seconds, u.start_deadline_seconds,
         CASE WHEN u.schedule_type = 'cron' THEN ${tsParam(13)} END, string_to_array(u.limits, ' '),
         u.parent_id, u.child_key, u.traceparent
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
              $8::int2[], $9::int4[], $10::int4[], $11::int2[], $12::text[], $14::int4[], $15::int4[],
              $16::text[], $17::uuid[], $18::text[], $19::text[])
       AS u(id, task_type, payload, status, schedule_type, schedule, due_ms, priority, max_retries,
            timeout_seconds, partition, idempotency_key, max_timeout_seconds, start_deadline_seconds, limits,
            parent_id, child_key, traceparent)`;

/**
 * The same for tasks with dependencies or in a graph, with their edges, in one statement
 * (one round trip, its own transaction when the caller has none): the columns of 000003_dags
 * as six more arrays, the edges as three. A statement of its own, so that the plain
 * submission (the benchmark path) does not carry nine arrays of nulls.
 */
const INSERT_GRAPH_TASKS = `
  WITH inserted AS (
  INSERT INTO tasks (id, task_type, payload, status, schedule_type, schedule, due_time, priority,
                     max_retries, timeout_seconds, partition, idempotency_key, created_at, updated_at,
                     max_timeout_seconds, start_deadline_seconds,
                     dag_id, dag_ref, deps_total, deps_satisfied, has_dependents, last_error, completed_at,
                     limits, traceparent)
  SELECT u.id, u.task_type, u.payload::jsonb, u.status, u.schedule_type, u.schedule::jsonb,
         to_timestamp(u.due_ms / 1000), u.priority, u.max_retries, u.timeout_seconds, u.partition,
         u.idempotency_key, ${tsParam(13)}, ${tsParam(13)}, u.max_timeout_seconds, u.start_deadline_seconds,
         u.dag_id, u.dag_ref, u.deps_total, u.deps_satisfied, u.has_dependents, u.last_error,
         CASE WHEN u.status = 'cancelled' THEN ${tsParam(13)} END, string_to_array(u.limits, ' '),
         u.traceparent
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
              $8::int2[], $9::int4[], $10::int4[], $11::int2[], $12::text[], $14::int4[], $15::int4[],
              $16::text[], $17::uuid[], $18::text[], $19::int4[], $20::int4[], $21::bool[], $22::text[],
              $26::text[])
       AS u(id, task_type, payload, status, schedule_type, schedule, due_ms, priority, max_retries,
            timeout_seconds, partition, idempotency_key, max_timeout_seconds, start_deadline_seconds, limits,
            dag_id, dag_ref, deps_total, deps_satisfied, has_dependents, last_error, traceparent)
  ),
  edges AS (
    INSERT INTO task_dependencies (task_id, predecessor_id, satisfied)
    SELECT * FROM unnest($23::uuid[], $24::uuid[], $25::bool[])
  )
  SELECT 1`;

/** Edges of a graph being inserted, as three parallel arrays. */
export interface GraphEdges {
  taskIds: string[];
  predecessorIds: string[];
  satisfied: boolean[];
}

/** What the store decided for a task with dependencies (see `sql/dag.ts`). */
export interface GraphColumns {
  status: TaskRecord['status'];
  depsTotal: number;
  depsSatisfied: number;
  hasDependents: boolean;
  lastError: string | null;
}

/** A task's payload as the JSON text a statement sends: validation's when it wrote it, else written here. */
export function payloadText(t: NewTask): string {
  return t.payloadJson ?? JSON.stringify(t.payload ?? null);
}

export async function insertTasks(
  db: DbTx,
  tasks: NewTask[],
  nowMs: number,
  graph?: { columns: readonly GraphColumns[]; edges: GraphEdges },
): Promise<TaskRecord[]> {
  const n = tasks.length;
  const ids = new Array<string>(n);
  const types = new Array<string>(n);
  const payloads = new Array<string>(n);
  const statuses = new Array<string>(n);
  const scheduleTypes = new Array<string>(n);
  const schedules = new Array<string | null>(n);
  const dues = new Array<number>(n);
  const priorities = new Array<number>(n);
  const maxRetries = new Array<number>(n);
  const timeouts = new Array<number>(n);
  const maxTimeouts = new Array<number | null>(n);
  const startDeadlines = new Array<number | null>(n);
  const partitions = new Array<number>(n);
  const keys = new Array<string | null>(n);
  const limits = new Array<string | null>(n);
  const records = new Array<TaskRecord>(n);
  const createdMs = wholeMs(nowMs);
  for (let i = 0; i < n; i++) {
    const t = tasks[i]!;
    const dueMs = wholeMs(t.dueMs);
    const g = graph?.columns[i];
    ids[i] = t.id;
    types[i] = t.taskType;
    payloads[i] = payloadText(t);
    statuses[i] = g?.status ?? t.status;
    scheduleTypes[i] = t.scheduleType;
    schedules[i] = t.schedule === null ? null : JSON.stringify(cronScheduleJson(t.schedule));
    dues[i] = dueMs;
    priorities[i] = t.priority;
    maxRetries[i] = t.maxRetries;
    timeouts[i] = t.timeoutSeconds;
    maxTimeouts[i] = t.maxTimeoutSeconds ?? null;
    startDeadlines[i] = t.startDeadlineSeconds ?? null;
    partitions[i] = t.partition;
    keys[i] = t.idempotencyKey;
    limits[i] = t.limits && t.limits.length > 0 ? t.limits.join(' ') : null;
    records[i] = newRecord(t, dueMs, createdMs, g);
  }
  const params: unknown[] = [
    ids,
    types,
    payloads,
    statuses,
    scheduleTypes,
    schedules,
    dues,
    priorities,
    maxRetries,
    timeouts,
    partitions,
    keys,
    nowMs,
    maxTimeouts,
    startDeadlines,
    limits,
  ];
  if (graph === undefined) {
    params.push(
      tasks.map((t) => t.parentId ?? null),
      tasks.map((t) => t.childKey ?? null),
      tasks.map((t) => t.traceparent ?? null),
    );
    await db.query(INSERT_TASKS, params, 'wh_insert_tasks');
  } else {
    const { columns, edges } = graph;
    params.push(
      tasks.map((t) => t.dagId ?? null),
      tasks.map((t) => t.dagRef ?? null),
      columns.map((g) => g.depsTotal),
      columns.map((g) => g.depsSatisfied),
      columns.map((g) => g.hasDependents),
      columns.map((g) => g.lastError),
      edges.taskIds,
      edges.predecessorIds,
      edges.satisfied,
      tasks.map((t) => t.traceparent ?? null),
    );
    await db.query(INSERT_GRAPH_TASKS, params, 'wh_insert_graph_tasks');
  }
  return records;
}

/**
 * The record of a task just inserted, as `get` would read it back (payload and schedule are
 * the caller's values; the stored ones are their JSON round trip).
 */
function newRecord(t: NewTask, dueMs: number, nowMs: number, g: GraphColumns | undefined): TaskRecord {
  return {
    id: t.id.toLowerCase(),
    taskType: t.taskType,
    payload: t.payload ?? null,
    status: g?.status ?? t.status,
    version: 0,
    scheduleType: t.scheduleType,
    schedule: t.schedule === null ? null : { definition: t.schedule, generation: 0 },
    dueMs,
    priority: t.priority,
    maxRetries: t.maxRetries,
    timeoutSeconds: t.timeoutSeconds,
    maxTimeoutSeconds: t.maxTimeoutSeconds ?? null,
    startDeadlineSeconds: t.startDeadlineSeconds ?? null,
    // As the trigger of 000011_deadlines writes it.
    startByMs: t.startDeadlineSeconds == null ? null : dueMs + t.startDeadlineSeconds * 1000,
    attempts: 0,
    leaseExpiresMs: null,
    deadlineMs: null,
    workerId: null,
    cancelRequested: false,
    partition: t.partition,
    idempotencyKey: t.idempotencyKey,
    createdMs: nowMs,
    updatedMs: nowMs,
    startedMs: null,
    completedMs: g?.status === 'cancelled' ? nowMs : null,
    lastError: g?.lastError ?? null,
    scheduleId: null,
    fireMs: null,
    lastFiredMs: null,
    dagId: t.dagId ?? null,
    dagRef: t.dagRef ?? null,
    depsTotal: g?.depsTotal ?? 0,
    depsSatisfied: g?.depsSatisfied ?? 0,
    hasDependents: g?.hasDependents ?? false,
    result: null,
    progress: null,
    progressMs: null,
    limits: t.limits ? [...t.limits] : [],
    parentId: t.parentId ?? null,
    childKey: t.childKey ?? null,
    traceparent: t.traceparent ?? null,
  };
}
