import Type, { type Static } from 'typebox';
import {
  MAX_CONCURRENCY,
  MAX_LIMIT_NAME_LENGTH,
  MAX_RATE_BURST,
  MAX_RATE_LIMIT,
  MAX_RATE_PERIOD_SECONDS,
  MAX_WEIGHT,
  MIN_WEIGHT,
  ON_LIMIT,
} from '../../domain/limits.js';
import { MIN_RATE_PERIOD_SECONDS } from '../../services/limit-input.js';
import { COMMON_ERRORS, Nullable, Ok, Ref, StringEnum, TaskType, errors, needs } from './common.js';

/**
 * The flow-control routes (API.md "Flow control"): `PUT/GET/DELETE /api/limits/{name}`,
 * `GET /api/limits`, and pausing or resuming a task type. Declaring is an operator's act
 * (`admin`); reading is a reader's, as for tasks (`read`).
 */

const LIMIT_NAME_PATTERN = `^[A-Za-z0-9_.:*-]{1,${MAX_LIMIT_NAME_LENGTH}}$`;

/** A limit name in a path: the service also checks that `*` ends a family (`customer:*`). */
const LimitName = Type.String({
  minLength: 1,
  maxLength: MAX_LIMIT_NAME_LENGTH,
  pattern: LIMIT_NAME_PATTERN,
  'x-hint': 'contain only letters, digits and _ . : - (a family ends in :*)',
  examples: ['customer:42', 'customer:*', 'stripe-api'],
});

export const LimitParams = Type.Object({ name: LimitName }, { additionalProperties: false });
export const TaskTypeParams = Type.Object({ task_type: TaskType }, { additionalProperties: false });

const OnLimit = StringEnum(ON_LIMIT, {
  description:
    'When concurrency is reached: queue (wait, first in first out within the key), cancel_running (the oldest ' +
    'running task is cancelled), cancel_new (the new task is cancelled), keep_latest_waiting (older waiting ' +
    'tasks of the key are cancelled).',
});

const Rate = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: MAX_RATE_LIMIT, description: 'Starts per period.' }),
    period_seconds: Type.Number({
      minimum: MIN_RATE_PERIOD_SECONDS,
      maximum: MAX_RATE_PERIOD_SECONDS,
      description: 'The period, seconds (whole milliseconds).',
    }),
    burst: Type.Optional(
      Nullable(
        Type.Integer({ minimum: 0, maximum: MAX_RATE_BURST, description: 'Extra starts allowed at once (default 0).' }),
      ),
    ),
  },
  { additionalProperties: false },
);

/** `PUT /api/limits/{name}`: every member may be left out (or null). */
export const LimitRequest = Type.Object(
  {
    concurrency: Type.Optional(
      Nullable(
        Type.Integer({
          minimum: 0,
          maximum: MAX_CONCURRENCY,
          description: 'Tasks of the key running at once; 0 pauses it. Left out or null: unlimited.',
        }),
      ),
    ),
    rate: Type.Optional(
      Nullable({ ...Rate, description: 'Task starts per period (GCRA). Left out or null: unlimited.' }),
    ),
    on_limit: Type.Optional(Nullable(OnLimit)),
    weight: Type.Optional(
      Nullable(
        Type.Number({
          minimum: MIN_WEIGHT,
          maximum: MAX_WEIGHT,
          description: "The key's share when the keys of one family compete for workers (default 1).",
        }),
      ),
    ),
  },
  { additionalProperties: false },
);
export type LimitRequestJson = Static<typeof LimitRequest>;

/** A limit as the routes answer it. */
export const Limit = Type.Object(
  {
    name: Type.String(),
    declared_as: Type.String({ description: 'The name whose declaration applies: this one, or its family.' }),
    concurrency: Nullable(Type.Integer()),
    rate: Nullable(
      Type.Object(
        { limit: Type.Integer(), period_seconds: Type.Number(), burst: Type.Integer() },
        { additionalProperties: false },
      ),
    ),
    on_limit: OnLimit,
    weight: Type.Number(),
    running: Nullable(Type.Integer({ description: 'Tasks of the key running now; null for a family, and in a list.' })),
    waiting: Nullable(Type.Integer({ description: 'Tasks of the key pending now; null for a family, and in a list.' })),
    starts_last_period: Nullable(
      Type.Integer({ description: "Starts within the rate's last period; null while no actor counts them." }),
    ),
  },
  { additionalProperties: false },
);
export type LimitJson = Static<typeof Limit>;

export const LimitListQuery = Type.Object(
  {
    prefix: Type.Optional(
      Type.String({
        maxLength: MAX_LIMIT_NAME_LENGTH,
        pattern: '^[A-Za-z0-9_.:*-]*$',
        'x-hint': 'be the start of a limit name',
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
    next_token: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type LimitListQueryJson = Static<typeof LimitListQuery>;

const LimitPage = Type.Object(
  { limits: Type.Array(Ref<typeof Limit>('Limit')), next_token: Nullable(Type.String()) },
  { additionalProperties: false },
);

const TypePause = Type.Object(
  {
    task_type: Type.String(),
    paused: Type.Boolean({ description: "Whether the type's key now resolves to concurrency 0." }),
    limit: Nullable(Ref<typeof Limit>('Limit')),
  },
  { additionalProperties: false },
);
export type TypePauseJson = Static<typeof TypePause>;

export const limitRoutes = {
  put: {
    ...needs('admin'),
    tags: ['limits'],
    summary: 'Declare or change a limit (a key, or a family: customer:*)',
    description: 'Answers the limit as stored. Takes effect for waiting tasks at once.',
    params: LimitParams,
    body: LimitRequest,
    response: { 200: Ref<typeof Limit>('Limit'), ...errors(...COMMON_ERRORS) },
  },
  get: {
    ...needs('read'),
    tags: ['limits'],
    summary: "A limit's values and live figures",
    description:
      "A key that is not declared but covered by a declared family answers the family's values, `declared_as` " +
      'naming it. Neither: 404 not_found.',
    params: LimitParams,
    response: { 200: Ref<typeof Limit>('Limit'), ...errors(400, 401, 403, 404, 500, 503) },
  },
  list: {
    ...needs('read'),
    tags: ['limits'],
    summary: 'List declared limits in name order',
    description: 'The live figures (running, waiting, starts_last_period) are null here: GET one name for them.',
    querystring: LimitListQuery,
    response: { 200: LimitPage, ...errors(400, 401, 403, 500, 503) },
  },
  delete: {
    ...needs('admin'),
    tags: ['limits'],
    summary: 'Remove a declaration',
    description:
      'Refused (409 limit_in_use) while tasks waiting to start (pending, blocked) take part in it: removing ' +
      'does not release them. Not declared: 404 not_found.',
    params: LimitParams,
    response: { 200: Ok, ...errors(400, 401, 403, 404, 409, 500, 503) },
  },
  pauseType: {
    ...needs('admin'),
    tags: ['limits'],
    summary: 'Pause a task type: its key type:<task_type> at concurrency 0',
    description: 'Running tasks finish; nothing of the type starts until it is resumed.',
    params: TaskTypeParams,
    response: { 200: TypePause, ...errors(400, 401, 403, 500, 503) },
  },
  resumeType: {
    ...needs('admin'),
    tags: ['limits'],
    summary: "Resume a task type: its key's concurrency removed",
    description:
      'A declaration left with nothing else in it is removed. A concurrency declared before the pause is not ' +
      'restored.',
    params: TaskTypeParams,
    response: { 200: TypePause, ...errors(400, 401, 403, 500, 503) },
  },
} as const;
