import type { FastifyPluginAsync } from 'fastify';
import type { DagsApi } from '../services/types.js';
import { validateDag, validateTaskId, type TaskDefaults } from './validation/tasks.js';
import { BODY } from './validation/fields.js';
import { dagJson, dagSubmitJson } from './serialize.js';

/**
 * `POST /api/dags` (a whole graph, all or nothing) and `GET /api/dags/{dag_id}` (the graph
 * with each task's status), as in API.md.
 */
export interface DagRoutesOptions {
  api: DagsApi;
  defaults: TaskDefaults;
  /** Body limit of `POST /api/dags`, bytes (a graph holds up to 10 000 tasks). */
  bodyLimitBytes: number;
}

export const dagRoutes: FastifyPluginAsync<DagRoutesOptions> = async (app, opts) => {
  const { api, defaults } = opts;

  /** 201 with the graph's id and its tasks in request order; 200 for an idempotent replay. */
  app.post('/api/dags', { bodyLimit: opts.bodyLimitBytes }, async (request, reply) => {
    const result = await api.submitDag(validateDag(request.body, defaults));
    reply.code(result.created ? 201 : 200);
    return dagSubmitJson(result.dag);
  });

  app.get<{ Params: { id: string } }>('/api/dags/:id', async (request) =>
    dagJson(await api.getDag(validateTaskId(request.params.id, BODY.at('dag_id')))),
  );
};
