import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { DagsApi } from '../services/types.js';
import { taskRoutes as schemas } from './schemas/task-routes.js';
import { dagSpec, traceHeader, type TaskDefaults } from './validation/tasks.js';
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

export const dagRoutes: FastifyPluginAsync<DagRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api, defaults } = opts;

  /** 201 with the graph's id and its tasks in request order; 200 for an idempotent replay. */
  app.post('/api/dags', { schema: schemas.submitDag, bodyLimit: opts.bodyLimitBytes }, async (request, reply) => {
    const spec = dagSpec(request.body, defaults);
    traceHeader(
      spec.tasks.map((t) => t.spec),
      request.headers.traceparent,
    );
    const result = await api.submitDag(spec);
    reply.code(result.created ? 201 : 200);
    return dagSubmitJson(result.dag);
  });

  app.get('/api/dags/:dag_id', { schema: schemas.getDag }, async (request) =>
    dagJson(await api.getDag(request.params.dag_id.toLowerCase())),
  );
};
