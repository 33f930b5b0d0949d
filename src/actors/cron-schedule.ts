import { WheelhouseError } from '../lib/errors.js';
import { fnv1a, instanceId, jitterOf, partitionOf } from '../lib/ids.js';
import type { Cancel } from '../runtime/clock.js';
import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import type { ScheduleRecord, ScheduleStatus } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Placing } from './ports.js';
import type { NewInstance, ScheduleStore, ScheduleWrite, ScheduleWriteResult } from '../store/types.js';
import { cronRule, type CronRule } from '../domain/cron-rule.js';

/**
 * A cron schedule: one actor per schedule (`("cron", schedule_id)`). It keeps exactly one
 * future instance — an ordinary task row on the wheel — and when that instance's time comes
 * it creates the one after. It never stores more than that.
 *
 * Its durable state is the schedule's own task row (next fire time, last fired, status,
 * version); every write is a compare-and-set on the version, and activation itself bumps
 * the version, so an older activation of the same schedule (a node that was paused, a
 * duplicate activation) can no longer change anything. Instance ids are derived from
 * (schedule, generation, fire time), so whichever activation creates an instance, it is
 * created once. See docs/decisions/0005-cron-state-in-the-task-row.md.
 *
 * Fire times within `misfireThresholdMs` of now are "late", not missed: every one of them
 * gets its instance (a node busy for two seconds does not drop two per-second fires). Beyond
 * the threshold the schedule's misfire policy decides: `fire_once` lets the overdue
 * instance run once and goes on from now, `skip` cancels it, `fire_all` also creates the
 * fire times missed in between (the latest `fireAllLimit`).
 */
export const CRON = defineKind<CronMessage>('cron');

export type CronCommandResult =
  | { ok: true; status: ScheduleStatus; cancelledInstances: number }
  | { ok: false; reason: 'not_found' | 'finished'; status: ScheduleStatus | null };

export type CronMessage =
  /** The current instance's due time came (the actor's own timer). */
  | { type: 'fire' }
  | Ask<{ type: 'pause' }, CronCommandResult>
  | Ask<{ type: 'resume' }, CronCommandResult>
  /** Stop for good: cancels the pending instance. */
  | Ask<{ type: 'cancel' }, CronCommandResult>;

export interface CronState {
  /** null: there is no such schedule. */
  record: ScheduleRecord | null;
  rule: CronRule | null;
  timer: Cancel | null;
  /** Fire times handled by this activation: instances that fired, were skipped, were missed. */
  fired: number;
  skipped: number;
  missed: number;
}

export interface CronDeps {
  schedules: Pick<ScheduleStore, 'get'>;
  /** One schedule write; the node merges concurrent ones into batches. */
  write(write: ScheduleWrite): Promise<ScheduleWriteResult>;
  /** Puts instances that became pending on their wheel partitions. */
  placement: Pick<Placing, 'placeSoon'>;
  partitions: number;
  misfireThresholdMs: number;
  fireAllLimit: number;
  /** The most a schedule waits after a fire before creating the next instance (see `handleAt`); 0: at once. */
  advanceSpreadMs: number;
  /** A record the caller just read or wrote (a submit, a page at start), to save the read. */
  preloaded: { take(id: string): ScheduleRecord | undefined };
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

/** Deleted, or out of fire times. */
function finished(record: ScheduleRecord): boolean {
  return record.status === 'cancelled' || record.status === 'succeeded';
}

/** A fraction in [0, 1) fixed per schedule. */
function spreadFraction(id: string): number {
  return fnv1a(id) / 2 ** 32;
}

export function cronScheduleBehavior(deps: CronDeps): Behavior<CronState, CronMessage> {
  /** An instance is due at its fire time plus the schedule's jitter for that fire time. */
  const dueOf = (record: ScheduleRecord, fireMs: number): number =>
    fireMs + jitterOf(record.id, fireMs, record.definition.jitterSeconds * 1000);
  const instance = (
    record: ScheduleRecord,
    generation: number,
    fireMs: number,
    status: NewInstance['status'],
  ): NewInstance => {
    const id = instanceId(record.id, generation, fireMs);
    return { id, fireMs, dueMs: dueOf(record, fireMs), partition: partitionOf(id, deps.partitions), status };
  };
  /** Regular instances are held until their time when overlapping runs must be skipped. */
  const regular = (record: ScheduleRecord): NewInstance['status'] =>
    record.definition.overlapPolicy === 'skip' ? 'blocked' : 'pending';
  /** The fire time after `afterMs`, or null when the schedule has none left (end_time). */
  const nextFire = (state: CronState, afterMs: number): number | null => {
    const next = state.rule!.nextAfter(afterMs);
    const end = state.record!.definition.endMs;
    return next === null || (end !== null && next > end) ? null : next;
  };
  const write = (record: ScheduleRecord, change: Partial<ScheduleWrite>): ScheduleWrite => ({
    scheduleId: record.id,
    version: record.version,
    status: record.status,
    nextFireMs: null,
    lastFiredMs: null,
    generation: null,
    release: null,
    instances: [],
    cancel: null,
    ...change,
  });
  /** Applies a write to the in-memory record once the row took it. */
  const applied = (state: CronState, w: ScheduleWrite, result: ScheduleWriteResult): void => {
    const record = state.record!;
    record.version = result.version;
    record.status = w.status;
    if (w.nextFireMs !== null) record.nextFireMs = w.nextFireMs;
    if (w.lastFiredMs !== null) record.lastFiredMs = w.lastFiredMs;
    if (w.generation !== null) record.generation = w.generation;
    if (result.due.length > 0) deps.placement.placeSoon(result.due);
  };
  /**
   * When the actor handles its current instance's time. A held instance (overlap `skip`) is
   * released at its due time: that is its firing. An instance on the wheel fires by itself,
   * and the actor creates the next one a little later — between a tenth and a half of the
   * interval after, at most `advanceSpreadMs`, at an offset fixed per schedule — so that
   * schedules aligned on one instant (1 000 per-second schedules, 100 000 on the minute)
   * write their next instances spread out, not in the same millisecond as the claims of
   * the instances that just fired.
   */
  const handleAt = (state: CronState, record: ScheduleRecord): number => {
    const due = dueOf(record, record.nextFireMs);
    if (regular(record) === 'blocked' || deps.advanceSpreadMs <= 0) return due;
    const following = state.rule!.nextAfter(record.nextFireMs);
    const interval = following === null ? 0 : following - record.nextFireMs;
    const hi = Math.min(interval / 2, deps.advanceSpreadMs);
    const lo = Math.min(interval / 10, hi / 2);
    return due + Math.floor(lo + (hi - lo) * spreadFraction(record.id));
  };
  const arm = (state: CronState, ctx: ActorContext<CronMessage>, delayMs?: number): void => {
    state.timer?.();
    state.timer = null;
    const record = state.record;
    if (record?.status !== 'active') return;
    state.timer = ctx.schedule(delayMs ?? handleAt(state, record) - ctx.clock.now(), { type: 'fire' });
  };
  /**
   * A write was refused: the row is no longer at this activation's version, so another
   * activation took the schedule (a node that was paused past its failover, a second
   * activation). This one changes nothing more and leaves memory; the next message
   * activates a fresh one that reads the row.
   */
  const fenced = (ctx: ActorContext<CronMessage>, during: string): WheelhouseError => {
    ctx.stop();
    return new WheelhouseError(
      'stale_epoch',
      `cron ${ctx.key}: another activation took the schedule row during ${during}; this one stops`,
      {
        details: { kind: CRON.name, key: ctx.key },
      },
    );
  };

  /** Handles the current instance's due time. See the module comment for the policies. */
  async function fire(state: CronState, ctx: ActorContext<CronMessage>): Promise<void> {
    const record = state.record!;
    const now = ctx.clock.now();
    const current = record.nextFireMs;
    const currentInstance = instance(record, record.generation, current, regular(record));
    const at = handleAt(state, record);
    if (now < at) return arm(state, ctx);

    const missed = now - at > deps.misfireThresholdMs;
    const policy = record.definition.misfirePolicy;
    const change: Partial<ScheduleWrite> = { lastFiredMs: current, instances: [] };
    if (regular(record) === 'blocked') change.release = currentInstance.id;
    let next: number | null;
    if (!missed) {
      next = nextFire(state, current);
    } else {
      next = nextFire(state, now);
      if (policy === 'skip') {
        change.release = null;
        change.lastFiredMs = record.lastFiredMs;
        change.cancel = {
          instanceId: currentInstance.id,
          reason: `misfire: skipped (${Math.round((now - currentInstance.dueMs) / 1000)} s late, misfire_policy skip)`,
        };
      } else if (policy === 'fire_all') {
        const { times } = state.rule!.firesBetween(
          current,
          Math.min(now, record.definition.endMs ?? now),
          deps.fireAllLimit - 1,
        );
        change.instances = times.map((t: number) => instance(record, record.generation, t, 'pending'));
        change.lastFiredMs = times.at(-1) ?? current;
      }
    }
    if (next === null) {
      change.status = 'succeeded';
    } else {
      change.nextFireMs = next;
      change.instances!.push(instance(record, record.generation, next, regular(record)));
    }
    const w = write(record, change);
    const result = await deps.write(w);
    if (!result.ok) return deps.onError(fenced(ctx, 'a fire'), 'cron fire');
    applied(state, w, result);
    const extra = change.instances!.length - (next === null ? 0 : 1);
    if (change.cancel) {
      state.missed += 1;
      deps.events.emit('cron:fired', { outcome: 'missed', count: 1 });
    } else if (result.skipped) {
      state.skipped += 1;
      deps.events.emit('cron:fired', { outcome: 'skipped', count: 1 });
    } else {
      state.fired += 1 + extra;
      deps.events.emit('cron:fired', { outcome: 'fired', count: 1 + extra });
    }
    arm(state, ctx);
  }

  /** pause / resume / cancel: one write each; a refused compare-and-set fences this activation. */
  async function command(
    state: CronState,
    ctx: ActorContext<CronMessage>,
    type: 'pause' | 'resume' | 'cancel',
  ): Promise<CronCommandResult> {
    const record = state.record;
    if (record === null) return { ok: false, reason: 'not_found', status: null };
    if (finished(record)) return { ok: false, reason: 'finished', status: record.status };
    let w: ScheduleWrite;
    if (type === 'pause') {
      if (record.status === 'paused') return { ok: true, status: 'paused', cancelledInstances: 0 };
      w = write(record, { status: 'paused', cancel: { instanceId: null, reason: 'the schedule was paused' } });
    } else if (type === 'cancel') {
      w = write(record, { status: 'cancelled', cancel: { instanceId: null, reason: 'the schedule was deleted' } });
    } else {
      if (record.status === 'active') return { ok: true, status: 'active', cancelledInstances: 0 };
      // From now, but never at or before the last fire time: a clock set back since then
      // must not make a resume create fire times that already fired.
      const next = nextFire(state, Math.max(ctx.clock.now(), record.lastFiredMs ?? -Infinity));
      const generation = record.generation + 1;
      w =
        next === null
          ? write(record, { status: 'succeeded' })
          : write(record, {
              status: 'active',
              nextFireMs: next,
              generation,
              instances: [instance(record, generation, next, regular(record))],
            });
    }
    const result = await deps.write(w);
    if (!result.ok) throw fenced(ctx, type);
    applied(state, w, result);
    arm(state, ctx);
    return { ok: true, status: w.status, cancelledInstances: result.cancelled };
  }

  return {
    kind: CRON,
    persistence: 'external',
    mailboxCapacity: 1_000,

    async activate(ctx) {
      const state: CronState = { record: null, rule: null, timer: null, fired: 0, skipped: 0, missed: 0 };
      state.record = deps.preloaded.take(ctx.key) ?? (await deps.schedules.get(ctx.key));
      for (let attempt = 0; state.record !== null && !finished(state.record); attempt++) {
        const record = state.record;
        state.rule = cronRule(record.definition.cronExpression, record.definition.timezone);
        // Take the row (version + 1 fences any earlier activation) and make sure the
        // current instance exists: the write that moved the schedule on may have been the
        // last thing a failed node did, or the first instance of a new schedule.
        const current =
          record.status === 'active' ? [instance(record, record.generation, record.nextFireMs, regular(record))] : [];
        const w = write(record, { instances: current });
        const result = await deps.write(w);
        if (result.ok) {
          applied(state, w, result);
          break;
        }
        // The row moved since it was read (a preloaded record gone stale): read it again.
        if (attempt >= 2)
          throw new WheelhouseError(
            'stale_epoch',
            `cron ${ctx.key}: could not take the schedule row (it kept changing)`,
          );
        state.record = await deps.schedules.get(ctx.key);
      }
      // Fire times that passed while no actor held the schedule are handled now, before the
      // node hands out work: a misfire policy of `skip` must cancel before the wheel fires.
      if (state.record?.status === 'active') {
        try {
          await fire(state, ctx);
        } catch (error) {
          // Handed to the 'fire' duty, which the runtime retries with backoff until it succeeds.
          deps.onError(error, `cron ${ctx.key}: catching up on activation failed; retrying`);
          arm(state, ctx, 0);
        }
      }
      return state;
    },

    async receive(state, message, ctx) {
      switch (message.type) {
        case 'fire':
          // A duty: should the write fail, the runtime delivers 'fire' again with backoff.
          state.timer = null;
          if (state.record?.status !== 'active') return state;
          await fire(state, ctx);
          if (state.record !== null && finished(state.record)) ctx.stop();
          return state;
        case 'pause':
        case 'resume':
        case 'cancel':
          ctx.reply(message, await command(state, ctx, message.type));
          // A deleted, ended or unknown schedule has nothing left to do in memory.
          if (state.record === null || finished(state.record)) ctx.stop();
          return state;
      }
    },

    async deactivate(state) {
      state.timer?.();
    },

    describe(state) {
      const r = state.record;
      if (r === null) return { schedule: null };
      return {
        status: r.status,
        version: r.version,
        cronExpression: r.definition.cronExpression,
        timezone: r.definition.timezone,
        nextFireAt: r.status === 'active' ? new Date(r.nextFireMs).toISOString() : null,
        lastFiredAt: r.lastFiredMs === null ? null : new Date(r.lastFiredMs).toISOString(),
        generation: r.generation,
        fired: state.fired,
        skipped: state.skipped,
        missed: state.missed,
      };
    },
  };
}
