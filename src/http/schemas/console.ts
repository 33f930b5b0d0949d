import Type from 'typebox';
import { SCOPES } from '../../services/api-keys.js';
import { StringEnum, Time, TimeInput, Uuid, errors, needs } from './common.js';

/**
 * Schemas of the routes the dashboard's operations console reads (src/http/console-routes.ts):
 * what the caller's key may do, the failures grouped, the connected workers; and the
 * node-to-node route through which a node lists its own workers for the others.
 */

const ConnectedWorker = Type.Object(
  {
    worker_id: Type.String(),
    node_id: Type.String({ description: 'The node it is connected to.' }),
    transport: StringEnum(['channel', 'http'] as const, {
      description: '`channel`: a worker-channel socket; `http`: a long-poll waiting now.',
    }),
    task_types: Type.Array(Type.String()),
    credits: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'Tasks the node may still push to it; null for a long-poll.',
    }),
    leases: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()], {
      description: 'Leases its socket holds now; null for a long-poll.',
    }),
    connected_since: Time,
  },
  { additionalProperties: false },
);

const NodeWorkers = {
  workers: Type.Array(ConnectedWorker),
  more: Type.Integer({ minimum: 0, description: 'Workers not listed: a node lists at most 1 000.' }),
};

export const consoleRoutesSchemas = {
  whoami: {
    tags: ['admin'],
    ...needs(...SCOPES),
    summary: 'What the key of this request may do (the dashboard shows the buttons it opens)',
    response: {
      200: Type.Object(
        {
          keys_enabled: Type.Boolean({
            description: 'Whether this node asks for a key; without, every scope is open.',
          }),
          name: Type.Union([Type.String(), Type.Null()]),
          scopes: Type.Array(StringEnum(SCOPES)),
        },
        { additionalProperties: false },
      ),
      ...errors(401, 403, 500),
    },
  },
  failures: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'Failed tasks grouped by task type and last error, most failures first',
    description:
      'The newest failures (at most `scan_limit`, through an index of failed tasks) since `since`, grouped. ' +
      "`scanned` equal to `scan_limit` means older failures were left out. A group's `error` is the first " +
      '1 000 characters of the error: as `error_equals` in `POST /api/operations`, it matches this group alone.',
    querystring: Type.Object(
      {
        since: Type.Optional(TimeInput),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
      },
      { additionalProperties: false },
    ),
    response: {
      200: Type.Object(
        {
          groups: Type.Array(
            Type.Object(
              {
                task_type: Type.String(),
                error: Type.String({ description: "The last error's first 1 000 characters; '' for none." }),
                count: Type.Integer({ minimum: 1 }),
                newest_failure: Time,
                sample_task_id: Type.String({ format: 'uuid' }),
              },
              { additionalProperties: false },
            ),
          ),
          group_count: Type.Integer({ minimum: 0, description: 'Groups among the failures read.' }),
          scanned: Type.Integer({ minimum: 0 }),
          scan_limit: Type.Integer({ minimum: 1 }),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500, 503),
    },
  },
  workers: {
    tags: ['admin'],
    ...needs('ops', 'admin'),
    summary: 'The workers connected to every live node: transport, task types, credits, leases, since when',
    description:
      'Each live node lists its own; a node that does not answer is named in `unanswered` and its workers are missing.',
    response: {
      200: Type.Object({ ...NodeWorkers, unanswered: Type.Array(Type.String()) }, { additionalProperties: false }),
      ...errors(401, 403, 500),
    },
  },
  graphs: {
    tags: ['admin'],
    ...needs('read', 'ops', 'admin'),
    summary: 'The newest graphs (DAGs), newest first, from their ids',
    querystring: Type.Object(
      {
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
        before: Type.Optional({ ...Uuid, description: 'Graphs older than this one (the last of the previous page).' }),
      },
      { additionalProperties: false },
    ),
    response: {
      200: Type.Object(
        {
          dags: Type.Array(
            Type.Object({ dag_id: Type.String({ format: 'uuid' }), created_at: Time }, { additionalProperties: false }),
          ),
          next_before: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
        },
        { additionalProperties: false },
      ),
      ...errors(400, 401, 403, 500, 503),
    },
  },
} as const;

/** `GET /internal/workers`: this node's own workers (cluster secret). */
export const nodeWorkersSchema = {
  hide: true,
  security: [{ cluster: [] as string[] }],
  summary: "This node's connected workers",
  response: {
    200: Type.Object(NodeWorkers, { additionalProperties: false }),
    ...errors(401, 403, 500),
  },
} as const;
