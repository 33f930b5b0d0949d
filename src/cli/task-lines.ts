import type { NewTask, Schedule } from '../client/types.js';

/**
 * One line of a `wheelhouse submit --file` input: a `POST /api/tasks` body in the API's
 * snake_case, read into the client's `NewTask`. Only the shape is checked here — a JSON
 * object whose members the API knows — because the client would otherwise drop a member
 * it has no name for, and the node, which refuses an unknown field, would never see it.
 * Values (types, ranges, cron expressions) are the node's to check: a batch it refuses names
 * `tasks[i]`, which the caller maps back to the line.
 *
 * The field lists are the node's (`src/http/validation/tasks.ts`), copied: the CLI's client
 * side imports nothing of the server.
 */

/** The line cannot become a task; the message says why, without the line number. */
export class TaskLineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TaskLineError';
  }
}

const TASK_FIELDS: ReadonlySet<string> = new Set([
  'task_type',
  'payload',
  'schedule',
  'dependencies',
  'idempotency_key',
  'priority',
  'max_retries',
  'timeout_seconds',
]);

const SCHEDULE_FIELDS: Readonly<Record<Schedule['type'], ReadonlySet<string>>> = {
  immediate: new Set(['type']),
  delayed: new Set(['type', 'due_time', 'delay_seconds']),
  cron: new Set([
    'type',
    'cron_expression',
    'timezone',
    'jitter_seconds',
    'misfire_policy',
    'overlap_policy',
    'end_time',
  ]),
};

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function rejectUnknown(o: Json, known: ReadonlySet<string>, at: string): void {
  for (const key of Object.keys(o)) {
    if (!known.has(key)) throw new TaskLineError(`${at}unknown field "${key}"`);
  }
}

/** `text` (one non-blank line) as a task; throws `TaskLineError`. */
export function taskFromLine(text: string): NewTask {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new TaskLineError(`not JSON: ${(error as Error).message}`);
  }
  if (!isObject(value)) throw new TaskLineError('not a JSON object (each line is a POST /api/tasks body)');
  rejectUnknown(value, TASK_FIELDS, '');
  // The casts let values of the wrong type through on purpose: the node names them.
  const task: NewTask = { taskType: value.task_type as string };
  if (value.payload !== undefined) task.payload = value.payload;
  const schedule = scheduleOf(value.schedule);
  if (schedule !== undefined) task.schedule = schedule;
  if (value.dependencies !== undefined) task.dependencies = value.dependencies as string[];
  if (value.idempotency_key !== undefined) task.idempotencyKey = value.idempotency_key as string;
  if (value.priority !== undefined) task.priority = value.priority as number;
  if (value.max_retries !== undefined) task.maxRetries = value.max_retries as number;
  if (value.timeout_seconds !== undefined) task.timeoutSeconds = value.timeout_seconds as number;
  return task;
}

/** A `schedule` member: left out (or null) is the node's default, immediate. */
function scheduleOf(value: unknown): Schedule | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw new TaskLineError('schedule: must be a JSON object');
  const type = value.type;
  if (type !== 'immediate' && type !== 'delayed' && type !== 'cron') {
    throw new TaskLineError('schedule.type: must be one of immediate, delayed, cron');
  }
  rejectUnknown(value, SCHEDULE_FIELDS[type], 'schedule: ');
  switch (type) {
    case 'immediate':
      return { type };
    case 'delayed':
      return {
        type,
        ...(value.due_time !== undefined ? { dueTime: value.due_time as string } : {}),
        ...(value.delay_seconds !== undefined ? { delaySeconds: value.delay_seconds as number } : {}),
      };
    case 'cron':
      return {
        type,
        cronExpression: value.cron_expression as string,
        ...(value.timezone !== undefined ? { timezone: value.timezone as string } : {}),
        ...(value.jitter_seconds !== undefined ? { jitterSeconds: value.jitter_seconds as number } : {}),
        ...(value.misfire_policy !== undefined
          ? { misfirePolicy: value.misfire_policy as 'fire_once' | 'skip' | 'fire_all' }
          : {}),
        ...(value.overlap_policy !== undefined ? { overlapPolicy: value.overlap_policy as 'allow' | 'skip' } : {}),
        ...(value.end_time !== undefined ? { endTime: value.end_time as string } : {}),
      };
  }
}
