import { WheelhouseError, isWheelhouseError } from '../errors.js';
import { partitionOf, uuidv7 } from '../ids.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import { LEASE_KIND, type LeaseMessage } from '../actors/worker-lease.js';
import { WHEEL_KIND, type WheelMessage } from '../actors/wheel-partition.js';
import type { BackoffPolicy, DueEntry, NewTask, ReadyQueue, SubmitResult, TaskStore, Transition } from '../store/types.js';
import type { Dispatcher } from './dispatcher.js';
import { decodeLeaseToken } from './lease-token.js';
import { visibleStatus } from './lifecycle.js';
import type { Assignment, CompletionRequest, PollRequest, SchedulerApi, TaskSpec, TaskView } from './types.js';

/**
 * The scheduler's service face: what the HTTP layer calls. It writes to the system of record
 * first (a task is in Postgres before the submit answers), then tells the actors.
 */
export interface SchedulerDeps {
  tasks: TaskStore;
  ready: ReadyQueue;
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
  onSubmitted?(count: number): void;
  onCompleted?(transitions: Transition[]): void;
}

/** How long a submit waits for its partitions to take the new tasks. */
const SCHEDULE_ASK_MS = 10_000;

export class Scheduler implements SchedulerApi {
  constructor(private readonly deps: SchedulerDeps) {}

  async submit(specs: TaskSpec[]): Promise<SubmitResult[]> {
    const { clock, tasks, partitions } = this.deps;
    const backlog = this.deps.backlog();
    if (backlog >= this.deps.readyBacklogLimit) {
      throw new WheelhouseError('backlog_full', `the ready backlog (${backlog}) is past its limit`, {
        retryAfterSeconds: 1,
        details: { backlog, limit: this.deps.readyBacklogLimit },
      });
    }
    const now = clock.now();
    const rows = specs.map((spec, index): NewTask => {
      unsupported(spec, index);
      const id = uuidv7(now);
      return {
        id,
        taskType: spec.taskType,
        payload: spec.payload,
        scheduleType: spec.schedule.type,
        schedule: null,
        status: 'pending',
        dueMs: dueTime(spec, now),
        priority: spec.priority,
        maxRetries: spec.maxRetries,
        timeoutSeconds: spec.timeoutSeconds,
        partition: partitionOf(id, partitions),
        idempotencyKey: spec.idempotencyKey,
        requestHash: spec.idempotencyKey === null ? null : spec.requestHash,
      };
    });
    const results = await tasks.submit(rows, now);
    const created = results.filter((r) => r.created && r.task.status === 'pending');
    await this.schedule(created.map((r) => dueEntry(r.task)));
    this.deps.onSubmitted?.(created.length);
    return results;
  }

  async getTask(taskId: string): Promise<TaskView> {
    const record = await this.deps.tasks.get(taskId);
    if (!record) throw new WheelhouseError('task_not_found', `no task has id ${taskId}`, { details: { task_id: taskId } });
    return this.view(record);
  }

  async listTasks(filter: Parameters<SchedulerApi['listTasks']>[0]): Promise<{ tasks: TaskView[]; nextToken: string | null }> {
    const beforeId = filter.nextToken === undefined ? undefined : decodeToken(filter.nextToken, 'next_token');
    const records = await this.deps.tasks.list(
      { status: filter.status, taskType: filter.taskType, limit: filter.limit, beforeId },
      this.deps.clock.now(),
    );
    const last = records[records.length - 1];
    return {
      tasks: records.map((r) => this.view(r)),
      nextToken: records.length === filter.limit && last ? encodeToken(last.id) : null,
    };
  }

  async cancel(taskId: string): Promise<{ cancelledInstances: number }> {
    const result = await this.deps.tasks.cancel(taskId, this.deps.clock.now());
    switch (result.kind) {
      case 'not_found':
        throw new WheelhouseError('task_not_found', `no task has id ${taskId}`, { details: { task_id: taskId } });
      case 'finished':
        throw new WheelhouseError('task_finished', `the task is already ${result.task.status}`, {
          details: { task_id: taskId, status: result.task.status },
        });
      case 'cancelled':
      case 'cancel_requested':
        return { cancelledInstances: 1 };
    }
  }

  async history(taskId: string, limit: number, nextToken?: string) {
    const before = nextToken === undefined ? undefined : Number(decodeToken(nextToken, 'next_token'));
    if (before !== undefined && !Number.isSafeInteger(before)) {
      throw new WheelhouseError('validation_failed', 'next_token: not a token this endpoint issued', { details: { field: 'next_token' } });
    }
    const task = await this.deps.tasks.get(taskId);
    if (!task) throw new WheelhouseError('task_not_found', `no task has id ${taskId}`, { details: { task_id: taskId } });
    const executions = await this.deps.tasks.history(taskId, limit, before);
    const last = executions[executions.length - 1];
    return { executions, nextToken: executions.length === limit && last ? encodeToken(String(last.attempt)) : null };
  }

  poll(request: PollRequest, signal?: AbortSignal): Promise<Assignment[]> {
    return this.deps.dispatcher.poll(request, signal);
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

  /** Puts tasks that went back to `pending` (retries, expired leases) on their partitions. */
  async requeue(transitions: Transition[]): Promise<void> {
    const entries = transitions.flatMap((t) => (t.requeued ? [t.requeued] : []));
    if (entries.length > 0) await this.schedule(entries);
  }

  /**
   * Hands due entries to their wheel partitions, one message per partition. A failure here
   * loses nothing — the tasks are pending in the task table and the partition reloads them
   * on its next activation — so it is reported, not thrown.
   */
  private async schedule(entries: DueEntry[]): Promise<void> {
    const byPartition = new Map<number, DueEntry[]>();
    for (const entry of entries) {
      const partition = partitionOf(entry.taskId, this.deps.partitions);
      const list = byPartition.get(partition);
      if (list) list.push(entry);
      else byPartition.set(partition, [entry]);
    }
    await Promise.all(
      [...byPartition].map(async ([partition, list]) => {
        try {
          await this.deps.system
            .ref<WheelMessage>(WHEEL_KIND, String(partition))
            .ask({ type: 'schedule', entries: list }, SCHEDULE_ASK_MS);
        } catch (error) {
          this.deps.onError(error, `wheel ${partition}: could not schedule ${list.length} tasks (they stay pending)`);
        }
      }),
    );
  }

  private view(record: TaskView['record']): TaskView {
    return { record, status: visibleStatus(record.status, record.dueMs, this.deps.clock.now()), dependencies: [] };
  }
}

function dueTime(spec: TaskSpec, nowMs: number): number {
  const s = spec.schedule;
  if (s.type !== 'delayed') return nowMs;
  if (s.dueMs !== null) return Math.max(s.dueMs, nowMs);
  return nowMs + Math.round((s.delaySeconds ?? 0) * 1000);
}

/** What this version accepts in the contract but cannot run yet is refused, not half-built. */
function unsupported(spec: TaskSpec, index: number): void {
  if (spec.schedule.type === 'cron') {
    throw new WheelhouseError('validation_failed', 'schedule.type: cron schedules are not available in this version', {
      details: { field: 'schedule.type', index },
    });
  }
  if (spec.dependencies.length > 0) {
    throw new WheelhouseError('validation_failed', 'dependencies: task dependencies are not available in this version', {
      details: { field: 'dependencies', index },
    });
  }
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
