import { isWheelhouseError } from '../lib/errors.js';
import { tracingOn } from '../lib/otel.js';
import { traceFired } from './hop-spans.js';
import { defineKind, type ActorContext, type Ask, type Behavior } from '../runtime/actor.js';
import { isScheduleWake, type DueEntry } from '../domain/model.js';
import type { ScheduleStore, TaskStore } from '../store/types.js';
import type { ScheduleWakes } from './ports.js';
import type { NodeEventSink } from '../domain/events.js';
import { LEASE } from './worker-lease.js';
import type { BucketStore, ReadyQueue } from '../store/fast-index-types.js';
import { RebuildPermits } from './rebuild-permits.js';
import { describeWheel } from './wheel-describe.js';
import { placeFarPage, rebuild, type FarPageMessage } from './wheel-rebuild.js';
import { TimeWheel } from './time-wheel.js';
import {
  decodeWheelSnapshot,
  nearHorizon,
  observeStamp,
  snapshotOf,
  VERIFY_MS,
  WHEEL_SNAPSHOT_VERSION,
  type WheelSnapshot,
  type WheelState,
} from './wheel-state.js';

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
 * Its duties — tick, cascade, verify — are timer messages, so the runtime delivers a failed
 * one again with backoff: a store blip delays them, it never stops them. Every second
 * `verify` takes what landed in minutes already loaded (a fallback add made while the
 * partition did not answer), retries far entries whose bucket write failed, and checks the
 * partition's stamp (see `BucketStore`): gone, or lower than a write of this activation
 * already saw, the store lost data, and the partition rebuilds from the task table.
 *
 * Fencing: activation takes `(node, epoch + 1)` in Postgres (the runtime does) and then
 * raises the partition's fence in the bucket store to that epoch before anything else.
 * Every write the partition makes there — a push to the ready queue (a fired slot), a bucket
 * added to or taken — carries its epoch and is refused atomically once a newer activation
 * has fenced, and a refusal stops this activation. So a node that was paused past the
 * failure timeout cannot fire a slot its successor already fired, nor take entries out of
 * its successor's buckets.
 *
 * Its snapshot (`WheelSnapshot`) is stored with its version and decoded on activation.
 */
export const WHEEL = defineKind<WheelMessage, WheelSnapshot>('wheel', {
  version: WHEEL_SNAPSHOT_VERSION,
  decode: decodeWheelSnapshot,
});

/** What a wheel partition's handlers get. */
type WheelContext = ActorContext<WheelMessage, WheelSnapshot>;

export type WheelMessage =
  /** Tasks to trigger at their due times (new, retried or unblocked). */
  | Ask<{ type: 'schedule'; entries: DueEntry[] }, void>
  | { type: 'tick' }
  | { type: 'cascade' }
  | { type: 'verify' }
  /** A page of a full rebuild's far part to place (see wheel-rebuild.ts). */
  | FarPageMessage
  /**
   * The safety net found these tasks pending and overdue: push those that nothing holds (not
   * queued, not in flight, not waiting for a push retry here) and are still pending at the
   * same due time. Answers how many were pushed.
   */
  | Ask<{ type: 'recover'; entries: DueEntry[] }, number>;

export interface WheelDeps {
  tasks: TaskStore;
  /** Where a rebuild reads the partition's schedule wakes from. */
  schedules: Pick<ScheduleStore, 'wakesInPartition'>;
  /** Told the schedules whose wake (`scheduleWake`) came: those entries go to no ready queue. */
  wakes: ScheduleWakes;
  buckets: BucketStore;
  ready: ReadyQueue;
  slotMs: number;
  nearWindowMs: number;
  /**
   * `safety-net:recovered` (kind `pending`) for tasks the net found held by nothing, as they
   * are pushed (see 'recover'); `partition:rebuilt` when a full rebuild from the task table
   * ended; `wheel:fired` for each push of due entries.
   */
  events: NodeEventSink;
  onError(error: unknown, context: string): void;
  /** Partitions of this node reading a full rebuild's far pages at once (see `RebuildPermits`). @default 4 */
  rebuildConcurrency?: number;
}

const MINUTE_MS = 60_000;
/** Cascades of different partitions are spread over this much of each minute. */
const CASCADE_STAGGER_MS = 30_000;
/** What the handlers use: the deps given, and the node's rebuild permits. */
type PartitionDeps = WheelDeps & { permits: RebuildPermits };

/** See `WheelDeps.rebuildConcurrency`. */
const REBUILD_CONCURRENCY = 4;
/** Wait before retrying a ready-queue push that failed. */
const RETRY_PUSH_MS = 1_000;

export function wheelPartitionBehavior(wheelDeps: WheelDeps): Behavior<WheelState, WheelMessage, WheelSnapshot> {
  const deps: PartitionDeps = {
    ...wheelDeps,
    permits: new RebuildPermits(wheelDeps.rebuildConcurrency ?? REBUILD_CONCURRENCY),
  };
  return {
    kind: WHEEL,
    persistence: 'snapshot',
    mailboxCapacity: 1_000_000,

    async activate(ctx, previous) {
      const now = ctx.clock.now();
      const state: WheelState = {
        partition: Number(ctx.key),
        wheel: new TimeWheel(deps.slotMs),
        // As far as the previous activation may have taken buckets, at least.
        loadedUntilMs: Math.max(nearHorizon(now, deps.nearWindowMs), previous?.loadedUntilMs ?? 0),
        cursorMs: previous?.cursorMs ?? now,
        firedCount: 0,
        wokenCount: 0,
        stamp: 0,
        lost: false,
        unplaced: [],
        retrying: new Map(),
        rebuilds: 0,
        farRebuild: null,
        tickAtMs: null,
        cancelTick: null,
        cancelCascade: null,
        cancelVerify: null,
      };
      await deps.buckets.fence(state.partition, ctx.epoch);
      const [stamp = 0] = await deps.buckets.stamps([state.partition]);
      state.stamp = Math.max(stamp, previous?.stamp ?? 0);
      // The store lost data since the last snapshot (or never had it), or the previous
      // activation had far entries it could not write: place every pending task again.
      const full = stamp === 0 || stamp < (previous?.stamp ?? 0) || previous?.unplaced === true;
      await rebuild(state, ctx, deps, full);
      armCascade(state, ctx, deps);
      armVerify(state, ctx, VERIFY_MS);
      // Fire first: on a failover every moment here delays the partition's overdue tasks.
      await fireDue(state, ctx, deps);
      for (const running of await deps.tasks.runningInPartitions([state.partition])) {
        ctx.system
          .ref(LEASE, running.taskId)
          .tell({ type: 'granted', version: running.version, leaseExpiresMs: running.leaseExpiresMs });
      }
      return state;
    },

    async receive(state, message, ctx) {
      switch (message.type) {
        case 'schedule':
          await schedule(state, ctx, deps, message.entries);
          ctx.reply(message, undefined);
          return state;
        case 'tick':
          state.tickAtMs = null;
          state.cancelTick = null;
          await fireDue(state, ctx, deps);
          return state;
        case 'cascade':
          await cascade(state, ctx, deps);
          return state;
        case 'verify':
          await verify(state, ctx, deps);
          return state;
        case 'rebuild':
          await placeFarPage(state, ctx, deps, message);
          await fireDue(state, ctx, deps);
          return state;
        case 'recover':
          ctx.reply(message, await recover(state, ctx, deps, message.entries));
          return state;
      }
    },

    async deactivate(state, ctx, reason) {
      deps.permits.release(state.partition);
      state.cancelTick?.();
      state.cancelCascade?.();
      state.cancelVerify?.();
      if (reason !== 'failed') await ctx.snapshot(snapshotOf(state));
    },

    describe: describeWheel,
  };
}

/**
 * Near entries go on the wheel, far ones into their buckets. A far write that fails (the
 * store is unreachable) keeps the entries here, marked durably in the snapshot, for `verify`
 * to write again: the ask still succeeds, because the partition now answers for them — the
 * task is in Postgres, and a new activation that finds the mark rebuilds in full. The near
 * entries fire on time either way.
 */
async function schedule(state: WheelState, ctx: WheelContext, deps: PartitionDeps, entries: DueEntry[]): Promise<void> {
  const far: DueEntry[] = [];
  for (const entry of entries) {
    if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
    else far.push(entry);
  }
  try {
    if (far.length > 0) await writeFar(state, ctx, deps, far);
  } finally {
    await fireDue(state, ctx, deps);
  }
}

/** Writes far entries to their buckets, or keeps them for `verify` when the store fails. */
async function writeFar(state: WheelState, ctx: WheelContext, deps: PartitionDeps, far: DueEntry[]): Promise<void> {
  try {
    observeStamp(state, await deps.buckets.add(state.partition, far, ctx.epoch), true);
  } catch (error) {
    if (isWheelhouseError(error, 'stale_epoch')) throw error;
    const wasEmpty = state.unplaced.length === 0;
    for (const entry of far) state.unplaced.push(entry);
    deps.onError(error, `wheel ${state.partition}: far-bucket write of ${far.length} failed; kept here and retried`);
    if (wasEmpty) {
      await ctx.snapshot(snapshotOf(state)).catch((snapshotError: unknown) => {
        if (isWheelhouseError(snapshotError, 'stale_epoch')) throw snapshotError;
        deps.onError(snapshotError, `wheel ${state.partition}: could not mark unwritten far entries in the snapshot`);
      });
    }
    armVerify(state, ctx, 0);
  }
}

/**
 * Moves every due entry to the ready queue in one push, then arms the timer for the next
 * due time. A failed push puts the entries back to be tried again shortly (remembering
 * their due times): they stay `pending` in the task table either way. Due schedule wakes go
 * to their schedules' actors instead; a wake is told once (it is in the row, where the
 * safety net finds it should the actor not act on it).
 */
async function fireDue(state: WheelState, ctx: WheelContext, deps: PartitionDeps): Promise<void> {
  const now = ctx.clock.now();
  let due = state.wheel.takeDue(now);
  state.cursorMs = Math.max(state.cursorMs, now);
  if (due.some(isScheduleWake)) due = wake(state, deps, due);
  if (due.length > 0) {
    if (state.retrying.size > 0) due = due.map((e) => restoreDue(state, e));
    try {
      observeStamp(state, await deps.ready.push(due, { partition: state.partition, epoch: ctx.epoch }), true);
      state.firedCount += due.length;
      if (tracingOn()) traceFired(due, state.partition);
      deps.events.emit('wheel:fired', { partition: state.partition, count: due.length });
    } catch (error) {
      if (isWheelhouseError(error, 'stale_epoch')) throw error; // a newer owner fires these
      for (const entry of due) {
        const retryMs = Math.max(entry.dueMs, now + RETRY_PUSH_MS);
        if (retryMs !== entry.dueMs) state.retrying.set(entry.taskId, entry.dueMs);
        state.wheel.add({ ...entry, dueMs: retryMs });
      }
      deps.onError(error, `wheel ${state.partition}: ready-queue push of ${due.length} failed; retrying`);
    }
  }
  armTick(state, ctx);
  if (state.lost) armVerify(state, ctx, 0);
}

/** Tells the schedules whose wakes are among `due` (each once: the latest); answers the rest, the tasks. */
function wake(state: WheelState, deps: PartitionDeps, due: DueEntry[]): DueEntry[] {
  const wakes = new Map<string, DueEntry>();
  const tasks: DueEntry[] = [];
  for (const entry of due) {
    if (!isScheduleWake(entry)) tasks.push(entry);
    else if ((wakes.get(entry.taskId)?.dueMs ?? -Infinity) < entry.dueMs) wakes.set(entry.taskId, entry);
  }
  state.wokenCount += wakes.size;
  deps.wakes.wake([...wakes.values()]);
  return tasks;
}

/** An entry back from a push retry, with the due time its task has. */
function restoreDue(state: WheelState, entry: DueEntry): DueEntry {
  const dueMs = state.retrying.get(entry.taskId);
  if (dueMs === undefined) return entry;
  state.retrying.delete(entry.taskId);
  return { ...entry, dueMs };
}

function armTick(state: WheelState, ctx: WheelContext): void {
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
async function cascade(state: WheelState, ctx: WheelContext, deps: PartitionDeps): Promise<void> {
  state.cancelCascade = null;
  const horizon = Math.max(nearHorizon(ctx.clock.now(), deps.nearWindowMs), state.loadedUntilMs + MINUTE_MS);
  // Written ahead: see WheelSnapshot. A fenced activation stops here, having taken nothing.
  await ctx.snapshot({ ...snapshotOf(state), loadedUntilMs: horizon });
  const { entries, stamp } = await deps.buckets.takeUntil(state.partition, horizon, ctx.epoch);
  observeStamp(state, stamp, entries.length > 0);
  state.wheel.addAll(entries);
  // Far entries still waiting for their bucket write that this minute now covers.
  state.unplaced = state.unplaced.filter((entry) => {
    if (entry.dueMs >= horizon) return true;
    state.wheel.add(entry);
    return false;
  });
  state.loadedUntilMs = horizon;
  armCascade(state, ctx, deps);
  await fireDue(state, ctx, deps);
}

/**
 * Arms the next cascade: before `now + nearWindow` reaches `loadedUntil`, by a stagger of up
 * to 30 s that differs per partition, so the 64 partitions of a node do not all cascade
 * (a bucket read and a snapshot write each) in the same millisecond of every minute.
 */
function armCascade(state: WheelState, ctx: WheelContext, deps: PartitionDeps): void {
  state.cancelCascade?.();
  const staggerMs = (state.partition * 7_919) % CASCADE_STAGGER_MS;
  const atMs = state.loadedUntilMs - deps.nearWindowMs - staggerMs;
  state.cancelCascade = ctx.schedule(Math.max(atMs - ctx.clock.now(), 0), { type: 'cascade' });
}

function armVerify(state: WheelState, ctx: WheelContext, delayMs: number): void {
  state.cancelVerify?.();
  state.cancelVerify = ctx.schedule(delayMs, { type: 'verify' });
}

/**
 * The partition's check on its store, every second: far entries whose write failed are
 * written again; entries that landed in minutes already loaded are taken (a fallback add of
 * the scheduler while this partition did not answer) — which also reads the stamp; and a
 * lost partition rebuilds in full.
 */
async function verify(state: WheelState, ctx: WheelContext, deps: PartitionDeps): Promise<void> {
  state.cancelVerify = null;
  if (!state.lost && state.unplaced.length > 0) {
    observeStamp(state, await deps.buckets.add(state.partition, state.unplaced, ctx.epoch), true);
    state.unplaced = [];
    await ctx.snapshot(snapshotOf(state));
  }
  if (!state.lost) {
    const { entries, stamp } = await deps.buckets.takeUntil(state.partition, state.loadedUntilMs, ctx.epoch);
    observeStamp(state, stamp, entries.length > 0);
    state.wheel.addAll(entries);
  }
  if (state.lost) {
    deps.onError(
      new Error(`the bucket store lost data of partition ${state.partition} (stamp gone or gone back)`),
      `wheel ${state.partition}: rebuilding from the task table`,
    );
    await rebuild(state, ctx, deps, true);
  }
  await fireDue(state, ctx, deps);
  armVerify(state, ctx, VERIFY_MS);
}

/** See `WheelMessage` 'recover'. */
async function recover(
  state: WheelState,
  ctx: WheelContext,
  deps: PartitionDeps,
  entries: DueEntry[],
): Promise<number> {
  const candidates = entries.filter((e) => !state.retrying.has(e.taskId));
  if (candidates.length === 0) return 0;
  const held = await deps.ready.held(candidates);
  const loose = candidates.filter((e) => !held.has(e.taskId));
  if (loose.length === 0) return 0;
  // Read again after the check: a task claimed in between is running now, not lost.
  const pending = await deps.tasks.pendingDueTimes(loose.map((e) => e.taskId));
  const lost = loose.filter((e) => pending.get(e.taskId) === e.dueMs);
  if (lost.length === 0) return 0;
  deps.events.emit('safety-net:recovered', { kind: 'pending', count: lost.length });
  observeStamp(state, await deps.ready.push(lost, { partition: state.partition, epoch: ctx.epoch }), true);
  state.firedCount += lost.length;
  return lost.length;
}
