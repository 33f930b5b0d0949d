import type { ActivityCounts } from '../domain/task-stats.js';

/** One minute of one task type, as a node counted it. */
export interface StatsRow {
  /** The minute's start, Unix ms. */
  minuteMs: number;
  taskType: string;
  counts: ActivityCounts;
}

/** One step of a read: its start (Unix ms) and the counts of its minutes, summed. */
export interface StatsSlot {
  startMs: number;
  counts: ActivityCounts;
}

/** The task activity rollup (`task_stats`; docs/decisions/0034-task-stats-rollup.md). */
export interface TaskStatsStore {
  /** Adds a node's counts to its rows, in one statement. */
  add(nodeId: string, rows: readonly StatsRow[]): Promise<void>;
  /** Deletes the rows of minutes before `beforeMs`; answers how many went. */
  trim(beforeMs: number): Promise<number>;
  /** `[fromMs, toMs)` in `stepMs` slots, summed over nodes (and task types when `taskType` is null). */
  read(fromMs: number, toMs: number, stepMs: number, taskType: string | null): Promise<StatsSlot[]>;
  /** The task types with rows since `sinceMs`, at most `limit`. */
  taskTypes(sinceMs: number, limit: number): Promise<string[]>;
  /** Running tasks now (of `taskType`, or all), counted up to `limit` + 1. */
  running(taskType: string | null, limit: number): Promise<number>;
}
