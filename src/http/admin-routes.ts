import type { FastifyPluginAsync } from 'fastify';
import { WheelhouseError } from '../lib/errors.js';
import type { ActorInfo } from '../runtime/actor.js';
import type { QueueDepth } from '../store/fast-index-types.js';

/**
 * Operator routes: the cluster, the live actors (any actor by kind and key, with its state)
 * and the ready queues. Covered by the bearer token when auth is on.
 */
export interface AdminApi {
  /** Nodes, their liveness, and which node owns each wheel partition. */
  cluster(): Promise<unknown>;
  listActors(filter: { kind?: string; limit: number }): ActorInfo[];
  /** One actor, from whichever node holds it (the ring's owner is asked when this node does not). */
  inspectActor(kind: string, key: string): Promise<ActorInfo | null>;
  queues(): Promise<QueueDepth[]>;
}

const NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

export function adminRoutes(admin: AdminApi): FastifyPluginAsync {
  return async (app) => {
    app.get('/admin/cluster', async () => admin.cluster());

    app.get('/admin/actors', async (request) => {
      const query = request.query as Record<string, string | undefined>;
      const unknown = Object.keys(query).filter((k) => !['kind', 'node', 'limit'].includes(k));
      if (unknown.length > 0) throw invalid(unknown[0] as string, 'is not a known query parameter');
      if (query.kind !== undefined && !NAME.test(query.kind)) throw invalid('kind', 'must be an actor kind');
      const limit = query.limit === undefined ? 100 : Number(query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw invalid('limit', 'must be an integer 1–10000');
      const actors = admin
        .listActors({ kind: query.kind, limit: query.node === undefined ? limit : Number.MAX_SAFE_INTEGER })
        .filter((a) => query.node === undefined || a.node === query.node)
        .slice(0, limit);
      return { actors };
    });

    app.get('/admin/actors/:kind/:key', async (request) => {
      const { kind, key } = request.params as { kind: string; key: string };
      const actor = await admin.inspectActor(kind, key);
      if (!actor) {
        throw new WheelhouseError('not_found', `no live actor (${kind}, ${key}) in the cluster`, {
          details: { kind, key },
        });
      }
      return actor;
    });

    app.get('/admin/queues', async () => {
      const queues = await admin.queues();
      return {
        queues: queues.map((q) => ({
          task_type: q.taskType,
          priority: q.priority,
          depth: q.depth,
          oldest_ready_age_ms: q.oldestReadyAgeMs,
        })),
      };
    });
  };
}

function invalid(field: string, message: string): WheelhouseError {
  return new WheelhouseError('validation_failed', `${field}: ${message}`, { details: { field } });
}
