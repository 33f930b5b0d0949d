import { isWheelhouseError, WheelhouseError } from '../lib/errors.js';
import type { Cancel } from '../runtime/clock.js';
import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import { scheduleWake, type ScheduleRecord, type ScheduleStatus } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { Placing } from './ports.js';
import type { ScheduleStore, ScheduleWrite, ScheduleWriteResult } from '../store/types.js';
import { cronRule, type CronRule } from '../domain/cron-rule.js';
import { CronTimes, type FireOutcome } from './cron-times.js';

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
 * What a fire time's handling changes — the misfire, overlap and spread rules — is decided in
 * `cron-times.ts`; this file is the actor that writes it.
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

/** The rule of a schedule read from its row (none for a row that is gone). */
function ruleOf(record: ScheduleRecord | null): CronRule | null {
  return record === null ? null : cronRule(record.definition.cronExpression, record.definition.timezone);
}

export function cronScheduleBehavior(deps: CronDeps): Behavior<CronState, CronMessage> {
  const times = new CronTimes(deps);
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
    if (record?.status === 'active' && times.intervalAfter(state.rule!, record.nextFireMs) <= deps.awakeIntervalMs) {
      arm(state, ctx, times.handleAt(record, state.rule!) - ctx.clock.now());
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
      const fire = active ? times.fireChange(record, state.rule!, ctx.clock.now()) : null;
      if (fire === null && state.taken) return true;
      const change: Partial<ScheduleWrite> = fire?.change ?? {};
      if (!state.taken && active) change.ensure = times.current(record);
      if (fire === null && active) change.wakeMs = times.handleAt(record, state.rule!);
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

  function counted(state: CronState, outcome: FireOutcome, count: number): void {
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
      const next = times.nextFire(record, state.rule!, Math.max(ctx.clock.now(), record.lastFiredMs ?? -Infinity));
      const generation = record.generation + 1;
      w =
        next === null
          ? write(record, { status: 'succeeded' })
          : write(record, {
              status: 'active',
              nextFireMs: next,
              generation,
              wakeMs: times.handleAt(record, state.rule!, next),
              instances: [times.instance(record, generation, next, times.regular(record))],
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
          const waitMs = record?.status === 'active' ? times.handleAt(record, state.rule!) - ctx.clock.now() : Infinity;
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
