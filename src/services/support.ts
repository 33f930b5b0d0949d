import { tracingOn } from '../lib/otel.js';
import type { DueEntry, SubmitResult, TaskRecord } from '../domain/model.js';
import { visibleStatus } from '../domain/lifecycle.js';
import { WheelhouseError } from '../lib/errors.js';
import type { Clock } from '../runtime/clock.js';
import type { DagStore } from '../store/dag-types.js';
import type { TaskView } from './types.js';

/** What the services share: errors of the catalogue, page tokens, views, admission. */

export function badToken(): WheelhouseError {
  return new WheelhouseError('validation_failed', 'next_token: not a token this endpoint issued', {
    details: { field: 'next_token' },
  });
}

/**
 * One answer for every way a report can miss its lease (the lease ran out, the task finished,
 * the token is not the lease's): which of them it was is not said to whoever holds the token.
 */
export function leaseNotHeld(taskId: string): WheelhouseError {
  return new WheelhouseError(
    'lease_not_held',
    'no lease of this task is held with this token: it expired and the task was handed on, the task finished, or the token is not the one the poll handed out',
    { details: { task_id: taskId } },
  );
}

/** A task's due entry, with its limits when it names some (an entry without them has none). */
export function dueEntry(task: SubmitResult['task']): DueEntry {
  const entry: DueEntry = { taskId: task.id, taskType: task.taskType, priority: task.priority, dueMs: task.dueMs };
  if (task.limits !== undefined && task.limits.length > 0) entry.limits = task.limits;
  // Only the fire's span reads it: a node that does not trace leaves the entry as it was.
  if (task.traceparent != null && tracingOn()) entry.traceparent = task.traceparent;
  return entry;
}

export function encodeToken(value: string): string {
  return Buffer.from(value, 'utf8').toString('base64url');
}

/**
 * A page token back to what `encodeToken` encoded. A token it could not have made (not
 * base64url, not UTF-8, empty, too long) is a 400: the value never reaches a statement.
 */
export function decodeToken(token: string, field: string): string {
  const value = Buffer.from(token, 'base64url').toString('utf8');
  if (value.length === 0 || value.length > 64 || encodeToken(value) !== token) {
    throw new WheelhouseError('validation_failed', `${field}: not a token this endpoint issued`, {
      details: { field },
    });
  }
  return value;
}

/** Task views with their dependencies: one read for all the records that have predecessors. */
export class TaskViews {
  constructor(private readonly deps: { dags: Pick<DagStore, 'predecessors'>; clock: Clock }) {}

  async of(records: TaskRecord[]): Promise<TaskView[]> {
    const waiting = records.filter((r) => r.depsTotal > 0).map((r) => r.id);
    const predecessors =
      waiting.length === 0 ? new Map<string, string[]>() : await this.deps.dags.predecessors(waiting);
    const now = this.deps.clock.now();
    return records.map((record) => ({
      record,
      status: visibleStatus(record.status, record.dueMs, now),
      dependencies: predecessors.get(record.id) ?? [],
    }));
  }
}

/** Admission of new work: 429 past the ready backlog's limit, before anything is written. */
export class Admission {
  constructor(private readonly deps: { backlog(): number; readyBacklogLimit: number }) {}

  admit(): void {
    const backlog = this.deps.backlog();
    const limit = this.deps.readyBacklogLimit;
    if (backlog >= limit) {
      throw new WheelhouseError('backlog_full', `the ready backlog (${backlog}) is past its limit`, {
        retryAfterSeconds: 1,
        details: { backlog, limit },
      });
    }
  }
}
