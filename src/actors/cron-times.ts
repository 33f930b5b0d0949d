import { fnv1a, instanceId, jitterOf, partitionOf } from '../lib/ids.js';
import type { ScheduleRecord } from '../domain/model.js';
import type { CronRule } from '../domain/cron-rule.js';
import type { NewInstance, ScheduleWrite } from '../store/types.js';

/**
 * When a cron schedule acts, and what handling a fire time changes: its instances' ids and due
 * times, its handling (wake) times, and the misfire and overlap rules — pure functions of its
 * row, its rule and the clock. The actor (`cron-schedule.ts`) writes what these decide.
 */

export interface CronTimesOptions {
  partitions: number;
  misfireThresholdMs: number;
  fireAllLimit: number;
  /** The most a schedule waits after a fire before creating the next instance (see `handleAt`); 0: at once. */
  advanceSpreadMs: number;
  /** Schedules firing at most this far apart stay in memory (see cron-schedule.ts). @default 0 */
  awakeIntervalMs?: number;
}

/** What handling a fire time does, once its write went through. */
export type FireOutcome = 'fired' | 'skipped' | 'missed';

/** The change handling the current instance's time makes, and what to count of it. */
export interface FireChange {
  change: Partial<ScheduleWrite>;
  outcome: FireOutcome;
  /** Fire times it stands for: 1, or the instances `fire_all` creates. */
  count: number;
}

/** A fraction in [0, 1) fixed per schedule. */
function spreadFraction(id: string): number {
  return fnv1a(id) / 2 ** 32;
}

export class CronTimes {
  constructor(private readonly options: CronTimesOptions) {}

  /** An instance is due at its fire time plus the schedule's jitter for that fire time. */
  dueOf(record: ScheduleRecord, fireMs: number): number {
    return fireMs + jitterOf(record.id, fireMs, record.definition.jitterSeconds * 1000);
  }

  instance(record: ScheduleRecord, generation: number, fireMs: number, status: NewInstance['status']): NewInstance {
    const id = instanceId(record.id, generation, fireMs);
    return {
      id,
      fireMs,
      dueMs: this.dueOf(record, fireMs),
      partition: partitionOf(id, this.options.partitions),
      status,
    };
  }

  /** Regular instances are held until their time when overlapping runs must be skipped. */
  regular(record: ScheduleRecord): NewInstance['status'] {
    return record.definition.overlapPolicy === 'skip' ? 'blocked' : 'pending';
  }

  /** The current instance, as the row says it must exist. */
  current(record: ScheduleRecord): NewInstance {
    return this.instance(record, record.generation, record.nextFireMs, this.regular(record));
  }

  /** The fire time after `afterMs`, or null when the schedule has none left (end_time). */
  nextFire(record: ScheduleRecord, rule: CronRule, afterMs: number): number | null {
    const next = rule.nextAfter(afterMs);
    const end = record.definition.endMs;
    return next === null || (end !== null && next > end) ? null : next;
  }

  /** Time from the fire time `fireMs` to the one after (Infinity when there is none). */
  intervalAfter(rule: CronRule, fireMs: number): number {
    const following = rule.nextAfter(fireMs);
    return following === null ? Infinity : following - fireMs;
  }

  /**
   * When the actor handles the instance of fire time `fireMs`. A held instance (overlap
   * `skip`) is released at its due time: that is its firing. An instance on the wheel fires
   * by itself, and the actor creates the next one a little later, at an offset fixed per
   * schedule, so that schedules aligned on one instant (1 000 per-second schedules, 100 000 on
   * the minute) write their next instances spread out:
   * - a schedule that stays in memory (fires at most `awakeIntervalMs` apart) between a tenth
   *   and a half of the interval after, at most `advanceSpreadMs`;
   * - a schedule that leaves memory between `advanceSpreadMs` (or half the interval) and twice
   *   that (or nine tenths of the interval) after: it must be read back into memory to write,
   *   and that only once the herd of instances that just fired has had time to drain —
   *   100 000 such reads 6–30 s after a minute boundary, beside the herd's claims, tripled the
   *   herd's drain (decision 0016).
   * This is the schedule's wake time.
   */
  handleAt(record: ScheduleRecord, rule: CronRule, fireMs: number = record.nextFireMs): number {
    const due = this.dueOf(record, fireMs);
    const spread = this.options.advanceSpreadMs;
    if (this.regular(record) === 'blocked' || spread <= 0) return due;
    const interval = this.intervalAfter(rule, fireMs);
    let lo: number;
    let hi: number;
    if (interval <= (this.options.awakeIntervalMs ?? 0)) {
      hi = Math.min(interval / 2, spread);
      lo = Math.min(interval / 10, hi / 2);
    } else {
      lo = Math.min(interval / 2, spread);
      hi = Math.min((interval * 9) / 10, 2 * spread);
    }
    return due + Math.floor(lo + (hi - lo) * spreadFraction(record.id));
  }

  /**
   * What handling the current instance's time changes at `now`, or null before that time.
   * Fire times within `misfireThresholdMs` are late, not missed: each gets its instance.
   * Beyond it the misfire policy decides: `fire_once` lets the overdue instance run once and
   * goes on from now, `skip` cancels it, `fire_all` also creates the fire times missed in
   * between (the latest `fireAllLimit`). The change names the next wake.
   */
  fireChange(record: ScheduleRecord, rule: CronRule, now: number): FireChange | null {
    const at = this.handleAt(record, rule);
    if (now < at) return null;
    const currentFire = record.nextFireMs;
    const currentInstance = this.current(record);
    const missed = now - at > this.options.misfireThresholdMs;
    const policy = record.definition.misfirePolicy;
    const instances: NewInstance[] = [];
    const change: Partial<ScheduleWrite> = { lastFiredMs: currentFire, instances };
    if (this.regular(record) === 'blocked') change.release = currentInstance.id;
    let outcome: FireOutcome = 'fired';
    let next: number | null;
    if (!missed) {
      next = this.nextFire(record, rule, currentFire);
    } else {
      next = this.nextFire(record, rule, now);
      if (policy === 'skip') {
        outcome = 'missed';
        change.release = null;
        change.lastFiredMs = record.lastFiredMs;
        change.cancel = {
          instanceId: currentInstance.id,
          reason: `misfire: skipped (${Math.round((now - currentInstance.dueMs) / 1000)} s late, misfire_policy skip)`,
        };
      } else if (policy === 'fire_all') {
        const { times } = rule.firesBetween(
          currentFire,
          Math.min(now, record.definition.endMs ?? now),
          this.options.fireAllLimit - 1,
        );
        for (const t of times) instances.push(this.instance(record, record.generation, t, 'pending'));
        change.lastFiredMs = times.at(-1) ?? currentFire;
      }
    }
    const count = outcome === 'fired' ? 1 + instances.length : 1;
    if (next === null) {
      change.status = 'succeeded';
    } else {
      change.nextFireMs = next;
      change.wakeMs = this.handleAt(record, rule, next);
      instances.push(this.instance(record, record.generation, next, this.regular(record)));
    }
    return { change, outcome, count };
  }
}
