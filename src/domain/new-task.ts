import { WheelhouseError } from '../lib/errors.js';
import { partitionOf } from '../lib/ids.js';
import type { CronDefinition, NewTask, ScheduleRecord, TaskRecord } from './model.js';
import { CronBudgetExceeded, type CronBudget } from './cron-budget.js';
import { cronRule } from './cron-rule.js';
import type { TaskSpec } from './specs.js';

/**
 * A validated submission → the row to write: its due time (now, a delay, a given time, or a
 * cron schedule's first fire time, which also checks the schedule can fire), its partition
 * and, for a schedule, the definition its actor will read back.
 */

/**
 * The row for `spec` with id `id`. `index` is the task's position in its request, for the
 * errors of a schedule that cannot fire.
 */
export function newTask(
  spec: TaskSpec,
  id: string,
  now: number,
  index: number,
  partitions: number,
  budget?: CronBudget,
): NewTask {
  const cron = spec.schedule.type === 'cron' ? cronDefinition(spec.schedule) : null;
  const task: NewTask = {
    id,
    taskType: spec.taskType,
    payload: spec.payload,
    scheduleType: spec.schedule.type,
    schedule: cron,
    status: cron === null ? 'pending' : 'active',
    dueMs: cron === null ? dueTime(spec, now) : firstFire(cron, now, index, budget),
    priority: spec.priority,
    maxRetries: spec.maxRetries,
    timeoutSeconds: spec.timeoutSeconds,
    maxTimeoutSeconds: spec.maxTimeoutSeconds,
    startDeadlineSeconds: spec.startDeadlineSeconds,
    limits: spec.limits,
    partition: partitionOf(id, partitions),
    idempotencyKey: spec.idempotencyKey,
    requestHash: spec.idempotencyKey === null ? null : spec.requestHash,
  };
  // Set only when present, without spreads: one object a task on the submit's hot path.
  if (spec.dependencies.length > 0) task.dependsOn = spec.dependencies;
  if (spec.debounce) task.debounce = spec.debounce;
  if (spec.traceparent !== undefined) task.traceparent = spec.traceparent;
  if (spec.payloadJson !== undefined) task.payloadJson = spec.payloadJson;
  return task;
}

function dueTime(spec: TaskSpec, nowMs: number): number {
  // A debounced task is due `seconds` after its (latest) submit: validation refused a schedule with it.
  if (spec.debounce) return nowMs + Math.round(spec.debounce.seconds * 1000);
  const s = spec.schedule;
  if (s.type !== 'delayed') return nowMs;
  if (s.dueMs !== null) return Math.max(s.dueMs, nowMs);
  return nowMs + Math.round((s.delaySeconds ?? 0) * 1000);
}

function cronDefinition({
  type: _cron,
  ...definition
}: Extract<TaskSpec['schedule'], { type: 'cron' }>): CronDefinition {
  return definition;
}

/** How many fire times the jitter check looks at. */
const JITTER_SAMPLES = 100;

/**
 * A new schedule's first fire time after `nowMs`. Refuses a schedule that would never fire
 * (no fire time before `end_time`), a jitter that is not smaller than the shortest interval
 * between fire times (a jittered instance could then run after the next one), and — with a
 * `budget` — a rule whose fire times are not found before the budget is spent.
 */
function firstFire(cron: CronDefinition, nowMs: number, index: number, budget?: CronBudget): number {
  try {
    return checkedFirstFire(cron, nowMs, index, budget);
  } catch (error) {
    if (!(error instanceof CronBudgetExceeded)) throw error;
    throw new WheelhouseError(
      'invalid_cron',
      `schedule.cron_expression: the fire times of "${cron.cronExpression}" were not found within the ` +
        `${error.budgetMs} ms a request's cron checks may take (cronCheckBudgetSeconds): the rule fires too ` +
        'rarely to check, or the request holds too many schedules to check at once',
      { cause: error, details: { field: 'schedule.cron_expression', index, budget_ms: error.budgetMs } },
    );
  }
}

function checkedFirstFire(cron: CronDefinition, nowMs: number, index: number, budget?: CronBudget): number {
  const rule = cronRule(cron.cronExpression, cron.timezone);
  const first = rule.nextAfter(nowMs, budget);
  if (first === null) {
    throw new WheelhouseError(
      'invalid_cron',
      `schedule.cron_expression: "${cron.cronExpression}" has no fire time after now`,
      {
        details: { field: 'schedule.cron_expression', index },
      },
    );
  }
  if (cron.endMs !== null && first > cron.endMs) {
    throw new WheelhouseError(
      'validation_failed',
      `schedule.end_time: the first fire time, ${new Date(first).toISOString()}, is after end_time`,
      {
        details: { field: 'schedule.end_time', index },
      },
    );
  }
  if (cron.jitterSeconds > 0) {
    const interval = rule.minIntervalMs(nowMs, JITTER_SAMPLES, budget);
    if (cron.jitterSeconds * 1000 >= interval) {
      throw new WheelhouseError(
        'validation_failed',
        `schedule.jitter_seconds: ${cron.jitterSeconds} s is not smaller than the shortest interval between fire times (${interval / 1000} s)`,
        { details: { field: 'schedule.jitter_seconds', index, min_interval_seconds: interval / 1000 } },
      );
    }
  }
  return first;
}

/** The record a new schedule's actor starts from, built from the row just inserted. */
export function scheduleRecord(task: TaskRecord): ScheduleRecord {
  if (task.schedule === null) throw new WheelhouseError('internal', `task ${task.id} is not a cron schedule`);
  return {
    id: task.id,
    status: 'active',
    version: task.version,
    definition: task.schedule.definition,
    nextFireMs: task.dueMs,
    lastFiredMs: task.lastFiredMs,
    generation: task.schedule.generation,
    // As the insert writes it (000009_cron_wake): its actor must act at once.
    wakeMs: task.createdMs,
  };
}
