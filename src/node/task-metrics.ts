import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { NodeEvents } from '../domain/events.js';
import type { Transition } from '../domain/model.js';
import type { TypedEvents } from '../lib/events.js';
import type { QueueDepth } from '../store/fast-index-types.js';

/** The `task_type` label of every task type past a node's `metricsTaskTypesMax`. */
export const OTHER_TASK_TYPES = 'other';

/**
 * The `task_type` label values of one node: the first `max` task types it meets keep their
 * name, every later one is counted as `other`, so that a million task types make at most
 * `max + 1` series of each metric. First come, first served (a submission, a claim, a result
 * or a scrape of the ready queues), and a type's label never changes for the life of the node.
 */
export class TaskTypeLabels {
  private readonly named = new Set<string>();

  constructor(private readonly max: number) {}

  of(taskType: string): string {
    if (this.named.has(taskType)) return taskType;
    if (this.named.size >= this.max) return OTHER_TASK_TYPES;
    this.named.add(taskType);
    return taskType;
  }
}

/** How an attempt ended, in the words of the task's history (`executions.status`). */
export type AttemptOutcome = 'succeeded' | 'failed' | 'timed_out' | 'cancelled';

/** Due → start: a few ms on a quiet cluster, minutes behind a backlog. Seconds. */
const START_LAG_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
];
/** Start → finish: from a no-op to an hour's job. Seconds. */
const RUN_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

export interface TaskMetricSources {
  /** The ready queues (cluster-wide on Postgres + Redis), read at scrape time. */
  depths(): Promise<QueueDepth[]>;
}

/**
 * The metrics of tasks by `task_type`: counters of submitted, started and finished tasks and
 * histograms of start lag and run time, bumped from the node's events (`domain/events.ts`),
 * whose payloads carry each task's type and times: nothing is read to count. Per task, the
 * cost is a set lookup for the label, a map lookup for the series (cached per label, so no
 * label objects are made per task) and a histogram observation.
 *
 * @returns a collector that sets the ready queues' gauges, to run at scrape time; when the
 *   queues cannot be read it leaves them out and tells `onError`
 */
export function taskMetrics(
  registry: Registry,
  events: TypedEvents<NodeEvents>,
  maxTaskTypes: number,
  sources: TaskMetricSources,
  onError: (error: unknown, context: string) => void,
): () => Promise<void> {
  const labels = new TaskTypeLabels(maxTaskTypes);
  const registers = [registry];
  const submitted = new Counter({
    name: 'wheelhouse_tasks_submitted_total',
    help: 'Tasks written by submissions, by task type.',
    labelNames: ['task_type'],
    registers,
  });
  const started = new Counter({
    name: 'wheelhouse_tasks_started_total',
    help: 'Attempts started (tasks claimed by a worker), by task type.',
    labelNames: ['task_type'],
    registers,
  });
  const finished = new Counter({
    name: 'wheelhouse_tasks_finished_total',
    help: 'Attempts ended, by task type and outcome (succeeded, failed, timed_out, cancelled).',
    labelNames: ['task_type', 'outcome'],
    registers,
  });
  const expired = new Counter({
    name: 'wheelhouse_tasks_expired_total',
    help: 'Tasks that did not start within their start deadline (start_deadline_seconds) and ended expired, by task type.',
    labelNames: ['task_type'],
    registers,
  });
  const startLag = new Histogram({
    name: 'wheelhouse_task_start_lag_seconds',
    help: "Time from a task's due time to the start of its attempt (its claim), by task type.",
    labelNames: ['task_type'],
    buckets: START_LAG_BUCKETS,
    registers,
  });
  const runTime = new Histogram({
    name: 'wheelhouse_task_run_seconds',
    help: 'Time from the start of an attempt to its end (a result or an expired lease), by task type and outcome.',
    labelNames: ['task_type', 'outcome'],
    buckets: RUN_BUCKETS,
    registers,
  });

  const submittedOf = cached((type) => submitted.labels(type));
  const startedOf = cached((type) => started.labels(type));
  const lagOf = cached((type) => startLag.labels(type));
  const expiredOf = cached((type) => expired.labels(type));
  const finishedOf = byOutcome((type, outcome) => finished.labels(type, outcome));
  const runOf = byOutcome((type, outcome) => runTime.labels(type, outcome));

  const attemptEnded = (taskType: string, outcome: AttemptOutcome, startedMs: number | null, endedMs: number) => {
    const label = labels.of(taskType);
    finishedOf(outcome)(label).inc();
    if (startedMs !== null) runOf(outcome)(label).observe(Math.max(0, endedMs - startedMs) / 1000);
  };

  events.on('task:submitted', ({ taskTypes }) => {
    for (const [series, n] of tally(taskTypes, (type) => submittedOf(labels.of(type)))) series.inc(n);
  });
  events.on('task:claimed', ({ tasks, startedMs }) => {
    for (const [series, n] of tally(tasks, (task) => startedOf(labels.of(task.taskType)))) series.inc(n);
    for (const task of tasks) lagOf(labels.of(task.taskType)).observe(Math.max(0, startedMs - task.dueMs) / 1000);
  });
  events.on('task:completed', ({ transitions }) => {
    const finishedIn = tally(transitions, (t) => finishedOf(resultOutcome(t))(labels.of(t.taskType)));
    for (const [series, n] of finishedIn) series.inc(n);
    for (const t of transitions) {
      if (t.startedMs !== null)
        runOf(resultOutcome(t))(labels.of(t.taskType)).observe(Math.max(0, t.endedMs - t.startedMs) / 1000);
    }
  });
  events.on('task:expired', ({ transitions }) => {
    for (const t of transitions) expiredOf(labels.of(t.taskType)).inc();
  });
  events.on('lease:expired', (e) =>
    attemptEnded(e.taskType, e.status === 'cancelled' ? 'cancelled' : 'timed_out', e.startedMs, e.endedMs),
  );

  const depth = new Gauge({
    name: 'wheelhouse_ready_depth',
    help: 'Tasks due and waiting in the ready queues for a worker, by task type and priority (on Postgres + Redis: the whole cluster, the same on every node).',
    labelNames: ['task_type', 'priority'],
    registers,
  });
  const oldestAge = new Gauge({
    name: 'wheelhouse_ready_oldest_age_seconds',
    help: 'Time since the due time of the oldest task waiting in a ready queue, by task type and priority (empty queues have none).',
    labelNames: ['task_type', 'priority'],
    registers,
  });
  return async () => {
    let read: QueueDepth[];
    try {
      read = await sources.depths();
    } catch (error) {
      // A store outage leaves these gauges out rather than failing the whole scrape.
      depth.reset();
      oldestAge.reset();
      onError(error, 'reading the ready queues for /metrics (their gauges are left out)');
      return;
    }
    const queues = new Map<string, { taskType: string; priority: string; depth: number; ageMs: number | null }>();
    for (const q of read) {
      const taskType = labels.of(q.taskType);
      const key = `${q.priority} ${taskType}`;
      const seen = queues.get(key);
      if (seen === undefined) {
        queues.set(key, { taskType, priority: String(q.priority), depth: q.depth, ageMs: q.oldestReadyAgeMs });
      } else {
        seen.depth += q.depth;
        if (q.oldestReadyAgeMs !== null) seen.ageMs = Math.max(seen.ageMs ?? 0, q.oldestReadyAgeMs);
      }
    }
    depth.reset();
    oldestAge.reset();
    for (const q of queues.values()) {
      depth.set({ task_type: q.taskType, priority: q.priority }, q.depth);
      if (q.ageMs !== null) oldestAge.set({ task_type: q.taskType, priority: q.priority }, q.ageMs / 1000);
    }
  };
}

/**
 * How many of `items` fall under each key (a counter's series, a label value), for one `inc(n)`
 * a series rather than one a task: prom-client hashes a series' labels on every `inc`, and a
 * batch is mostly one series.
 */
export function tally<T, K>(items: Iterable<T>, keyOf: (item: T) => K): Map<K, number> {
  const counts = new Map<K, number>();
  for (const item of items) {
    const key = keyOf(item);
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** The outcome of the attempt a worker's result ended. */
function resultOutcome(t: Transition): AttemptOutcome {
  if (t.status === 'succeeded' || t.status === 'cancelled') return t.status;
  // The handler ended well and asked to wait for its children; with none left unfinished the
  // task is `pending` at once, which is still that wait, not a retry.
  if (t.status === 'waiting' || t.childWait === true) return 'succeeded';
  return 'failed'; // failed for good, or back to pending for a retry
}

/** `make(label)`, made once per label (the labels are bounded by `TaskTypeLabels`). */
function cached<C>(make: (label: string) => C): (label: string) => C {
  const children = new Map<string, C>();
  return (label) => {
    let child = children.get(label);
    if (child === undefined) children.set(label, (child = make(label)));
    return child;
  };
}

/** {@link cached} for each outcome. */
function byOutcome<C>(
  make: (label: string, outcome: AttemptOutcome) => C,
): (outcome: AttemptOutcome) => (label: string) => C {
  const outcomes = new Map<AttemptOutcome, (label: string) => C>();
  return (outcome) => {
    let of = outcomes.get(outcome);
    if (of === undefined) outcomes.set(outcome, (of = cached((label) => make(label, outcome))));
    return of;
  };
}
