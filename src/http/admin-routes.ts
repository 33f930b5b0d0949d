import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WheelhouseError } from '../lib/errors.js';
import type { ActorInfo } from '../runtime/actor.js';
import type { QueueDepth } from '../store/fast-index-types.js';
import type { ApiKeysApi, ApiKeyView } from '../services/api-keys.js';
import type { ActorCursor, ActorListFilter, ActorPage } from '../services/actor-browser.js';
import { adminActorJson } from './actor-json.js';
import { adminRoutesSchemas as schemas, tokenRoutesSchemas as tokens, type ApiKeyJson } from './schemas/operations.js';

/**
 * Operator routes: the cluster, the live actors (any actor by kind and key, with its state)
 * and the ready queues. Covered by the bearer token when auth is on.
 */
export interface AdminApi {
  /** Nodes, their liveness, and which node owns each wheel partition. */
  cluster(): Promise<unknown>;
  /** Live actors across the live nodes, in (node, kind, key) order, a page at a time. */
  listActors(filter: ActorListFilter): Promise<ActorPage>;
  /** One actor, from whichever node holds it (the ring's owner, else every live node, is asked when this node does not). */
  inspectActor(kind: string, key: string): Promise<ActorInfo | null>;
  queues(): Promise<QueueDepth[]>;
}

/** `/admin/tokens`: make, list and revoke API keys. */
export function tokenRoutes(keys: ApiKeysApi): FastifyPluginAsync {
  return async (fastify) => {
    const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
    app.post('/admin/tokens', { schema: tokens.create }, async (request, reply) => {
      const made = await keys.create(request.body.name, request.body.scopes);
      request.log.info({ tokenId: made.keyId, name: made.name, scopes: made.scopes }, 'API key made');
      reply.code(201);
      return { ...keyJson(made), token: made.secret };
    });
    app.get('/admin/tokens', { schema: tokens.list }, async () => ({ tokens: (await keys.list()).map(keyJson) }));
    app.delete('/admin/tokens/:token_id', { schema: tokens.revoke }, async (request) => {
      await keys.revoke(request.params.token_id.toLowerCase());
      request.log.info({ tokenId: request.params.token_id }, 'API key revoked');
      return { ok: true as const };
    });
  };
}

function keyJson(key: ApiKeyView): ApiKeyJson {
  return { token_id: key.keyId, name: key.name, scopes: key.scopes, created_at: new Date(key.createdMs).toISOString() };
}

export function adminRoutes(admin: AdminApi): FastifyPluginAsync {
  return async (fastify) => {
    const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
    app.get(
      '/admin/cluster',
      { schema: schemas.cluster },
      async () => (await admin.cluster()) as Record<string, unknown>,
    );

    app.get('/admin/actors', { schema: schemas.actors }, async (request) => {
      const { kind, node, limit = 100, next_token: token } = request.query;
      const after = token === undefined ? undefined : cursorOf(token);
      const page = await admin.listActors({
        limit,
        ...(kind === undefined ? {} : { kind }),
        ...(node === undefined ? {} : { node }),
        ...(after === undefined ? {} : { after }),
      });
      return {
        actors: page.actors.map(adminActorJson),
        next_token: page.next === null ? null : tokenOf(page.next),
        nodes: page.nodes.map((n) => ({ node_id: n.nodeId, ok: n.ok })),
      };
    });

    app.get('/admin/actors/:kind/:key', { schema: schemas.actor }, async (request) => {
      const { kind, key } = request.params;
      const actor = await admin.inspectActor(kind, key);
      if (!actor) {
        throw new WheelhouseError('not_found', `no live actor (${kind}, ${key}) in the cluster`, {
          details: { kind, key },
        });
      }
      return adminActorJson(actor);
    });

    app.get('/admin/queues', { schema: schemas.queues }, async () => {
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

/** A page token of `/admin/actors`: the last actor shown, as base64url JSON. */
function tokenOf(cursor: ActorCursor): string {
  return Buffer.from(JSON.stringify([cursor.node, cursor.kind, cursor.key]), 'utf8').toString('base64url');
}

/** A token back to its cursor; anything `tokenOf` did not make is a 400. */
function cursorOf(token: string): ActorCursor {
  try {
    const value: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 3 && value.every((v) => typeof v === 'string' && v.length > 0)) {
      const [node, kind, key] = value as [string, string, string];
      if (tokenOf({ node, kind, key }) === token) return { node, kind, key };
    }
  } catch {
    // not JSON: refused below
  }
  throw new WheelhouseError('validation_failed', 'next_token: not a token this endpoint issued', {
    details: { field: 'next_token' },
  });
}
