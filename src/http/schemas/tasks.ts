import Type, { type Static } from 'typebox';
import { Debounce, TaskLimits } from './flow-control.js';
import { MAX_DEPENDENCIES } from '../../lib/config.js';
import {
  Nullable,
  NullableTime,
  Ref,
  StoredText,
  StringEnum,
  TaskStatus,
  TaskType,
  Time,
  TimeInput,
  TRACEPARENT_PATTERN,
  Uuid,
} from './common.js';

/**
 * The task and graph routes' shapes (what each route takes and answers is ./task-routes.ts):
 * what a client sends (`TaskRequest`, `BatchRequest`,
 * `DagRequest`, the list and history queries) and what it gets back (`Task`, `Submitted`,
 * `Execution`, `Dag`). What a schema cannot say is checked in code after it
 * (src/http/validation/tasks.ts): cron expressions, time zones, ISO times, exactly one of
 * `due_time` and `delay_seconds`, no dependencies on a cron task, the payload's size.
 */

/** Most tasks in one `POST /api/tasks/batch`. */
export const MAX_BATCH_TASKS = 1000;

/** Most tasks in one `POST /api/dags`. */
export const MAX_DAG_TASKS = 10_000;

/** Longest `delay_seconds`: 100 years, so a due time always fits a Date. */
export const MAX_DELAY_SECONDS = 100 * 365.25 * 86_400;

/** Longest `max_timeout_seconds` and `start_deadline_seconds`, and the most one `extend_seconds` asks: a week. */
export const MAX_TIMEOUT_SECONDS = 7 * 86_400;

export const MISFIRE_POLICIES = ['fire_once', 'skip', 'fire_all'] as const;
export const OVERLAP_POLICIES = ['allow', 'skip'] as const;
export const SCHEDULE_TYPES = ['immediate', 'delayed', 'cron'] as const;

const IdempotencyKey = StoredText(256);

const ImmediateSchedule = Type.Object({ type: Type.Literal('immediate') }, { additionalProperties: false });

const DelayedSchedule = Type.Object(
  {
    type: Type.Literal('delayed'),
    due_time: Type.Optional(Nullable(TimeInput)),
    delay_seconds: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: MAX_DELAY_SECONDS }))),
  },
  {
    additionalProperties: false,
    description: 'Exactly one of due_time (a past time means due now) or delay_seconds.',
  },
);

const CronSchedule = Type.Object(
  {
    type: Type.Literal('cron'),
    cron_expression: Type.String({
      minLength: 1,
      maxLength: 256,
      description: '5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first. L and # accepted.',
      examples: ['0 * * * *'],
    }),
    timezone: Type.Optional(
      Nullable(Type.String({ minLength: 1, maxLength: 64, default: 'UTC', description: 'IANA name.' })),
    ),
    jitter_seconds: Type.Optional(Nullable(Type.Number({ minimum: 0, maximum: MAX_DELAY_SECONDS, default: 0 }))),
    misfire_policy: Type.Optional(Nullable(StringEnum(MISFIRE_POLICIES, { default: 'fire_once' }))),
    overlap_policy: Type.Optional(Nullable(StringEnum(OVERLAP_POLICIES, { default: 'allow' }))),
    end_time: Type.Optional(Nullable(TimeInput)),
  },
  { additionalProperties: false },
);

/** When a task runs: now, at a time or after a delay, or on a cron schedule. Left out: now. */
export const Schedule = Type.Unsafe<
  Static<typeof ImmediateSchedule> | Static<typeof DelayedSchedule> | Static<typeof CronSchedule>
>({
  type: 'object',
  required: ['type'],
  oneOf: [ImmediateSchedule, DelayedSchedule, CronSchedule],
  discriminator: { propertyName: 'type' },
});
export type ScheduleBody = Static<typeof Schedule>;

/** The members every task has, in the order error messages list them: what and when … */
const taskHead = {
  task_type: TaskType,
  payload: Type.Optional(Type.Unknown({ description: 'Any JSON value, up to the configured size (256 KiB).' })),
  schedule: Type.Optional(Nullable(Ref<typeof Schedule>('Schedule'))),
};

/** … and how. */
const taskTail = {
  traceparent: Type.Optional(
    Nullable(
      Type.String({
        pattern: TRACEPARENT_PATTERN,
        'x-hint': 'be a W3C traceparent (00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>)',
        description:
          "The W3C trace context to trace the task under (its hops' spans, and the worker's, join this trace). Overrides the request's `traceparent` header.",
        examples: ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
      }),
    ),
  ),
  priority: Type.Optional(
    Nullable(Type.Integer({ minimum: 0, maximum: 9, default: 5, description: 'Lower runs first.' })),
  ),
  max_retries: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 100, default: 3 }))),
  timeout_seconds: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: 86_400,
        description:
          'The execution deadline of one attempt: at it the attempt ends as a timeout (a retry, or failed). Default from config (60).',
      }),
    ),
  ),
  max_timeout_seconds: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TIMEOUT_SECONDS,
        description:
          'How far a worker may push the deadline (extend_seconds), counted from the attempt start; at least timeout_seconds. Default: timeout_seconds.',
      }),
    ),
  ),
  start_deadline_seconds: Type.Optional(
    Nullable(
      Type.Integer({
        minimum: 1,
        maximum: MAX_TIMEOUT_SECONDS,
        description: 'A task not started this long after its due time ends expired. Default from config (none).',
      }),
    ),
  ),
  limits: Type.Optional(Nullable(TaskLimits)),
};

/** `POST /api/tasks`, and each task of a batch. */
export const TaskRequest = Type.Object(
  {
    ...taskHead,
    dependencies: Type.Optional(
      Nullable(
        Type.Array(Uuid, {
          maxItems: MAX_DEPENDENCIES,
          description:
            'Ids of tasks that must succeed first (at most `maxDependencies`, 1 000 by default). Not on a cron task.',
        }),
      ),
    ),
    idempotency_key: Type.Optional(Nullable(IdempotencyKey)),
    ...taskTail,
    debounce: Type.Optional(Nullable(Debounce)),
  },
  { additionalProperties: false },
);
export type TaskRequestBody = Static<typeof TaskRequest>;

export const BatchRequest = Type.Object(
  {
    tasks: Type.Array(Ref<typeof TaskRequest>('TaskRequest'), { minItems: 1, maxItems: MAX_BATCH_TASKS }),
  },
  { additionalProperties: false },
);
export type BatchRequestBody = Static<typeof BatchRequest>;

/** A task of a graph: a task without its own dependencies or idempotency key, plus `ref` and `depends_on`. */
export const DagTaskRequest = Type.Object(
  {
    ref: StoredText(128, { description: "The task's name in this request." }),
    depends_on: Type.Optional(
      Nullable(
        Type.Array(StoredText(128), {
          maxItems: MAX_DEPENDENCIES,
          description: 'Refs of this request, or ids of existing tasks (at most `maxDependencies`, 1 000 by default).',
        }),
      ),
    ),
    ...taskHead,
    ...taskTail,
  },
  { additionalProperties: false },
);
export type DagTaskRequestBody = Static<typeof DagTaskRequest>;

export const DagRequest = Type.Object(
  {
    tasks: Type.Array(DagTaskRequest, { minItems: 1, maxItems: MAX_DAG_TASKS }),
    idempotency_key: Type.Optional(Nullable(IdempotencyKey)),
  },
  { additionalProperties: false },
);
export type DagRequestBody = Static<typeof DagRequest>;

export const TaskIdParams = Type.Object({ task_id: Uuid }, { additionalProperties: false });
export const DagIdParams = Type.Object({ dag_id: Uuid }, { additionalProperties: false });

/** `GET /api/tasks`. An empty `next_token` means the first page. */
export const ListQuery = Type.Object(
  {
    status: Type.Optional(TaskStatus),
    task_type: Type.Optional(TaskType),
    schedule_id: Type.Optional({ ...Uuid, description: "A cron schedule's instances only." }),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })),
    next_token: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type ListQueryJson = Static<typeof ListQuery>;

export const HistoryQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 20 })),
    next_token: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: false },
);
export type HistoryQueryJson = Static<typeof HistoryQuery>;

/** What a submit answers for each task: the stored status (`pending`, `blocked`, `active`, …). */
export const Submitted = Type.Object(
  {
    task_id: Uuid,
    status: TaskStatus,
    due_time: NullableTime,
    debounced: Type.Optional(
      Type.Boolean({
        description:
          'Only for a submit with `debounce`: true when it merged into the waiting task named (200), false when it made a new one.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SubmittedJson = Static<typeof Submitted>;

const optionalString = Type.Optional(Nullable(Type.String()));

/** A task as `GET /api/tasks/{task_id}` shows it. */
export const Task = Type.Object(
  {
    task_id: Uuid,
    task_type: Type.String(),
    status: TaskStatus,
    schedule_type: StringEnum(SCHEDULE_TYPES),
    due_time: NullableTime,
    created_at: NullableTime,
    started_at: NullableTime,
    completed_at: NullableTime,
    attempts: Type.Integer(),
    max_retries: Type.Integer(),
    priority: Type.Integer(),
    timeout_seconds: Type.Integer(),
    max_timeout_seconds: Type.Integer({ description: 'How far extensions may push an attempt deadline.' }),
    start_deadline_seconds: Nullable(Type.Integer({ description: 'null: the task may wait for ever.' })),
    start_by: { ...NullableTime, description: 'Not started by then, the task ends expired; null: never.' },
    deadline_at: {
      ...NullableTime,
      description: 'While running: when the attempt ends as a timeout unless it is extended.',
    },
    last_error: Nullable(Type.String()),
    idempotency_key: Nullable(Type.String()),
    cancel_requested: Type.Boolean(),
    dependencies: Type.Array(Uuid, { description: 'Predecessor ids.' }),
    parent_id: Nullable({ ...Uuid, description: 'The running task that spawned it (a child); null: none.' }),
    child_key: Nullable(Type.String({ description: 'A child only: its name within its parent, when given.' })),
    traceparent: Nullable(
      Type.String({
        description:
          "The W3C trace context its hops are traced under, as stored: its submit span's when the node traces, else the one it was submitted with; null: none.",
      }),
    ),
    limits: Type.Array(Type.String(), { description: "The limits it takes part in, sorted (its type's not listed)." }),
    payload: Type.Unknown(),
    result: Type.Unknown({ description: "What the succeeded attempt's worker returned; null when none." }),
    progress: Type.Unknown({
      description:
        'The latest progress a worker reported; null when none. A retry clears it; a task that ends keeps it.',
    }),
    progress_at: { ...NullableTime, description: 'When progress was recorded.' },
    dependencies_satisfied: Type.Optional(
      Type.Integer({ description: 'Tasks with predecessors only: how many have succeeded.' }),
    ),
    dag_id: Type.Optional({ ...Uuid, description: "A graph's tasks only, as is ref." }),
    debounce_key: Type.Optional(Type.String({ description: 'Debounced tasks only: the `debounce.key` submitted.' })),
    ref: optionalString,
    cron_expression: Type.Optional(
      Nullable(Type.String({ description: 'Cron tasks only, as are the fields down to last_fired_at.' })),
    ),
    timezone: optionalString,
    jitter_seconds: Type.Optional(Nullable(Type.Number())),
    misfire_policy: Type.Optional(Nullable(StringEnum(MISFIRE_POLICIES))),
    overlap_policy: Type.Optional(Nullable(StringEnum(OVERLAP_POLICIES))),
    end_time: Type.Optional(NullableTime),
    next_due_time: Type.Optional(NullableTime),
    last_fired_at: Type.Optional(NullableTime),
    schedule_id: Type.Optional({ ...Uuid, description: 'Cron instances only: the schedule that made this task.' }),
    fire_time: Type.Optional(
      Nullable({ ...Time, description: 'Cron instances only: the nominal fire time; due_time adds the jitter.' }),
    ),
  },
  { additionalProperties: false },
);
export type TaskJson = Static<typeof Task>;

export const EXECUTION_STATUSES = [
  'running',
  'succeeded',
  'failed',
  'timed_out',
  'cancelled',
  'expired',
  'waiting',
] as const;

/** One attempt of a task, in `GET /api/tasks/{task_id}/history`. */
export const Execution = Type.Object(
  {
    execution_id: Uuid,
    task_id: Uuid,
    attempt: Type.Integer(),
    status: StringEnum(EXECUTION_STATUSES),
    due_time: NullableTime,
    started_at: NullableTime,
    completed_at: NullableTime,
    worker_id: Nullable(Type.String()),
    error: Nullable(Type.String()),
    result: Type.Unknown({ description: "A succeeded attempt's result; null for any other attempt or when none." }),
  },
  { additionalProperties: false },
);
export type ExecutionJson = Static<typeof Execution>;

export const DagSubmitted = Type.Object(
  {
    dag_id: Uuid,
    tasks: Type.Array(
      Type.Object(
        { ref: Type.String(), task_id: Uuid, status: TaskStatus, due_time: NullableTime },
        { additionalProperties: false },
      ),
      { description: 'In request order.' },
    ),
  },
  { additionalProperties: false },
);
export type DagSubmittedJson = Static<typeof DagSubmitted>;

export const DAG_STATUSES = ['running', 'succeeded', 'failed', 'cancelled'] as const;

export const Dag = Type.Object(
  {
    dag_id: Uuid,
    status: StringEnum(DAG_STATUSES),
    counts: Type.Record(Type.String(), Type.Integer(), { description: 'Tasks by status.' }),
    tasks: Type.Array(
      Type.Object(
        {
          ref: Type.String(),
          task_id: Uuid,
          task_type: Type.String(),
          status: TaskStatus,
          depends_on: Type.Array(Type.String(), { description: 'Refs, or ids of tasks outside the graph.' }),
          due_time: NullableTime,
          started_at: NullableTime,
          completed_at: NullableTime,
          attempts: Type.Integer(),
          last_error: Nullable(Type.String()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type DagJson = Static<typeof Dag>;

const NextToken = Nullable(Type.String({ description: 'Give it back for the next page; null on the last page.' }));

export const TaskPage = Type.Object(
  { tasks: Type.Array(Ref<typeof Task>('Task')), next_token: NextToken },
  { additionalProperties: false },
);

export const HistoryPage = Type.Object(
  { executions: Type.Array(Ref<typeof Execution>('Execution')), next_token: NextToken },
  { additionalProperties: false },
);
