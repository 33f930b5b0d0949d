import { isUuid } from '../../lib/ids.js';
import type { TaskStatus } from '../../domain/model.js';
import type { CompletionRequest, PollRequest } from '../../services/types.js';
import {
  BODY,
  FieldPath,
  isAbsent,
  readBoolean,
  readInteger,
  readObject,
  readOneOf,
  readQueryInteger,
  readQueryString,
  readString,
  readTaskType,
  rejectUnknown,
  truncateUtf8,
} from './fields.js';

/**
 * Validators for the worker endpoints (poll, heartbeat, complete, batch complete), task ids
 * in paths, and the list and history query strings. Same conventions as `validate.ts`:
 * a `WheelhouseError('validation_failed')` whose message names the field.
 */

/** Every status a client may see, for `GET /api/tasks?status=`. */
export const TASK_STATUSES: readonly TaskStatus[] = [
  'blocked',
  'pending',
  'ready',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'active',
  'paused',
];

/** A worker's `error` text is cut to this many bytes of UTF-8 (4 KiB). */
export const MAX_ERROR_BYTES = 4096;

/** Most results in one `POST /api/workers/complete`. */
export const MAX_BATCH_COMPLETIONS = 1000;

/** Longest long-poll the API accepts, ms (API.md: `wait_ms` max 30 000). */
const MAX_WAIT_MS = 30_000;
const DEFAULT_WAIT_MS = 20_000;

const POLL_FIELDS: ReadonlySet<string> = new Set(['worker_id', 'task_types', 'max_tasks', 'wait_ms']);
const HEARTBEAT_FIELDS: ReadonlySet<string> = new Set(['lease_token']);
const COMPLETE_FIELDS: ReadonlySet<string> = new Set(['lease_token', 'status', 'error', 'retryable']);
const BATCH_COMPLETE_ITEM_FIELDS: ReadonlySet<string> = new Set(['task_id', ...COMPLETE_FIELDS]);
const BATCH_COMPLETE_FIELDS: ReadonlySet<string> = new Set(['results']);
const LIST_FIELDS: ReadonlySet<string> = new Set(['status', 'task_type', 'schedule_id', 'limit', 'next_token']);
const HISTORY_FIELDS: ReadonlySet<string> = new Set(['limit', 'next_token']);
const OUTCOMES = ['succeeded', 'failed'] as const;
/** Query parameters are named `query.limit` etc. in messages. */
const QUERY = new FieldPath('query');

/** Limits that come from configuration. */
export interface PollLimits {
  /** Longest long-poll this node allows, ms; a longer `wait_ms` is clamped to it. */
  pollMaxWaitMs: number;
}

/** `GET /api/tasks` query, validated. */
export interface ListQuery {
  status?: TaskStatus;
  taskType?: string;
  /** A cron schedule's id: its instances only. */
  scheduleId?: string;
  /** 1–1000. @default 50 */
  limit: number;
  nextToken?: string;
}

/** `GET /api/tasks/{id}/history` query, validated. */
export interface HistoryQuery {
  /** 1–1000. @default 20 */
  limit: number;
  nextToken?: string;
}

/** A task id from a path or body: a UUID, lower-cased. 400 otherwise (never 500). */
export function validateTaskId(value: unknown, at: FieldPath = BODY.at('task_id')): string {
  if (!isUuid(value)) {
    at.fail(`must be a task id (a UUID), got ${typeof value === 'string' ? `"${value.slice(0, 60)}"` : typeof value}`);
  }
  return value.toLowerCase();
}

/** `POST /api/workers/poll` body → `PollRequest`. `wait_ms` 0–30 000 (default 20 000), clamped to the node's maximum. */
export function validatePoll(body: unknown, limits: PollLimits): PollRequest {
  const o = readObject(body, BODY);
  rejectUnknown(o, POLL_FIELDS, BODY);
  const workerAt: FieldPath = BODY.at('worker_id');
  if (o.worker_id === undefined) workerAt.fail('is required');
  const workerId = readString(o.worker_id, workerAt, { min: 1, max: 128 });
  const typesAt: FieldPath = BODY.at('task_types');
  if (!Array.isArray(o.task_types)) typesAt.fail('must be a non-empty array of task types');
  if (o.task_types.length === 0) typesAt.fail('must name at least one task type');
  const taskTypes = new Set<string>();
  for (let i = 0; i < o.task_types.length; i++) taskTypes.add(readTaskType(o.task_types[i], typesAt.item(i)));
  const maxTasks = isAbsent(o.max_tasks) ? 1 : readInteger(o.max_tasks, BODY.at('max_tasks'), 1, 1000);
  const waitMs = isAbsent(o.wait_ms) ? DEFAULT_WAIT_MS : readInteger(o.wait_ms, BODY.at('wait_ms'), 0, MAX_WAIT_MS);
  return { workerId, taskTypes: [...taskTypes], maxTasks, waitMs: Math.min(waitMs, limits.pollMaxWaitMs) };
}

/** `POST /api/tasks/{id}/heartbeat` body → the lease token. */
export function validateHeartbeat(body: unknown): { leaseToken: string } {
  const o = readObject(body, BODY);
  rejectUnknown(o, HEARTBEAT_FIELDS, BODY);
  return { leaseToken: readLeaseToken(o.lease_token, BODY.at('lease_token')) };
}

/** `POST /api/tasks/{id}/complete` body → `CompletionRequest`. `error` is cut to 4 KiB; `retryable` defaults to true. */
export function validateCompletion(taskId: string, body: unknown): CompletionRequest {
  const o = readObject(body, BODY);
  rejectUnknown(o, COMPLETE_FIELDS, BODY);
  return readCompletion(taskId, o, BODY);
}

/**
 * `POST /api/workers/complete` body (`{results: [{task_id, lease_token, status, error?,
 * retryable?}]}`, 1–1000 items) → `CompletionRequest[]`. One invalid item rejects the batch
 * with its `details.index`.
 */
export function validateCompletionBatch(body: unknown): CompletionRequest[] {
  const o = readObject(body, BODY, 'a JSON object {"results": [...]}');
  rejectUnknown(o, BATCH_COMPLETE_FIELDS, BODY);
  const at: FieldPath = BODY.at('results');
  if (o.results === undefined) at.fail('is required');
  if (!Array.isArray(o.results)) at.fail('must be an array of results');
  if (o.results.length === 0) at.fail('must hold at least one result');
  if (o.results.length > MAX_BATCH_COMPLETIONS) {
    at.fail(`holds ${o.results.length} results; the most is ${MAX_BATCH_COMPLETIONS}`);
  }
  const out = new Array<CompletionRequest>(o.results.length);
  for (let i = 0; i < o.results.length; i++) {
    const itemAt: FieldPath = new FieldPath(`results[${i}]`, i);
    const item = readObject(o.results[i], itemAt);
    rejectUnknown(item, BATCH_COMPLETE_ITEM_FIELDS, itemAt);
    const taskIdAt: FieldPath = itemAt.at('task_id');
    if (item.task_id === undefined) taskIdAt.fail('is required');
    out[i] = readCompletion(validateTaskId(item.task_id, taskIdAt), item, itemAt);
  }
  return out;
}

/** `GET /api/tasks` query string → `ListQuery`. */
export function validateListQuery(query: unknown): ListQuery {
  const o = readObject(query ?? {}, QUERY, 'a query string');
  rejectUnknown(o, LIST_FIELDS, QUERY);
  const out: ListQuery = {
    limit: o.limit === undefined ? 50 : readQueryInteger(o.limit, QUERY.at('limit'), 1, 1000),
  };
  if (o.status !== undefined) {
    out.status = readOneOf(readQueryString(o.status, QUERY.at('status')), QUERY.at('status'), TASK_STATUSES);
  }
  if (o.task_type !== undefined) {
    out.taskType = readTaskType(readQueryString(o.task_type, QUERY.at('task_type')), QUERY.at('task_type'));
  }
  if (o.schedule_id !== undefined) {
    out.scheduleId = validateTaskId(readQueryString(o.schedule_id, QUERY.at('schedule_id')), QUERY.at('schedule_id'));
  }
  const nextToken = readNextToken(o.next_token);
  if (nextToken !== undefined) out.nextToken = nextToken;
  return out;
}

/** `GET /api/tasks/{id}/history` query string → `HistoryQuery`. */
export function validateHistoryQuery(query: unknown): HistoryQuery {
  const o = readObject(query ?? {}, QUERY, 'a query string');
  rejectUnknown(o, HISTORY_FIELDS, QUERY);
  const out: HistoryQuery = {
    limit: o.limit === undefined ? 20 : readQueryInteger(o.limit, QUERY.at('limit'), 1, 1000),
  };
  const nextToken = readNextToken(o.next_token);
  if (nextToken !== undefined) out.nextToken = nextToken;
  return out;
}

function readNextToken(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const at = QUERY.at('next_token');
  const token = readQueryString(value, at);
  // An empty next_token (a client echoing back `next_token=` for "first page") means none.
  return token === '' ? undefined : readString(token, at, { min: 1, max: 1024 });
}

function readLeaseToken(value: unknown, at: FieldPath): string {
  if (value === undefined) at.fail('is required');
  return readString(value, at, { min: 1, max: 256 });
}

function readCompletion(taskId: string, o: Record<string, unknown>, at: FieldPath): CompletionRequest {
  const leaseToken = readLeaseToken(o.lease_token, at.at('lease_token'));
  if (o.status === undefined) at.at('status').fail('is required (succeeded or failed)');
  const outcome = readOneOf(o.status, at.at('status'), OUTCOMES);
  const error = isAbsent(o.error)
    ? null
    : truncateUtf8(readString(o.error, at.at('error'), { min: 0, max: Number.MAX_SAFE_INTEGER }), MAX_ERROR_BYTES);
  const retryable = isAbsent(o.retryable) ? true : readBoolean(o.retryable, at.at('retryable'));
  return { taskId, leaseToken, outcome, error, retryable };
}
