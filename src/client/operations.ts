import { sleep } from './backoff.js';
import { WheelhouseTimeoutError } from './errors.js';
import type { Transport } from './http.js';
import { itemsOf, nextTokenFromWire } from './wire.js';

/** What an operation does to each task it matches. */
export type OperationAction = 'cancel' | 'retry' | 'delete';
export type OperationState = 'running' | 'done' | 'cancelled' | 'failed';

/**
 * Which tasks an operation acts on: every field given narrows it. Times are ISO-8601 strings
 * or `Date`s; `after`/`before` bounds are exclusive. At least one field is needed.
 */
export interface OperationFilter {
  status?: string;
  taskType?: string;
  createdAfter?: string | Date;
  createdBefore?: string | Date;
  dueAfter?: string | Date;
  dueBefore?: string | Date;
  /** A limit name the task takes part in. */
  limit?: string;
  /** Text in the task's last error, ignoring case. */
  errorContains?: string;
  /** The first 1 000 characters of the task's last error, exactly ('' for none): a failed view group's error. */
  errorEquals?: string;
  /** The children of this task (`client.children`). */
  parentId?: string;
}

/** An operation and its progress (`GET /api/operations/{id}`). */
export interface Operation {
  operationId: string;
  action: OperationAction;
  /** The filter as the node holds it (times as ISO strings). */
  filter: OperationFilter;
  state: OperationState;
  /** Tasks found so far that match, in a status the action applies to. */
  matched: number;
  /** Of those, the ones the action changed. */
  done: number;
  /** Of those, the ones it could not change. */
  failed: number;
  error: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

export interface OperationPage {
  operations: Operation[];
  nextToken: string | null;
}

export interface OperationWaitOptions {
  /** Rejects with `WheelhouseTimeoutError` (its `taskId` the operation's id) past it, ms. @default 600000 */
  timeoutMs?: number;
  /** Between reads of the progress, ms. @default 500 */
  pollMs?: number;
  /** Told of each progress read, the last one (ended) included. */
  onProgress?: (operation: Operation) => void;
}

/**
 * Operations on many tasks (`client.operations`, API.md "POST /api/operations"): cancel, retry
 * or delete every task a filter matches, in the background. `cancel` and `retry` need a
 * `submit` key, `delete` an `admin` one.
 */
export interface OperationsClient {
  /** `POST /api/operations`: answers the running operation at once. */
  start(action: OperationAction, filter: OperationFilter): Promise<Operation>;
  /** `GET /api/operations/{id}`. */
  get(operationId: string): Promise<Operation>;
  /** One page of `GET /api/operations`, newest first. */
  listPage(options?: { limit?: number; nextToken?: string | null }): Promise<OperationPage>;
  /** `DELETE /api/operations/{id}`: what it has not done is not done (the page under way may finish). */
  cancel(operationId: string): Promise<Operation>;
  /** Reads the progress until the operation has ended; resolves with it. */
  wait(operationId: string, options?: OperationWaitOptions): Promise<Operation>;
}

export function operationsClient(http: Transport): OperationsClient {
  const path = (id: string): string => `/api/operations/${encodeURIComponent(id)}`;
  const get = async (operationId: string): Promise<Operation> =>
    operationFromWire((await http.send({ method: 'GET', path: path(operationId), idempotent: true })).body);
  return {
    async start(action, filter) {
      // Not retried after a network error: a second POST would start a second operation.
      const answer = await http.send({
        method: 'POST',
        path: '/api/operations',
        body: { action, filter: filterToWire(filter) },
        idempotent: false,
      });
      return operationFromWire(answer.body);
    },

    get,

    async listPage(options = {}) {
      const { body } = await http.send({
        method: 'GET',
        path: '/api/operations',
        query: { limit: options.limit, next_token: options.nextToken ?? undefined },
        idempotent: true,
      });
      return {
        operations: itemsOf((body as { operations?: unknown }).operations).map(operationFromWire),
        nextToken: nextTokenFromWire(body),
      };
    },

    async cancel(operationId) {
      // Cancelling twice answers the cancelled operation again: safe to retry.
      const answer = await http.send({ method: 'DELETE', path: path(operationId), idempotent: true });
      return operationFromWire(answer.body);
    },

    async wait(operationId, options = {}) {
      const timeoutMs = options.timeoutMs ?? 600_000;
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const op = await get(operationId);
        options.onProgress?.(op);
        if (op.state !== 'running') return op;
        // The error names the operation where a task's would be: the id whose wait ran out.
        if (Date.now() >= deadline)
          throw new WheelhouseTimeoutError(operationId, ['done', 'cancelled', 'failed'], op.state, timeoutMs);
        await sleep(options.pollMs ?? 500);
      }
    },
  };
}

type Json = Record<string, unknown>;

const timeToWire = (t: string | Date | undefined): string | undefined =>
  t === undefined ? undefined : t instanceof Date ? t.toISOString() : t;

export function filterToWire(f: OperationFilter): Json {
  const out: Json = {
    status: f.status,
    task_type: f.taskType,
    created_after: timeToWire(f.createdAfter),
    created_before: timeToWire(f.createdBefore),
    due_after: timeToWire(f.dueAfter),
    due_before: timeToWire(f.dueBefore),
    limit: f.limit,
    error_contains: f.errorContains,
    error_equals: f.errorEquals,
    parent_id: f.parentId,
  };
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
  return out;
}

export function operationFromWire(body: unknown): Operation {
  const o = (body ?? {}) as Json;
  const f = (o.filter ?? {}) as Json;
  const filter: OperationFilter = {};
  if (typeof f.status === 'string') filter.status = f.status;
  if (typeof f.task_type === 'string') filter.taskType = f.task_type;
  if (typeof f.created_after === 'string') filter.createdAfter = f.created_after;
  if (typeof f.created_before === 'string') filter.createdBefore = f.created_before;
  if (typeof f.due_after === 'string') filter.dueAfter = f.due_after;
  if (typeof f.due_before === 'string') filter.dueBefore = f.due_before;
  if (typeof f.limit === 'string') filter.limit = f.limit;
  if (typeof f.error_contains === 'string') filter.errorContains = f.error_contains;
  if (typeof f.error_equals === 'string') filter.errorEquals = f.error_equals;
  if (typeof f.parent_id === 'string') filter.parentId = f.parent_id;
  return {
    operationId: String(o.operation_id),
    action: o.action as OperationAction,
    filter,
    state: o.state as OperationState,
    matched: Number(o.matched),
    done: Number(o.done),
    failed: Number(o.failed),
    error: typeof o.error === 'string' ? o.error : null,
    startedAt: new Date(String(o.started_at)),
    finishedAt: typeof o.finished_at === 'string' ? new Date(o.finished_at) : null,
  };
}
