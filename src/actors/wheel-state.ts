import { WheelhouseError } from '../lib/errors.js';
import type { Cancel } from '../runtime/clock.js';
import type { DueEntry } from '../domain/model.js';
import type { PartitionCursor } from '../store/types.js';
import { NOTHING_PUSHED } from '../store/fast-index-types.js';
import type { TimeWheel } from './time-wheel.js';

/**
 * A wheel partition's state and what it persists: the parts of `WheelPartition` that are
 * about its memory rather than its messages (how a partition is rebuilt from the task table
 * is in wheel-rebuild.ts).
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
 * A full rebuild's far part: entries due from the near horizon on, a page at a time (see
 * wheel-rebuild.ts). The task table's pending tasks first, then the schedule wakes, each from
 * where its near part stopped. `generation` (unique across nodes) tells a page of an abandoned
 * rebuild — the store was lost again, or the partition moved — from one still owed.
 */
export interface FarRebuild {
  readonly generation: string;
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
  // Every entry went to its limit key: nothing was written, so there is nothing to compare.
  // (Taken for a loss, it had the partition rebuild and fire its gated tasks again, forever.)
  if (stamp === NOTHING_PUSHED) return;
  if (stamp === 0 || stamp < state.stamp || (wrote && stamp === state.stamp)) state.lost = true;
  else state.stamp = stamp;
}
