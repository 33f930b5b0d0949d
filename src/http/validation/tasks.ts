import type { DebounceSpec } from '../../domain/model.js';
import type { DagSpec, DagTaskSpec, ScheduleSpec, TaskSpec } from '../../domain/specs.js';
import { cronRule } from '../../domain/cron-rule.js';
import { isFamily, isLimitName, normaliseLimits, TYPE_LIMIT_PREFIX } from '../../domain/limits.js';
import {
  BatchRequest,
  DagRequest,
  TaskRequest,
  type BatchRequestBody,
  type DagRequestBody,
  type ScheduleBody,
  type TaskRequestBody,
} from '../schemas/tasks.js';
import { isTraceparent } from '../../lib/otel.js';
import { assertSchema } from './ajv.js';
import { BODY, FieldPath, canonicalJson, parseIsoTime, sha256Hex, unstorable } from './fields.js';

/**
 * Task submissions: a request body in, a `TaskSpec` out. The route schemas
 * (src/http/schemas/tasks.ts) check the shape — types, bounds, unknown members — and this file
 * the rest: ISO times, exactly one of `due_time` and `delay_seconds`, cron expressions, time
 * zones, no dependencies on a cron task, the payload's size; then it fills the defaults and
 * hashes a keyed request. Errors are `WheelhouseError`s (`validation_failed`, `invalid_cron`,
 * `unknown_timezone`, `payload_too_large`) whose message and `details.field` name the field
 * (`tasks[3].schedule.cron_expression: …`) and, in a batch, `details.index` the task.
 *
 * The routes get bodies fastify has already held to the schema and call `taskSpec`,
 * `batchSpecs`, `dagSpec`; `validateTask`, `validateBatch` and `validateDag` do both steps,
 * for callers with a body no route has checked.
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
export { canonicalJson, parseIsoTime } from './fields.js';
export { MAX_BATCH_TASKS, MAX_DAG_TASKS, MAX_DELAY_SECONDS } from '../schemas/tasks.js';

/** Values that come from configuration rather than the request. */
export interface TaskDefaults {
  /** The execution deadline when the task gives no `timeout_seconds`, seconds. */
  timeoutSeconds: number;
  /** The start deadline when the task gives no `start_deadline_seconds`, seconds; null or left out: none. */
  startDeadlineSeconds?: number | null;
  /** Largest accepted `payload`, bytes of JSON. Unchecked when left out. */
  maxPayloadBytes?: number;
  /** Most `dependencies` of a task (`depends_on` of a graph's task). Unchecked when left out. */
  maxDependencies?: number;
}

/** Checks one submission body (`POST /api/tasks`) against its schema and makes it a `TaskSpec`. */
export function validateTask(body: unknown, defaults: TaskDefaults): TaskSpec {
  assertSchema(TaskRequest, body);
  return taskSpec(body as TaskRequestBody, defaults);
}

/** Checks `POST /api/tasks/batch` (1–1000 tasks, all or nothing) and makes each a `TaskSpec`. */
export function validateBatch(body: unknown, defaults: TaskDefaults): TaskSpec[] {
  assertSchema(BatchRequest, body);
  return batchSpecs(body as BatchRequestBody, defaults);
}

/** Checks `POST /api/dags` and makes it a `DagSpec`. */
export function validateDag(body: unknown, defaults: TaskDefaults): DagSpec {
  assertSchema(DagRequest, body);
  return dagSpec(body as DagRequestBody, defaults);
}

/**
 * A task body that matches `TaskRequest` → a `TaskSpec`. `at` is where the task sits in a
 * larger request (a batch passes `tasks[i]`).
 */
export function taskSpec(o: TaskRequestBody, defaults: TaskDefaults, at: FieldPath = BODY): TaskSpec {
  const payload = o.payload === undefined ? null : o.payload;
  const schedule = scheduleSpec(o.schedule ?? null, at.at('schedule'));
  checkDependencyCount(o.dependencies?.length ?? 0, at.at('dependencies'), defaults);
  const dependencies = uniqueIds(o.dependencies ?? null);
  if (schedule.type === 'cron' && dependencies.length > 0) {
    at.at('dependencies').fail('a cron task cannot have dependencies');
  }
  const idempotencyKey = o.idempotency_key ?? null;

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

  if (unstorable(payloadJson)) {
    at.at('payload').fail(
      'holds U+0000 or an unpaired surrogate in a string or a key, which the store (Postgres jsonb) cannot keep',
    );
  }

  const timeoutSeconds = o.timeout_seconds ?? defaults.timeoutSeconds;
  const spec: TaskSpec = {
    taskType: o.task_type,
    payload,
    schedule,
    dependencies,
    idempotencyKey,
    priority: o.priority ?? 5,
    maxRetries: o.max_retries ?? 3,
    timeoutSeconds,
    maxTimeoutSeconds: maxTimeoutSeconds(o.max_timeout_seconds ?? null, timeoutSeconds, at),
    startDeadlineSeconds: o.start_deadline_seconds ?? defaults.startDeadlineSeconds ?? null,
    limits: limitNames(o.limits ?? null, at.at('limits')),
    requestHash: '',
  };
  // Written above to measure it: the insert sends the same text (with a key it is the canonical
  // form, key-sorted, which the insert does not need).
  if (idempotencyKey === null) spec.payloadJson = payloadJson;
  if (o.debounce != null) spec.debounce = debounceSpec(o.debounce, spec, at.at('debounce'));
  if (o.traceparent != null) {
    if (!isTraceparent(o.traceparent)) at.at('traceparent').fail('has a trace id or a parent id of all zeros');
    spec.traceparent = o.traceparent;
  }
  // Only a replay needs the hash: without a key it stays empty and is never compared.
  if (idempotencyKey !== null) spec.requestHash = requestHashOf(spec, payloadJson);
  return spec;
}

/**
 * The request's `traceparent` header, for the tasks that carry none of their own. A header
 * that is not a valid traceparent is ignored, as the W3C recommendation says a receiver does.
 */
export function traceHeader<T extends { traceparent?: string }>(
  specs: T[],
  header: string | string[] | undefined,
): T[] {
  if (typeof header !== 'string' || !isTraceparent(header.trim().toLowerCase())) return specs;
  const traceparent = header.trim().toLowerCase();
  for (const spec of specs) spec.traceparent ??= traceparent;
  return specs;
}

/** A batch body that matches `BatchRequest` → its specs, a bad task named by index. */
export function batchSpecs(body: BatchRequestBody, defaults: TaskDefaults): TaskSpec[] {
  const { tasks } = body;
  const specs = new Array<TaskSpec>(tasks.length);
  for (let i = 0; i < tasks.length; i++) {
    specs[i] = taskSpec(tasks[i] as TaskRequestBody, defaults, new FieldPath(`tasks[${i}]`, i));
  }
  return specs;
}

/**
 * A graph body that matches `DagRequest` → a `DagSpec`. Each task is a task of
 * `POST /api/tasks` plus `ref` and `depends_on` (refs of this request or existing task ids)
 * and not a cron schedule; the graph itself (duplicate refs, unknown refs, cycles) is checked
 * by the planner. The request hash, for a replay, is that of the whole body's canonical JSON.
 */
export function dagSpec(body: DagRequestBody, defaults: TaskDefaults): DagSpec {
  const out = new Array<DagTaskSpec>(body.tasks.length);
  for (let i = 0; i < body.tasks.length; i++) {
    const taskAt = new FieldPath(`tasks[${i}]`, i);
    const { ref, depends_on: dependsOn, ...task } = body.tasks[i] as DagRequestBody['tasks'][number];
    checkDependencyCount(dependsOn?.length ?? 0, taskAt.at('depends_on'), defaults);
    const spec = taskSpec(task, defaults, taskAt);
    if (spec.schedule.type === 'cron') taskAt.at('schedule.type').fail('a cron schedule cannot be part of a graph');
    out[i] = { ref, dependsOn: dependsOn ?? [], spec };
  }
  const idempotencyKey = body.idempotency_key ?? null;
  return { tasks: out, idempotencyKey, requestHash: idempotencyKey === null ? '' : sha256Hex(canonicalJson(body)) };
}

/**
 * At most `maxDependencies` predecessors a task: a submit reads and locks each one, and a task
 * with a hundred thousand would hold the store for everyone else.
 */
function checkDependencyCount(count: number, at: FieldPath, defaults: TaskDefaults): void {
  const max = defaults.maxDependencies;
  if (max !== undefined && count > max) {
    at.fail(`holds ${count} items; the most is ${max} (maxDependencies)`, 'validation_failed', { limit: max });
  }
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
    // Only when set, so that a key's hash from before these fields existed still matches.
    ...(spec.maxTimeoutSeconds === null && spec.startDeadlineSeconds === null
      ? []
      : [spec.maxTimeoutSeconds, spec.startDeadlineSeconds]),
    ...(spec.limits === null ? [] : [['limits', spec.limits]]),
  ]);
  return sha256Hex(`${head}\n${payloadJson}`);
}

/** A name as an answer quotes it (made only for an answer, not for every task). */
function quoted(name: string): string {
  return `"${name.length > 60 ? `${name.slice(0, 60)}…` : name}"`;
}

/**
 * `limits` as stored (sorted, each once; null for none). Each a key a task may name: a valid
 * name, not a family (a family is the default of its keys, not a key), not a type's
 * `type:<t>` (every task takes part in its type's already). Whether each is declared is the
 * services' check (`unknown_limit`): it needs the node's catalog.
 */
function limitNames(given: readonly string[] | null, at: FieldPath): string[] | null {
  if (given === null) return null;
  given.forEach((name, i) => {
    if (!isLimitName(name))
      at.item(i).fail(`${quoted(name)} is not a limit name: 1–200 of A-Z a-z 0-9 _ . : - (a family ends in :*)`);
    if (isFamily(name))
      at.item(i).fail(`${quoted(name)} is a family; a task names one of its keys (such as ${name.slice(0, -1)}42)`);
    if (name.startsWith(TYPE_LIMIT_PREFIX))
      at.item(i).fail(`${quoted(name)}: every task takes part in its own type's limit already; name no type:<…> limit`);
  });
  return normaliseLimits(given);
}

/**
 * `debounce` → a `DebounceSpec`. Refused with what a merge could not honour: a schedule (the
 * debounce sets the due time; a cron schedule is not a task that waits), dependencies (a
 * waiting task would be `blocked`, not `pending`) and an idempotency key (a replay answers
 * the task it made, a debounce the task still waiting: the two say different things).
 */
function debounceSpec(o: NonNullable<TaskRequestBody['debounce']>, spec: TaskSpec, at: FieldPath): DebounceSpec {
  if (o.max_wait_seconds < o.seconds) {
    at.at('max_wait_seconds').fail(`is ${o.max_wait_seconds}, less than seconds (${o.seconds})`);
  }
  if (spec.schedule.type !== 'immediate')
    at.fail(`cannot go with a ${spec.schedule.type} schedule: it sets the due time`);
  if (spec.dependencies.length > 0) at.fail('cannot go with dependencies');
  if (spec.idempotencyKey !== null) at.fail('cannot go with an idempotency_key');
  return { key: o.key, seconds: o.seconds, maxWaitSeconds: o.max_wait_seconds };
}

/** `max_timeout_seconds` as stored: null when it adds nothing to `timeout_seconds`; never below it. */
function maxTimeoutSeconds(given: number | null, timeoutSeconds: number, at: FieldPath): number | null {
  if (given === null || given === timeoutSeconds) return null;
  if (given < timeoutSeconds)
    at.at('max_timeout_seconds').fail(`is ${given}, less than timeout_seconds (${timeoutSeconds})`);
  return given;
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

/** A `schedule` member that matches `Schedule` → a `ScheduleSpec`; left out means immediate. */
export function scheduleSpec(o: ScheduleBody | null, at: FieldPath): ScheduleSpec {
  if (o === null) return { type: 'immediate' };
  switch (o.type) {
    case 'immediate':
      return { type: 'immediate' };
    case 'delayed': {
      const due = o.due_time ?? null;
      const delay = o.delay_seconds ?? null;
      if (due !== null && delay !== null) at.fail('give one of due_time or delay_seconds, not both');
      if (due !== null) return { type: 'delayed', dueMs: readTime(due, at.at('due_time')), delaySeconds: null };
      if (delay === null) at.fail('a delayed schedule needs due_time or delay_seconds');
      return { type: 'delayed', dueMs: null, delaySeconds: delay };
    }
    case 'cron': {
      const timezone =
        o.timezone === undefined || o.timezone === null ? 'UTC' : checkTimezone(o.timezone, at.at('timezone'));
      return {
        type: 'cron',
        cronExpression: checkCronExpression(o.cron_expression, at.at('cron_expression'), timezone),
        timezone,
        jitterSeconds: o.jitter_seconds ?? 0,
        misfirePolicy: o.misfire_policy ?? 'fire_once',
        overlapPolicy: o.overlap_policy ?? 'allow',
        endMs: o.end_time === undefined || o.end_time === null ? null : readTime(o.end_time, at.at('end_time')),
      };
    }
  }
}

/** An ISO-8601 time as Unix milliseconds; 400 naming the field when it does not parse. */
function readTime(text: string, at: FieldPath): number {
  const ms = parseIsoTime(text);
  if (ms === null) {
    at.fail(
      `"${text.length > 60 ? `${text.slice(0, 60)}…` : text}" is not an ISO-8601 time such as 2026-11-30T12:00:00.000Z`,
    );
  }
  return ms;
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
export function checkTimezone(name: string, at: FieldPath): string {
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
export function checkCronExpression(raw: string, at: FieldPath, timezone: string): string {
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

/** Task ids, lower-cased, each once. */
function uniqueIds(ids: readonly string[] | null): string[] {
  if (ids === null || ids.length === 0) return [];
  if (ids.length === 1) return [(ids[0] as string).toLowerCase()];
  return [...new Set(ids.map((id) => id.toLowerCase()))];
}
