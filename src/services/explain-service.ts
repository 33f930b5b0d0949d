import { visibleStatus } from '../domain/lifecycle.js';
import type { TaskRecord, TaskStatus } from '../domain/model.js';
import type { ExplainState, Explanation } from './explanation.js';
import { WHEEL } from '../actors/wheel-partition.js';
import { LEASE } from '../actors/worker-lease.js';
import type { Clock } from '../runtime/clock.js';
import type { SnapshotStore } from '../runtime/snapshots.js';
import type { DagStore } from '../store/dag-types.js';
import type { ReadyQueue } from '../store/fast-index-types.js';
import type { TaskStore } from '../store/types.js';
import { explainSentence } from './explain-sentence.js';
import { dueEntry } from './support.js';
import { LEASE_EXPIRED, TIMED_OUT } from '../domain/attempt-errors.js';
import type { MissingTasks } from './missing-tasks.js';
import type { WorkerPresence } from './worker-presence.js';
import { limitFacts, type ExplainLimits } from './explain-limits.js';

export type { ExplainState, Explanation } from './explanation.js';

/** Most predecessors an explanation lists (each is one read by primary key). */
export const DEPENDENCIES_SHOWN = 20;

export interface ExplainDeps {
  tasks: Pick<TaskStore, 'get'>;
  dags: Pick<DagStore, 'predecessors'>;
  ready: Pick<ReadyQueue, 'ahead'>;
  /** The fencing rows of the wheel partitions: who holds each, at which epoch. */
  snapshots: Pick<SnapshotStore, 'owners'>;
  clock: Clock;
  /** The node the ring names for an actor. */
  ownerOf(kind: string, key: string): string;
  /**
   * The node that holds an actor now, asking the live nodes when this one does not (a lease
   * lives where its task was claimed, not where the ring would put it); null: none does.
   */
  holderOf(kind: string, key: string): Promise<string | null>;
  /** The workers of a task type across the live cluster. */
  presence(taskType: string): Promise<WorkerPresence>;
  /** The 404 of an id that names no task (saying when it passed retention). */
  missing: Pick<MissingTasks, 'task'>;
  /** Flow control: the node's catalog and the keys' actors. @default no key is gated */
  limits?: ExplainLimits;
}

/**
 * Answers "why isn't it running?" for one task. The task row says which state it is in; then
 * each fact comes from its owner: the wheel partition's owner and epoch from the ring and the
 * fencing rows, the place in line from the ready queue, the workers from every live node, the
 * predecessors from their rows, a gated key's figures from its actor. Nothing scans the task table: every read is by key.
 */
export class ExplainService {
  constructor(private readonly deps: ExplainDeps) {}

  async explain(taskId: string): Promise<Explanation> {
    const task = await this.deps.tasks.get(taskId);
    if (task === null) throw await this.deps.missing.task(taskId);
    const now = this.deps.clock.now();
    const status = visibleStatus(task.status, task.dueMs, now);
    const state = stateOf(task, status, now);
    const facts: Omit<Explanation, 'sentence'> = {
      taskId: task.id,
      status,
      state,
      checkedMs: now,
      due: null,
      dependencies: null,
      queue: null,
      lease: null,
      limits: null,
      backoff: null,
      startByMs: task.status === 'pending' ? task.startByMs : null,
      schedule: null,
      outcome: null,
    };
    switch (state) {
      case 'scheduled':
      case 'ready':
      case 'backing_off':
        facts.due = await this.due(task, now);
        if (state === 'backing_off')
          facts.backoff = { untilMs: task.dueMs, attempt: task.attempts, lastError: task.lastError };
        if (state === 'ready') {
          const limits = this.deps.limits;
          [facts.queue, facts.limits] = await Promise.all([
            this.queue(task),
            limits === undefined ? null : limitFacts(limits, task),
          ]);
        }
        break;
      case 'waiting':
        facts.dependencies = await this.dependencies(task);
        // A parent waiting for its children: its edges are to them (src/store/sql/waiting.ts).
        if (task.status === 'waiting')
          facts.children = { open: task.depsTotal - task.depsSatisfied, total: task.depsTotal };
        break;
      case 'running':
        facts.lease = await this.lease(task);
        break;
      case 'active':
      case 'paused':
        facts.schedule = { paused: state === 'paused', nextDueMs: task.status === 'active' ? task.dueMs : null };
        break;
      case 'succeeded':
      case 'failed':
      case 'cancelled':
      case 'expired':
        facts.outcome = outcomeOf(task);
        break;
    }
    return { ...facts, sentence: explainSentence(facts) };
  }

  private async due(task: TaskRecord, now: number): Promise<NonNullable<Explanation['due']>> {
    const key = String(task.partition);
    const rows = await this.deps.snapshots.owners(WHEEL.name);
    const row = rows.find((r) => r.key === key);
    return {
      dueMs: task.dueMs,
      dueInMs: Math.max(0, task.dueMs - now),
      partition: task.partition,
      ownerNode: this.deps.ownerOf(WHEEL.name, key),
      epoch: row?.epoch ?? null,
    };
  }

  private async queue(task: TaskRecord): Promise<NonNullable<Explanation['queue']>> {
    // With its limits: a ready queue holds a limited task's entry under a member that names them.
    const entry = dueEntry(task);
    const [ahead, workers] = await Promise.all([this.deps.ready.ahead(entry), this.deps.presence(task.taskType)]);
    return {
      taskType: task.taskType,
      priority: task.priority,
      ahead,
      workers: { connected: workers.connected, polling: workers.polling, lastAskedMs: workers.lastAskedMs },
    };
  }

  private async dependencies(task: TaskRecord): Promise<NonNullable<Explanation['dependencies']>> {
    const ids = ((await this.deps.dags.predecessors([task.id])).get(task.id) ?? []).slice(0, DEPENDENCIES_SHOWN);
    const rows = await Promise.all(ids.map((id) => this.deps.tasks.get(id)));
    const now = this.deps.clock.now();
    return ids.map((id, i) => {
      const row = rows[i];
      return { taskId: id, status: row ? visibleStatus(row.status, row.dueMs, now) : 'unknown' };
    });
  }

  /**
   * The lease as the row holds it. A heartbeat sets the expiry to its time plus the timeout,
   * unless that passes the deadline: an expiry short of the deadline dates the last heartbeat
   * exactly; one at the deadline says only that the row was last written (a heartbeat, a
   * progress update) at its `updated_at`.
   */
  private async lease(task: TaskRecord): Promise<NonNullable<Explanation['lease']>> {
    const timeoutMs = task.timeoutSeconds * 1000;
    const capped = task.leaseExpiresMs !== null && task.deadlineMs !== null && task.leaseExpiresMs >= task.deadlineMs;
    const beat = task.leaseExpiresMs === null ? null : capped ? task.updatedMs : task.leaseExpiresMs - timeoutMs;
    return {
      workerId: task.workerId,
      sinceMs: task.startedMs,
      leaseExpiresMs: task.leaseExpiresMs,
      deadlineMs: task.deadlineMs,
      lastHeartbeatMs: beat !== null && task.startedMs !== null && beat > task.startedMs ? beat : null,
      ownerNode: await this.deps.holderOf(LEASE.name, task.id).catch(() => null),
    };
  }
}

function stateOf(task: TaskRecord, status: TaskStatus, now: number): ExplainState {
  switch (task.status) {
    case 'blocked':
      return 'waiting';
    case 'pending':
      if (task.dueMs <= now) return 'ready';
      // After a failed attempt the due time is the backoff's end (a retry of a finished
      // task is due at once, so it is never here).
      return task.attempts > 0 && task.lastError !== null ? 'backing_off' : 'scheduled';
    default:
      return status as ExplainState;
  }
}

function outcomeOf(task: TaskRecord): NonNullable<Explanation['outcome']> {
  const finishedMs = task.completedMs;
  switch (task.status) {
    case 'succeeded':
      return {
        finishedMs,
        error: null,
        reason: task.scheduleType === 'cron' ? 'no fire time left' : `attempt ${task.attempts} succeeded`,
      };
    case 'failed':
      return {
        finishedMs,
        error: task.lastError,
        reason:
          task.lastError === LEASE_EXPIRED
            ? `the lease of attempt ${task.attempts} ran out with no retry left`
            : task.lastError === TIMED_OUT
              ? `attempt ${task.attempts} reached its deadline (timeout_seconds ${task.timeoutSeconds}) with no retry left`
              : task.attempts > task.maxRetries
                ? `retries spent (${task.attempts} attempts, max_retries ${task.maxRetries})`
                : `attempt ${task.attempts} failed and was not retryable`,
      };
    case 'expired':
      return {
        finishedMs,
        error: task.lastError,
        reason: `it did not start within ${task.startDeadlineSeconds ?? 0} s of its due time (start_deadline_seconds)`,
      };
    default: {
      const byPredecessor = task.lastError?.startsWith('predecessor ') === true;
      return {
        finishedMs,
        error: task.lastError,
        reason: byPredecessor
          ? `${task.lastError ?? ''}`
          : task.scheduleType === 'cron'
            ? 'the schedule was deleted'
            : 'cancelled by request',
      };
    }
  }
}
