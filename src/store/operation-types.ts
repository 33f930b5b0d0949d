import type { DueEntry, TaskRecord } from '../domain/model.js';
import type { OperationAction, OperationFilter, OperationRecord } from '../domain/operations.js';

/** An operation to record (`POST /api/operations`). */
export interface NewOperation {
  id: string;
  action: OperationAction;
  filter: OperationFilter;
  /** Tasks whose id is at or above this are not looked at (submitted after the start). */
  walkBefore: string;
  startedMs: number;
}

/** What one page of an operation did. */
export type OperationPage =
  /** The operation is gone or no longer running (done, cancelled, failed): nothing was done. */
  | { kind: 'stopped'; operation: OperationRecord | null }
  /**
   * A page committed: the operation as it now is, and what the caller hands on of the tasks
   * the action changed: the cancelled rows (to the worker, the dependents), the retried tasks'
   * due entries (to the wheel).
   */
  | { kind: 'page'; operation: OperationRecord; changed: TaskRecord[]; retried: DueEntry[] };

/** Operations on many tasks: their rows (`operations`), and the pages that do them. */
export interface OperationStore {
  create(operation: NewOperation): Promise<OperationRecord>;
  get(operationId: string): Promise<OperationRecord | null>;
  /** Newest first; `beforeId` (exclusive) goes on from a previous page. */
  list(limit: number, beforeId?: string): Promise<OperationRecord[]>;
  /** Ends a running operation as `cancelled`; answers it as it is after (null: no such operation). */
  cancel(operationId: string, nowMs: number): Promise<OperationRecord | null>;
  /** Ends a running operation as `failed`, saying why. */
  fail(operationId: string, error: string, nowMs: number): Promise<void>;
  /** The ids of the running operations (at most `limit`), oldest first. */
  running(limit: number): Promise<string[]>;
  /**
   * Runs the operation's next page, walking at most `walk` tasks: the action on the ones that
   * match and the progress in one transaction (src/store/sql/operation-page.ts).
   */
  runPage(operationId: string, walk: number, nowMs: number): Promise<OperationPage>;
}
