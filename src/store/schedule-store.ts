import type { Db } from './db.js';
import { activeScheduleIds, activeSchedules, getSchedule, scheduleHistory, writeSchedules } from './sql/cron.js';
import type { ExecutionRecord, ScheduleRecord } from '../domain/model.js';
import type { HistoryCursor, ScheduleStore, ScheduleWrite, ScheduleWriteResult } from './types.js';

/** Cron schedules over SQL, on Postgres and PGlite alike; the statements are in `sql/cron.ts`. */
export class SqlScheduleStore implements ScheduleStore {
  constructor(private readonly db: Db) {}

  get(id: string): Promise<ScheduleRecord | null> {
    return getSchedule(this.db, id);
  }

  active(afterId: string | null, limit: number): Promise<ScheduleRecord[]> {
    return activeSchedules(this.db, afterId, limit);
  }

  activeIds(afterId: string | null, limit: number): Promise<string[]> {
    return activeScheduleIds(this.db, afterId, limit);
  }

  write(writes: ScheduleWrite[], nowMs: number): Promise<ScheduleWriteResult[]> {
    return writeSchedules(this.db, writes, nowMs);
  }

  history(scheduleId: string, limit: number, before?: HistoryCursor): Promise<ExecutionRecord[]> {
    return scheduleHistory(this.db, scheduleId, limit, before);
  }
}
