import Type, { type Static } from 'typebox';
import { Nullable, NullableTime, StringEnum, TaskStatus, Time, errors, needs } from './common.js';
import { TaskIdParams } from './tasks.js';

/** The states of `GET /api/tasks/{task_id}/explain`. */
export const EXPLAIN_STATES = [
  'scheduled',
  'backing_off',
  'ready',
  'waiting',
  'running',
  'paused',
  'active',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
] as const;

const Count = Type.Integer({ minimum: 0 });

/** What a gated key holds a due task by (`LimitHold`). */
export const LIMIT_HOLDS = ['paused', 'full', 'throttled', 'open', 'unknown'] as const;

/** Why a task is where it is (docs/api.md, "explain"). Members that do not apply are null. */
export const Explanation = Type.Object(
  {
    task_id: Type.String(),
    status: TaskStatus,
    state: StringEnum(EXPLAIN_STATES),
    sentence: Type.String({ description: 'One plain-English sentence built from the facts below.' }),
    checked_at: Time,
    due: Nullable(
      Type.Object(
        {
          due_at: Time,
          due_in_ms: Count,
          partition: Count,
          owner_node: Type.String({ description: 'The node the ring names for the wheel partition.' }),
          epoch: Nullable(
            Type.Integer({ description: "The partition's fencing epoch; null before its first activation." }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    dependencies: Nullable(
      Type.Array(
        Type.Object(
          { task_id: Type.String(), status: Type.Union([TaskStatus, Type.Literal('unknown')]) },
          { additionalProperties: false },
        ),
      ),
    ),
    queue: Nullable(
      Type.Object(
        {
          task_type: Type.String(),
          priority: Count,
          ahead: Nullable(Count),
          workers: Type.Object(
            { connected: Count, polling: Count, last_asked_at: NullableTime },
            { additionalProperties: false },
          ),
        },
        { additionalProperties: false },
      ),
    ),
    lease: Nullable(
      Type.Object(
        {
          worker_id: Nullable(Type.String()),
          since: NullableTime,
          lease_expires_at: NullableTime,
          deadline_at: {
            ...NullableTime,
            description:
              'The execution deadline of the attempt: it ends as a timeout then, unless a worker extends it.',
          },
          last_heartbeat_at: NullableTime,
          owner_node: Nullable(
            Type.String({
              description:
                "The node that holds the lease: the one that claimed the task, or the ring's owner after it died; null when no live node answers for it.",
            }),
          ),
        },
        { additionalProperties: false },
      ),
    ),
    limits: Nullable(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ description: 'A gated key of the task: a limit it names, or type:<its type>.' }),
            declared_as: Nullable(
              Type.String({ description: "The name whose declaration applies: the key's own, or its family." }),
            ),
            concurrency: Nullable(Count),
            running: Nullable(Count),
            waiting: Nullable(Count),
            throttled_until: {
              ...NullableTime,
              description: "While the key's rate holds its waiting tasks back: when the next start is allowed.",
            },
            holds: StringEnum(LIMIT_HOLDS),
          },
          { additionalProperties: false },
        ),
        {
          description:
            "A due task's gated keys, each with its actor's live figures and what it holds the task by; null when none is gated.",
        },
      ),
    ),
    backoff: Nullable(
      Type.Object(
        { until: Time, attempt: Count, last_error: Nullable(Type.String()) },
        { additionalProperties: false },
      ),
    ),
    start_by: {
      ...NullableTime,
      description: 'A pending task with a start deadline: not started by then, it ends expired.',
    },
    schedule: Nullable(
      Type.Object({ paused: Type.Boolean(), next_due_time: NullableTime }, { additionalProperties: false }),
    ),
    outcome: Nullable(
      Type.Object(
        { finished_at: NullableTime, error: Nullable(Type.String()), reason: Type.String() },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ExplanationJson = Static<typeof Explanation>;

export const explainRouteSchema = {
  ...needs('read'),
  tags: ['tasks'],
  summary: 'Why a task is where it is: what it waits for, as data and as one sentence',
  description:
    'Due on which wheel partition (owner node, epoch); waiting on which predecessors; in the ready queue behind ' +
    'how many tasks, with the workers of its type across the cluster; held by which worker; backing off; a ' +
    "schedule's next fire; how it ended; which of its limits holds it (paused, full, throttled) with each key's live figures. Every fact is read by key from its owner: nothing scans the task table.",
  params: TaskIdParams,
  response: { 200: Explanation, ...errors(400, 401, 403, 404, 500, 503) },
} as const;
