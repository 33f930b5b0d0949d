import { WheelhouseError, isWheelhouseError } from '../errors.js';
import { isUuid, uuidv7 } from '../ids.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import type { DutyFailure } from '../runtime/supervision.js';
import { LEASE_KIND, type LeaseMessage } from '../actors/worker-lease.js';
import { CRON_KIND, type CronMessage } from '../actors/cron-schedule.js';
import type { BackoffPolicy, DueEntry, NewTask, ScheduleRecord, ScheduleStore, SubmitResult, TaskRecord, TaskStatus, TaskStore, Transition } from '../store/types.js';
import type { BucketStore, ReadyQueue } from '../store/fast-index-types.js';
import type { DagStore } from '../store/dag-types.js';
import type { Dispatcher } from './dispatcher.js';
import { decodeLeaseToken } from './lease-token.js';
import { visibleStatus } from './lifecycle.js';
import { planGraph } from './dag-graph.js';
import { newTask, scheduleRecord } from './new-task.js';
import { WheelPlacement } from './wheel-placement.js';
import type { FinishedEvent } from './dag-resolver.js';
import type {
  Assignment,
  CompletionRequest,
  DagSpec,
  DagSubmitResult,
  DagView,
  PollRequest,
  SchedulerApi,
  TaskSpec,
  TaskView,
} from './types.js';

/**
 * The scheduler's service face: what the HTTP layer calls. It writes to the system of record
 * first (a task is in Postgres before the submit answers), then tells the actors.
 */
export interface SchedulerDeps {
  tasks: TaskStore;
  schedules: ScheduleStore;
  dags: DagStore;
  /** Predecessors that ended and have dependents (their outbox events are written): tell the dependents. */
  notifyDependents(events: FinishedEvent[]): void;
  /** Activates the actors of schedules just written (they create their first instances). */
  activateSchedules(records: ScheduleRecord[]): Promise<void>;
  ready: ReadyQueue;
  /** Where entries go when their partition cannot be reached: see `WheelPlacement`. */
  buckets: Pick<BucketStore, 'add'>;
  clock: Clock;
  system: ActorSystemApi;
  dispatcher: Dispatcher;
  partitions: number;
  backoff: BackoffPolicy;
  readyBacklogLimit: number;
  /** The ready backlog as last measured (refreshed in the background, not per request). */
  backlog(): number;
  /** Resolves when the stores answer; rejects otherwise. */
  ping(): Promise<void>;
  isStarted(): boolean;
  onError(error: unknown, context: string): void;
  /** A placement that failed goes on being tried (see `schedule`); each failure is told here. */
  onDutyFailure(error: unknown, failure: DutyFailure): void;
  onSubmitted?(count: number): void;
  onCompleted?(transitions: Transition[]): void;
}

/** How long pause, resume and delete wait for a schedule's actor. */
const CRON_ASK_MS = 10_000;


export class Scheduler implements SchedulerApi {
  private readonly placement: WheelPlacement;

  constructor(private readonly deps: SchedulerDeps) {
    this.placement = new WheelPlacement(deps);
  }

  /** Stops retrying placements (their tasks are pending in Postgres: the partitions find them). */
  stop(): void {
    this.placement.stop();
  }

  async submit(specs: TaskSpec[]): Promise<SubmitResult[]> {
    this.admit();
    const now = this.deps.clock.now();
    const rows = specs.map((spec, index) => newTask(spec, uuidv7(now), now, index, this.deps.partitions));
    const results = await this.deps.tasks.submit(rows, now);
    const created = results.filter((r) => r.created);
    const due = created.filter((r) => r.task.status === 'pending');
    const schedules = created.filter((r) => r.task.status === 'active').map((r) => scheduleRecord(r.task));
    await Promise.all([this.schedule(due.map((r) => dueEntry(r.task))), this.activateSchedules(schedules)]);
    // Every task written counts, blocked ones (and ones born cancelled) included.
    this.deps.onSubmitted?.(created.length);
    return results;
  }

  /**
   * Submits a graph, all or nothing: the planner refuses cycles, duplicate refs and names
   * that are neither refs nor ids before anything is written; the store refuses ids of no
   * task inside the one transaction. Ids are handed out in request order (sorted v7 ids of
   * the same millisecond), so the graph reads back in that order.
   */
  async submitDag(spec: DagSpec): Promise<DagSubmitResult> {
    this.admit();
    const plan = planGraph(spec.tasks.map((t) => ({ ref: t.ref, dependsOn: t.dependsOn })));
    const now = this.deps.clock.now();
    const ids = spec.tasks.map(() => uuidv7(now)).sort();
    const dagId = uuidv7(now);
    const dependsOn = spec.tasks.map((_, i) => [...plan.localPredecessors[i]!.map((j) => ids[j]!), ...plan.externalPredecessors[i]!]);
    const rows = spec.tasks.map((t, i): NewTask => ({ ...newTask(t.spec, ids[i]!, now, i, this.deps.partitions), dependsOn: dependsOn[i]!, dagId, dagRef: t.ref }));
    const result = await this.deps.dags.submitGraph(rows, { id: dagId, idempotencyKey: spec.idempotencyKey, requestHash: spec.requestHash }, now);
    if (!result.created) return { created: false, dag: await this.getDag(result.dagId) };
    const due = result.tasks.filter((t) => t.status === 'pending');
    await this.schedule(due.map(dueEntry));
    this.deps.onSubmitted?.(result.tasks.length);
    return {
      created: true,
      dag: this.dagView(dagId, result.tasks.map((record, i) => ({ ref: spec.tasks[i]!.ref, ...this.nodeView(record, spec.tasks[i]!.dependsOn) }))),
    };
  }

  async getDag(dagId: string): Promise<DagView> {
    const nodes = await this.deps.dags.graph(dagId);
    if (nodes === null) throw new WheelhouseError('task_not_found', `no graph has id ${dagId}`, { details: { dag_id: dagId } });
    const refOf = new Map(nodes.map((n) => [n.task.id, n.task.dagRef ?? n.task.id]));
    return this.dagView(
      dagId,
      nodes.map((n) => ({ ref: n.task.dagRef ?? n.task.id, ...this.nodeView(n.task, n.dependsOn.map((id) => refOf.get(id) ?? id)) })),
    );
  }

  private dagView(dagId: string, tasks: DagView['tasks']): DagView {
    const counts: Partial<Record<TaskStatus, number>> = {};
    for (const t of tasks) counts[t.status] = (counts[t.status] ?? 0) + 1;
    return { dagId, status: graphStatus(counts), counts, tasks };
  }

  /** 429 past the ready backlog's limit: nothing is written. */
  private admit(): void {
    const backlog = this.deps.backlog();
    if (backlog >= this.deps.readyBacklogLimit) {
      throw new WheelhouseError('backlog_full', `the ready backlog (${backlog}) is past its limit`, {
        retryAfterSeconds: 1,
        details: { backlog, limit: this.deps.readyBacklogLimit },
      });
    }
  }

  private nodeView(record: TaskRecord, dependsOn: string[]): { record: TaskRecord; status: TaskStatus; dependsOn: string[] } {
    return { record, status: visibleStatus(record.status, record.dueMs, this.deps.clock.now()), dependsOn };
  }

  /**
   * A new schedule's actor creates its first instance on activation. The schedule is in the
   * task table already, so a failure here is reported, not thrown: the node activates every
   * active schedule when it starts.
   */
  private async activateSchedules(records: ScheduleRecord[]): Promise<void> {
    if (records.length === 0) return;
    try {
      await this.deps.activateSchedules(records);
    } catch (error) {
      this.deps.onError(error, `could not activate ${records.length} new schedules (they start with the next node start)`);
    }
  }

  /** Pauses a cron schedule: it stops firing and its pending instance is cancelled. */
  async pause(taskId: string): Promise<TaskView> {
    await this.cronCommand(await this.scheduleRow(taskId, 'pause'), 'pause');
    return this.getTask(taskId);
  }

  /** Resumes a paused schedule from now: the fire times it was paused through are not caught up. */
  async resume(taskId: string): Promise<TaskView> {
    await this.cronCommand(await this.scheduleRow(taskId, 'resume'), 'resume');
    return this.getTask(taskId);
  }

  private async scheduleRow(taskId: string, action: 'pause' | 'resume'): Promise<TaskRecord> {
    const task = await this.deps.tasks.get(taskId);
    if (!task) throw notFound(taskId);
    if (task.scheduleType !== 'cron') {
      throw new WheelhouseError('invalid_transition', `only cron schedules can ${action}; this task is ${task.scheduleType}`, {
        details: { task_id: taskId, schedule_type: task.scheduleType },
      });
    }
    return task;
  }

  /** Asks the schedule's actor; its refusals become the catalogue's errors. */
  private async cronCommand(task: TaskRecord, type: 'pause' | 'resume' | 'cancel'): Promise<{ cancelledInstances: number }> {
    const result = await this.deps.system.ref<CronMessage>(CRON_KIND, task.id).ask({ type }, CRON_ASK_MS);
    if (result.ok) return result;
    if (result.reason === 'not_found') throw notFound(task.id);
    throw new WheelhouseError('task_finished', `the schedule is already ${result.status}`, {
      details: { task_id: task.id, status: result.status },
    });
  }

  async getTask(taskId: string): Promise<TaskView> {
    const record = await this.deps.tasks.get(taskId);
    if (!record) throw notFound(taskId);
    return (await this.views([record]))[0]!;
  }

  async listTasks(filter: Parameters<SchedulerApi['listTasks']>[0]): Promise<{ tasks: TaskView[]; nextToken: string | null }> {
    const beforeId = filter.nextToken === undefined ? undefined : decodeToken(filter.nextToken, 'next_token');
    const records = await this.deps.tasks.list(
      { status: filter.status, taskType: filter.taskType, scheduleId: filter.scheduleId, limit: filter.limit, beforeId },
      this.deps.clock.now(),
    );
    const last = records[records.length - 1];
    return {
      tasks: await this.views(records),
      nextToken: records.length === filter.limit && last ? encodeToken(last.id) : null,
    };
  }

  async cancel(taskId: string): Promise<{ cancelledInstances: number }> {
    const existing = await this.deps.tasks.get(taskId);
    if (existing?.scheduleType === 'cron') return this.cronCommand(existing, 'cancel');
    const result = await this.deps.tasks.cancel(taskId, this.deps.clock.now());
    switch (result.kind) {
      case 'not_found':
        throw notFound(taskId);
      case 'finished':
        throw new WheelhouseError('task_finished', `the task is already ${result.task.status}`, {
          details: { task_id: taskId, status: result.task.status },
        });
      case 'cancelled':
        if (result.task.hasDependents) this.deps.notifyDependents([{ predecessorId: taskId, status: 'cancelled' }]);
        return { cancelledInstances: 1 };
      case 'cancel_requested':
        return { cancelledInstances: 1 };
    }
  }

  async history(taskId: string, limit: number, nextToken?: string) {
    const token = nextToken === undefined ? undefined : decodeToken(nextToken, 'next_token');
    const task = await this.deps.tasks.get(taskId);
    if (!task) throw notFound(taskId);
    if (task.scheduleType === 'cron') {
      // A schedule's history is its instances' executions; the token names the last one.
      const [instance, attempt] = token === undefined ? [] : token.split(':');
      const before = token === undefined ? undefined : { taskId: instance ?? '', attempt: Number(attempt) };
      if (before !== undefined && !(isUuid(before.taskId) && Number.isSafeInteger(before.attempt))) throw badToken();
      const executions = await this.deps.schedules.history(task.id, limit, before);
      const last = executions[executions.length - 1];
      return { executions, nextToken: executions.length === limit && last ? encodeToken(`${last.taskId}:${last.attempt}`) : null };
    }
    const before = token === undefined ? undefined : Number(token);
    if (before !== undefined && !Number.isSafeInteger(before)) throw badToken();
    const executions = await this.deps.tasks.history(taskId, limit, before);
    const last = executions[executions.length - 1];
    return { executions, nextToken: executions.length === limit && last ? encodeToken(String(last.attempt)) : null };
  }

  poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    return this.deps.dispatcher.poll(request, signal);
  }

  async release(assignments: readonly Assignment[]): Promise<void> {
    if (assignments.length === 0) return;
    try {
      const claims = assignments.map((a) => ({ taskId: a.id, version: a.version }));
      const entries = await this.deps.tasks.release(claims, this.deps.clock.now());
      for (const claim of claims) this.deps.system.ref<LeaseMessage>(LEASE_KIND, claim.taskId).tell({ type: 'released', version: claim.version });
      await this.schedule(entries);
    } catch (error) {
      // Not handed back: their leases run out and hand them on, as for any lost worker.
      this.deps.onError(error, `could not hand back ${assignments.length} claims no worker received (their leases will)`);
    }
  }

  async heartbeat(taskId: string, leaseToken: string): Promise<{ leaseExpiresMs: number; cancelRequested: boolean }> {
    const version = decodeLeaseToken(leaseToken);
    const lease = this.deps.system.ref<LeaseMessage>(LEASE_KIND, taskId);
    const extended = await lease.ask({ type: 'heartbeat', version });
    if (!extended) throw leaseNotHeld(taskId);
    return extended;
  }

  async complete(results: CompletionRequest[]): Promise<{ taskId: string; ok: boolean }[]> {
    const valid: { taskId: string; version: number; request: CompletionRequest }[] = [];
    for (const request of results) {
      try {
        valid.push({ taskId: request.taskId, version: decodeLeaseToken(request.leaseToken), request });
      } catch (error) {
        if (!isWheelhouseError(error, 'lease_not_held')) throw error;
      }
    }
    const transitions = await this.deps.tasks.complete(
      valid.map((v) => ({
        taskId: v.taskId,
        version: v.version,
        outcome: v.request.outcome,
        error: v.request.error,
        retryable: v.request.retryable,
      })),
      this.deps.clock.now(),
      this.deps.backoff,
    );
    const done = new Set(transitions.map((t) => t.taskId));
    for (const v of valid) {
      if (done.has(v.taskId)) this.deps.system.ref<LeaseMessage>(LEASE_KIND, v.taskId).tell({ type: 'released', version: v.version });
    }
    this.finished(transitions);
    await this.requeue(transitions);
    this.deps.onCompleted?.(transitions);
    return results.map((r) => ({ taskId: r.taskId, ok: done.has(r.taskId) }));
  }

  async isReady(): Promise<boolean> {
    if (!this.deps.isStarted()) return false;
    try {
      await this.deps.ping();
      return true;
    } catch {
      return false;
    }
  }

  /** Puts tasks that became `pending` (cron instances) on their wheel partitions. */
  place(entries: DueEntry[]): Promise<void> {
    return this.schedule(entries);
  }

  /** Tells the dependents of tasks that ended (results, expired leases). */
  finished(transitions: Transition[]): void {
    const events = transitions.filter((t) => t.notifyDependents).map((t) => ({ predecessorId: t.taskId, status: t.status }));
    if (events.length > 0) this.deps.notifyDependents(events);
  }

  /** Puts tasks that went back to `pending` (retries, expired leases) on their partitions. */
  async requeue(transitions: Transition[]): Promise<void> {
    const entries = transitions.flatMap((t) => (t.requeued ? [t.requeued] : []));
    if (entries.length > 0) await this.schedule(entries);
  }

  /** Hands due entries to their wheel partitions (see `WheelPlacement`). Never rejects. */
  private schedule(entries: DueEntry[]): Promise<void> {
    return this.placement.place(entries);
  }

  /** Views with their dependencies: one read for all the records that have predecessors. */
  private async views(records: TaskRecord[]): Promise<TaskView[]> {
    const waiting = records.filter((r) => r.depsTotal > 0).map((r) => r.id);
    const predecessors = waiting.length === 0 ? new Map<string, string[]>() : await this.deps.dags.predecessors(waiting);
    const now = this.deps.clock.now();
    return records.map((record) => ({
      record,
      status: visibleStatus(record.status, record.dueMs, now),
      dependencies: predecessors.get(record.id) ?? [],
    }));
  }
}

/** A graph's status: running while any task can still run; then succeeded, failed or cancelled. */
function graphStatus(counts: Partial<Record<TaskStatus, number>>): DagView['status'] {
  const open: TaskStatus[] = ['blocked', 'pending', 'ready', 'running'];
  if (open.some((s) => (counts[s] ?? 0) > 0)) return 'running';
  if ((counts.failed ?? 0) > 0) return 'failed';
  if ((counts.cancelled ?? 0) > 0) return 'cancelled';
  return 'succeeded';
}

function notFound(taskId: string): WheelhouseError {
  return new WheelhouseError('task_not_found', `no task has id ${taskId}`, { details: { task_id: taskId } });
}

function badToken(): WheelhouseError {
  return new WheelhouseError('validation_failed', 'next_token: not a token this endpoint issued', { details: { field: 'next_token' } });
}

function dueEntry(task: SubmitResult['task']): DueEntry {
  return { taskId: task.id, taskType: task.taskType, priority: task.priority, dueMs: task.dueMs };
}

function leaseNotHeld(taskId: string): WheelhouseError {
  return new WheelhouseError('lease_not_held', 'the lease is no longer held: it expired and the task was handed on, or the task finished', {
    details: { task_id: taskId },
  });
}

function encodeToken(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url');
}

function decodeToken(token: string, field: string): string {
  const value = Buffer.from(token, 'base64url').toString('utf8');
  if (value.length === 0 || value.length > 64) {
    throw new WheelhouseError('validation_failed', `${field}: not a token this endpoint issued`, { details: { field } });
  }
  return value;
}
