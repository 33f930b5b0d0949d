import Type from 'typebox';
import { Ok, errors } from './common.js';

/**
 * Schemas of the operations, admin and node-to-node routes. The admin answers are described
 * loosely (objects whose members may grow); the node-to-node routes are validated like the rest
 * but left out of the published document (`hide`).
 */

/** An actor kind or a node id in a path or query: what the runtime names them with. */
const Name = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9_.:-]+$',
  'x-hint': 'contain only letters, digits and _ . : -',
});
/** An actor key: anything printable, bounded. */
const ActorKey = Type.String({
  minLength: 1,
  maxLength: 512,
  pattern: '^[^\\u0000-\\u001f]+$',
  'x-hint': 'be printable',
});

const ActorParams = Type.Object({ kind: Name, key: ActorKey }, { additionalProperties: false });

/** One live actor as the admin routes show it. */
export const ActorInfoSchema = Type.Object(
  {
    kind: Type.String(),
    key: Type.String(),
    node: Type.String({ description: 'The node that holds it.' }),
    mailboxDepth: Type.Integer(),
    activatedAt: Type.String({ format: 'date-time' }),
    lastMessageAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    epoch: Type.Integer(),
    snapshotVersion: Type.Union([Type.Integer(), Type.Null()]),
    state: Type.Optional(Type.Unknown({ description: 'Inspecting one actor only.' })),
  },
  { additionalProperties: false },
);

const Plain = (description: string) => Type.Object({}, { additionalProperties: true, description });

const text = (description: string, type: string) => ({
  description,
  content: { [type]: { schema: Type.String() } },
});

export const opsRoutesSchemas = {
  healthz: { tags: ['operations'], summary: 'Liveness', security: [], response: { 200: Ok } },
  readyz: {
    tags: ['operations'],
    summary: 'Readiness: the node reaches its stores',
    security: [],
    response: { 200: Ok, ...errors(503) },
  },
  metrics: {
    tags: ['operations'],
    summary: 'Prometheus metrics',
    security: [],
    produces: ['text/plain'],
    response: { 200: text('Prometheus text exposition 0.0.4', 'text/plain') },
  },
  document: {
    tags: ['operations'],
    summary: 'This OpenAPI document',
    security: [],
    response: { 200: Plain('The OpenAPI 3.1 document.') },
  },
} as const;

export const adminRoutesSchemas = {
  cluster: {
    tags: ['admin'],
    summary: 'Nodes, liveness, ring spread and the owner of each wheel partition',
    response: { 200: Plain('The cluster as this node sees it.'), ...errors(401, 403, 500, 503) },
  },
  actors: {
    tags: ['admin'],
    summary: 'Live actors on this node',
    querystring: Type.Object(
      {
        kind: Type.Optional(Name),
        node: Type.Optional(Name),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, default: 100 })),
      },
      { additionalProperties: false },
    ),
    response: {
      200: Type.Object({ actors: Type.Array(ActorInfoSchema) }, { additionalProperties: false }),
      ...errors(400, 401, 403, 500),
    },
  },
  actor: {
    tags: ['admin'],
    summary: 'One actor with its state, wherever in the cluster it lives',
    params: ActorParams,
    response: { 200: ActorInfoSchema, ...errors(400, 401, 403, 404, 500, 503) },
  },
  queues: {
    tags: ['admin'],
    summary: 'Ready-queue depth and oldest age by task type and priority',
    response: {
      200: Type.Object(
        {
          queues: Type.Array(
            Type.Object(
              {
                task_type: Type.String(),
                priority: Type.Integer(),
                depth: Type.Integer(),
                oldest_ready_age_ms: Type.Union([Type.Number(), Type.Null()]),
              },
              { additionalProperties: false },
            ),
          ),
        },
        { additionalProperties: false },
      ),
      ...errors(401, 403, 500, 503),
    },
  },
} as const;

const Envelope = Type.Object(
  {
    kind: Type.String(),
    key: Type.String(),
    message: Type.Object({}, { additionalProperties: true }),
    deadline: Type.Number({ description: 'Unix ms.' }),
    ask: Type.Boolean(),
  },
  { additionalProperties: true },
);

export const ActorBatchRequest = Type.Object(
  {
    from: Type.String({ minLength: 1, description: 'The sending node id.' }),
    order: Type.Optional(
      Type.Object(
        {
          stream: Type.String({ minLength: 1, maxLength: 200 }),
          seq: Type.Integer({ minimum: 0 }),
          since: Type.Integer({ minimum: 0 }),
        },
        { additionalProperties: false },
      ),
    ),
    envelopes: Type.Array(Envelope),
  },
  { additionalProperties: false },
);

export const clusterRoutesSchemas = {
  actors: {
    hide: true,
    summary: 'A batch of actor messages from a peer',
    body: ActorBatchRequest,
    response: {
      200: Type.Object({ results: Type.Array(Type.Unknown()) }, { additionalProperties: false }),
      ...errors(400, 401, 403, 413, 500, 503),
    },
  },
  refresh: {
    hide: true,
    summary: 'A peer joined or left: re-read membership',
    response: { 204: Type.Null({ description: 'Re-read.' }), ...errors(401, 403, 500, 503) },
  },
  actor: {
    hide: true,
    summary: 'One live actor of this node',
    params: ActorParams,
    response: { 200: ActorInfoSchema, ...errors(400, 401, 403, 404, 500) },
  },
} as const;
