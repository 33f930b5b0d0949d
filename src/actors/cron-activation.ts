import type { DueEntry, ScheduleRecord } from '../domain/model.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import type { ScheduleWakes } from './ports.js';
import { CRON } from './cron-schedule.js';

/**
 * Brings schedules' actors into memory: activates them (a submit, a node taking over
 * partitions), handing the activation a record the caller already holds to save it a read,
 * and tells them their wake came (the wheel, the safety net).
 */
export class CronActivation implements ScheduleWakes {
  private readonly preloaded = new Map<string, ScheduleRecord>();

  constructor(
    private readonly system: Pick<ActorSystemApi, 'ensureActive' | 'ref'>,
    private readonly onError: (error: unknown, context: string) => void,
  ) {}

  /** Activates these schedules, handing each actor its record. */
  async records(records: readonly ScheduleRecord[]): Promise<void> {
    for (const r of records) this.preloaded.set(r.id, r);
    try {
      await Promise.all(records.map((r) => this.system.ensureActive(CRON, r.id)));
    } finally {
      for (const r of records) this.preloaded.delete(r.id);
    }
  }

  /** Activates these schedules by id (each actor reads its row); settles once every one has. */
  ids(ids: readonly string[]): Promise<PromiseSettledResult<void>[]> {
    return Promise.allSettled(ids.map((id) => this.system.ensureActive(CRON, id)));
  }

  /** Tells each schedule its wake came; one that cannot be told is reported (the safety net finds it). */
  wake(wakes: readonly DueEntry[]): void {
    for (const { taskId, dueMs } of wakes) {
      try {
        this.system.ref(CRON, taskId).tell({ type: 'wake', atMs: dueMs });
      } catch (error) {
        this.onError(error, `could not wake cron schedule ${taskId}; the safety net will`);
      }
    }
  }

  /** The record a caller handed for `id`, if its activation is under way. */
  take(id: string): ScheduleRecord | undefined {
    return this.preloaded.get(id);
  }
}
