import { isSpanContextValid, trace, TraceFlags } from '@opentelemetry/api';
import type {
  CancelResult,
  Dag,
  DagSubmitResult,
  DagTask,
  Execution,
  NewDag,
  NewDagTask,
  NewTask,
  Schedule,
  Submitted,
  Task,
  TaskStatus,
  ScheduleType,
} from './types.js';

/**
 * camelCase ↔ the wire's snake_case, field by field as API.md and the node's serializer
 * write them. Requests leave out what the caller left out, so the node's defaults apply;
 * answers keep the node's nulls.
 */

type Json = Record<string, unknown>;

/** Drops undefined members, so `JSON.stringify` and the node's unknown-field check see only what was set. */
function compact(o: Json): Json {
  for (const key of Object.keys(o)) if (o[key] === undefined) delete o[key];
  return o;
}

function time(value: string | Date | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

export function scheduleToWire(s: Schedule): Json {
  switch (s.type) {
    case 'immediate':
      return { type: 'immediate' };
    case 'delayed':
      return compact({ type: 'delayed', due_time: time(s.dueTime), delay_seconds: s.delaySeconds });
    case 'cron':
      return compact({
        type: 'cron',
        cron_expression: s.cronExpression,
        timezone: s.timezone,
        jitter_seconds: s.jitterSeconds,
        misfire_policy: s.misfirePolicy,
        overlap_policy: s.overlapPolicy,
        end_time: time(s.endTime),
      });
  }
}

export function taskToWire(t: NewTask): Json {
  return compact({
    task_type: t.taskType,
    payload: t.payload,
    schedule: t.schedule === undefined ? undefined : scheduleToWire(t.schedule),
    dependencies: t.dependencies,
    idempotency_key: t.idempotencyKey,
    priority: t.priority,
    max_retries: t.maxRetries,
    timeout_seconds: t.timeoutSeconds,
    max_timeout_seconds: t.maxTimeoutSeconds,
    start_deadline_seconds: t.startDeadlineSeconds,
    traceparent: t.traceparent ?? activeTraceparent(),
  });
}

/** The active span's context as a `traceparent`, when the application traces (a valid span is active). */
function activeTraceparent(): string | undefined {
  const span = trace.getActiveSpan();
  if (span === undefined) return undefined;
  const c = span.spanContext();
  if (!isSpanContextValid(c)) return undefined;
  return `00-${c.traceId}-${c.spanId}-${(c.traceFlags & TraceFlags.SAMPLED) === 0 ? '00' : '01'}`;
}

function dagTaskToWire(t: NewDagTask): Json {
  const { ref, dependsOn, ...task } = t;
  return compact({ ref, depends_on: dependsOn, ...taskToWire(task) });
}

export function dagToWire(d: NewDag): Json {
  return compact({ tasks: d.tasks.map(dagTaskToWire), idempotency_key: d.idempotencyKey });
}

/** What an answer body is read as: an object whose members are looked up by their wire names. */
function obj(value: unknown): Json {
  return typeof value === 'object' && value !== null ? (value as Json) : {};
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

function strs(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

export function submittedFromWire(body: unknown): Submitted {
  const o = obj(body);
  return { taskId: String(o.task_id), status: o.status as TaskStatus, dueTime: str(o.due_time) };
}

export function taskFromWire(body: unknown): Task {
  const o = obj(body);
  const task: Task = {
    taskId: String(o.task_id),
    taskType: String(o.task_type),
    status: o.status as TaskStatus,
    scheduleType: o.schedule_type as ScheduleType,
    dueTime: str(o.due_time),
    createdAt: str(o.created_at),
    startedAt: str(o.started_at),
    completedAt: str(o.completed_at),
    attempts: Number(o.attempts),
    maxRetries: Number(o.max_retries),
    priority: Number(o.priority),
    timeoutSeconds: Number(o.timeout_seconds),
    maxTimeoutSeconds: Number(o.max_timeout_seconds ?? o.timeout_seconds),
    startDeadlineSeconds: typeof o.start_deadline_seconds === 'number' ? o.start_deadline_seconds : null,
    startBy: str(o.start_by),
    deadlineAt: str(o.deadline_at),
    lastError: str(o.last_error),
    idempotencyKey: str(o.idempotency_key),
    cancelRequested: o.cancel_requested === true,
    dependencies: strs(o.dependencies),
    parentId: str(o.parent_id),
    childKey: str(o.child_key),
    traceparent: str(o.traceparent),
    payload: o.payload === undefined ? null : o.payload,
    result: o.result === undefined ? null : o.result,
    progress: o.progress === undefined ? null : o.progress,
    progressAt: str(o.progress_at),
  };
  // The optional members are copied only when the node sent them, as it sends them.
  const optional: [keyof Task, string][] = [
    ['dependenciesSatisfied', 'dependencies_satisfied'],
    ['dagId', 'dag_id'],
    ['ref', 'ref'],
    ['cronExpression', 'cron_expression'],
    ['timezone', 'timezone'],
    ['jitterSeconds', 'jitter_seconds'],
    ['misfirePolicy', 'misfire_policy'],
    ['overlapPolicy', 'overlap_policy'],
    ['endTime', 'end_time'],
    ['nextDueTime', 'next_due_time'],
    ['lastFiredAt', 'last_fired_at'],
    ['scheduleId', 'schedule_id'],
    ['fireTime', 'fire_time'],
  ];
  const out = task as unknown as Json;
  for (const [name, wire] of optional) if (o[wire] !== undefined) out[name] = o[wire];
  return task;
}

export function executionFromWire(body: unknown): Execution {
  const o = obj(body);
  return {
    executionId: String(o.execution_id),
    taskId: String(o.task_id),
    attempt: Number(o.attempt),
    status: o.status as Execution['status'],
    dueTime: str(o.due_time),
    startedAt: str(o.started_at),
    completedAt: str(o.completed_at),
    workerId: str(o.worker_id),
    error: str(o.error),
    result: o.result === undefined ? null : o.result,
  };
}

export function dagSubmitFromWire(body: unknown, created: boolean): DagSubmitResult {
  const o = obj(body);
  return {
    dagId: String(o.dag_id),
    created,
    tasks: list(o.tasks).map((t) => ({ ref: String(obj(t).ref), ...submittedFromWire(t) })),
  };
}

function dagTaskFromWire(body: unknown): DagTask {
  const o = obj(body);
  return {
    ref: String(o.ref),
    taskId: String(o.task_id),
    taskType: String(o.task_type),
    status: o.status as TaskStatus,
    dependsOn: strs(o.depends_on),
    dueTime: str(o.due_time),
    startedAt: str(o.started_at),
    completedAt: str(o.completed_at),
    attempts: Number(o.attempts),
    lastError: str(o.last_error),
  };
}

export function dagFromWire(body: unknown): Dag {
  const o = obj(body);
  return {
    dagId: String(o.dag_id),
    status: o.status as Dag['status'],
    counts: obj(o.counts),
    tasks: list(o.tasks).map(dagTaskFromWire),
  };
}

export function cancelFromWire(body: unknown): CancelResult {
  return { ok: true, cancelledInstances: Number(obj(body).cancelled_instances) };
}

/** A page's `next_token`: null on the last page (an empty string counts as none). */
export function nextTokenFromWire(body: unknown): string | null {
  const token = str(obj(body).next_token);
  return token === '' ? null : token;
}

export { list as itemsOf };
