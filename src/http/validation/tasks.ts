import { isUuid } from '../../lib/ids.js';
import type { DagSpec, DagTaskSpec, ScheduleSpec, TaskSpec } from '../../domain/specs.js';
import { cronRule } from '../../domain/cron-rule.js';
import {
  BODY,
  FieldPath,
  canonicalJson,
  isAbsent,
  readInteger,
  readNumber,
  readObject,
  readOneOf,
  readString,
  readTaskType,
  readTime,
  rejectUnknown,
  sha256Hex,
} from './fields.js';

/**
 * Request validation for task submission: a request body in, a `TaskSpec` out, or a
 * `WheelhouseError` (`validation_failed`, `invalid_cron`, `unknown_timezone`,
 * `payload_too_large`) whose message and `details.field` name the field
 * (`tasks[3].schedule.cron_expression: …`) and, in a batch, `details.index` the task.
 * The rules are API.md's. Validators for the worker endpoints and query strings are in
 * `validate-requests.ts` and re-exported here.
 */

export {
  validateCompletion,
  validateCompletionBatch,
  validateHeartbeat,
  validateHistoryQuery,
  validateListQuery,
  validatePoll,
  validateTaskId,
  MAX_BATCH_COMPLETIONS,
  MAX_ERROR_BYTES,
  TASK_STATUSES,
  type HistoryQuery,
  type ListQuery,
  type PollLimits,
} from './requests.js';
export { canonicalJson, isTaskType, parseIsoTime } from './fields.js';

/** Values that come from configuration rather than the request. */
export interface TaskDefaults {
  /** Lease length when the task gives no `timeout_seconds`, seconds. */
  timeoutSeconds: number;
  /** Largest accepted `payload`, bytes of JSON. Unchecked when left out. */
  maxPayloadBytes?: number;
}

/** Most tasks in one `POST /api/tasks/batch`. */
export const MAX_BATCH_TASKS = 1000;

/** Most tasks in one `POST /api/dags`. */
export const MAX_DAG_TASKS = 10_000;

/** Longest `delay_seconds`: 100 years, so a due time always fits a Date. */
export const MAX_DELAY_SECONDS = 100 * 365.25 * 86_400;

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
const BATCH_FIELDS: ReadonlySet<string> = new Set(['tasks']);
const DAG_FIELDS: ReadonlySet<string> = new Set(['tasks', 'idempotency_key']);
const REF = { min: 1, max: 128 };
const IMMEDIATE_FIELDS: ReadonlySet<string> = new Set(['type']);
const DELAYED_FIELDS: ReadonlySet<string> = new Set(['type', 'due_time', 'delay_seconds']);
const CRON_FIELDS: ReadonlySet<string> = new Set([
  'type',
  'cron_expression',
  'timezone',
  'jitter_seconds',
  'misfire_policy',
  'overlap_policy',
  'end_time',
]);

const IDEMPOTENCY_KEY = { min: 1, max: 256 };
const TIMEZONE = { min: 1, max: 64 };
const CRON_EXPRESSION = { min: 1, max: 256 };

const SCHEDULE_TYPES = ['immediate', 'delayed', 'cron'] as const;
const MISFIRE_POLICIES = ['fire_once', 'skip', 'fire_all'] as const;
const OVERLAP_POLICIES = ['allow', 'skip'] as const;

/**
 * Validates one submission body (`POST /api/tasks`) into a `TaskSpec`. `at` is where the
 * task sits in a larger request (a batch passes `tasks[i]`).
 */
export function validateTask(body: unknown, defaults: TaskDefaults, at: FieldPath = BODY): TaskSpec {
  const o = readObject(body, at, 'a JSON object describing a task');
  rejectUnknown(o, TASK_FIELDS, at);

  const taskType = readTaskType(o.task_type, at.at('task_type'));
  const payload = o.payload === undefined ? null : o.payload;
  const schedule = validateSchedule(o.schedule, at.at('schedule'));
  const dependencies = validateDependencies(o.dependencies, at.at('dependencies'));
  if (schedule.type === 'cron' && dependencies.length > 0) {
    at.at('dependencies').fail('a cron task cannot have dependencies');
  }
  const idempotencyKey = isAbsent(o.idempotency_key)
    ? null
    : readString(o.idempotency_key, at.at('idempotency_key'), IDEMPOTENCY_KEY);
  const priority = isAbsent(o.priority) ? 5 : readInteger(o.priority, at.at('priority'), 0, 9);
  const maxRetries = isAbsent(o.max_retries) ? 3 : readInteger(o.max_retries, at.at('max_retries'), 0, 100);
  const timeoutSeconds = isAbsent(o.timeout_seconds)
    ? defaults.timeoutSeconds
    : readInteger(o.timeout_seconds, at.at('timeout_seconds'), 1, 86_400);

  // The canonical (key-sorted) form is needed only to hash a request that carries an
  // idempotency key; the size check is the same on plain JSON, which is much cheaper.
  const payloadJson = idempotencyKey === null ? (JSON.stringify(payload) ?? 'null') : canonicalJson(payload);
  if (defaults.maxPayloadBytes !== undefined && payloadJson.length > defaults.maxPayloadBytes / 3) {
    const bytes = Buffer.byteLength(payloadJson);
    if (bytes > defaults.maxPayloadBytes) {
      at.at('payload').fail(
        `is ${bytes} bytes of JSON; the limit is ${defaults.maxPayloadBytes}`,
        'payload_too_large',
        {
          limit_bytes: defaults.maxPayloadBytes,
        },
      );
    }
  }

  const spec: TaskSpec = {
    taskType,
    payload,
    schedule,
    dependencies,
    idempotencyKey,
    priority,
    maxRetries,
    timeoutSeconds,
    requestHash: '',
  };
  // Only a replay needs the hash: without a key it stays empty and is never compared.
  if (idempotencyKey !== null) spec.requestHash = requestHashOf(spec, payloadJson);
  return spec;
}

/**
 * Validates `POST /api/tasks/batch` (`{tasks: [...]}`, 1–1000 tasks). One invalid task
 * rejects the whole batch; the error names it (`tasks[3].priority: …`, `details.index: 3`).
 */
export function validateBatch(body: unknown, defaults: TaskDefaults): TaskSpec[] {
  const o = readObject(body, BODY, 'a JSON object {"tasks": [...]}');
  rejectUnknown(o, BATCH_FIELDS, BODY);
  const tasks = o.tasks;
  const at: FieldPath = BODY.at('tasks');
  if (tasks === undefined) at.fail('is required');
  if (!Array.isArray(tasks)) at.fail('must be an array of tasks');
  if (tasks.length === 0) at.fail('must hold at least one task');
  if (tasks.length > MAX_BATCH_TASKS) at.fail(`holds ${tasks.length} tasks; the most is ${MAX_BATCH_TASKS}`);
  const specs = new Array<TaskSpec>(tasks.length);
  for (let i = 0; i < tasks.length; i++) {
    specs[i] = validateTask(tasks[i], defaults, new FieldPath(`tasks[${i}]`, i));
  }
  return specs;
}

/**
 * Validates `POST /api/dags` (`{tasks: [...], idempotency_key?}`, 1–10 000 tasks). Each task
 * is a task of `POST /api/tasks` plus `ref` (its local name, required) and `depends_on`
 * (refs of this request or existing task ids), without `dependencies` (that is
 * `depends_on` here), without its own `idempotency_key` (the graph's covers it) and not a
 * cron schedule. The graph itself (duplicate refs, unknown refs, cycles) is checked by the
 * planner. The request hash, for a replay, is that of the whole body's canonical JSON.
 */
export function validateDag(body: unknown, defaults: TaskDefaults): DagSpec {
  const o = readObject(body, BODY, 'a JSON object {"tasks": [...]}');
  rejectUnknown(o, DAG_FIELDS, BODY);
  const at: FieldPath = BODY.at('tasks');
  const tasks = o.tasks;
  if (tasks === undefined) at.fail('is required');
  if (!Array.isArray(tasks)) at.fail('must be an array of tasks');
  if (tasks.length === 0) at.fail('must hold at least one task');
  if (tasks.length > MAX_DAG_TASKS) at.fail(`holds ${tasks.length} tasks; the most is ${MAX_DAG_TASKS}`);
  const idempotencyKey = isAbsent(o.idempotency_key)
    ? null
    : readString(o.idempotency_key, BODY.at('idempotency_key'), IDEMPOTENCY_KEY);
  const out = new Array<DagTaskSpec>(tasks.length);
  for (let i = 0; i < tasks.length; i++) {
    const taskAt = new FieldPath(`tasks[${i}]`, i);
    const { ref, depends_on: dependsOn, ...task } = readObject(tasks[i], taskAt, 'a JSON object describing a task');
    if (task.dependencies !== undefined) taskAt.at('dependencies').fail('in a graph, name predecessors in depends_on');
    if (task.idempotency_key !== undefined)
      taskAt.at('idempotency_key').fail("a graph's tasks share the graph's idempotency_key");
    const spec = validateTask(task, defaults, taskAt);
    if (spec.schedule.type === 'cron') taskAt.at('schedule.type').fail('a cron schedule cannot be part of a graph');
    out[i] = {
      ref: readString(ref, taskAt.at('ref'), REF),
      dependsOn: readNames(dependsOn, taskAt.at('depends_on')),
      spec,
    };
  }
  return { tasks: out, idempotencyKey, requestHash: idempotencyKey === null ? '' : sha256Hex(canonicalJson(o)) };
}

/** `depends_on`: an array of strings (refs or ids; which, the planner decides). */
function readNames(value: unknown, at: FieldPath): string[] {
  if (isAbsent(value)) return [];
  if (!Array.isArray(value)) at.fail('must be an array of refs or task ids');
  return value.map((name: unknown, i) => readString(name, at.item(i), REF));
}

/**
 * sha256 of the canonical JSON of a normalised request: defaults filled in, dependencies
 * sorted, the payload's object keys sorted at every level (`payloadJson` is its canonical
 * JSON), so key order and spelled-out defaults do not change it. `delay_seconds` is hashed
 * as given, not as a due time, so a replay later on still matches.
 */
function requestHashOf(spec: Omit<TaskSpec, 'requestHash'>, payloadJson: string): string {
  // Everything but the payload is written in a fixed order by this code, so a plain
  // JSON.stringify of a tuple is already canonical (and much cheaper than sorting keys).
  const head = JSON.stringify([
    'v1',
    spec.taskType,
    scheduleTuple(spec.schedule),
    spec.dependencies.length > 1 ? [...spec.dependencies].sort() : spec.dependencies,
    spec.idempotencyKey,
    spec.priority,
    spec.maxRetries,
    spec.timeoutSeconds,
  ]);
  return sha256Hex(`${head}\n${payloadJson}`);
}

function scheduleTuple(s: ScheduleSpec): unknown[] {
  switch (s.type) {
    case 'immediate':
      return [s.type];
    case 'delayed':
      return [s.type, s.dueMs, s.delaySeconds];
    case 'cron':
      return [s.type, s.cronExpression, s.timezone, s.jitterSeconds, s.misfirePolicy, s.overlapPolicy, s.endMs];
  }
}

/** Validates a `schedule` member; left out means immediate. */
export function validateSchedule(value: unknown, at: FieldPath): ScheduleSpec {
  if (isAbsent(value)) return { type: 'immediate' };
  const o = readObject(value, at);
  if (o.type === undefined) at.at('type').fail(`is required (one of ${SCHEDULE_TYPES.join(', ')})`);
  const type = readOneOf(o.type, at.at('type'), SCHEDULE_TYPES);
  switch (type) {
    case 'immediate':
      rejectUnknown(o, IMMEDIATE_FIELDS, at);
      return { type };
    case 'delayed': {
      rejectUnknown(o, DELAYED_FIELDS, at);
      const hasDue = !isAbsent(o.due_time);
      const hasDelay = !isAbsent(o.delay_seconds);
      if (hasDue && hasDelay) at.fail('give one of due_time or delay_seconds, not both');
      if (!hasDue && !hasDelay) at.fail('a delayed schedule needs due_time or delay_seconds');
      return hasDue
        ? { type, dueMs: readTime(o.due_time, at.at('due_time')), delaySeconds: null }
        : {
            type,
            dueMs: null,
            delaySeconds: readNumber(o.delay_seconds, at.at('delay_seconds'), 0, MAX_DELAY_SECONDS),
          };
    }
    case 'cron':
      rejectUnknown(o, CRON_FIELDS, at);
      return validateCron(o, at);
  }
}

function validateCron(o: Record<string, unknown>, at: FieldPath): ScheduleSpec {
  const timezone = isAbsent(o.timezone) ? 'UTC' : readTimezone(o.timezone, at.at('timezone'));
  const exprAt: FieldPath = at.at('cron_expression');
  if (isAbsent(o.cron_expression)) exprAt.fail('is required for a cron schedule');
  const cronExpression = readCronExpression(o.cron_expression, exprAt, timezone);
  return {
    type: 'cron',
    cronExpression,
    timezone,
    jitterSeconds: isAbsent(o.jitter_seconds)
      ? 0
      : readNumber(o.jitter_seconds, at.at('jitter_seconds'), 0, MAX_DELAY_SECONDS),
    misfirePolicy: isAbsent(o.misfire_policy)
      ? 'fire_once'
      : readOneOf(o.misfire_policy, at.at('misfire_policy'), MISFIRE_POLICIES),
    overlapPolicy: isAbsent(o.overlap_policy)
      ? 'allow'
      : readOneOf(o.overlap_policy, at.at('overlap_policy'), OVERLAP_POLICIES),
    endMs: isAbsent(o.end_time) ? null : readTime(o.end_time, at.at('end_time')),
  };
}

/**
 * Checks already passed, so a batch of a thousand cron tasks does not pay for a thousand
 * `Intl.DateTimeFormat` constructions (~100 µs each) and cron parses. Only successes are
 * kept; the sets are cleared when they reach `CHECK_CACHE_SIZE`.
 */
const CHECK_CACHE_SIZE = 10_000;
const knownTimezones = new Set<string>(['UTC']);
const validCrons = new Set<string>();

function remember(cache: Set<string>, key: string): void {
  if (cache.size >= CHECK_CACHE_SIZE) cache.clear();
  cache.add(key);
}

/** An IANA time zone name that this runtime knows (`Europe/Paris`, `UTC`); else `unknown_timezone`. */
export function readTimezone(value: unknown, at: FieldPath): string {
  const name = readString(value, at, TIMEZONE);
  if (knownTimezones.has(name)) return name;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
  } catch (error) {
    at.fail(`"${name}" is not a known IANA time zone`, 'unknown_timezone', {}, error);
  }
  remember(knownTimezones, name);
  return name;
}

/**
 * A cron expression: 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds
 * first, in the syntax `cron-parser` accepts (ranges, steps, names, `L`, `#`). Whitespace is
 * normalised to single spaces. Nicknames such as `@daily` are not part of the contract.
 * Anything else is `invalid_cron` carrying the parser's reason.
 */
export function readCronExpression(value: unknown, at: FieldPath, timezone: string): string {
  const raw = readString(value, at, CRON_EXPRESSION);
  const fields = raw.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) {
    at.fail(
      `"${raw}" has ${fields.length} field${fields.length === 1 ? '' : 's'}; a cron expression has 5 ` +
        '(minute hour day-of-month month day-of-week) or 6 with seconds first',
      'invalid_cron',
    );
  }
  const expression = fields.join(' ');
  const key = `${timezone} ${expression}`;
  if (validCrons.has(key)) return expression;
  try {
    cronRule(expression, timezone);
  } catch (error) {
    at.fail((error as Error).message, 'invalid_cron', {}, error);
  }
  remember(validCrons, key);
  return expression;
}

function validateDependencies(value: unknown, at: FieldPath): string[] {
  if (isAbsent(value)) return [];
  if (!Array.isArray(value)) at.fail('must be an array of task ids');
  if (value.length === 0) return [];
  const seen = new Set<string>();
  for (let i = 0; i < value.length; i++) {
    const id: unknown = value[i];
    if (isUuid(id)) seen.add(id.toLowerCase());
    else at.item(i).fail('must be a task id (a UUID)');
  }
  return [...seen];
}
