import type { StoredStatus } from './model.js';

/**
 * Operations on many tasks (`POST /api/operations`): the vocabulary, and which tasks each
 * action applies to. Pure: no I/O.
 */

export const OPERATION_ACTIONS = ['cancel', 'retry', 'delete'] as const;
export type OperationAction = (typeof OPERATION_ACTIONS)[number];

/** An operation's lifecycle: `running` → `done` | `cancelled` | `failed`, each final. */
export const OPERATION_STATES = ['running', 'done', 'cancelled', 'failed'] as const;
export type OperationState = (typeof OPERATION_STATES)[number];

/**
 * The statuses each action applies to, as the single-task routes apply it: `cancel` as
 * `DELETE /api/tasks/{id}` (a running task is asked to stop), `retry` as
 * `POST /api/tasks/{id}/retry`, `delete` as retention removes a finished task. A cron schedule
 * (`active`, `paused`) is not among them: its instances are the tasks an operation acts on.
 */
export const ACTION_STATUSES: Readonly<Record<OperationAction, readonly StoredStatus[]>> = {
  cancel: ['blocked', 'pending', 'running', 'waiting'],
  retry: ['failed', 'cancelled', 'expired'],
  delete: ['succeeded', 'failed', 'cancelled', 'expired'],
};

/**
 * Which tasks an operation looks at: every field present narrows it (AND). Times are Unix ms;
 * `after` bounds are exclusive, `before` bounds exclusive too. `limit` is a limit name the task
 * takes part in; `errorContains` is matched in the task's last error, ignoring case;
 * `errorEquals` is the first ERROR_KEY_CHARS characters of the last error exactly ('' for none),
 * as the failed view groups errors (src/store/sql/failures.ts); `parentId` names the running
 * task whose children it looks at.
 */
export interface OperationFilter {
  status?: StoredStatus;
  taskType?: string;
  createdAfterMs?: number;
  createdBeforeMs?: number;
  dueAfterMs?: number;
  dueBeforeMs?: number;
  limit?: string;
  errorContains?: string;
  errorEquals?: string;
  parentId?: string;
}

/** An operation as the store keeps it. */
export interface OperationRecord {
  id: string;
  action: OperationAction;
  filter: OperationFilter;
  state: OperationState;
  /** Tasks the walk found matching the filter, in a status the action applies to. */
  matched: number;
  /** Of those, the ones the action changed. */
  done: number;
  /** Of those, the ones it could not change (see docs/api.md): matched = done + failed. */
  failed: number;
  /** Why a `failed` operation failed. */
  error: string | null;
  startedMs: number;
  finishedMs: number | null;
}

/** Whether an operation has ended. */
export function isFinished(state: OperationState): boolean {
  return state !== 'running';
}

/** The statuses an operation's walk matches: the filter's one, or every one the action applies to. */
export function matchedStatuses(action: OperationAction, filter: OperationFilter): readonly StoredStatus[] {
  return filter.status === undefined ? ACTION_STATUSES[action] : [filter.status];
}
