/** The document's components: the body schemas and the error answers. */
import { json, nullableTime, ref, taskStatus, time, uuid, type Json } from './builders.js';

export const schemas: Record<string, Json> = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'details'],
        properties: {
          code: {
            type: 'string',
            example: 'validation_failed',
            description: 'What went wrong, for programs to branch on. Each error response lists the codes it carries.',
            // The whole catalogue, by status. test/architecture/error-codes.test.ts holds it
            // equal to src/lib/errors.ts both ways.
            enum: [
              // 400
              'validation_failed',
              'malformed_json',
              'invalid_cron',
              'unknown_timezone',
              'dependency_cycle',
              'unknown_dependency',
              // 401, 403
              'unauthorized',
              'forbidden',
              // 404, 405
              'not_found',
              'task_not_found',
              'route_not_found',
              'method_not_allowed',
              // 409
              'idempotency_conflict',
              'lease_not_held',
              'task_finished',
              'invalid_transition',
              // 413, 415, 429
              'payload_too_large',
              'unsupported_media_type',
              'backlog_full',
              // 503
              'store_unavailable',
              'not_ready',
              'ask_timeout',
              'mailbox_full',
              'stale_epoch',
              // 500
              'internal',
            ],
          },
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
      timeout_seconds: {
        type: 'integer',
        minimum: 1,
        maximum: 86400,
        description: 'Lease length; default from config (60).',
      },
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
      dependencies_satisfied: {
        type: 'integer',
        description: 'Tasks with predecessors only: how many have succeeded.',
      },
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

/** The codes an error response carries, as its description's last sentence. */
const carrying = (description: string, ...codes: string[]): string =>
  `${description} Codes: ${codes.map((c) => `\`${c}\``).join(', ')}.`;

export const responses: Record<string, Json> = {
  E400: json(
    ref('Error'),
    carrying(
      'Malformed JSON, a schema violation, a bad cron expression, an unknown time zone, …',
      'validation_failed',
      'malformed_json',
      'invalid_cron',
      'unknown_timezone',
      'dependency_cycle',
      'unknown_dependency',
    ),
  ),
  E401: json(ref('Error'), carrying('Bearer token missing (when auth is on).', 'unauthorized')),
  E403: json(ref('Error'), carrying('Bearer token wrong.', 'forbidden')),
  E404: json(ref('Error'), carrying('No task has this id.', 'task_not_found', 'not_found', 'route_not_found')),
  E409: json(
    ref('Error'),
    carrying(
      'Idempotency conflict, lease no longer held, or task already finished.',
      'idempotency_conflict',
      'lease_not_held',
      'task_finished',
      'invalid_transition',
    ),
  ),
  E413: json(ref('Error'), carrying('Body larger than the configured limit.', 'payload_too_large')),
  E415: json(ref('Error'), carrying('Body is not application/json.', 'unsupported_media_type')),
  E429: json(ref('Error'), carrying('Ready backlog past its limit. Carries Retry-After.', 'backlog_full')),
  E503: json(
    ref('Error'),
    carrying(
      'Store unreachable or node not ready. Carries Retry-After.',
      'store_unavailable',
      'not_ready',
      'ask_timeout',
      'mailbox_full',
      'stale_epoch',
    ),
  ),
};
