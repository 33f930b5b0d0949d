import type { FastifyPluginAsync } from 'fastify';
import type { SchedulesApi, TasksApi } from '../services/types.js';
import {
  validateBatch,
  validateHistoryQuery,
  validateListQuery,
  validateTask,
  validateTaskId,
  type TaskDefaults,
} from './validation/tasks.js';
import { executionJson, submitJson, taskJson } from './serialize.js';

/**
 * The task routes of API.md: submit (one or a batch), status, list, cancel, history.
 * Validation is `src/tasks/validate.ts`; errors go to the server's error handler. A malformed
 * task id in a path is a 400 naming `task_id`, never a 500.
 */

export interface TasksRoutesOptions {
  api: TasksApi;
  schedules: SchedulesApi;
  /** Defaults and limits from configuration for validating submissions. */
  defaults: TaskDefaults;
  /** Body limit of `POST /api/tasks/batch`, bytes (larger than a single task's). */
  batchBodyLimitBytes: number;
}

interface IdParams {
  id: string;
}

export const tasksRoutes: FastifyPluginAsync<TasksRoutesOptions> = async (app, opts) => {
  const { api, defaults } = opts;

  /** Submit one task: 201, or 200 when an idempotency key matched an identical earlier request. */
  app.post('/api/tasks', async (request, reply) => {
    const spec = validateTask(request.body, defaults);
    const results = await api.submit([spec]);
    const result = results[0];
    if (result === undefined) throw new Error('TasksApi.submit answered no result for one task');
    reply.code(result.created ? 201 : 200);
    return submitJson(result);
  });

  /** Submit up to 1 000 tasks, all or nothing: 201 with the tasks in request order. */
  app.post('/api/tasks/batch', { bodyLimit: opts.batchBodyLimitBytes }, async (request, reply) => {
    const specs = validateBatch(request.body, defaults);
    const results = await api.submit(specs);
    if (results.length !== specs.length) {
      throw new Error(`TasksApi.submit answered ${results.length} results for ${specs.length} tasks`);
    }
    reply.code(201);
    return { tasks: results.map(submitJson) };
  });

  app.get<{ Params: IdParams }>('/api/tasks/:id', async (request) => {
    const view = await api.getTask(validateTaskId(request.params.id));
    return taskJson(view);
  });

  /** List, newest first, paginated by an opaque `next_token`. */
  app.get('/api/tasks', async (request) => {
    const q = validateListQuery(request.query);
    const page = await api.listTasks(q);
    return { tasks: page.tasks.map(taskJson), next_token: page.nextToken };
  });

  app.delete<{ Params: IdParams }>('/api/tasks/:id', async (request) => {
    const { cancelledInstances } = await api.cancel(validateTaskId(request.params.id));
    return { ok: true, cancelled_instances: cancelledInstances };
  });

  /** Cron schedules: pause stops firing (the pending instance is cancelled); resume goes on from now. */
  app.post<{ Params: IdParams }>('/api/tasks/:id/pause', async (request) =>
    taskJson(await opts.schedules.pause(validateTaskId(request.params.id))),
  );
  app.post<{ Params: IdParams }>('/api/tasks/:id/resume', async (request) =>
    taskJson(await opts.schedules.resume(validateTaskId(request.params.id))),
  );

  app.get<{ Params: IdParams }>('/api/tasks/:id/history', async (request) => {
    const id = validateTaskId(request.params.id);
    const q = validateHistoryQuery(request.query);
    const page = await api.history(id, q.limit, q.nextToken);
    return { executions: page.executions.map(executionJson), next_token: page.nextToken };
  });
};
