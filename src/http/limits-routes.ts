import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { LimitInput } from '../services/limit-input.js';
import type { LimitsApi, LimitView, TaskTypePause } from '../services/limits-service.js';
import { limitRoutes as schemas, type LimitJson, type LimitRequestJson, type TypePauseJson } from './schemas/limits.js';

/**
 * The flow-control routes of API.md: declare, read, list and remove limits, and pause or
 * resume a task type. The schemas (src/http/schemas/limits.ts) check each request's shape and
 * bounds; the service checks again what a schema cannot say (a `*` anywhere but a family's
 * end) and answers in its own words, turned into the API's snake_case here.
 */

export interface LimitsRoutesOptions {
  api: LimitsApi;
}

export const limitsRoutes: FastifyPluginAsync<LimitsRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api } = opts;

  app.put('/api/limits/:name', { schema: schemas.put }, async (request) =>
    limitJson(await api.declare(request.params.name, limitInput(request.body))),
  );

  app.get('/api/limits/:name', { schema: schemas.get }, async (request) =>
    limitJson(await api.get(request.params.name)),
  );

  app.get('/api/limits', { schema: schemas.list }, async (request) => {
    const q = request.query;
    const page = await api.list({
      limit: q.limit ?? 100,
      ...(q.prefix === undefined || q.prefix === '' ? {} : { prefix: q.prefix }),
      ...(q.next_token === undefined || q.next_token === '' ? {} : { nextToken: q.next_token }),
    });
    return { limits: page.items.map(limitJson), next_token: page.nextToken };
  });

  app.delete('/api/limits/:name', { schema: schemas.delete }, async (request) => {
    await api.remove(request.params.name);
    return { ok: true as const };
  });

  app.post('/api/task-types/:task_type/pause', { schema: schemas.pauseType }, async (request) =>
    typePauseJson(await api.pauseType(request.params.task_type)),
  );

  app.post('/api/task-types/:task_type/resume', { schema: schemas.resumeType }, async (request) =>
    typePauseJson(await api.resumeType(request.params.task_type)),
  );
};

/** A PUT body → the service's input (snake_case → camelCase; nulls kept: they mean "none"). */
export function limitInput(body: LimitRequestJson): LimitInput {
  const { rate } = body;
  return {
    ...(body.concurrency === undefined ? {} : { concurrency: body.concurrency }),
    ...(rate === undefined
      ? {}
      : {
          rate:
            rate === null
              ? null
              : {
                  limit: rate.limit,
                  periodSeconds: rate.period_seconds,
                  ...(rate.burst === undefined ? {} : { burst: rate.burst }),
                },
        }),
    ...(body.on_limit === undefined ? {} : { onLimit: body.on_limit }),
    ...(body.weight === undefined ? {} : { weight: body.weight }),
  };
}

export function limitJson(v: LimitView): LimitJson {
  return {
    name: v.key,
    declared_as: v.declaredAs,
    concurrency: v.concurrency,
    rate: v.rate === null ? null : { limit: v.rate.limit, period_seconds: v.rate.periodMs / 1000, burst: v.rate.burst },
    on_limit: v.onLimit,
    weight: v.weight,
    running: v.running,
    waiting: v.waiting,
    starts_last_period: v.startsLastPeriod,
  };
}

function typePauseJson(p: TaskTypePause): TypePauseJson {
  return { task_type: p.taskType, paused: p.paused, limit: p.limit === null ? null : limitJson(p.limit) };
}
