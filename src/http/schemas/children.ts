import Type, { type Static } from 'typebox';
import { COMMON_ERRORS, Nullable, NullableTime, StoredText, TaskStatus, Uuid, errors, needs } from './common.js';
import { TaskIdParams, TaskRequest } from './tasks.js';

/**
 * Children of a running task (docs/api.md, "Children of a running task"): what
 * `POST /api/tasks/{task_id}/children` takes and answers, and `GET` of the same path. The channel's
 * `spawn` frame carries the same tasks (src/http/schemas/worker-channel.ts).
 */

/** Most children one request (or one `spawn` frame) adds. */
export const MAX_SPAWN_TASKS = 1000;

/** A child: a task of `POST /api/tasks` and its `child_key`. */
export const ChildTaskRequest = Type.Object(
  {
    ...TaskRequest.properties,
    child_key: Type.Optional(
      Nullable(
        StoredText(256, {
          description:
            'Its name within the parent: a spawn that names it again (a retried attempt) answers the child made first and adds none. Left out: always a new child.',
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type ChildTaskRequestBody = Static<typeof ChildTaskRequest>;

/** The children of one request, as the route and the `spawn` frame hold them. */
export const ChildTasks = Type.Array(ChildTaskRequest, { minItems: 1, maxItems: MAX_SPAWN_TASKS });

export const SpawnRequest = Type.Object(
  {
    lease_token: Type.String({ description: "The lease token of the parent's running attempt." }),
    tasks: ChildTasks,
  },
  { additionalProperties: false },
);
export type SpawnRequestBody = Static<typeof SpawnRequest>;

/** What a spawn answers for each child (in request order). */
export const Spawned = Type.Object(
  { task_id: Uuid, status: TaskStatus, due_time: NullableTime, child_key: Nullable(Type.String()) },
  { additionalProperties: false },
);

export const ChildrenQuery = Type.Object(
  {
    status: Type.Optional(TaskStatus),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    next_token: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type ChildrenQueryJson = Static<typeof ChildrenQuery>;

export const Child = Type.Object(
  {
    task_id: Uuid,
    child_key: Nullable(Type.String()),
    status: TaskStatus,
    result: Type.Unknown({ description: "What the succeeded child's worker returned; null when none." }),
    last_error: Nullable(Type.String()),
  },
  { additionalProperties: false },
);

export const childrenRoutes = {
  spawn: {
    ...needs('work'),
    tags: ['tasks'],
    summary: 'Add children to a running task (its worker, with the lease token)',
    description:
      'Up to 1 000 children per request, all or none. Each is an ordinary task (not a cron schedule, no ' +
      '`dependencies`, no `debounce`) whose `parent_id` is the task. A `child_key` the parent already has answers ' +
      'that child. 409 `lease_not_held` unless the token is the running attempt’s lease.',
    params: TaskIdParams,
    body: SpawnRequest,
    response: {
      201: Type.Object(
        { tasks: Type.Array(Spawned) },
        { additionalProperties: false, description: 'The children, in request order' },
      ),
      ...errors(...COMMON_ERRORS, 404, 409),
    },
  },
  list: {
    ...needs('read'),
    tags: ['tasks'],
    summary: "A task's children, in the order they were spawned",
    params: TaskIdParams,
    querystring: ChildrenQuery,
    response: {
      200: Type.Object(
        {
          children: Type.Array(Child),
          next_token: Nullable(Type.String({ description: 'Give it back for the next page; null on the last page.' })),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 404, 500, 503),
    },
  },
} as const;
