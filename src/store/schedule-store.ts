import type { Db } from './db.js';
import { WriteBatcher } from '../lib/write-batcher.js';
import type { FirstPageRequest } from './sql/partition-pages.js';
import {
  getSchedule,
  getSchedules,
  scheduleHistory,
  wakesFirstPages,
  wakesInPartition,
  wakesInPartitions,
  writeSchedules,
} from './sql/cron.js';
import type { DueEntry, ExecutionRecord, ScheduleRecord } from '../domain/model.js';
import type { HistoryCursor, PartitionCursor, ScheduleStore, ScheduleWrite, ScheduleWriteResult } from './types.js';

/** Cron schedules over SQL, on Postgres and PGlite alike; the statements are in `sql/cron.ts`. */
export class SqlScheduleStore implements ScheduleStore {
  /** First pages asked for in one event-loop turn (wheel partitions activating together): one statement. */
  private readonly firstPages: WriteBatcher<FirstPageRequest, DueEntry[]>;

  constructor(private readonly db: Db) {
    this.firstPages = new WriteBatcher((requests) => wakesFirstPages(this.db, requests));
  }

  get(id: string): Promise<ScheduleRecord | null> {
    return getSchedule(this.db, id);
  }

  getMany(ids: readonly string[]): Promise<(ScheduleRecord | null)[]> {
    return getSchedules(this.db, ids);
  }

  wakesInPartition(partition: number, after: PartitionCursor | null, toMs: number, limit: number): Promise<DueEntry[]> {
    if (after === null) return this.firstPages.submit({ partition, toMs, limit });
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
