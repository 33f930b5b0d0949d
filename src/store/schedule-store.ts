import type { Db } from './db.js';
import {
  getSchedule,
  getSchedules,
  scheduleHistory,
  wakesInPartition,
  wakesInPartitions,
  writeSchedules,
} from './sql/cron.js';
import type { DueEntry, ExecutionRecord, ScheduleRecord } from '../domain/model.js';
import type { HistoryCursor, PartitionCursor, ScheduleStore, ScheduleWrite, ScheduleWriteResult } from './types.js';

/** Cron schedules over SQL, on Postgres and PGlite alike; the statements are in `sql/cron.ts`. */
export class SqlScheduleStore implements ScheduleStore {
  constructor(private readonly db: Db) {}

  get(id: string): Promise<ScheduleRecord | null> {
    return getSchedule(this.db, id);
  }

  getMany(ids: readonly string[]): Promise<(ScheduleRecord | null)[]> {
    return getSchedules(this.db, ids);
  }

  wakesInPartition(partition: number, after: PartitionCursor | null, toMs: number, limit: number): Promise<DueEntry[]> {
    return wakesInPartition(this.db, partition, after, toMs, limit);
  }

  wakesInPartitions(partitions: readonly number[], toMs: number, limit: number): Promise<Map<number, DueEntry[]>> {
    return wakesInPartitions(this.db, partitions, toMs, limit);
  }

  write(writes: ScheduleWrite[], nowMs: number): Promise<ScheduleWriteResult[]> {
    return writeSchedules(this.db, writes, nowMs);
  }

  history(scheduleId: string, limit: number, before?: HistoryCursor): Promise<ExecutionRecord[]> {
    return scheduleHistory(this.db, scheduleId, limit, before);
  }
}
