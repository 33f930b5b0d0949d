import Type, { type Static } from 'typebox';
import { MAX_POLL_TASK_TYPES } from '../../lib/config.js';
import {
  COMMON_ERRORS,
  Nullable,
  Ok,
  Ref,
  StoredText,
  StringEnum,
  TaskType,
  Time,
  Uuid,
  errors,
  needs,
} from './common.js';
import { MAX_TIMEOUT_SECONDS, TaskIdParams } from './tasks.js';

/**
 * The worker routes' schemas: long-poll, heartbeat, complete, and the batch completion
 * extension. A worker's `error` text is cut to 4 KiB in code (src/http/validation/requests.ts),
 * not refused.
 */

/** Longest long-poll the API accepts, ms. */
export const MAX_WAIT_MS = 30_000;
export const DEFAULT_WAIT_MS = 20_000;

/** Most results in one `POST /api/workers/complete`. */
export const MAX_BATCH_COMPLETIONS = 1000;

/** `waiting_children`: the attempt ends waiting for the task's children (docs/api.md, "Children of a running task"). */
export const OUTCOMES = ['succeeded', 'failed', 'waiting_children'] as const;

/** With `waiting_children`: what a child that does not succeed does to the parent (ignored otherwise). */
export const OnChildFailure = Type.Optional(
  Nullable(
    StringEnum(['fail', 'continue'] as const, {
      default: 'fail',
      description:
        'With status waiting_children: fail — a child that does not succeed fails the task; continue — the task runs again once every child has ended, whatever its end.',
    }),
  ),
);

export const PollRequest = Type.Object(
  {
    worker_id: StoredText(128),
    task_types: Type.Array(TaskType, {
      minItems: 1,
      maxItems: MAX_POLL_TASK_TYPES,
      description: 'Task types this worker runs: at most `pollMaxTaskTypes` (100 by default).',
    }),
    max_tasks: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 1000, default: 1 }))),
    wait_ms: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: MAX_WAIT_MS,
          default: DEFAULT_WAIT_MS,
          description: "How long to wait for a task; clamped to the node's maximum.",
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type PollRequestBody = Static<typeof PollRequest>;

/**
 * Not bounded here: a token of any length or shape that is not the lease's is 409
 * `lease_not_held`, like any other wrong token (the body limit bounds its size).
 */
const LeaseToken = Type.String({ description: 'The lease token the poll handed out with the task.' });

/** A worker's JSON value: a result or a progress update. Its size is checked in code (`maxResultBytes`). */
const WorkerJson = (description: string) => Type.Unknown({ description });

export const HeartbeatRequest = Type.Object(
  {
    lease_token: LeaseToken,
    progress: Type.Optional(
      WorkerJson(
        "Extension: the task's latest progress, any JSON up to `maxResultBytes` (64 KiB by default), " +
          'shown by GET /api/tasks/{task_id} until the next update; null is a value, leave it out to send none.',
      ),
    ),
    extend_seconds: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: MAX_TIMEOUT_SECONDS,
        description:
          "Push the attempt's deadline to at least now + this many seconds, never past its start + max_timeout_seconds.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type HeartbeatRequestBody = Static<typeof HeartbeatRequest>;

const completionFields = {
  lease_token: LeaseToken,
  status: StringEnum(OUTCOMES),
  on_child_failure: OnChildFailure,
  error: Type.Optional(Nullable(Type.String({ description: 'Cut to 4 KiB of UTF-8.' }))),
  retryable: Type.Optional(Nullable(Type.Boolean({ default: true }))),
  result: Type.Optional(
    WorkerJson(
      "A succeeded attempt's result, any JSON up to `maxResultBytes` (64 KiB by default), stored with the task " +
        'and shown by GET /api/tasks/{task_id} and its history. Ignored with status failed.',
    ),
  ),
};

export const Completion = Type.Object(completionFields, { additionalProperties: false });
export type CompletionBody = Static<typeof Completion>;

export const CompletionBatch = Type.Object(
  {
    results: Type.Array(Type.Object({ task_id: Uuid, ...completionFields }, { additionalProperties: false }), {
      minItems: 1,
      maxItems: MAX_BATCH_COMPLETIONS,
    }),
  },
  { additionalProperties: false },
);
export type CompletionBatchBody = Static<typeof CompletionBatch>;

/** One task handed to a worker. */
export const Assignment = Type.Object(
  {
    task_id: Uuid,
    task_type: Type.String(),
    payload: Type.Unknown(),
    attempt: Type.Integer(),
    lease_token: Type.String(),
    lease_expires_at: Nullable(Time),
    deadline_at: {
      ...Time,
      description:
        'The execution deadline of this attempt: at it the attempt ends as a timeout, whatever the worker does (extend it with extend_seconds on a heartbeat).',
    },
    timeout_seconds: Type.Integer(),
    children: Type.Optional(
      Type.Object(
        { total: Type.Integer(), succeeded: Type.Integer(), failed: Type.Integer(), cancelled: Type.Integer() },
        {
          additionalProperties: false,
          description:
            'Only for a task resumed after waiting for its children: how they ended (cancelled counts expired ones too). Page their results with GET /api/tasks/{task_id}/children.',
        },
      ),
    ),
    inputs: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description:
          'Only for a task with predecessors (a DAG dependent, a parent resumed after its children): each predecessor’s result by its task id, null for none. The first 100 predecessors by id; a result over 16 KiB, or past 64 KiB of results together, is named in inputs_omitted instead.',
      }),
    ),
    inputs_omitted: Type.Optional(
      Type.Array(Uuid, {
        description: 'Predecessors whose results were too large to hand on inline: read them with GET /api/tasks/{id}.',
      }),
    ),
    inputs_more: Type.Optional(
      Type.Integer({
        description:
          'How many predecessors there are beyond the first 100, whose results are not handed on (a parent pages its children with GET /api/tasks/{task_id}/children).',
      }),
    ),
    traceparent: Type.Optional(
      Type.String({
        description:
          "The W3C trace context of the task (its claim's span when the node traces, else the one it was submitted with): start the worker's span as its child. Absent when the task has none.",
      }),
    ),
  },
  { additionalProperties: false },
);
export type AssignmentJson = Static<typeof Assignment>;

export const workerRoutesSchemas = {
  poll: {
    ...needs('work'),
    tags: ['workers'],
    summary: 'Long-poll for due tasks',
    body: PollRequest,
    response: {
      200: Type.Object({ tasks: Type.Array(Ref<typeof Assignment>('Assignment')) }, { additionalProperties: false }),
      ...errors(...COMMON_ERRORS),
    },
  },
  heartbeat: {
    ...needs('work'),
    tags: ['workers'],
    summary: 'Extend a lease',
    description:
      'Extension: a `progress` member records the latest progress of the task (compare-and-set on the lease, as ' +
      'the heartbeat) after the lease is extended; over `maxResultBytes` it is a 400 and the lease is not extended.',
    params: TaskIdParams,
    body: HeartbeatRequest,
    response: {
      200: Type.Object(
        {
          ok: Type.Literal(true),
          lease_expires_at: Nullable(Time),
          deadline_at: { ...Time, description: "The attempt's deadline, after any extension." },
          cancel_requested: Type.Boolean(),
        },
        { additionalProperties: false },
      ),
      ...errors(...COMMON_ERRORS, 409),
    },
  },
  complete: {
    ...needs('work'),
    tags: ['workers'],
    summary: 'Report a result',
    params: TaskIdParams,
    body: Completion,
    response: { 200: Ok, ...errors(...COMMON_ERRORS, 409) },
  },
  completeBatch: {
    ...needs('work'),
    tags: ['workers'],
    summary: 'Report up to 1 000 results at once (extension)',
    description: 'ok: false for a result whose lease is no longer held (that result is discarded).',
    body: CompletionBatch,
    response: {
      200: Type.Object(
        {
          results: Type.Array(Type.Object({ task_id: Uuid, ok: Type.Boolean() }, { additionalProperties: false })),
        },
        { additionalProperties: false },
      ),
      ...errors(...COMMON_ERRORS),
    },
  },
} as const;
