import { WheelhouseError, isWheelhouseError } from '../lib/errors.js';
import type { ActorContext } from '../runtime/actor.js';
import type { Cancel } from '../runtime/clock.js';
import type { DueEntry } from '../domain/model.js';
import type { NodeEventSink } from '../domain/events.js';
import type { PartitionCursor, ScheduleStore, TaskStore } from '../store/types.js';
import type { BucketStore } from '../store/fast-index-types.js';
import type { RebuildPermits } from './rebuild-permits.js';
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
  /** Full rebuilds this activation finished. */
  rebuilds: number;
  /** The far part of a full rebuild, still being read page by page; null when none is owed. */
  farRebuild: FarRebuild | null;
  tickAtMs: number | null;
  cancelTick: Cancel | null;
  cancelCascade: Cancel | null;
  cancelVerify: Cancel | null;
}

/**
 * A full rebuild's far part: entries due from the near horizon on, read one page a message
 * (`{ type: 'rebuild' }`) so that ticks and cascades run between pages. The task table's
 * pending tasks first, then the schedule wakes, each from where its near part stopped.
 * `generation` tells a page message of an abandoned rebuild (the store was lost again).
 */
export interface FarRebuild {
  readonly generation: number;
  source: 'tasks' | 'wakes';
  readonly after: { tasks: PartitionCursor | null; wakes: PartitionCursor | null };
}

/**
 * What a partition persists. `loadedUntilMs` is written ahead of each cascade: before buckets
 * are taken out of the bucket store, the snapshot already says the near wheel reaches past
 * them, so the next activation — whatever happened to this one — reloads that far from the
 * task table. `stamp` is the partition's stamp in the bucket store as last seen: a store
 * found below it went back in time. `unplaced` says far entries were never written to their
 * buckets — some failed, or a full rebuild's far part had not finished. The task table is the
 * truth; the rest shows where the partition was.
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
    unplaced: state.unplaced.length > 0 || state.farRebuild !== null,
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

type RebuildDeps = {
  /** The node's bound on partitions reading far pages at once. */
  permits: RebuildPermits;
  tasks: Pick<TaskStore, 'pendingInPartition'>;
  schedules: Pick<ScheduleStore, 'wakesInPartition'>;
  buckets: BucketStore;
  events: NodeEventSink;
};

/**
 * Reloads the partition from the task table. Entries already queued are deduplicated by the
 * ready queue, a task claimed twice is refused by the claim's compare-and-set, and a schedule
 * woken twice finds nothing owed the second time.
 *
 * Not `full`: the near window is reloaded from Postgres and the far buckets are trusted.
 *
 * `full`: the bucket store lost data of this partition, so every pending task and schedule
 * wake is placed again, near ones first. This call reloads the near window, marks in the
 * snapshot that far entries are owed (an activation that finds the mark rebuilds in full
 * again), gives the partition a stamp above any seen, and sends itself the first of the far
 * part's page messages (see `rebuildFarPage`): the partition fires its near tasks on time
 * while millions of far ones are still being written to their buckets.
 */
export async function rebuild(
  state: WheelState,
  ctx: Pick<ActorContext<{ type: 'rebuild'; generation: number }, WheelSnapshot>, 'epoch' | 'snapshot' | 'self'>,
  deps: RebuildDeps,
  full: boolean,
): Promise<void> {
  state.wheel.clear();
  state.retrying.clear();
  state.farRebuild = null;
  // A flushed store lost the fence with everything else: raise it again before writing.
  if (full) await deps.buckets.fence(state.partition, ctx.epoch);
  const near = state.loadedUntilMs;
  const tasks = await reload(state, ctx, deps.buckets, near, (...page) => deps.tasks.pendingInPartition(...page));
  const wakes = await reload(state, ctx, deps.buckets, near, (...page) => deps.schedules.wakesInPartition(...page));
  if (!full) {
    const { entries, stamp } = await deps.buckets.takeUntil(state.partition, state.loadedUntilMs, ctx.epoch);
    observeStamp(state, stamp, entries.length > 0);
    state.wheel.addAll(entries);
    return;
  }
  const generation = ++rebuildGenerations;
  state.farRebuild = { generation, source: 'tasks', after: { tasks, wakes } };
  state.unplaced = [];
  await ctx.snapshot(snapshotOf(state));
  const stamp = state.stamp + 1;
  await deps.buckets.setIntact(state.partition, stamp);
  state.stamp = stamp;
  state.lost = false;
  nextPage(state, ctx, deps.permits, generation);
}

/** Tells one full rebuild's page messages from another's, across the partitions of a process. */
let rebuildGenerations = 0;

/**
 * One page of a full rebuild's far part (see `FarRebuild`): placed on the wheel when the
 * cascades have reached its due times meanwhile, in buckets otherwise; then the next page's
 * message, or — the last page read — the mark in the snapshot cleared and `partition:rebuilt`.
 * A page of a rebuild no longer owed (the store was lost again and a new one began) does nothing.
 */
export async function rebuildFarPage(
  state: WheelState,
  ctx: Pick<ActorContext<{ type: 'rebuild'; generation: number }, WheelSnapshot>, 'epoch' | 'snapshot' | 'self'>,
  deps: RebuildDeps,
  generation: number,
): Promise<void> {
  const far = state.farRebuild;
  if (far === null || far.generation !== generation) {
    deps.permits.release(state.partition);
    return;
  }
  const after = far.after[far.source];
  let page: DueEntry[];
  try {
    page =
      far.source === 'tasks'
        ? await deps.tasks.pendingInPartition(state.partition, after, END_OF_TIME_MS, REBUILD_PAGE)
        : await deps.schedules.wakesInPartition(state.partition, after, END_OF_TIME_MS, REBUILD_PAGE);
    await place(state, ctx, deps.buckets, page, true);
  } finally {
    deps.permits.release(state.partition);
  }
  const last = page[page.length - 1];
  if (page.length === REBUILD_PAGE && last !== undefined) {
    far.after[far.source] = { dueMs: last.dueMs, taskId: last.taskId };
  } else if (far.source === 'tasks') {
    far.source = 'wakes';
  } else {
    state.farRebuild = null;
    state.rebuilds++;
    await ctx.snapshot(snapshotOf(state));
    deps.events.emit('partition:rebuilt', { partition: state.partition });
    return;
  }
  nextPage(state, ctx, deps.permits, generation);
}

/**
 * Sends the far part's next page message once the partition holds one of the node's rebuild
 * permits (see `RebuildPermits`). A system shutting down refuses the message: the permit goes
 * back, the far part stays owed, as the snapshot says, and the next activation rebuilds in full.
 */
function nextPage(
  state: WheelState,
  ctx: Pick<ActorContext<{ type: 'rebuild'; generation: number }, never>, 'self'>,
  permits: RebuildPermits,
  generation: number,
): void {
  const partition = state.partition;
  permits.request(partition, () => {
    try {
      ctx.self.tell({ type: 'rebuild', generation });
    } catch (error) {
      permits.release(partition);
      if (!isWheelhouseError(error, 'not_ready')) throw error;
    }
  });
}

/**
 * Places the partition's entries due before `until` that `pageOf` reads, page by page;
 * answers the cursor after the last one (null when there were none past `after`).
 */
async function reload(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch'>,
  buckets: BucketStore,
  until: number,
  pageOf: PageOfEntries,
): Promise<PartitionCursor | null> {
  let after: PartitionCursor | null = null;
  for (;;) {
    const page = await pageOf(state.partition, after, until, REBUILD_PAGE);
    // During a full rebuild the partition has no stamp yet: these writes answer 0.
    await place(state, ctx, buckets, page, false);
    const last = page[page.length - 1];
    if (last !== undefined) after = { dueMs: last.dueMs, taskId: last.taskId };
    if (page.length < REBUILD_PAGE) return after;
  }
}

/** Entries the near wheel covers go on it, the rest into their buckets (`observe`: the stamp the write answers is taken). */
async function place(
  state: WheelState,
  ctx: Pick<ActorContext<never, WheelSnapshot>, 'epoch'>,
  buckets: BucketStore,
  page: readonly DueEntry[],
  observe: boolean,
): Promise<void> {
  const far: DueEntry[] = [];
  for (const entry of page) {
    if (entry.dueMs < state.loadedUntilMs) state.wheel.add(entry);
    else far.push(entry);
  }
  if (far.length === 0) return;
  const stamp = await buckets.add(state.partition, far, ctx.epoch);
  if (observe) observeStamp(state, stamp, true);
}
