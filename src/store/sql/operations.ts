import type { OperationAction, OperationFilter, OperationRecord, OperationState } from '../../domain/operations.js';
import { isUuid } from '../../lib/ids.js';
import type { Db } from '../db.js';
import type { NewOperation } from '../operation-types.js';
import { msOf, tsParam } from './columns.js';

/** The rows of `operations` (migrations/000016_operations.sql), and reading and ending them. */

/** The columns an operation is read with (alias `o`). */
export const OPERATION_COLUMNS = `o.id::text AS id, o.action, o.filter, o.state, o.matched::float8 AS matched,
  o.done::float8 AS done, o.failed::float8 AS failed, o.error, ${msOf('o.started_at')} AS started_ms,
  ${msOf('o.finished_at')} AS finished_ms`;

export interface OperationRow {
  id: string;
  action: OperationAction;
  filter: OperationFilter;
  state: OperationState;
  matched: number;
  done: number;
  failed: number;
  error: string | null;
  started_ms: number;
  finished_ms: number | null;
}

export function toOperationRecord(row: OperationRow): OperationRecord {
  return {
    id: row.id,
    action: row.action,
    filter: row.filter,
    state: row.state,
    matched: Number(row.matched),
    done: Number(row.done),
    failed: Number(row.failed),
    error: row.error,
    startedMs: Number(row.started_ms),
    finishedMs: row.finished_ms === null ? null : Number(row.finished_ms),
  };
}

const CREATE = `
  INSERT INTO operations AS o (id, action, filter, state, walk_before, started_at, updated_at)
  VALUES ($1, $2, $3::jsonb, 'running', $4::uuid, ${tsParam(5)}, ${tsParam(5)})
  RETURNING ${OPERATION_COLUMNS}`;

export async function createOperation(db: Db, op: NewOperation): Promise<OperationRecord> {
  const { rows } = await db.query<OperationRow>(
    CREATE,
    [op.id, op.action, JSON.stringify(op.filter), op.walkBefore, op.startedMs],
    'wh_operation_create',
  );
  return toOperationRecord(rows[0]!);
}

const GET = `SELECT ${OPERATION_COLUMNS} FROM operations o WHERE o.id = $1`;

export async function getOperation(db: Db, operationId: string): Promise<OperationRecord | null> {
  if (!isUuid(operationId)) return null;
  const { rows } = await db.query<OperationRow>(GET, [operationId], 'wh_operation_get');
  return rows[0] === undefined ? null : toOperationRecord(rows[0]);
}

const LIST = `SELECT ${OPERATION_COLUMNS} FROM operations o WHERE o.id < $1::uuid ORDER BY o.id DESC LIMIT $2`;
/** Above every UUID v7 an operation can have: the first page of the list. */
const MAX_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

export async function listOperations(db: Db, limit: number, beforeId?: string): Promise<OperationRecord[]> {
  if (beforeId !== undefined && !isUuid(beforeId)) return [];
  const { rows } = await db.query<OperationRow>(LIST, [beforeId ?? MAX_UUID, limit], 'wh_operation_list');
  return rows.map(toOperationRecord);
}

/**
 * Ends a running operation. Waits for the row lock of a page in flight: that page commits
 * (it may finish), then this one applies — or finds the operation already done.
 */
const END = `
  UPDATE operations SET state = $2, error = $3, finished_at = ${tsParam(4)}, updated_at = ${tsParam(4)}
  WHERE id = $1 AND state = 'running'`;

export async function cancelOperation(db: Db, operationId: string, nowMs: number): Promise<OperationRecord | null> {
  if (!isUuid(operationId)) return null;
  await db.query(END, [operationId, 'cancelled', null, nowMs], 'wh_operation_end');
  return getOperation(db, operationId);
}

export async function failOperation(db: Db, operationId: string, error: string, nowMs: number): Promise<void> {
  await db.query(END, [operationId, 'failed', error, nowMs], 'wh_operation_end');
}

const RUNNING = `SELECT id::text AS id FROM operations WHERE state = 'running' ORDER BY id LIMIT $1`;

export async function runningOperations(db: Db, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(RUNNING, [limit], 'wh_operation_running');
  return rows.map((r) => r.id);
}
