import { isWheelhouseError } from '../errors.js';
import type { Cancel } from '../runtime/clock.js';
import type { ActorContext, Ask, Behavior } from '../runtime/actor.js';
import type { BucketStore, DueEntry, PartitionCursor, ReadyQueue, TaskStore } from '../store/types.js';
import { TimeWheel } from './time-wheel.js';

/**
 * A wheel partition: one actor per partition (`("wheel", "<n>")`). It holds the near wheel
 * (the next minute or two, in memory, 10 ms slots) and the partition's far buckets in the
 * bucket store (one per minute). Once a minute it loads the next minute's bucket into the
 * near wheel — the cascade, which is also the pre-warm. At each tick it moves the due slot to
 * the ready queue in one batch. It writes nothing to Postgres on the tick: `ready` is derived
 * from `pending` and the due time.
 *
 * On activation it rebuilds from the system of record, so a lost bucket store or a restart
 * loses nothing.
 *
 * Fencing: activation takes `(node, epoch + 1)` in Postgres (the runtime does) and then
 * raises the partition's fence in the bucket store to that epoch before anything else.
 * Every write the partition makes there — a push to the ready queue (a fired slot), a bucket
 * added to or taken — carries its epoch and is refused atomically once a newer activation
 * has fenced, and a refusal stops this activation. So a node that was paused past the
 * failure timeout cannot fire a slot its successor already fired, nor take entries out of
 * its successor's buckets.
 */
export const WHEEL_KIND = 'wheel';

export type WheelMessage =
  /** Tasks to trigger at their due times (new, retried or unblocked). */
  | Ask<{ type: 'schedule'; entries: DueEntry[] }, void>
  | { type: 'tick' }
  | { type: 'cascade' }
  /** The bucket store lost this partition's buckets: reload them from the task table. */
  | Ask<{ type: 'rebuild' }, void>;

export interface WheelState {
  readonly partition: number;
  readonly wheel: TimeWheel;
  /** The near wheel holds every pending task due before this; the buckets hold the rest. */
  loadedUntilMs: number;
  /** Time of the last tick. */
  cursorMs: number;
  /** Tasks moved to the ready queue by this activation. */
  firedCount: number;
  tickAtMs: number | null;
  cancelTick: Cancel | null;
  cancelCascade: Cancel | null;
}

/**
 * What a partition persists. `loadedUntilMs` is written ahead of each cascade: before buckets
 * are taken out of the bucket store, the snapshot already says the near wheel reaches past
 * them, so the next activation — whatever happened to this one — reloads that far from the
 * task table. The task table is the truth; the rest shows where the partition was.
 */
interface WheelSnapshot {
  cursorMs: number;
  loadedUntilMs: number;
  firedTotal: number;
}

export interface WheelDeps {
  tasks: TaskStore;
  buckets: BucketStore;
  ready: ReadyQueue;
  slotMs: number;
  nearWindowMs: number;
  /** Tells the lease of a task that was running when the partition was last active. */
  recoverLease(entry: { taskId: string; version: number; leaseExpiresMs: number }): void;
  onError(error: unknown, context: string): void;
}

const MINUTE_MS = 60_000;
/** Cascades of different partitions are spread over this much of each minute. */
const CASCADE_STAGGER_MS = 30_000;
/** Page size when streaming a partition's pending tasks out of the task table. */
const REBUILD_PAGE = 5_000;
/** Wait before retrying a ready-queue push that failed. */
const RETRY_PUSH_MS = 1_000;
/** The latest instant a JavaScript Date can hold: an upper bound for "every pending task". */
const END_OF_TIME_MS = 8.64e15;

export function wheelPartitionBehavior(deps: WheelDeps): Behavior<WheelState, WheelMessage> {
  return {
    kind: WHEEL_KIND,
    persistence: 'snapshot',
    mailboxCapacity: 1_000_000,

    async activate(ctx, snapshot) {
      const previous = snapshot as WheelSnapshot | null;
      const now = ctx.clock.now();
      const state: WheelState = {
        partition: Number(ctx.key),
        wheel: new TimeWheel(deps.slotMs),
        // As far as the previous activation may have taken buckets, at least.
        loadedUntilMs: Math.max(nearHorizon(now, deps.nearWindowMs), previous?.loadedUntilMs ?? 0),
        cursorMs: previous?.cursorMs ?? now,
        firedCount: 0,
        tickAtMs: null,
        cancelTick: null,
        cancelCascade: null,
      };
      const [, lost] = await Promise.all([
        deps.buckets.fence(state.partition, ctx.epoch),
        deps.buckets.lostPartitions([state.partition]),
      ]);
      await rebuild(state, ctx, deps, lost.length > 0);
      armCascade(state, ctx, deps);
      // Fire first: on a failover every moment here delays the partition's overdue tasks.
      await fireDue(state, ctx, deps);
      for (const running of await deps.tasks.runningInPartitions([state.partition])) deps.recoverLease(running);
      return state;
    },

    async receive(state, message, ctx) {
      switch (message.type) {
        case 'schedule': {
          const far: DueEntry[] = [];
          for (const entry of message.entries) {
            if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
            else far.push(entry);
          }
          if (far.length > 0) await deps.buckets.add(state.partition, far, ctx.epoch);
          await fireDue(state, ctx, deps);
          return state;
        }
        case 'tick':
          state.tickAtMs = null;
          state.cancelTick = null;
          await fireDue(state, ctx, deps);
          return state;
        case 'cascade':
          await cascade(state, ctx, deps);
          return state;
        case 'rebuild': {
          // The node's loss check runs outside this mailbox and can catch the mark in the
          // moment a cascade of ours has taken it down; asked again here, between our own
          // messages, the answer is exact.
          const lost = await deps.buckets.lostPartitions([state.partition]);
          if (lost.length === 0) return state;
          await rebuild(state, ctx, deps, true);
          await fireDue(state, ctx, deps);
          return state;
        }
      }
    },

    async deactivate(state, ctx, reason) {
      state.cancelTick?.();
      state.cancelCascade?.();
      if (reason !== 'failed') await ctx.snapshot(snapshotOf(state));
    },

    describe(state) {
      return {
        partition: state.partition,
        nearWheelSize: state.wheel.size,
        nextDueAt: iso(state.wheel.nextDueMs()),
        loadedUntil: iso(state.loadedUntilMs),
        cursor: iso(state.cursorMs),
        firedCount: state.firedCount,
      };
    },
  };
}

/**
 * How far the near wheel must reach at `nowMs`: past `now + nearWindow`, to the end of the
 * minute that instant falls in (buckets are whole minutes). Strictly greater than
 * `now + nearWindow`, so a cascade armed at `loadedUntil − nearWindow` always makes progress.
 */
function nearHorizon(nowMs: number, nearWindowMs: number): number {
  return Math.floor((nowMs + nearWindowMs) / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
}

/**
 * Moves every due entry to the ready queue in one push, then arms the timer for the next
 * due time. A failed push puts the entries back and retries shortly: they stay `pending`
 * in the task table either way.
 */
async function fireDue(state: WheelState, ctx: ActorContext<WheelMessage>, deps: WheelDeps): Promise<void> {
  const now = ctx.clock.now();
  const due = state.wheel.takeDue(now);
  state.cursorMs = Math.max(state.cursorMs, now);
  if (due.length > 0) {
    try {
      await deps.ready.push(due, { partition: state.partition, epoch: ctx.epoch });
      state.firedCount += due.length;
    } catch (error) {
      if (isWheelhouseError(error, 'stale_epoch')) throw error; // a newer owner fires these
      state.wheel.addAll(due.map((e) => ({ ...e, dueMs: Math.max(e.dueMs, now + RETRY_PUSH_MS) })));
      deps.onError(error, `wheel ${state.partition}: ready-queue push of ${due.length} failed; retrying`);
    }
  }
  armTick(state, ctx);
}

function armTick(state: WheelState, ctx: ActorContext<WheelMessage>): void {
  const next = state.wheel.nextDueMs();
  if (next === null) {
    state.cancelTick?.();
    state.cancelTick = null;
    state.tickAtMs = null;
    return;
  }
  if (state.tickAtMs !== null && state.tickAtMs <= next) return;
  state.cancelTick?.();
  state.tickAtMs = next;
  state.cancelTick = ctx.schedule(next - ctx.clock.now(), { type: 'tick' });
}

/**
 * Loads the next minute's bucket (and any the clock has skipped past) into the near wheel.
 * Each cascade loads at least one more minute, so it may run early — see `armCascade`.
 */
async function cascade(state: WheelState, ctx: ActorContext<WheelMessage>, deps: WheelDeps): Promise<void> {
  state.cancelCascade = null;
  const horizon = Math.max(nearHorizon(ctx.clock.now(), deps.nearWindowMs), state.loadedUntilMs + MINUTE_MS);
  // Written ahead: see WheelSnapshot. A fenced activation stops here, having taken nothing.
  await ctx.snapshot({ ...snapshotOf(state), loadedUntilMs: horizon });
  const entries = await deps.buckets.takeUntil(state.partition, horizon, ctx.epoch);
  state.wheel.addAll(entries);
  state.loadedUntilMs = horizon;
  armCascade(state, ctx, deps);
  await fireDue(state, ctx, deps);
}

/**
 * Arms the next cascade: before `now + nearWindow` reaches `loadedUntil`, by a stagger of up
 * to 30 s that differs per partition, so the 64 partitions of a node do not all cascade
 * (a bucket read and a snapshot write each) in the same millisecond of every minute.
 */
function armCascade(state: WheelState, ctx: ActorContext<WheelMessage>, deps: WheelDeps): void {
  state.cancelCascade?.();
  const staggerMs = (state.partition * 7_919) % CASCADE_STAGGER_MS;
  const atMs = state.loadedUntilMs - deps.nearWindowMs - staggerMs;
  state.cancelCascade = ctx.schedule(Math.max(atMs - ctx.clock.now(), 0), { type: 'cascade' });
}

/**
 * Reloads the partition from the task table. `full`: the bucket store lost this partition,
 * so every pending task is placed again (near ones in the wheel, the rest in buckets) and the
 * partition is marked intact. Otherwise only the near window is reloaded from Postgres and
 * the far buckets are trusted. Entries already queued are deduplicated by the ready queue,
 * and a task claimed twice is refused by the claim's compare-and-set.
 */
async function rebuild(state: WheelState, ctx: ActorContext<WheelMessage>, deps: WheelDeps, full: boolean): Promise<void> {
  state.wheel.clear();
  // A flushed store lost the fence with everything else: raise it again before writing.
  if (full) await deps.buckets.fence(state.partition, ctx.epoch);
  const until = full ? END_OF_TIME_MS : state.loadedUntilMs;
  let after: PartitionCursor | null = null;
  for (;;) {
    const page = await deps.tasks.pendingInPartition(state.partition, after, until, REBUILD_PAGE);
    const far: DueEntry[] = [];
    for (const entry of page) {
      if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
      else far.push(entry);
    }
    if (far.length > 0) await deps.buckets.add(state.partition, far, ctx.epoch);
    const last = page[page.length - 1];
    if (page.length < REBUILD_PAGE || last === undefined) break;
    after = { dueMs: last.dueMs, taskId: last.taskId };
  }
  if (full) {
    await deps.buckets.setIntact(state.partition);
  } else {
    state.wheel.addAll(await deps.buckets.takeUntil(state.partition, state.loadedUntilMs, ctx.epoch));
  }
}

function snapshotOf(state: WheelState): WheelSnapshot {
  return { cursorMs: state.cursorMs, loadedUntilMs: state.loadedUntilMs, firedTotal: state.firedCount };
}

function iso(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}
