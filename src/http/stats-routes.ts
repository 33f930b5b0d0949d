import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WheelhouseError } from '../lib/errors.js';
import type { Activity, ActivityQuery, ActivityStep } from '../services/activity.js';
import { statsRoutesSchemas as schemas } from './schemas/stats.js';
import { parseIsoTime } from './validation/fields.js';

/** What `GET /admin/stats` reads (src/services/activity.ts over the store's `task_stats`). */
export interface StatsApi {
  activity(query: ActivityQuery): Promise<Activity>;
}

/**
 * `GET /admin/stats`: the task activity of a time range, totals and a series, from the kept
 * per-minute rollup (docs/api.md, "Task activity"; docs/decisions/0034-task-stats-rollup.md).
 */
export function statsRoutes(api: StatsApi): FastifyPluginAsync {
  return async (fastify) => {
    const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
    app.get('/admin/stats', { schema: schemas.stats }, async (request) => {
      const q = request.query;
      const fromMs = timeOf('from', q.from);
      const toMs = timeOf('to', q.to);
      const a = await api.activity({
        taskType: q.task_type ?? null,
        ...(fromMs === undefined ? {} : { fromMs }),
        ...(toMs === undefined ? {} : { toMs }),
        ...(q.step === undefined ? {} : { stepMs: q.step * 1000 }),
      });
      return {
        task_type: a.taskType,
        from: new Date(a.fromMs).toISOString(),
        to: new Date(a.toMs).toISOString(),
        step_seconds: a.stepMs / 1000,
        totals: countsJson(a.totals),
        series: a.series.map(stepJson),
        now: { ready: a.now.ready, running: a.now.running, running_capped: a.now.runningCapped },
        task_types: a.taskTypes,
      };
    });
  };
}

function stepJson(s: ActivityStep) {
  return { at: new Date(s.startMs).toISOString(), ...countsJson(s) };
}

function countsJson(s: ActivityStep) {
  const c = s.counts;
  return {
    submitted: c.submitted,
    started: c.started,
    succeeded: c.succeeded,
    failed: c.failed,
    retried: c.retried,
    cancelled: c.cancelled,
    expired: c.expired,
    failure_rate: s.failureRate,
    start_lag_p50_ms: s.lagP50Ms,
    start_lag_p99_ms: s.lagP99Ms,
    start_lag_max_ms: c.started === 0 ? null : c.lagMaxMs,
    start_lag_mean_ms: c.started === 0 ? null : Math.round(c.lagSumMs / c.started),
  };
}

function timeOf(field: 'from' | 'to', text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const ms = parseIsoTime(text);
  if (ms === null)
    throw new WheelhouseError('validation_failed', `${field}: must be an ISO-8601 time string`, {
      details: { field },
    });
  return ms;
}
