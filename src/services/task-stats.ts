import type { NodeEvents, NodeEventSink } from '../domain/events.js';
import type { Transition } from '../domain/model.js';
import { addCounts, addStart, emptyCounts, minuteOf, type ActivityCounts, type Counted } from '../domain/task-stats.js';
import type { TypedEvents } from '../lib/events.js';
import type { Clock } from '../runtime/clock.js';
import type { StatsRow, TaskStatsStore } from '../store/task-stats-types.js';

/** The task type every type past a node's `maxTaskTypes` is counted under. */
export const OTHER_TASK_TYPES = 'other';

/** How often, at most, a node deletes the rows past the stats retention. */
const TRIM_EVERY_MS = 3_600_000;

export interface TaskStatsDeps {
  store: Pick<TaskStatsStore, 'add' | 'trim'>;
  nodeId: string;
  clock: Clock;
  /** How long rows are kept, ms. */
  retentionMs: number;
  /** Task types counted under their own name; later ones count as `other`. */
  maxTaskTypes: number;
  events: NodeEventSink;
}

/**
 * The node's share of the task activity history (docs/decisions/0034-task-stats-rollup.md):
 * counts by minute and task type, taken in memory from the events the node already emits
 * (they carry each task's type and times, so nothing is read to count), and added to the node's
 * own `task_stats` rows by `flush` in one statement. Per task the cost is a map lookup and a few
 * additions; per flush, one statement whatever the task rate. What a flush could not write
 * stays for the next one.
 */
export class TaskStatsRollup {
  /** What was counted since the last flush, by minute (Unix ms), then task type. */
  private pending = new Map<number, Map<string, StatsRow>>();
  private readonly named = new Set<string>();
  private lastTrimMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly deps: TaskStatsDeps) {}

  /** Counts from `events` until the returned function is called. */
  listen(events: TypedEvents<NodeEvents>): () => void {
    const offs = [
      events.on('task:submitted', ({ taskTypes }) => {
        const nowMs = this.deps.clock.now();
        for (const type of taskTypes) this.count(type, nowMs, 'submitted');
      }),
      events.on('task:claimed', ({ tasks, startedMs }) => {
        for (const task of tasks) addStart(this.row(task.taskType, startedMs), startedMs - task.dueMs);
      }),
      events.on('task:completed', ({ transitions }) => {
        for (const t of transitions) this.ended(t.taskType, t.status, t.endedMs, t.childWait === true);
      }),
      events.on('lease:expired', (e) => this.ended(e.taskType, e.status, e.endedMs)),
      // Cancelled with no attempt ending (a running task's cancel is counted when its attempt ends).
      events.on('task:cancelled', ({ tasks }) => {
        for (const t of tasks) this.count(t.taskType, t.endedMs, 'cancelled');
      }),
      events.on('task:expired', ({ transitions }) => {
        for (const t of transitions) this.count(t.taskType, t.endedMs, 'expired');
      }),
    ];
    return () => offs.forEach((off) => off());
  }

  /**
   * Adds what was counted since the last flush to the store, in one statement, and (at most
   * once an hour) deletes the rows past retention. On failure what was taken goes back, to be
   * written by the next flush, and the error is thrown (the loop that calls this retries).
   */
  async flush(): Promise<void> {
    const rows = [...this.pending.values()].flatMap((byType) => [...byType.values()]);
    this.pending = new Map();
    const startMs = performance.now();
    try {
      await this.deps.store.add(this.deps.nodeId, rows);
    } catch (error) {
      for (const r of rows) addCounts(this.row(r.taskType, r.minuteMs), r.counts);
      throw error;
    }
    const ms = performance.now() - startMs;
    let trimmed = 0;
    const nowMs = this.deps.clock.now();
    if (nowMs - this.lastTrimMs >= TRIM_EVERY_MS) {
      trimmed = await this.deps.store.trim(minuteOf(nowMs - this.deps.retentionMs));
      this.lastTrimMs = nowMs;
    }
    if (rows.length > 0 || trimmed > 0) this.deps.events.emit('stats:flushed', { rows: rows.length, ms, trimmed });
  }

  /** How an attempt's end counts, by the status it left the task in. */
  private ended(taskType: string, status: Transition['status'], endedMs: number, childWait = false): void {
    switch (status) {
      case 'succeeded':
      case 'failed':
      case 'cancelled':
        return this.count(taskType, endedMs, status);
      case 'pending':
        // A wait with no child left unfinished is `pending` at once: not a retry.
        if (childWait) return;
        return this.count(taskType, endedMs, 'retried');
      default:
        // `waiting`: the attempt ended waiting for its children; the task runs again.
        return;
    }
  }

  private count(taskType: string, atMs: number, name: Counted): void {
    this.row(taskType, atMs)[name]++;
  }

  /** The counts of `taskType` in the minute of `atMs`, made on first use. */
  private row(taskType: string, atMs: number): ActivityCounts {
    const type = this.typeOf(taskType);
    const minuteMs = minuteOf(atMs);
    let byType = this.pending.get(minuteMs);
    if (byType === undefined) this.pending.set(minuteMs, (byType = new Map<string, StatsRow>()));
    let row = byType.get(type);
    if (row === undefined) byType.set(type, (row = { minuteMs, taskType: type, counts: emptyCounts() }));
    return row.counts;
  }

  /**
   * First come, first named, as the metrics' labels are: a million task types make at most
   * `maxTaskTypes + 1` rows a minute per node.
   */
  private typeOf(taskType: string): string {
    if (this.named.has(taskType)) return taskType;
    if (this.named.size >= this.deps.maxTaskTypes) return OTHER_TASK_TYPES;
    this.named.add(taskType);
    return taskType;
  }
}
