import Type, { type Static } from 'typebox';
import { TaskType, Time, TimeInput, errors, needs } from './common.js';

/** Schemas of `GET /admin/stats`: the task activity history (docs/api.md, "Task activity"). */

const StatsQuery = Type.Object(
  {
    task_type: Type.Optional(TaskType),
    from: Type.Optional({ ...TimeInput, description: 'Start of the range (default: an hour before `to`).' }),
    to: Type.Optional({ ...TimeInput, description: 'End of the range (default: now).' }),
    step: Type.Optional(
      Type.Integer({
        minimum: 60,
        maximum: 86_400 * 31,
        multipleOf: 60,
        description: 'Seconds per step of the series, whole minutes (default: the range in about 60 steps).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type StatsQueryJson = Static<typeof StatsQuery>;

const Count = Type.Integer({ minimum: 0 });
const Rate = Type.Union([Type.Number(), Type.Null()], {
  description: 'failed ÷ (succeeded + failed); null when none ended.',
});
const Lag = Type.Union([Type.Integer(), Type.Null()]);

const Counts = {
  submitted: Count,
  started: Count,
  succeeded: Count,
  failed: Count,
  retried: Count,
  cancelled: Count,
  expired: Count,
  failure_rate: Rate,
  start_lag_p50_ms: Lag,
  start_lag_p99_ms: Lag,
  start_lag_max_ms: Lag,
  start_lag_mean_ms: Lag,
};

const Step = Type.Object({ at: Time, ...Counts }, { additionalProperties: false });

export const statsRoutesSchemas = {
  stats: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'Task activity over a time range: totals per outcome and a series, from the kept per-minute rollup',
    querystring: StatsQuery,
    response: {
      200: Type.Object(
        {
          task_type: Type.Union([Type.String(), Type.Null()]),
          from: Time,
          to: Time,
          step_seconds: Type.Integer(),
          totals: Type.Object(Counts, { additionalProperties: false }),
          series: Type.Array(Step),
          now: Type.Object(
            {
              ready: Count,
              running: Count,
              running_capped: Type.Boolean({ description: 'More tasks run than `running` says.' }),
            },
            { additionalProperties: false },
          ),
          task_types: Type.Array(Type.String(), { description: 'The task types with activity in the range.' }),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500, 503),
    },
  },
} as const;
