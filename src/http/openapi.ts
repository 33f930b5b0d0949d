/**
 * The OpenAPI 3.1 document of the HTTP API, written by hand from API.md (served at
 * `/docs/openapi.json`). Keep it in step with the route plugins: a route added there is
 * added here.
 */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The document's top level; `paths` typed so the docs page can list the routes. */
export interface OpenApiDocument {
  [key: string]: Json;
  paths: { [path: string]: { [method: string]: { [key: string]: Json } } };
}

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const time: Json = { type: 'string', format: 'date-time', example: '2026-11-30T12:00:00.000Z' };
const nullableTime: Json = { type: ['string', 'null'], format: 'date-time' };
const uuid: Json = { type: 'string', format: 'uuid' };
const taskIdParam: Json = { name: 'id', in: 'path', required: true, schema: uuid, description: 'Task id (UUID).' };

const errors = (...statuses: number[]): Record<string, Json> =>
  Object.fromEntries(
    statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }] as const),
  );

const json = (schema: Json, description = 'OK'): Json => ({
  description,
  content: { 'application/json': { schema } },
});

const body = (schema: Json): Json => ({ required: true, content: { 'application/json': { schema } } });

const taskStatus: Json = {
  type: 'string',
  enum: ['blocked', 'pending', 'ready', 'running', 'succeeded', 'failed', 'cancelled', 'active', 'paused'],
};

const schemas: Record<string, Json> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'details'],
        properties: {
          code: { type: 'string', example: 'validation_failed' },
          message: { type: 'string', example: 'schedule.cron_expression: "* *" has 2 fields; …' },
          details: { type: 'object', description: '`field` names the failing field; `index` the task in a batch.' },
        },
      },
    },
  },
  Schedule: {
    oneOf: [
      { type: 'object', required: ['type'], additionalProperties: false, properties: { type: { const: 'immediate' } } },
      {
        type: 'object',
        required: ['type'],
        additionalProperties: false,
        description: 'Exactly one of due_time (a past time means due now) or delay_seconds.',
        properties: {
          type: { const: 'delayed' },
          due_time: time,
          delay_seconds: { type: 'number', minimum: 0 },
        },
      },
      {
        type: 'object',
        required: ['type', 'cron_expression'],
        additionalProperties: false,
        properties: {
          type: { const: 'cron' },
          cron_expression: { type: 'string', description: '5 fields, or 6 with seconds first. L and # accepted.' },
          timezone: { type: 'string', default: 'UTC', description: 'IANA name.' },
          jitter_seconds: { type: 'number', minimum: 0, default: 0 },
          misfire_policy: { enum: ['fire_once', 'skip', 'fire_all'], default: 'fire_once' },
          overlap_policy: { enum: ['allow', 'skip'], default: 'allow' },
          end_time: time,
        },
      },
    ],
  },
  TaskRequest: {
    type: 'object',
    required: ['task_type'],
    additionalProperties: false,
    properties: {
      task_type: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' },
      payload: { description: 'Any JSON value.', default: null },
      schedule: ref('Schedule'),
      dependencies: { type: 'array', items: uuid, description: 'Not allowed on a cron task.' },
      idempotency_key: { type: 'string', minLength: 1, maxLength: 256 },
      priority: { type: 'integer', minimum: 0, maximum: 9, default: 5, description: 'Lower runs first.' },
      max_retries: { type: 'integer', minimum: 0, maximum: 100, default: 3 },
      timeout_seconds: { type: 'integer', minimum: 1, maximum: 86400, description: 'Lease length; default from config (60).' },
    },
  },
  Submitted: {
    type: 'object',
    required: ['task_id', 'status', 'due_time'],
    properties: { task_id: uuid, status: { enum: ['pending', 'blocked', 'active', 'cancelled'] }, due_time: time },
  },
  DagSubmitted: {
    type: 'object',
    required: ['dag_id', 'tasks'],
    properties: {
      dag_id: uuid,
      tasks: {
        type: 'array',
        description: 'In request order.',
        items: {
          type: 'object',
          properties: { ref: { type: 'string' }, task_id: uuid, status: taskStatus, due_time: time },
        },
      },
    },
  },
  Task: {
    type: 'object',
    properties: {
      task_id: uuid,
      task_type: { type: 'string' },
      status: taskStatus,
      schedule_type: { enum: ['immediate', 'delayed', 'cron'] },
      due_time: time,
      created_at: time,
      started_at: nullableTime,
      completed_at: nullableTime,
      attempts: { type: 'integer' },
      max_retries: { type: 'integer' },
      priority: { type: 'integer' },
      timeout_seconds: { type: 'integer' },
      last_error: { type: ['string', 'null'] },
      idempotency_key: { type: ['string', 'null'] },
      cancel_requested: { type: 'boolean' },
      dependencies: { type: 'array', items: uuid, description: 'Predecessor ids.' },
      dependencies_satisfied: { type: 'integer', description: 'Tasks with predecessors only: how many have succeeded.' },
      dag_id: { ...uuid, description: "A graph's tasks only, as is ref." },
      ref: { type: 'string' },
      payload: {},
      cron_expression: { type: 'string', description: 'Cron tasks only, as are the fields below.' },
      timezone: { type: 'string' },
      jitter_seconds: { type: 'number' },
      misfire_policy: { enum: ['fire_once', 'skip', 'fire_all'] },
      overlap_policy: { enum: ['allow', 'skip'] },
      end_time: nullableTime,
      next_due_time: nullableTime,
      last_fired_at: nullableTime,
      schedule_id: { ...uuid, description: 'Cron instances only: the schedule that made this task.' },
      fire_time: { ...time, description: 'Cron instances only: the nominal fire time; due_time adds the jitter.' },
    },
  },
  Execution: {
    type: 'object',
    properties: {
      execution_id: uuid,
      task_id: uuid,
      attempt: { type: 'integer' },
      status: { enum: ['running', 'succeeded', 'failed', 'timed_out', 'cancelled'] },
      due_time: time,
      started_at: nullableTime,
      completed_at: nullableTime,
      worker_id: { type: ['string', 'null'] },
      error: { type: ['string', 'null'] },
    },
  },
  Assignment: {
    type: 'object',
    properties: {
      task_id: uuid,
      task_type: { type: 'string' },
      payload: {},
      attempt: { type: 'integer' },
      lease_token: { type: 'string' },
      lease_expires_at: time,
      timeout_seconds: { type: 'integer' },
    },
  },
  Completion: {
    type: 'object',
    required: ['lease_token', 'status'],
    additionalProperties: false,
    properties: {
      lease_token: { type: 'string' },
      status: { enum: ['succeeded', 'failed'] },
      error: { type: 'string', description: 'Cut to 4 KiB.' },
      retryable: { type: 'boolean', default: true },
    },
  },
};

const responses: Record<string, Json> = {
  E400: json(ref('Error'), 'Malformed JSON, a schema violation, a bad cron expression, an unknown time zone, …'),
  E401: json(ref('Error'), 'Bearer token missing (when auth is on).'),
  E403: json(ref('Error'), 'Bearer token wrong.'),
  E404: json(ref('Error'), 'No task has this id.'),
  E409: json(ref('Error'), 'Idempotency conflict, lease no longer held, or task already finished.'),
  E413: json(ref('Error'), 'Body larger than the configured limit.'),
  E415: json(ref('Error'), 'Body is not application/json.'),
  E429: json(ref('Error'), 'Ready backlog past its limit. Carries Retry-After.'),
  E503: json(ref('Error'), 'Store unreachable or node not ready. Carries Retry-After.'),
};

const common = [400, 401, 403, 413, 415, 429, 503];

/** The document. */
export const OPENAPI_DOCUMENT: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Wheelhouse',
    version: '1',
    description: 'A distributed job scheduler: immediate, delayed, cron and dependent tasks, at least once.',
  },
  components: {
    schemas,
    responses,
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Only when the node has an auth token.' } },
  },
  security: [{}, { bearer: [] }],
  paths: {
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
          { name: 'schedule_id', in: 'query', schema: { type: 'string', format: 'uuid' }, description: "A cron schedule's instances only." },
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
                    properties: { ref: { type: 'string', minLength: 1, maxLength: 128 }, depends_on: { type: 'array', items: { type: 'string' } } },
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
                    depends_on: { type: 'array', items: { type: 'string' }, description: 'Refs, or ids of tasks outside the graph.' },
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
            properties: { executions: { type: 'array', items: ref('Execution') }, next_token: { type: ['string', 'null'] } },
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
              items: { allOf: [ref('Completion'), { type: 'object', required: ['task_id'], properties: { task_id: uuid } }] },
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
  },
};
