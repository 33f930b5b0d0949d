import Type, { type Static } from 'typebox';
import { SCOPES } from '../../services/api-keys.js';
import { OPEN, Ok, StringEnum, TaskType, Time, Uuid, errors, needs } from './common.js';

/** Node-to-node routes: the cluster secret, checked by their own hook, not an API key. */
const CLUSTER = { security: [{ cluster: [] as string[] }] };

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

/**
 * One live actor as the admin routes show it: the API's snake_case, its state's field names
 * too (`src/http/actor-json.ts`).
 */
export const AdminActorSchema = Type.Object(
  {
    kind: Type.String(),
    key: Type.String(),
    node: Type.String({ description: 'The node that holds it.' }),
    mailbox_depth: Type.Integer(),
    activated_at: Type.String({ format: 'date-time' }),
    last_message_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    epoch: Type.Integer(),
    snapshot_version: Type.Union([Type.Integer(), Type.Null()]),
    state: Type.Optional(
      Type.Unknown({ description: 'Inspecting one actor only: what its kind shows of it, in snake_case.' }),
    ),
  },
  { additionalProperties: false },
);

/** One live actor as a node tells a peer (`/internal/actors…`): the runtime's own fields. */
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
  healthz: { tags: ['operations'], summary: 'Liveness', ...OPEN, response: { 200: Ok } },
  readyz: {
    tags: ['operations'],
    summary: 'Readiness: the node reaches its stores',
    ...OPEN,
    response: { 200: Ok, ...errors(503) },
  },
  metrics: {
    tags: ['operations'],
    summary: 'Prometheus metrics',
    ...needs('metrics', 'ops', 'admin'),
    produces: ['text/plain'],
    response: { 200: text('Prometheus text exposition 0.0.4', 'text/plain') },
  },
  document: {
    tags: ['operations'],
    summary: 'This OpenAPI document',
    ...OPEN,
    response: { 200: Plain('The OpenAPI 3.1 document.') },
  },
} as const;

/** What a dashboard file's name looks like (`app.js`, `dashboard.css`). */
export const ASSET_NAME_PATTERN = '^[a-z][a-z0-9-]*\\.(js|css)$';

/** A dashboard file: one of the names the build writes (src/dashboard/). */
const AssetName = Type.String({
  maxLength: 64,
  pattern: ASSET_NAME_PATTERN,
  'x-hint': 'name a dashboard file (lower-case, .js or .css)',
});

/**
 * The dashboard (docs/decisions/0014-dashboard.md): its page and its files are open, as `/docs`
 * is; they hold no data. The calls the page makes need `read` (tasks, graphs) and `ops` (the
 * cluster, queues and actors), and its buttons `submit`.
 */
export const dashboardRoutesSchemas = {
  page: {
    tags: ['admin'],
    summary: 'The dashboard (open: the page holds no data; its API calls need a read and ops key)',
    ...OPEN,
    produces: ['text/html'],
    response: { 200: text('The dashboard page', 'text/html') },
  },
  asset: {
    hide: true,
    ...OPEN,
    summary: "One of the dashboard's scripts or its style sheet",
    params: Type.Object({ file: AssetName }, { additionalProperties: false }),
    response: {
      200: text('The file', 'text/javascript'),
      304: Type.Null({ description: 'Not modified since the ETag sent.' }),
      ...errors(400, 404),
    },
  },
} as const;

export const adminRoutesSchemas = {
  cluster: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'Nodes, liveness, ring spread and the owner of each wheel partition',
    response: { 200: Plain('The cluster as this node sees it.'), ...errors(401, 403, 500, 503) },
  },
  actors: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'Live actors across the live nodes, in (node, kind, key) order, paged',
    description:
      'Each live node lists its own actors; a node that does not answer is listed in `nodes` with `ok: false` ' +
      'and its actors are missing from the page.',
    querystring: Type.Object(
      {
        kind: Type.Optional(Name),
        node: Type.Optional(Name),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, default: 100 })),
        next_token: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
      },
      { additionalProperties: false },
    ),
    response: {
      200: Type.Object(
        {
          actors: Type.Array(AdminActorSchema),
          next_token: Type.Union([Type.String(), Type.Null()]),
          nodes: Type.Array(
            Type.Object({ node_id: Type.String(), ok: Type.Boolean() }, { additionalProperties: false }),
          ),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500),
    },
  },
  actor: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'One actor with its state, wherever in the cluster it lives',
    params: ActorParams,
    response: { 200: AdminActorSchema, ...errors(400, 401, 403, 404, 500, 503) },
  },
  queues: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
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

const ScopeName = StringEnum(SCOPES);

export const ApiKey = Type.Object(
  {
    token_id: Uuid,
    name: Type.String(),
    scopes: Type.Array(ScopeName),
    created_at: Time,
  },
  { additionalProperties: false },
);
export type ApiKeyJson = Static<typeof ApiKey>;

export const tokenRoutesSchemas = {
  create: {
    tags: ['admin'],
    summary: 'Make an API key; its secret is in this answer only',
    ...needs('admin'),
    body: Type.Object(
      {
        name: Type.String({ minLength: 1, maxLength: 128, description: 'What the key is for.' }),
        scopes: Type.Array(ScopeName, { minItems: 1, maxItems: SCOPES.length, uniqueItems: true }),
      },
      { additionalProperties: false },
    ),
    response: {
      201: Type.Object(
        {
          ...ApiKey.properties,
          token: Type.String({ description: 'The secret, for `Authorization: Bearer`. Shown once, stored as a hash.' }),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 413, 415, 500, 503),
    },
  },
  list: {
    tags: ['admin'],
    summary: 'The live API keys, without their secrets',
    ...needs('admin'),
    response: {
      200: Type.Object({ tokens: Type.Array(ApiKey) }, { additionalProperties: false }),
      ...errors(401, 403, 500, 503),
    },
  },
  revoke: {
    tags: ['admin'],
    summary: 'Revoke an API key: refused on every node within a second',
    ...needs('admin'),
    params: Type.Object({ token_id: Uuid }, { additionalProperties: false }),
    response: { 200: Ok, ...errors(400, 401, 403, 404, 500, 503) },
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
    ...CLUSTER,
    summary: 'A batch of actor messages from a peer',
    body: ActorBatchRequest,
    response: {
      200: Type.Object({ results: Type.Array(Type.Unknown()) }, { additionalProperties: false }),
      ...errors(400, 401, 403, 413, 500, 503),
    },
  },
  refresh: {
    hide: true,
    ...CLUSTER,
    summary: 'A peer joined or left: re-read membership',
    response: { 204: Type.Null({ description: 'Re-read.' }), ...errors(401, 403, 500, 503) },
  },
  presence: {
    hide: true,
    ...CLUSTER,
    summary: "This node's workers of a task type: sockets, waiting polls, last ask",
    querystring: Type.Object({ task_type: TaskType }, { additionalProperties: false }),
    response: {
      200: Type.Object(
        {
          connected: Type.Integer({ minimum: 0 }),
          polling: Type.Integer({ minimum: 0 }),
          last_asked_ms: Type.Union([Type.Number(), Type.Null()]),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500),
    },
  },
  actorList: {
    hide: true,
    ...CLUSTER,
    summary: "This node's live actors, in (kind, key) order after a cursor",
    querystring: Type.Object(
      {
        kind: Type.Optional(Name),
        limit: Type.Integer({ minimum: 1, maximum: 10_001 }),
        after_kind: Type.Optional(Name),
        after_key: Type.Optional(ActorKey),
      },
      { additionalProperties: false },
    ),
    response: {
      200: Type.Object({ actors: Type.Array(ActorInfoSchema) }, { additionalProperties: false }),
      ...errors(400, 401, 403, 500),
    },
  },
  actor: {
    hide: true,
    ...CLUSTER,
    summary: 'One live actor of this node',
    params: ActorParams,
    response: { 200: ActorInfoSchema, ...errors(400, 401, 403, 404, 500) },
  },
} as const;
