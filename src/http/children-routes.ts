import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ChildrenApi } from '../services/types.js';
import { childrenRoutes as schemas } from './schemas/children.js';
import { childJson, spawnedJson } from './serialize.js';
import { childSpecs } from './validation/children.js';
import { traceHeader } from './validation/tasks.js';
import type { TaskDefaults } from './validation/tasks.js';

/**
 * Children of a running task (docs/api.md, "Children of a running task"): its worker adds
 * them with the lease token (scope `work`, as heartbeats and results), anyone who may read
 * lists them. The channel's `spawn` frame reaches the same service (src/services/worker-channel.ts).
 */

export interface ChildrenRoutesOptions {
  api: ChildrenApi;
  /** Defaults and limits from configuration for validating the children, as for a submission. */
  defaults: TaskDefaults;
  /** Body limit of a spawn, bytes: that of `POST /api/tasks/batch` (as many tasks). */
  batchBodyLimitBytes: number;
}

export const childrenRoutes: FastifyPluginAsync<ChildrenRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api } = opts;

  /** Up to 1 000 children, all or none: 201 with each (new or named again by its key) in request order. */
  app.post(
    '/api/tasks/:task_id/children',
    { schema: schemas.spawn, bodyLimit: opts.batchBodyLimitBytes },
    async (request, reply) => {
      const children = childSpecs(request.body.tasks, opts.defaults);
      traceHeader(
        children.map((c) => c.spec),
        request.headers.traceparent,
      );
      const results = await api.spawnChildren(request.params.task_id.toLowerCase(), request.body.lease_token, children);
      reply.code(201);
      return { tasks: results.map(spawnedJson) };
    },
  );

  /** In the order they were spawned, paged by an opaque `next_token`. */
  app.get('/api/tasks/:task_id/children', { schema: schemas.list }, async (request) => {
    const q = request.query;
    const page = await api.listChildren(request.params.task_id.toLowerCase(), {
      limit: q.limit ?? 100,
      ...(q.status === undefined ? {} : { status: q.status }),
      ...(q.next_token === undefined || q.next_token === '' ? {} : { nextToken: q.next_token }),
    });
    return { children: page.children.map(childJson), next_token: page.nextToken };
  });
};
