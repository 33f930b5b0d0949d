import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ExplainApi, SchedulesApi, TasksApi } from '../services/types.js';
import { explainRouteSchema } from './schemas/explain.js';
import { taskRoutes as schemas } from './schemas/task-routes.js';
import { historyQuery, listQuery } from './validation/requests.js';
import { batchSpecs, taskSpec, traceHeader, type TaskDefaults } from './validation/tasks.js';
import { executionJson, explanationJson, submitJson, taskJson } from './serialize.js';

/**
 * The task routes of API.md: submit (one or a batch), status, list, cancel, retry, explain,
 * pause, resume, history. Each route's schema (src/http/schemas/tasks.ts) validates its request before the
 * handler runs and serializes its answer; what a schema cannot say is checked in
 * src/http/validation/tasks.ts. Errors go to the server's error handler.
 */

export interface TasksRoutesOptions {
  api: TasksApi;
  schedules: SchedulesApi;
  explain: ExplainApi;
  /** Defaults and limits from configuration for validating submissions. */
  defaults: TaskDefaults;
  /** Body limit of `POST /api/tasks/batch`, bytes (larger than a single task's). */
  batchBodyLimitBytes: number;
}

export const tasksRoutes: FastifyPluginAsync<TasksRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api, defaults } = opts;

  /** Submit one task: 201, or 200 when an idempotency key matched an identical earlier request. */
  app.post('/api/tasks', { schema: schemas.submit }, async (request, reply) => {
    const [result] = await api.submit(
      traceHeader([taskSpec(request.body, defaults)], request.headers.traceparent),
      true,
    );
    if (result === undefined) throw new Error('TasksApi.submit answered no result for one task');
    reply.code(result.created ? 201 : 200);
    return submitJson(result);
  });

  /** Submit up to 1 000 tasks, all or nothing: 201 with the tasks in request order. */
  app.post(
    '/api/tasks/batch',
    { schema: schemas.batch, bodyLimit: opts.batchBodyLimitBytes },
    async (request, reply) => {
      const specs = traceHeader(batchSpecs(request.body, defaults), request.headers.traceparent);
      const results = await api.submit(specs);
      if (results.length !== specs.length) {
        throw new Error(`TasksApi.submit answered ${results.length} results for ${specs.length} tasks`);
      }
      reply.code(201);
      return { tasks: results.map(submitJson) };
    },
  );

  app.get('/api/tasks/:task_id', { schema: schemas.get }, async (request) =>
    taskJson(await api.getTask(request.params.task_id.toLowerCase())),
  );

  /** List, newest first, paginated by an opaque `next_token`. */
  app.get('/api/tasks', { schema: schemas.list }, async (request) => {
    const page = await api.listTasks(listQuery(request.query));
    return { tasks: page.tasks.map(taskJson), next_token: page.nextToken };
  });

  app.delete('/api/tasks/:task_id', { schema: schemas.cancel }, async (request) => {
    const { cancelledInstances } = await api.cancel(request.params.task_id.toLowerCase());
    return { ok: true as const, cancelled_instances: cancelledInstances };
  });

  /** A failed or cancelled task runs again as a new attempt. */
  app.post('/api/tasks/:task_id/retry', { schema: schemas.retry }, async (request) =>
    taskJson(await api.retry(request.params.task_id.toLowerCase())),
  );

  /** Why the task is where it is, from the actors and stores that own each fact. */
  app.get('/api/tasks/:task_id/explain', { schema: explainRouteSchema }, async (request) =>
    explanationJson(await opts.explain.explain(request.params.task_id.toLowerCase())),
  );

  /** Cron schedules: pause stops firing (the pending instance is cancelled); resume goes on from now. */
  app.post('/api/tasks/:task_id/pause', { schema: schemas.pause }, async (request) =>
    taskJson(await opts.schedules.pause(request.params.task_id.toLowerCase())),
  );
  app.post('/api/tasks/:task_id/resume', { schema: schemas.resume }, async (request) =>
    taskJson(await opts.schedules.resume(request.params.task_id.toLowerCase())),
  );

  app.get('/api/tasks/:task_id/history', { schema: schemas.history }, async (request) => {
    const q = historyQuery(request.query);
    const page = await api.history(request.params.task_id.toLowerCase(), q.limit, q.nextToken);
    return { executions: page.executions.map(executionJson), next_token: page.nextToken };
  });
};
