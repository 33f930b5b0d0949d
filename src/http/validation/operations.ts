import { ACTION_STATUSES, type OperationAction, type OperationFilter } from '../../domain/operations.js';
import { WheelhouseError } from '../../lib/errors.js';
import type { OperationRequestJson } from '../schemas/operation-routes.js';
import { parseIsoTime } from './fields.js';

/**
 * What the schema of `POST /api/operations` cannot say: the filter names at least one field
 * (an operation on every task must be asked for by a field, e.g. `status`), its status is one
 * the action applies to, and the times parse.
 * Each failure is a 400 `validation_failed` naming the field.
 */
export function operationRequest(body: OperationRequestJson): { action: OperationAction; filter: OperationFilter } {
  const { action } = body;
  const f = body.filter;
  const filter: OperationFilter = {};
  if (f.status !== undefined && f.status !== null) {
    const allowed = ACTION_STATUSES[action];
    if (!allowed.includes(f.status)) {
      throw invalid('filter.status', `${action} applies to ${allowed.join(', ')} tasks, not ${f.status}`, {
        allowed: [...allowed],
      });
    }
    filter.status = f.status;
  }
  if (f.task_type !== undefined && f.task_type !== null) filter.taskType = f.task_type;
  const time = (field: 'created_after' | 'created_before' | 'due_after' | 'due_before'): number | undefined => {
    const text = f[field];
    if (text === undefined || text === null) return undefined;
    const ms = parseIsoTime(text);
    if (ms === null) throw invalid(`filter.${field}`, `must be an ISO-8601 time string, not ${JSON.stringify(text)}`);
    return ms;
  };
  const createdAfter = time('created_after');
  const createdBefore = time('created_before');
  const dueAfter = time('due_after');
  const dueBefore = time('due_before');
  if (createdAfter !== undefined) filter.createdAfterMs = createdAfter;
  if (createdBefore !== undefined) filter.createdBeforeMs = createdBefore;
  if (dueAfter !== undefined) filter.dueAfterMs = dueAfter;
  if (dueBefore !== undefined) filter.dueBeforeMs = dueBefore;
  if (f.limit !== undefined && f.limit !== null) filter.limit = f.limit;
  if (f.error_contains !== undefined && f.error_contains !== null) filter.errorContains = f.error_contains;
  if (f.error_equals !== undefined && f.error_equals !== null) filter.errorEquals = f.error_equals;
  if (f.parent_id !== undefined && f.parent_id !== null) filter.parentId = f.parent_id.toLowerCase();
  if (Object.keys(filter).length === 0) {
    throw invalid(
      'filter',
      `names no field: an operation on every task must say so, e.g. {"status": "${ACTION_STATUSES[action][0]}"}`,
    );
  }
  return { action, filter };
}

function invalid(field: string, message: string, extra: Record<string, unknown> = {}): WheelhouseError {
  return new WheelhouseError('validation_failed', `${field}: ${message}`, { details: { field, ...extra } });
}
