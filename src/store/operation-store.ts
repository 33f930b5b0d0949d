import type { OperationRecord } from '../domain/operations.js';
import type { Db } from './db.js';
import type { NewOperation, OperationPage, OperationStore } from './operation-types.js';
import { runOperationPage } from './sql/operation-page.js';
import {
  cancelOperation,
  createOperation,
  failOperation,
  getOperation,
  listOperations,
  runningOperations,
} from './sql/operations.js';

/** Operations on many tasks over SQL: the same statements on Postgres and PGlite. */
export class SqlOperationStore implements OperationStore {
  constructor(private readonly db: Db) {}

  create(operation: NewOperation): Promise<OperationRecord> {
    return createOperation(this.db, operation);
  }

  get(operationId: string): Promise<OperationRecord | null> {
    return getOperation(this.db, operationId);
  }

  list(limit: number, beforeId?: string): Promise<OperationRecord[]> {
    return listOperations(this.db, limit, beforeId);
  }

  cancel(operationId: string, nowMs: number): Promise<OperationRecord | null> {
    return cancelOperation(this.db, operationId, nowMs);
  }

  fail(operationId: string, error: string, nowMs: number): Promise<void> {
    return failOperation(this.db, operationId, error, nowMs);
  }

  running(limit: number): Promise<string[]> {
    return runningOperations(this.db, limit);
  }

  runPage(operationId: string, walk: number, nowMs: number): Promise<OperationPage> {
    return runOperationPage(this.db, operationId, walk, nowMs);
  }
}
