import type { TaskStatus } from '../../domain/model.js';
import type { CompletionRequest, PollRequest } from '../../services/types.js';
import { TASK_STATUSES as STATUSES } from '../schemas/common.js';
import { HistoryQuery as HistoryQuerySchema, ListQuery as ListQuerySchema, TaskIdParams } from '../schemas/tasks.js';
import type { HistoryQueryJson, ListQueryJson } from '../schemas/tasks.js';
import {
  Completion,
  CompletionBatch,
  DEFAULT_WAIT_MS,
  HeartbeatRequest,
  PollRequest as PollRequestSchema,
  type CompletionBatchBody,
  type CompletionBody,
  type HeartbeatRequestBody,
  type PollRequestBody,
} from '../schemas/workers.js';
import { assertSchema } from './ajv.js';
import { BODY, FieldPath, truncateUtf8, unstorable } from './fields.js';

export { MAX_BATCH_COMPLETIONS } from '../schemas/workers.js';

/**
 * The worker endpoints (poll, heartbeat, complete, batch complete), task ids in paths, and the
 * list and history query strings: bodies that match their schemas (src/http/schemas/) → the
 * services' requests. `validate*` check the schema first, for callers no route has checked.
 */

/** Every status a client may see, for `GET /api/tasks?status=`. */
export const TASK_STATUSES: readonly TaskStatus[] = STATUSES;

/** A worker's `error` text is cut to this many bytes of UTF-8 (4 KiB). */
export const MAX_ERROR_BYTES = 4096;

/** Limits that come from configuration. */
export interface PollLimits {
  /** Longest long-poll this node allows, ms; a longer `wait_ms` is clamped to it. */
  pollMaxWaitMs: number;
  /** Most task types one poll may name; more is a 400. @default unbounded but for the schema's ceiling */
  pollMaxTaskTypes?: number;
}

/** Limits of the worker's JSON values (results, progress) that come from configuration. */
export interface ResultLimits {
  /** Largest `result` or `progress`, bytes of JSON; more is a 400 naming the field. Unchecked when left out. */
  maxResultBytes?: number;
}

/** A heartbeat body, validated: the token, and the progress when one was sent (null included). */
export interface HeartbeatBody {
  leaseToken: string;
  /** undefined: no progress was sent. */
  progress?: unknown;
  /** Push the deadline to at least now + this, seconds; undefined: leave it. */
  extendSeconds?: number;
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

/** A task id from a path: a UUID, lower-cased. 400 naming `task_id` otherwise (never 500). */
export function validateTaskId(value: unknown): string {
  assertSchema(TaskIdParams, { task_id: value }, 'params');
  return (value as string).toLowerCase();
}

export function validatePoll(body: unknown, limits: PollLimits): PollRequest {
  assertSchema(PollRequestSchema, body);
  return pollRequest(body as PollRequestBody, limits);
}

/**
 * A poll body → `PollRequest`: task types once each, `wait_ms` clamped to the node's maximum.
 * More task types than `pollMaxTaskTypes` is a 400: each names a ready queue that every take
 * (and every wake-up of a waiting poll) looks at.
 */
export function pollRequest(o: PollRequestBody, limits: PollLimits): PollRequest {
  const maxTypes = limits.pollMaxTaskTypes;
  if (maxTypes !== undefined && o.task_types.length > maxTypes) {
    BODY.at('task_types').fail(
      `holds ${o.task_types.length} items; the most is ${maxTypes} (pollMaxTaskTypes)`,
      'validation_failed',
      {
        limit: maxTypes,
      },
    );
  }
  return {
    workerId: o.worker_id,
    taskTypes: [...new Set(o.task_types)],
    maxTasks: o.max_tasks ?? 1,
    waitMs: Math.min(o.wait_ms ?? DEFAULT_WAIT_MS, limits.pollMaxWaitMs),
  };
}

export function validateHeartbeat(body: unknown, limits: ResultLimits = {}): HeartbeatBody {
  assertSchema(HeartbeatRequest, body);
  return heartbeatRequest(body as HeartbeatRequestBody, limits);
}

/** A heartbeat body → the token and, when sent, the progress (held to `maxResultBytes`) and the extension. */
export function heartbeatRequest(o: HeartbeatRequestBody, limits: ResultLimits = {}): HeartbeatBody {
  const body: HeartbeatBody = { leaseToken: o.lease_token };
  if (o.extend_seconds !== undefined) body.extendSeconds = o.extend_seconds;
  if (o.progress === undefined) return body;
  checkWorkerJson(o.progress, BODY.at('progress'), limits.maxResultBytes);
  body.progress = o.progress;
  return body;
}

export function validateCompletion(taskId: string, body: unknown, limits: ResultLimits = {}): CompletionRequest {
  assertSchema(Completion, body);
  return completionRequest(taskId, body as CompletionBody, limits);
}

/**
 * A completion body → `CompletionRequest`: `error` cut to 4 KiB with any U+0000 (which Postgres
 * text cannot hold) made U+FFFD, `retryable` true unless said, `result` (when sent) held to
 * `maxResultBytes`. `at` is where the completion sits in a larger request (a batch passes
 * `results[i]`).
 */
export function completionRequest(
  taskId: string,
  o: CompletionBody,
  limits: ResultLimits = {},
  at: FieldPath = BODY,
): CompletionRequest {
  const request: CompletionRequest = {
    taskId,
    leaseToken: o.lease_token,
    outcome: o.status,
    error: o.error === undefined || o.error === null ? null : truncateUtf8(withoutNul(o.error), MAX_ERROR_BYTES),
    retryable: o.retryable ?? true,
  };
  if (o.status === 'waiting_children') request.onChildFailure = o.on_child_failure ?? 'fail';
  if (o.result !== undefined) {
    checkWorkerJson(o.result, at.at('result'), limits.maxResultBytes);
    request.result = o.result;
  }
  return request;
}

/**
 * A worker's JSON value (a result, a progress update): at most `maxBytes` of JSON, and nothing
 * Postgres jsonb cannot keep (U+0000, an unpaired surrogate), else a 400 naming the field. A
 * value here came from a parsed body, so it always serialises.
 */
export function checkWorkerJson(value: unknown, at: FieldPath, maxBytes: number | undefined): void {
  const json = JSON.stringify(value) ?? 'null';
  // A string of n UTF-16 units is at most 3n bytes of UTF-8: most values need no count.
  if (maxBytes !== undefined && json.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(json);
    if (bytes > maxBytes) {
      at.fail(`is ${bytes} bytes of JSON; the limit is ${maxBytes} (maxResultBytes)`, 'validation_failed', {
        limit_bytes: maxBytes,
      });
    }
  }
  if (unstorable(json)) {
    at.fail('holds U+0000 or an unpaired surrogate in a string or a key, which the store (Postgres jsonb) cannot keep');
  }
}

function withoutNul(text: string): string {
  return text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text;
}

export function validateCompletionBatch(body: unknown, limits: ResultLimits = {}): CompletionRequest[] {
  assertSchema(CompletionBatch, body);
  return completionRequests(body as CompletionBatchBody, limits);
}

/**
 * `{results: [...]}` → one `CompletionRequest` each, task ids lower-cased. A bad item fails the
 * whole batch, named by its index.
 */
export function completionRequests(body: CompletionBatchBody, limits: ResultLimits = {}): CompletionRequest[] {
  return body.results.map((r, i) =>
    completionRequest(r.task_id.toLowerCase(), r, limits, new FieldPath(`results[${i}]`, i)),
  );
}

export function validateListQuery(query: unknown): ListQuery {
  assertSchema(ListQuerySchema, query ?? {}, 'query');
  return listQuery(query ?? {});
}

/** A list query string → `ListQuery`. An empty `next_token` (a client echoing `next_token=`) means none. */
export function listQuery(q: ListQueryJson): ListQuery {
  const out: ListQuery = { limit: q.limit ?? 50 };
  if (q.status !== undefined) out.status = q.status;
  if (q.task_type !== undefined) out.taskType = q.task_type;
  if (q.schedule_id !== undefined) out.scheduleId = q.schedule_id.toLowerCase();
  if (q.next_token !== undefined && q.next_token !== '') out.nextToken = q.next_token;
  return out;
}

export function validateHistoryQuery(query: unknown): HistoryQuery {
  assertSchema(HistoryQuerySchema, query ?? {}, 'query');
  return historyQuery(query ?? {});
}

export function historyQuery(q: HistoryQueryJson): HistoryQuery {
  const out: HistoryQuery = { limit: q.limit ?? 20 };
  if (q.next_token !== undefined && q.next_token !== '') out.nextToken = q.next_token;
  return out;
}
