import { isWheelhouseError, WheelhouseError } from '../lib/errors.js';
import { fnv1a, instanceId, jitterOf, partitionOf } from '../lib/ids.js';
import type { Cancel } from '../runtime/clock.js';
import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import { scheduleWake, type ScheduleRecord, type ScheduleStatus } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Placing } from './ports.js';
import type { NewInstance, ScheduleStore, ScheduleWrite, ScheduleWriteResult } from '../store/types.js';
import { cronRule, type CronRule } from '../domain/cron-rule.js';

/**
 * A cron schedule: one actor per schedule (`("cron", schedule_id)`). It keeps exactly one
 * future instance — an ordinary task row on the wheel — and when that instance's time comes
 * it creates the one after. It never stores more than that.
 *
 * It is in memory only around its fire times. Its row holds a wake time (`wake_time`, the
 * handling time of its current instance), and the wheel partition of the row holds the wake
 * as a due entry: when it comes, the wheel tells the actor `wake`, which activates it, and
 * the actor handles its instance's time and leaves memory again. A schedule whose fire times
 * are at most `awakeIntervalMs` apart stays in memory on its own timer instead (a per-second
 * schedule would otherwise come and go every second). Under the wheel: a node taking over a
 * partition first wakes the schedules whose wake has passed there, and the safety net wakes
 * those the wheel left behind (docs/decisions/0016-cron-passivation.md).
 *
 * Its durable state is the schedule's own task row (next fire time, last fired, status,
 * wake time, version); every write is a compare-and-set on the version, and an activation's
 * first write takes the row (version + 1), so an older activation of the same schedule (a
 * node that was paused, a duplicate activation) can no longer change anything. Instance ids
 * are derived from (schedule, generation, fire time), so whichever activation creates an
 * instance, it is created once. See docs/decisions/0005-cron-state-in-the-task-row.md.
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
  /**
   * The schedule's wake time `atMs` came (its wheel partition, the safety net): it handles
   * what it owes, if anything. Told from outside, so it only hands the work to 'fire', which
   * the runtime retries on failure.
   */
  | { type: 'wake'; atMs: number }
  /** The current instance's handling time came (the actor's own timer: a duty). */
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
  /**
   * A write of this activation went through: the row is this activation's (a later write
   * refused means another took it), and the current instance exists.
   */
  taken: boolean;
  /**
   * The wheel holds the row's wake. A schedule that stays in memory acts on its own timer
   * and puts its wake on the wheel only as it leaves memory (`placeWake`).
   */
  wakePlaced: boolean;
  /** Fire times handled by this activation: instances that fired, were skipped, were missed. */
  fired: number;
  skipped: number;
  missed: number;
}

export interface CronDeps {
  /** Reads a schedule's row (the node batches the reads of actors activated together). */
  schedules: Pick<ScheduleStore, 'get'>;
  /** One schedule write; the node merges concurrent ones into batches. */
  write(write: ScheduleWrite): Promise<ScheduleWriteResult>;
  /** Puts instances that became pending, and the schedule's wake, on their wheel partitions. */
  placement: Pick<Placing, 'placeSoon'>;
  partitions: number;
  misfireThresholdMs: number;
  fireAllLimit: number;
  /** The most a schedule waits after a fire before creating the next instance (see `handleAt`); 0: at once. */
  advanceSpreadMs: number;
  /**
   * A schedule whose fire times are at most this far apart keeps its actor in memory between
   * fires, on its own timer; a sparser one leaves memory after each and is woken by the wheel.
   * 0: every schedule leaves memory between fires.
   */
  awakeIntervalMs: number;
  /** A record the caller just read or wrote (a submit), to save the read. */
  preloaded: { take(id: string): ScheduleRecord | undefined };
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
}

/**
 * A wake at most this long before the handling time it stands for keeps the actor in memory
 * until then: the wheel that fired it may run on a node whose clock reads a little ahead.
 */
const EARLY_WAKE_MS = 1_000;

/** Deleted, or out of fire times. */
function finished(record: ScheduleRecord): boolean {
  return record.status === 'cancelled' || record.status === 'succeeded';
}

/** A fraction in [0, 1) fixed per schedule. */
function spreadFraction(id: string): number {
  return fnv1a(id) / 2 ** 32;
}

/** The rule of a schedule read from its row (none for a row that is gone). */
function ruleOf(record: ScheduleRecord | null): CronRule | null {
  return record === null ? null : cronRule(record.definition.cronExpression, record.definition.timezone);
}

/** What handling a fire time does, once its write went through. */
type Outcome = 'fired' | 'skipped' | 'missed';

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
  /** The current instance, as the row says it must exist. */
  const current = (record: ScheduleRecord): NewInstance =>
    instance(record, record.generation, record.nextFireMs, regular(record));
  /** The fire time after `afterMs`, or null when the schedule has none left (end_time). */
  const nextFire = (state: CronState, afterMs: number): number | null => {
    const next = state.rule!.nextAfter(afterMs);
    const end = state.record!.definition.endMs;
    return next === null || (end !== null && next > end) ? null : next;
  };
  /** Time from the fire time `fireMs` to the one after (Infinity when there is none). */
  const intervalAfter = (state: CronState, fireMs: number): number => {
    const following = state.rule!.nextAfter(fireMs);
    return following === null ? Infinity : following - fireMs;
  };
  const write = (record: ScheduleRecord, change: Partial<ScheduleWrite>): ScheduleWrite => ({
    scheduleId: record.id,
    version: record.version,
    status: record.status,
    nextFireMs: null,
    lastFiredMs: null,
    generation: null,
    wakeMs: null,
    ensure: null,
    release: null,
    instances: [],
    cancel: null,
    ...change,
  });
  /**
   * Applies a write to the in-memory record once the row took it, and places the instances it
   * made pending. A wake it moved is placed by `settle`, if the actor leaves memory.
   */
  const applied = (state: CronState, w: ScheduleWrite, result: ScheduleWriteResult): void => {
    const record = state.record!;
    state.taken = true;
    record.version = result.version;
    record.status = w.status;
    if (w.nextFireMs !== null) record.nextFireMs = w.nextFireMs;
    if (w.lastFiredMs !== null) record.lastFiredMs = w.lastFiredMs;
    if (w.generation !== null) record.generation = w.generation;
    if (w.wakeMs !== null && w.wakeMs !== record.wakeMs) {
      record.wakeMs = w.wakeMs;
      state.wakePlaced = false;
    }
    if (result.due.length > 0) deps.placement.placeSoon(result.due);
  };
  /** Puts an active schedule's wake on the wheel, unless it is there: it is about to leave memory. */
  const placeWake = (state: CronState): void => {
    const record = state.record;
    if (state.wakePlaced || record?.status !== 'active' || record.wakeMs === null) return;
    state.wakePlaced = true;
    deps.placement.placeSoon([scheduleWake(record.id, record.wakeMs)]);
  };
  /**
   * When the actor handles the instance of fire time `fireMs`. A held instance (overlap
   * `skip`) is released at its due time: that is its firing. An instance on the wheel fires
   * by itself, and the actor creates the next one a little later — between a tenth and a half
   * of the interval after, at most `advanceSpreadMs`, at an offset fixed per schedule — so
   * that schedules aligned on one instant (1 000 per-second schedules, 100 000 on the minute)
   * write their next instances spread out, not in the same millisecond as the claims of the
   * instances that just fired. This is the schedule's wake time.
   */
  const handleAt = (state: CronState, record: ScheduleRecord, fireMs: number = record.nextFireMs): number => {
    const due = dueOf(record, fireMs);
    if (regular(record) === 'blocked' || deps.advanceSpreadMs <= 0) return due;
    const interval = intervalAfter(state, fireMs);
    const hi = Math.min(interval / 2, deps.advanceSpreadMs);
    const lo = Math.min(interval / 10, hi / 2);
    return due + Math.floor(lo + (hi - lo) * spreadFraction(record.id));
  };
  /** Delivers 'fire' to this actor after `delayMs` (a duty), instead of any timer armed before. */
  const arm = (state: CronState, ctx: ActorContext<CronMessage>, delayMs: number): void => {
    state.timer?.();
    state.timer = ctx.schedule(Math.max(0, delayMs), { type: 'fire' });
  };
  /**
   * After a message: a schedule that fires often stays in memory with a timer for its next
   * handling time; any other leaves memory with its wake on the wheel, as does a paused one
   * (a command brings it back).
   */
  const settle = (state: CronState, ctx: ActorContext<CronMessage>): void => {
    state.timer?.();
    state.timer = null;
    const record = state.record;
    if (record?.status === 'active' && intervalAfter(state, record.nextFireMs) <= deps.awakeIntervalMs) {
      arm(state, ctx, handleAt(state, record) - ctx.clock.now());
      return;
    }
    placeWake(state);
    ctx.passivate();
  };
  /**
   * A write was refused: the row is no longer at this activation's version, so another
   * activation took the schedule (a node that was paused past its failover, a second
   * activation). This one changes nothing more and leaves memory; the next message
   * activates a fresh one that reads the row.
   */
  const fenced = (state: CronState, ctx: ActorContext<CronMessage>, during: string): WheelhouseError => {
    state.wakePlaced = true; // the row's wake is the new activation's
    ctx.stop();
    return new WheelhouseError(
      'stale_epoch',
      `cron ${ctx.key}: another activation took the schedule row during ${during}; this one stops`,
      {
        details: { kind: CRON.name, key: ctx.key },
      },
    );
  };

  /**
   * What handling the current instance's time changes, or null before that time. See the
   * module comment for the policies.
   */
  function fireChange(
    state: CronState,
    now: number,
  ): { change: Partial<ScheduleWrite>; outcome: Outcome; count: number } | null {
    const record = state.record!;
    const at = handleAt(state, record);
    if (now < at) return null;
    const currentFire = record.nextFireMs;
    const currentInstance = current(record);
    const missed = now - at > deps.misfireThresholdMs;
    const policy = record.definition.misfirePolicy;
    const instances: NewInstance[] = [];
    const change: Partial<ScheduleWrite> = { lastFiredMs: currentFire, instances };
    if (regular(record) === 'blocked') change.release = currentInstance.id;
    let outcome: Outcome = 'fired';
    let next: number | null;
    if (!missed) {
      next = nextFire(state, currentFire);
    } else {
      next = nextFire(state, now);
      if (policy === 'skip') {
        outcome = 'missed';
        change.release = null;
        change.lastFiredMs = record.lastFiredMs;
        change.cancel = {
          instanceId: currentInstance.id,
          reason: `misfire: skipped (${Math.round((now - currentInstance.dueMs) / 1000)} s late, misfire_policy skip)`,
        };
      } else if (policy === 'fire_all') {
        const { times } = state.rule!.firesBetween(
          currentFire,
          Math.min(now, record.definition.endMs ?? now),
          deps.fireAllLimit - 1,
        );
        for (const t of times) instances.push(instance(record, record.generation, t, 'pending'));
        change.lastFiredMs = times.at(-1) ?? currentFire;
      }
    }
    const count = outcome === 'fired' ? 1 + instances.length : 1;
    if (next === null) {
      change.status = 'succeeded';
    } else {
      change.nextFireMs = next;
      change.wakeMs = handleAt(state, record, next);
      instances.push(instance(record, record.generation, next, regular(record)));
    }
    return { change, outcome, count };
  }

  /**
   * Does what the schedule owes now: handles its current instance's time if it has come. The
   * first write of an activation is made even when nothing is owed — it takes the row, makes
   * sure of the current instance (nothing else creates a new schedule's first) and puts the
   * wake where the row says it is due — and a refusal of it only means the row moved since
   * it was read: it is read again and weighed anew. A later refusal fences this activation.
   * Answers false when fenced (the actor is stopping).
   */
  async function act(state: CronState, ctx: ActorContext<CronMessage>): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      const record = state.record;
      if (record === null || finished(record)) return true;
      const active = record.status === 'active';
      const fire = active ? fireChange(state, ctx.clock.now()) : null;
      if (fire === null && state.taken) return true;
      const change: Partial<ScheduleWrite> = fire?.change ?? {};
      if (!state.taken && active) change.ensure = current(record);
      if (fire === null && active) change.wakeMs = handleAt(state, record);
      const w = write(record, change);
      const result = await deps.write(w);
      if (result.ok) {
        applied(state, w, result);
        if (fire !== null) counted(state, result.skipped ? 'skipped' : fire.outcome, fire.count);
        return true;
      }
      if (state.taken) {
        deps.onError(fenced(state, ctx, 'a fire'), 'cron fire');
        return false;
      }
      if (attempt >= 2)
        throw new WheelhouseError('stale_epoch', `cron ${ctx.key}: could not take the schedule row (it kept changing)`);
      state.record = await deps.schedules.get(ctx.key);
      state.rule = ruleOf(state.record);
    }
  }

  function counted(state: CronState, outcome: Outcome, count: number): void {
    if (outcome === 'fired') state.fired += count;
    else state[outcome] += 1;
    deps.events.emit('cron:fired', { outcome, count: outcome === 'fired' ? count : 1 });
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
              wakeMs: handleAt(state, record, next),
              instances: [instance(record, generation, next, regular(record))],
            });
    }
    const result = await deps.write(w);
    if (!result.ok) throw fenced(state, ctx, type);
    applied(state, w, result);
    return { ok: true, status: w.status, cancelledInstances: result.cancelled };
  }

  return {
    kind: CRON,
    persistence: 'external',
    mailboxCapacity: 1_000,

    async activate(ctx) {
      const state: CronState = {
        record: null,
        rule: null,
        timer: null,
        taken: false,
        // The row's wake is on the wheel until it fires, and one that fired woke this actor.
        wakePlaced: true,
        fired: 0,
        skipped: 0,
        missed: 0,
      };
      state.record = deps.preloaded.take(ctx.key) ?? (await deps.schedules.get(ctx.key));
      state.rule = ruleOf(state.record);
      // Fire times that passed while no actor held the schedule are handled now, before the
      // node hands out work: a misfire policy of `skip` must cancel before the wheel fires.
      try {
        if (!(await act(state, ctx))) return state;
      } catch (error) {
        if (!state.taken && isWheelhouseError(error, 'stale_epoch')) throw error;
        // Handed to the 'fire' duty, which the runtime retries with backoff until it succeeds.
        deps.onError(error, `cron ${ctx.key}: acting on activation failed; retrying`);
        arm(state, ctx, 0);
        return state;
      }
      settle(state, ctx);
      return state;
    },

    async receive(state, message, ctx) {
      switch (message.type) {
        case 'wake': {
          // What is owed goes to the duty. The wake of the time still ahead, a little early
          // (the wheel's node reads a little ahead of this one), is kept for. Any other (one
          // already acted on, a stale one) changes nothing.
          const record = state.record;
          const waitMs = record?.status === 'active' ? handleAt(state, record) - ctx.clock.now() : Infinity;
          const current = record !== null && message.atMs >= (record.wakeMs ?? -Infinity);
          if (waitMs <= 0 || (current && waitMs <= EARLY_WAKE_MS)) arm(state, ctx, waitMs);
          else settle(state, ctx);
          return state;
        }
        case 'fire':
          // A duty: should the write fail, the runtime delivers 'fire' again with backoff.
          state.timer = null;
          if (!(await act(state, ctx))) return state;
          if (state.record !== null && finished(state.record)) ctx.stop();
          else settle(state, ctx);
          return state;
        case 'pause':
        case 'resume':
        case 'cancel':
          ctx.reply(message, await command(state, ctx, message.type));
          // A deleted, ended or unknown schedule has nothing left to do in memory.
          if (state.record === null || finished(state.record)) ctx.stop();
          else settle(state, ctx);
          return state;
      }
    },

    async deactivate(state, _ctx, reason) {
      state.timer?.();
      // Handed off to another node, or passivated from outside: the wheel brings it back. (A
      // node that stops or was declared out leaves the wakes to the partitions' rebuilds.)
      if (reason === 'passivated') placeWake(state);
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
        wakeAt: r.status === 'active' && r.wakeMs !== null ? new Date(r.wakeMs).toISOString() : null,
        generation: r.generation,
        fired: state.fired,
        skipped: state.skipped,
        missed: state.missed,
      };
    },
  };
}
