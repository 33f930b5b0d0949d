import type { Static } from 'typebox';
import type { ExecutionRecord, SubmitResult, TaskInputs } from '../domain/model.js';
import type { Explanation } from '../services/explanation.js';
import type { Assignment, ChildRecord, DagView, TaskView } from '../services/types.js';
import type { Child, Spawned } from './schemas/children.js';
import type {
  AssignmentJson,
  DagJson,
  DagSubmittedJson,
  ExecutionJson,
  ExplanationJson,
  SubmittedJson,
  TaskJson,
} from './schemas/index.js';

/**
 * Domain records → the JSON shapes of the route schemas (src/http/schemas/), typed by them:
 * snake_case names, times as ISO-8601 UTC with milliseconds, `null` where a value is absent.
 */

/**
 * The last two instants written (`iso` is called a few times a task, and a batch's tasks share
 * their times: a claim's lease expiry and deadline alternate, a submit's due time repeats), so
 * that a repeat is not a `Date` and a string again. ~2.5 µs of the node's CPU a task in W1.
 */
const recentIso = { ms: [Number.NaN, Number.NaN], text: ['', ''], next: 0 };

/** Unix milliseconds → `2026-11-30T12:00:00.000Z`; null stays null. */
export function iso(ms: number | null | undefined): string | null {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return null;
  const r = recentIso;
  if (r.ms[0] === ms) return r.text[0] as string;
  if (r.ms[1] === ms) return r.text[1] as string;
  const text = new Date(ms).toISOString();
  r.ms[r.next] = ms;
  r.text[r.next] = text;
  r.next = 1 - r.next;
  return text;
}

/** `POST /api/tasks` (and each item of the batch): the stored status (`pending`, `blocked`, `active`). */
export function submitJson(result: SubmitResult): SubmittedJson {
  const t = result.task;
  const out: SubmittedJson = { task_id: t.id, status: t.status, due_time: iso(t.dueMs) };
  if (result.debounced !== undefined) out.debounced = result.debounced;
  return out;
}

/** A child as a spawn answers it (the route's and the channel's `spawned`). */
export function spawnedJson(result: SubmitResult): Static<typeof Spawned> {
  const t = result.task;
  return { task_id: t.id, status: t.status, due_time: iso(t.dueMs), child_key: t.childKey ?? null };
}

/** A child as its parent's listing shows it. */
export function childJson(c: ChildRecord): Static<typeof Child> {
  return {
    task_id: c.taskId,
    child_key: c.childKey,
    status: c.status,
    result: c.result ?? null,
    last_error: c.lastError,
  };
}

/** `GET /api/tasks/{task_id}` and the items of `GET /api/tasks`. */
export function taskJson(view: TaskView): TaskJson {
  const r = view.record;
  const out: TaskJson = {
    task_id: r.id,
    task_type: r.taskType,
    status: view.status,
    schedule_type: r.scheduleType,
    due_time: iso(r.dueMs),
    created_at: iso(r.createdMs),
    started_at: iso(r.startedMs),
    completed_at: iso(r.completedMs),
    attempts: r.attempts,
    max_retries: r.maxRetries,
    priority: r.priority,
    timeout_seconds: r.timeoutSeconds,
    max_timeout_seconds: r.maxTimeoutSeconds ?? r.timeoutSeconds,
    start_deadline_seconds: r.startDeadlineSeconds,
    start_by: r.status === 'pending' || r.status === 'blocked' ? iso(r.startByMs) : null,
    deadline_at: r.status === 'running' ? iso(r.deadlineMs) : null,
    last_error: r.lastError,
    idempotency_key: r.idempotencyKey,
    cancel_requested: r.cancelRequested,
    dependencies: view.dependencies,
    parent_id: r.parentId ?? null,
    child_key: r.childKey ?? null,
    traceparent: r.traceparent ?? null,
    limits: r.limits ? [...r.limits] : [],
    payload: r.payload === undefined ? null : r.payload,
    result: r.result ?? null,
    progress: r.progress ?? null,
    progress_at: iso(r.progressMs),
  };
  if (r.depsTotal > 0) out.dependencies_satisfied = r.depsSatisfied;
  if (r.debounceKey != null) out.debounce_key = r.debounceKey;
  if (r.dagId !== null) {
    out.dag_id = r.dagId;
    out.ref = r.dagRef;
  }
  if (r.scheduleType === 'cron') {
    const d = r.schedule?.definition;
    out.cron_expression = d?.cronExpression ?? null;
    out.timezone = d?.timezone ?? 'UTC';
    out.jitter_seconds = d?.jitterSeconds ?? null;
    out.misfire_policy = d?.misfirePolicy ?? null;
    out.overlap_policy = d?.overlapPolicy ?? null;
    out.end_time = d === undefined ? null : iso(d.endMs);
    out.next_due_time = r.status === 'active' ? iso(r.dueMs) : null;
    out.last_fired_at = iso(r.lastFiredMs);
  }
  if (r.scheduleId !== null) {
    out.schedule_id = r.scheduleId;
    out.fire_time = iso(r.fireMs);
  }
  return out;
}

/** One execution in `GET /api/tasks/{id}/history`. */
export function executionJson(e: ExecutionRecord): ExecutionJson {
  return {
    execution_id: e.executionId,
    task_id: e.taskId,
    attempt: e.attempt,
    status: e.status,
    due_time: iso(e.dueMs),
    started_at: iso(e.startedMs),
    completed_at: iso(e.completedMs),
    worker_id: e.workerId,
    error: e.error,
    result: e.result ?? null,
  };
}

/** One task handed to a worker by `POST /api/workers/poll`. */
export function assignmentJson(a: Assignment): AssignmentJson {
  const out: AssignmentJson = {
    task_id: a.id,
    task_type: a.taskType,
    payload: a.payload === undefined ? null : a.payload,
    attempt: a.attempt,
    lease_token: a.leaseToken,
    lease_expires_at: iso(a.leaseExpiresMs),
    deadline_at: iso(a.deadlineMs) as string,
    timeout_seconds: a.timeoutSeconds,
  };
  // Set only when present, without spreads (one object a task on the claim's hot path).
  if (a.children !== undefined) out.children = a.children;
  if (a.inputs !== undefined) Object.assign(out, inputsJson(a.inputs));
  if (a.traceparent !== undefined) out.traceparent = a.traceparent;
  return out;
}

/** A task's predecessors' results, as `inputs`, `inputs_omitted` and `inputs_more` (the last two only when set). */
function inputsJson(inputs: TaskInputs): Pick<AssignmentJson, 'inputs' | 'inputs_omitted' | 'inputs_more'> {
  return {
    inputs: inputs.values,
    ...(inputs.omitted === undefined ? {} : { inputs_omitted: inputs.omitted }),
    ...(inputs.more === undefined ? {} : { inputs_more: inputs.more }),
  };
}

/** `POST /api/dags`: the graph's id and its tasks in request order. */
export function dagSubmitJson(dag: DagView): DagSubmittedJson {
  return {
    dag_id: dag.dagId,
    tasks: dag.tasks.map((t) => ({
      ref: t.ref,
      task_id: t.record.id,
      status: t.record.status,
      due_time: iso(t.record.dueMs),
    })),
  };
}

/** `GET /api/dags/{dag_id}`: the graph, each task with its status and predecessors (refs, or ids outside the graph). */
export function dagJson(dag: DagView): DagJson {
  return {
    dag_id: dag.dagId,
    status: dag.status,
    counts: dag.counts,
    tasks: dag.tasks.map((t) => ({
      ref: t.ref,
      task_id: t.record.id,
      task_type: t.record.taskType,
      status: t.status,
      depends_on: t.dependsOn,
      due_time: iso(t.record.dueMs),
      started_at: iso(t.record.startedMs),
      completed_at: iso(t.record.completedMs),
      attempts: t.record.attempts,
      last_error: t.record.lastError,
    })),
  };
}

/** `GET /api/tasks/{task_id}/explain`. */
export function explanationJson(e: Explanation): ExplanationJson {
  return {
    task_id: e.taskId,
    status: e.status,
    state: e.state,
    sentence: e.sentence,
    checked_at: iso(e.checkedMs) as string,
    due:
      e.due === null
        ? null
        : {
            due_at: iso(e.due.dueMs) as string,
            due_in_ms: e.due.dueInMs,
            partition: e.due.partition,
            owner_node: e.due.ownerNode,
            epoch: e.due.epoch,
          },
    dependencies: e.dependencies?.map((d) => ({ task_id: d.taskId, status: d.status })) ?? null,
    queue:
      e.queue === null
        ? null
        : {
            task_type: e.queue.taskType,
            priority: e.queue.priority,
            ahead: e.queue.ahead,
            workers: {
              connected: e.queue.workers.connected,
              polling: e.queue.workers.polling,
              last_asked_at: iso(e.queue.workers.lastAskedMs),
            },
          },
    lease:
      e.lease === null
        ? null
        : {
            worker_id: e.lease.workerId,
            since: iso(e.lease.sinceMs),
            lease_expires_at: iso(e.lease.leaseExpiresMs),
            deadline_at: iso(e.lease.deadlineMs),
            last_heartbeat_at: iso(e.lease.lastHeartbeatMs),
            owner_node: e.lease.ownerNode,
          },
    limits:
      e.limits?.map((l) => ({
        name: l.name,
        declared_as: l.declaredAs,
        concurrency: l.concurrency,
        running: l.running,
        waiting: l.waiting,
        throttled_until: iso(l.throttledUntilMs),
        holds: l.holds,
      })) ?? null,
    backoff:
      e.backoff === null
        ? null
        : { until: iso(e.backoff.untilMs) as string, attempt: e.backoff.attempt, last_error: e.backoff.lastError },
    start_by: iso(e.startByMs),
    schedule: e.schedule === null ? null : { paused: e.schedule.paused, next_due_time: iso(e.schedule.nextDueMs) },
    outcome:
      e.outcome === null
        ? null
        : { finished_at: iso(e.outcome.finishedMs), error: e.outcome.error, reason: e.outcome.reason },
  };
}
