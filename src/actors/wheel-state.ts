import { WheelhouseError } from '../lib/errors.js';
import type { ActorContext } from '../runtime/actor.js';
import type { Cancel } from '../runtime/clock.js';
import type { DueEntry } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { PartitionCursor, ScheduleStore, TaskStore } from '../store/types.js';
import type { BucketStore } from '../store/fast-index-types.js';
import type { TimeWheel } from './time-wheel.js';

/**
 * A wheel partition's state, what it persists, and how it is rebuilt from the task table:
 * the parts of `WheelPartition` that are about its memory rather than its messages.
 */

export interface WheelState {
  readonly partition: number;
  readonly wheel: TimeWheel;
  /** The near wheel holds every pending task due before this; the buckets hold the rest. */
  loadedUntilMs: number;
  /** Time of the last tick. */
  cursorMs: number;
  /** Tasks moved to the ready queue by this activation. */
  firedCount: number;
  /** Schedules this activation woke (see `fireDue`). */
  wokenCount: number;
  /** The highest stamp the bucket store has answered this activation (see `BucketStore`). */
  stamp: number;
  /** The store lost data of this partition: the next `verify` rebuilds it in full. */
  lost: boolean;
  /** Far entries whose bucket write failed, waiting for `verify` to write them. */
  unplaced: DueEntry[];
  /** Entries back on the wheel after a failed push, and the due times their tasks have. */
  readonly retrying: Map<string, number>;
  /** Full rebuilds this activation made. */
  rebuilds: number;
  tickAtMs: number | null;
  cancelTick: Cancel | null;
  cancelCascade: Cancel | null;
  cancelVerify: Cancel | null;
}

/**
 * What a partition persists. `loadedUntilMs` is written ahead of each cascade: before buckets
 * are taken out of the bucket store, the snapshot already says the near wheel reaches past
 * them, so the next activation — whatever happened to this one — reloads that far from the
 * task table. `stamp` is the partition's stamp in the bucket store as last seen: a store
 * found below it went back in time. `unplaced` says far entries were never written to their
 * buckets. The task table is the truth; the rest shows where the partition was.
 */
export interface WheelSnapshot {
  cursorMs: number;
  loadedUntilMs: number;
  firedTotal: number;
  stamp: number;
  unplaced: boolean;
}

/** How often a partition verifies its store (see `verify` in wheel-partition.ts). */
export const VERIFY_MS = 1_000;

const MINUTE_MS = 60_000;
/** Page size when streaming a partition's pending tasks out of the task table. */
const REBUILD_PAGE = 5_000;
/** The latest instant a JavaScript Date can hold: an upper bound for "every pending task". */
const END_OF_TIME_MS = 8.64e15;

/** The version of `WheelSnapshot` written now; version 0 is a snapshot written before versions. */
export const WHEEL_SNAPSHOT_VERSION = 1;

/**
 * Reads a stored snapshot written with `version`. Version 0 (written before snapshots carried
 * a version) may lack the fields added since, which read as 0 and false; version 1 has all of
 * them. A field of the wrong type, or anything but an object, is garbage: it throws.
 */
export function decodeWheelSnapshot(raw: unknown, version: number): WheelSnapshot {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new WheelhouseError(
      'internal',
      `a wheel snapshot must be an object, got ${raw === null ? 'null' : Array.isArray(raw) ? 'an array' : typeof raw}`,
    );
  }
  if (version !== 0 && version !== WHEEL_SNAPSHOT_VERSION) {
    throw new WheelhouseError('internal', `unknown wheel snapshot version ${version}`);
  }
  const v = raw as Record<string, unknown>;
  const field = <T>(name: keyof WheelSnapshot, valid: (x: unknown) => x is T, legacy: T): T => {
    const x = v[name];
    if (valid(x)) return x;
    if (x === undefined && version === 0) return legacy;
    throw new WheelhouseError(
      'internal',
      `wheel snapshot field '${name}' is ${x === undefined ? 'missing' : `not valid (${JSON.stringify(x)})`}`,
    );
  };
  return {
    cursorMs: field('cursorMs', isFiniteNumber, 0),
    loadedUntilMs: field('loadedUntilMs', isFiniteNumber, 0),
    firedTotal: field('firedTotal', isFiniteNumber, 0),
    stamp: field('stamp', isFiniteNumber, 0),
    unplaced: field('unplaced', isBoolean, false),
  };
}

function isFiniteNumber(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function isBoolean(x: unknown): x is boolean {
  return typeof x === 'boolean';
}

export function snapshotOf(state: WheelState): WheelSnapshot {
  return {
    cursorMs: state.cursorMs,
    loadedUntilMs: state.loadedUntilMs,
    firedTotal: state.firedCount,
    stamp: state.stamp,
    unplaced: state.unplaced.length > 0,
  };
}

/**
 * How far the near wheel must reach at `nowMs`: past `now + nearWindow`, to the end of the
 * minute that instant falls in (buckets are whole minutes). Strictly greater than
 * `now + nearWindow`, so a cascade armed at `loadedUntil − nearWindow` always makes progress.
 */
export function nearHorizon(nowMs: number, nearWindowMs: number): number {
  return Math.floor((nowMs + nearWindowMs) / MINUTE_MS) * MINUTE_MS + MINUTE_MS;
}

/**
 * Takes a stamp the store answered. Gone (0) means the store lost data; so does a stamp below
 * one seen before — or, answered by a write (`wrote`), one not above it, since every write
 * raises it: the store went back in time past a write this activation made.
 */
export function observeStamp(state: WheelState, stamp: number, wrote: boolean): void {
  if (stamp === 0 || stamp < state.stamp || (wrote && stamp === state.stamp)) state.lost = true;
  else state.stamp = stamp;
}

/** A page of a partition's entries in (due time, id) order, from a cursor: pending tasks, or schedule wakes. */
type PageOfEntries = (
  partition: number,
  after: PartitionCursor | null,
  toMs: number,
  limit: number,
) => Promise<DueEntry[]>;

/**
 * Reloads the partition from the task table. `full`: the bucket store lost data of this
 * partition, so every pending task and every schedule wake is placed again (near ones in the
 * wheel, the rest in buckets) and the partition gets a stamp above any seen. Otherwise only
 * the near window is reloaded from Postgres and the far buckets are trusted. Entries already
 * queued are deduplicated by the ready queue, a task claimed twice is refused by the claim's
 * compare-and-set, and a schedule woken twice finds nothing owed the second time.
 */
export async function rebuild(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch' | 'snapshot'>,
  deps: {
    tasks: TaskStore;
    schedules: Pick<ScheduleStore, 'wakesInPartition'>;
    buckets: BucketStore;
    events: NodeEventSink;
  },
  full: boolean,
): Promise<void> {
  state.wheel.clear();
  state.retrying.clear();
  // A flushed store lost the fence with everything else: raise it again before writing.
  if (full) await deps.buckets.fence(state.partition, ctx.epoch);
  const until = full ? END_OF_TIME_MS : state.loadedUntilMs;
  await reload(state, ctx, deps.buckets, until, (...page) => deps.tasks.pendingInPartition(...page));
  await reload(state, ctx, deps.buckets, until, (...page) => deps.schedules.wakesInPartition(...page));
  if (full) {
    const stamp = state.stamp + 1;
    await deps.buckets.setIntact(state.partition, stamp);
    state.stamp = stamp;
    state.lost = false;
    state.unplaced = [];
    state.rebuilds++;
    deps.events.emit('partition:rebuilt', { partition: state.partition });
    await ctx.snapshot(snapshotOf(state));
  } else {
    const { entries, stamp } = await deps.buckets.takeUntil(state.partition, state.loadedUntilMs, ctx.epoch);
    observeStamp(state, stamp, entries.length > 0);
    state.wheel.addAll(entries);
  }
}

/** Places the partition's entries due before `until` that `pageOf` reads, page by page. */
async function reload(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch'>,
  buckets: BucketStore,
  until: number,
  pageOf: PageOfEntries,
): Promise<void> {
  let after: PartitionCursor | null = null;
  for (;;) {
    const page = await pageOf(state.partition, after, until, REBUILD_PAGE);
    const far: DueEntry[] = [];
    for (const entry of page) {
      if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
      else far.push(entry);
    }
    // During a full rebuild the partition has no stamp yet: these writes answer 0.
    if (far.length > 0) await buckets.add(state.partition, far, ctx.epoch);
    const last = page[page.length - 1];
    if (page.length < REBUILD_PAGE || last === undefined) return;
    after = { dueMs: last.dueMs, taskId: last.taskId };
  }
}
