import type { ScheduleRecord } from '../domain/model.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import { CRON } from './cron-schedule.js';

/**
 * Activates schedules' actors. Records a caller already holds (a submit just wrote them, the
 * node just read a page of them) are handed to the activation to save it a read.
 */
export class CronActivation {
  private readonly preloaded = new Map<string, ScheduleRecord>();

  constructor(private readonly system: Pick<ActorSystemApi, 'ensureActive'>) {}

  /** Activates these schedules, handing each actor its record. */
  async records(records: readonly ScheduleRecord[]): Promise<void> {
    for (const r of records) this.preloaded.set(r.id, r);
    try {
      await Promise.all(records.map((r) => this.system.ensureActive(CRON, r.id)));
    } finally {
      for (const r of records) this.preloaded.delete(r.id);
    }
  }

  /** Activates these schedules by id (each actor reads its row). */
  async ids(ids: readonly string[]): Promise<void> {
    await Promise.all(ids.map((id) => this.system.ensureActive(CRON, id)));
  }

  /** The record a caller handed for `id`, if its activation is under way. */
  take(id: string): ScheduleRecord | undefined {
    return this.preloaded.get(id);
  }
}
