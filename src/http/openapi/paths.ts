/** The document's paths, one entry per route; keep in step with the route plugins. */
import {
  body,
  common,
  errors,
  json,
  nullableTime,
  ref,
  taskIdParam,
  taskStatus,
  time,
  uuid,
  type Json,
} from './builders.js';

export const paths: Record<string, Record<string, Record<string, Json>>> = {
  '/api/tasks': {
    post: {
      summary: 'Submit a task',
      requestBody: body(ref('TaskRequest')),
      responses: {
        '201': json(ref('Submitted'), 'Created'),
        '200': json(ref('Submitted'), 'Idempotent replay: the earlier task, nothing created'),
        ...errors(...common, 409),
      },
    },
    get: {
      summary: 'List tasks, newest first',
      parameters: [
        { name: 'status', in: 'query', schema: taskStatus },
        { name: 'task_type', in: 'query', schema: { type: 'string' } },
        {
          name: 'schedule_id',
          in: 'query',
          schema: { type: 'string', format: 'uuid' },
          description: "A cron schedule's instances only.",
        },
        { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 50 } },
        { name: 'next_token', in: 'query', schema: { type: 'string' } },
      ],
      responses: {
        '200': json({
          type: 'object',
          properties: { tasks: { type: 'array', items: ref('Task') }, next_token: { type: ['string', 'null'] } },
        }),
        ...errors(400, 401, 403, 503),
      },
    },
  },
  '/api/tasks/batch': {
    post: {
      summary: 'Submit up to 1 000 tasks, all or nothing',
      description: 'One invalid task rejects the batch with 400 and its details.index.',
      requestBody: body({
        type: 'object',
        required: ['tasks'],
        properties: { tasks: { type: 'array', minItems: 1, maxItems: 1000, items: ref('TaskRequest') } },
      }),
      responses: {
        '201': json({ type: 'object', properties: { tasks: { type: 'array', items: ref('Submitted') } } }, 'Created'),
        ...errors(...common, 409),
      },
    },
  },
  '/api/dags': {
    post: {
      summary: 'Submit a graph of tasks, all or nothing',
      description:
        'Each task has a local `ref`; `depends_on` names refs of this request or existing task ids. A cycle, an unknown ref or id, a duplicate ref or any invalid task is a 400 and creates nothing. Up to 10 000 tasks.',
      requestBody: body({
        type: 'object',
        required: ['tasks'],
        properties: {
          tasks: {
            type: 'array',
            minItems: 1,
            maxItems: 10_000,
            items: {
              allOf: [
                ref('TaskRequest'),
                {
                  type: 'object',
                  required: ['ref'],
                  properties: {
                    ref: { type: 'string', minLength: 1, maxLength: 128 },
                    depends_on: { type: 'array', items: { type: 'string' } },
                  },
                },
              ],
            },
          },
          idempotency_key: { type: 'string', minLength: 1, maxLength: 256 },
        },
      }),
      responses: {
        '201': json(ref('DagSubmitted'), 'Created'),
        '200': json(ref('DagSubmitted'), 'Idempotent replay: the earlier graph, nothing created'),
        ...errors(...common, 409),
      },
    },
  },
  '/api/dags/{id}': {
    get: {
      summary: 'A graph with the status of each task',
      parameters: [{ name: 'id', in: 'path', required: true, schema: uuid, description: 'Graph id (UUID).' }],
      responses: {
        '200': json({
          type: 'object',
          properties: {
            dag_id: uuid,
            status: { type: 'string', enum: ['running', 'succeeded', 'failed', 'cancelled'] },
            counts: { type: 'object', additionalProperties: { type: 'integer' } },
            tasks: {
              type: 'array',
              items: {
                type: 'object',
                properties: {
                  ref: { type: 'string' },
                  task_id: uuid,
                  task_type: { type: 'string' },
                  status: taskStatus,
                  depends_on: {
                    type: 'array',
                    items: { type: 'string' },
                    description: 'Refs, or ids of tasks outside the graph.',
                  },
                  due_time: time,
                  started_at: nullableTime,
                  completed_at: nullableTime,
                  attempts: { type: 'integer' },
                  last_error: { type: ['string', 'null'] },
                },
              },
            },
          },
        }),
        ...errors(400, 401, 403, 404, 503),
      },
    },
  },
  '/api/tasks/{id}': {
    get: {
      summary: 'Task status',
      parameters: [taskIdParam],
      responses: { '200': json(ref('Task')), ...errors(400, 401, 403, 404, 503) },
    },
    delete: {
      summary: 'Cancel a task',
      parameters: [taskIdParam],
      responses: {
        '200': json({
          type: 'object',
          properties: { ok: { const: true }, cancelled_instances: { type: 'integer' } },
        }),
        ...errors(400, 401, 403, 404, 409, 503),
      },
    },
  },
  '/api/tasks/{id}/pause': {
    post: {
      summary: 'Pause a cron schedule: it stops firing and its pending instance is cancelled',
      parameters: [taskIdParam],
      responses: { '200': json(ref('Task')), ...errors(400, 401, 403, 404, 409, 503) },
    },
  },
  '/api/tasks/{id}/resume': {
    post: {
      summary: 'Resume a paused cron schedule from now (no catch-up of the paused time)',
      parameters: [taskIdParam],
      responses: { '200': json(ref('Task')), ...errors(400, 401, 403, 404, 409, 503) },
    },
  },
  '/api/tasks/{id}/history': {
    get: {
      summary: 'Execution history, newest first',
      parameters: [
        taskIdParam,
        { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 20 } },
        { name: 'next_token', in: 'query', schema: { type: 'string' } },
      ],
      responses: {
        '200': json({
          type: 'object',
          properties: {
            executions: { type: 'array', items: ref('Execution') },
            next_token: { type: ['string', 'null'] },
          },
        }),
        ...errors(400, 401, 403, 404, 503),
      },
    },
  },
  '/api/workers/poll': {
    post: {
      summary: 'Long-poll for due tasks',
      requestBody: body({
        type: 'object',
        required: ['worker_id', 'task_types'],
        additionalProperties: false,
        properties: {
          worker_id: { type: 'string', minLength: 1, maxLength: 128 },
          task_types: { type: 'array', minItems: 1, items: { type: 'string' } },
          max_tasks: { type: 'integer', minimum: 1, maximum: 1000, default: 1 },
          wait_ms: { type: 'integer', minimum: 0, maximum: 30000, default: 20000 },
        },
      }),
      responses: {
        '200': json({ type: 'object', properties: { tasks: { type: 'array', items: ref('Assignment') } } }),
        ...errors(...common),
      },
    },
  },
  '/api/tasks/{id}/heartbeat': {
    post: {
      summary: 'Extend a lease',
      parameters: [taskIdParam],
      requestBody: body({ type: 'object', required: ['lease_token'], properties: { lease_token: { type: 'string' } } }),
      responses: {
        '200': json({
          type: 'object',
          properties: { ok: { const: true }, lease_expires_at: time, cancel_requested: { type: 'boolean' } },
        }),
        ...errors(...common, 409),
      },
    },
  },
  '/api/tasks/{id}/complete': {
    post: {
      summary: 'Report a result',
      parameters: [taskIdParam],
      requestBody: body(ref('Completion')),
      responses: { '200': json({ type: 'object', properties: { ok: { const: true } } }), ...errors(...common, 409) },
    },
  },
  '/api/workers/complete': {
    post: {
      summary: 'Report up to 1 000 results at once (extension)',
      description: 'ok: false for a result whose lease is no longer held (that result is discarded).',
      requestBody: body({
        type: 'object',
        required: ['results'],
        properties: {
          results: {
            type: 'array',
            minItems: 1,
            maxItems: 1000,
            items: {
              allOf: [ref('Completion'), { type: 'object', required: ['task_id'], properties: { task_id: uuid } }],
            },
          },
        },
      }),
      responses: {
        '200': json({
          type: 'object',
          properties: {
            results: {
              type: 'array',
              items: { type: 'object', properties: { task_id: uuid, ok: { type: 'boolean' } } },
            },
          },
        }),
        ...errors(...common),
      },
    },
  },
  '/healthz': { get: { summary: 'Liveness', security: [], responses: { '200': json({ type: 'object' }) } } },
  '/readyz': {
    get: { summary: 'Readiness', security: [], responses: { '200': json({ type: 'object' }), ...errors(503) } },
  },
  '/metrics': {
    get: {
      summary: 'Prometheus metrics',
      security: [],
      responses: { '200': { description: 'OK', content: { 'text/plain': { schema: { type: 'string' } } } } },
    },
  },
  '/docs': {
    get: {
      summary: 'This document, browsable',
      security: [],
      responses: { '200': { description: 'OK', content: { 'text/html': { schema: { type: 'string' } } } } },
    },
  },
  '/docs/openapi.json': {
    get: { summary: 'This document', security: [], responses: { '200': json({ type: 'object' }) } },
  },
};
