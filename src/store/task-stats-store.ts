import type { Db } from './db.js';
import { countRunning, readStats, statsTaskTypes, trimStats, upsertStats } from './sql/task-stats.js';
import type { StatsRow, StatsSlot, TaskStatsStore } from './task-stats-types.js';

/**
 * The task activity rollup over SQL: the same statements on Postgres and PGlite. The flush and
 * the trim run on `db`; the operator's reads on `reads` (on Postgres the listings' pool, with
 * its statement timeout), so a wide read never holds a connection the hot path needs.
 */
export class SqlTaskStatsStore implements TaskStatsStore {
  constructor(
    private readonly db: Db,
    private readonly reads: Db = db,
  ) {}

  add(nodeId: string, rows: readonly StatsRow[]): Promise<void> {
    return upsertStats(this.db, nodeId, rows);
  }

  trim(beforeMs: number): Promise<number> {
    return trimStats(this.db, beforeMs);
  }

  read(fromMs: number, toMs: number, stepMs: number, taskType: string | null): Promise<StatsSlot[]> {
    return readStats(this.reads, fromMs, toMs, stepMs, taskType);
  }

  taskTypes(sinceMs: number, limit: number): Promise<string[]> {
    return statsTaskTypes(this.reads, sinceMs, limit);
  }

  running(taskType: string | null, limit: number): Promise<number> {
    return countRunning(this.reads, taskType, limit);
  }
}
