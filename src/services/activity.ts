import { WheelhouseError } from '../lib/errors.js';
import { addCounts, emptyCounts, failureRate, lagQuantileMs, type ActivityCounts } from '../domain/task-stats.js';
import type { QueueDepth } from '../store/fast-index-types.js';
import type { TaskStatsStore } from '../store/task-stats-types.js';

/** The most steps one read answers. */
export const MAX_STEPS = 1_440;
/** The steps a read without `step` is cut into, about. */
const DEFAULT_STEPS = 60;
/** The range a read without `from` covers, ms. */
const DEFAULT_RANGE_MS = 3_600_000;
/** Running tasks are counted up to this many (a bounded read of the running set). */
const RUNNING_COUNT_MAX = 100_000;
/** Task types listed for the selector, at most. */
const TASK_TYPES_MAX = 500;

/** What `GET /admin/stats` is asked. Times are Unix ms. */
export interface ActivityQuery {
  taskType: string | null;
  fromMs?: number;
  toMs?: number;
  /** A whole number of minutes, ms. */
  stepMs?: number;
}

/** One step of the series: its counts and what is derived from them. */
export interface ActivityStep {
  startMs: number;
  counts: ActivityCounts;
  failureRate: number | null;
  lagP50Ms: number | null;
  lagP99Ms: number | null;
}

/** The answer: the range as read, its totals and its steps (every one, empty ones as zeros). */
export interface Activity {
  taskType: string | null;
  fromMs: number;
  toMs: number;
  stepMs: number;
  totals: ActivityStep;
  series: ActivityStep[];
  /** Now: tasks due and waiting in the ready queues, and running (claimed by a worker). */
  now: { ready: number; running: number; runningCapped: boolean };
  /** The task types with activity in the range, for a selector. */
  taskTypes: string[];
}

export interface ActivityDeps {
  store: Pick<TaskStatsStore, 'read' | 'taskTypes' | 'running'>;
  depths(): Promise<QueueDepth[]>;
  nowMs(): number;
}

/**
 * The task activity of a range (docs/api.md, "Task activity"): totals and a series read from
 * the kept rollup alone (`task_stats`), never from the task rows, so its cost is the range's
 * minutes × task types × nodes, whatever the number of tasks; and the current ready and
 * running counts. The range is aligned on its step; the current minute is included, with
 * what the nodes flushed of it so far.
 */
export async function readActivity(deps: ActivityDeps, query: ActivityQuery): Promise<Activity> {
  const nowMs = deps.nowMs();
  const rawTo = query.toMs ?? nowMs;
  const rawFrom = query.fromMs ?? rawTo - DEFAULT_RANGE_MS;
  if (rawFrom >= rawTo) throw invalid('from', 'from must be before to');
  const stepMs = query.stepMs ?? Math.max(60_000, Math.ceil((rawTo - rawFrom) / DEFAULT_STEPS / 60_000) * 60_000);
  if (stepMs % 60_000 !== 0) throw invalid('step', 'step must be a whole number of minutes');
  const fromMs = Math.floor(rawFrom / stepMs) * stepMs;
  const toMs = Math.ceil(rawTo / stepMs) * stepMs;
  const steps = (toMs - fromMs) / stepMs;
  if (steps > MAX_STEPS)
    throw invalid('step', `the range holds ${steps} steps of ${stepMs / 60_000} min; at most ${MAX_STEPS}`);

  const [slots, taskTypes, depths, running] = await Promise.all([
    deps.store.read(fromMs, toMs, stepMs, query.taskType),
    deps.store.taskTypes(fromMs, TASK_TYPES_MAX),
    deps.depths(),
    deps.store.running(query.taskType, RUNNING_COUNT_MAX),
  ]);
  const bySlot = new Map(slots.map((s) => [s.startMs, s.counts]));
  const total = emptyCounts();
  const series: ActivityStep[] = [];
  for (let at = fromMs; at < toMs; at += stepMs) {
    const counts = bySlot.get(at) ?? emptyCounts();
    addCounts(total, counts);
    series.push(step(at, counts));
  }
  const ready = depths
    .filter((d) => query.taskType === null || d.taskType === query.taskType)
    .reduce((n, d) => n + d.depth, 0);
  return {
    taskType: query.taskType,
    fromMs,
    toMs,
    stepMs,
    totals: step(fromMs, total),
    series,
    now: { ready, running: Math.min(running, RUNNING_COUNT_MAX), runningCapped: running > RUNNING_COUNT_MAX },
    taskTypes,
  };
}

function step(startMs: number, counts: ActivityCounts): ActivityStep {
  return {
    startMs,
    counts,
    failureRate: failureRate(counts),
    lagP50Ms: lagQuantileMs(counts.lagBuckets, 0.5, counts.lagMaxMs),
    lagP99Ms: lagQuantileMs(counts.lagBuckets, 0.99, counts.lagMaxMs),
  };
}

function invalid(field: string, message: string): WheelhouseError {
  return new WheelhouseError('validation_failed', message, { details: { field } });
}
