import Type, { type Static } from 'typebox';
import { OPERATION_ACTIONS, OPERATION_STATES } from '../../domain/operations.js';
import { STORED_STATUSES } from '../../domain/model.js';
import {
  COMMON_ERRORS,
  Nullable,
  NullableTime,
  StoredText,
  StringEnum,
  TaskType,
  Time,
  TimeInput,
  Uuid,
  errors,
  needs,
} from './common.js';

/**
 * Operations on many tasks (`/api/operations`): what each route takes and answers. What a
 * schema cannot say (at least one filter field, a status the action applies to, the times) is
 * checked in src/http/validation/operations.ts.
 */

const filterFields = {
  // Any stored status; which ones the action takes is checked after (validation/operations.ts).
  status: Type.Optional(Nullable(StringEnum(STORED_STATUSES))),
  task_type: Type.Optional(Nullable(TaskType)),
  created_after: Type.Optional(Nullable(TimeInput)),
  created_before: Type.Optional(Nullable(TimeInput)),
  due_after: Type.Optional(Nullable(TimeInput)),
  due_before: Type.Optional(Nullable(TimeInput)),
  limit: Type.Optional(Nullable(StoredText(256, { description: 'A limit name the task takes part in.' }))),
  error_contains: Type.Optional(
    Nullable(StoredText(1000, { description: "Text in the task's last error, ignoring case." })),
  ),
  error_equals: Type.Optional(
    Nullable(
      StoredText(1000, {
        minLength: 0,
        description:
          "The first 1 000 characters of the task's last error, exactly ('' for none): a failed view group's `error`.",
      }),
    ),
  ),
};

export const OperationFilterRequest = Type.Object(
  {
    ...filterFields,
    parent_id: Type.Optional(Nullable({ ...Uuid, description: 'The children of this task (its spawned tasks).' })),
  },
  { additionalProperties: false },
);

export const OperationRequest = Type.Object(
  {
    action: StringEnum(OPERATION_ACTIONS),
    filter: OperationFilterRequest,
  },
  { additionalProperties: false },
);
export type OperationRequestJson = Static<typeof OperationRequest>;

/** The filter as an operation answers it: the fields given, times as the API writes them. */
const OperationFilterJson = Type.Object(
  {
    status: Type.Optional(StringEnum(STORED_STATUSES)),
    task_type: Type.Optional(Type.String()),
    created_after: Type.Optional(Time),
    created_before: Type.Optional(Time),
    due_after: Type.Optional(Time),
    due_before: Type.Optional(Time),
    limit: Type.Optional(Type.String()),
    error_contains: Type.Optional(Type.String()),
    error_equals: Type.Optional(Type.String()),
    parent_id: Type.Optional(Uuid),
  },
  { additionalProperties: false },
);

export const Operation = Type.Object(
  {
    operation_id: Type.String({ format: 'uuid' }),
    action: StringEnum(OPERATION_ACTIONS),
    filter: OperationFilterJson,
    state: StringEnum(OPERATION_STATES),
    matched: Type.Integer({
      description: 'Tasks found so far that match the filter, in a status the action applies to.',
    }),
    done: Type.Integer({ description: 'Of those, the ones the action changed.' }),
    failed: Type.Integer({ description: 'Of those, the ones it could not change (docs/api.md says why).' }),
    error: Nullable(Type.String({ description: 'Why a failed operation failed.' })),
    started_at: Time,
    finished_at: NullableTime,
  },
  { additionalProperties: false },
);
export type OperationJson = Static<typeof Operation>;

const OperationIdParams = Type.Object({ operation_id: Uuid }, { additionalProperties: false });

const ListOperationsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
    next_token: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);

export const operationRoutes = {
  start: {
    // `delete` needs `admin`: checked by the route once it has read the body.
    ...needs('submit', 'admin'),
    tags: ['operations'],
    summary: 'Cancel, retry or delete every task a filter matches, in the background',
    description:
      'Answers at once with the running operation; its progress is at GET /api/operations/{operation_id}. ' +
      '`cancel` and `retry` need the submit scope, `delete` the admin scope.',
    body: OperationRequest,
    response: { 202: Operation, ...errors(...COMMON_ERRORS) },
  },
  get: {
    ...needs('read'),
    tags: ['operations'],
    summary: "An operation's progress",
    params: OperationIdParams,
    response: { 200: Operation, ...errors(400, 401, 403, 404, 500, 503) },
  },
  list: {
    ...needs('read'),
    tags: ['operations'],
    summary: 'List operations, newest first',
    querystring: ListOperationsQuery,
    response: {
      200: Type.Object(
        {
          operations: Type.Array(Operation),
          next_token: Nullable(Type.String({ description: 'Give it back for the next page; null on the last page.' })),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500, 503),
    },
  },
  cancel: {
    ...needs('submit', 'admin'),
    tags: ['operations'],
    summary: 'Cancel an operation: what it has not done yet is not done',
    params: OperationIdParams,
    response: { 200: Operation, ...errors(400, 401, 403, 404, 409, 500, 503) },
  },
};
