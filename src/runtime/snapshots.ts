import { WheelhouseError } from '../lib/errors.js';
import type { SnapshotCodec } from './actor.js';

/**
 * Durable actor state with fenced ownership. Activating an actor takes `(owner, epoch + 1)`
 * by compare-and-set; every later write carries that epoch and is refused once a newer
 * activation exists, so a paused node that wakes up cannot overwrite the new owner.
 */
export interface SnapshotStore {
  /** Takes ownership for `nodeId`: epoch + 1. Returns the new epoch and the last snapshot. */
  acquire(kind: string, key: string, nodeId: string, nowMs: number): Promise<AcquiredSnapshot>;
  /** Writes `state` if `epoch` still holds; rejects with `stale_epoch` otherwise. Returns the new version. */
  save(kind: string, key: string, epoch: number, state: unknown, nowMs: number): Promise<number>;
  /** Gives ownership up (owner cleared) if `epoch` still holds. */
  release(kind: string, key: string, epoch: number, nowMs: number): Promise<void>;
  /** Reads without taking ownership. */
  read(kind: string, key: string): Promise<SnapshotRow | null>;
  /** Who holds each actor of `kind` with a row, without the state (the cluster status). */
  owners(kind: string): Promise<SnapshotOwner[]>;
}

/** A snapshot row's ownership: `ownerNode` null once released. */
export interface SnapshotOwner {
  key: string;
  ownerNode: string | null;
  epoch: number;
  version: number;
  updatedMs: number;
}

export interface AcquiredSnapshot {
  epoch: number;
  version: number;
  state: unknown;
}

export interface SnapshotRow {
  kind: string;
  key: string;
  ownerNode: string | null;
  epoch: number;
  version: number;
  state: unknown;
  updatedMs: number;
}

/**
 * How a snapshot is stored: `{ v, state }`, the kind's snapshot version beside its state, in
 * the row's JSON. A row written before snapshots carried a version holds the bare state; it
 * reads as version 0, so those rows still load.
 */
export interface SnapshotEnvelope {
  v: number;
  state: unknown;
}

/** The stored form of `state` written with `version`. */
export function wrapSnapshot(version: number, state: unknown): SnapshotEnvelope {
  return { v: version, state };
}

/**
 * A stored snapshot and the version it was written with; null when there is none. An object
 * with exactly the keys `v` (a positive integer) and `state` is an envelope; anything else is
 * a bare state of version 0.
 */
export function unwrapSnapshot(stored: unknown): { version: number; state: unknown } | null {
  if (stored === null || stored === undefined) return null;
  if (typeof stored === 'object' && !Array.isArray(stored)) {
    const keys = Object.keys(stored);
    const v = (stored as { v?: unknown }).v;
    if (keys.length === 2 && 'state' in stored && typeof v === 'number' && Number.isInteger(v) && v > 0) {
      return { version: v, state: (stored as SnapshotEnvelope).state };
    }
  }
  return { version: 0, state: stored };
}

/**
 * Decodes what the store holds for `address` with its kind's codec: null when there is no
 * snapshot. A snapshot the codec refuses, or one written by a newer version than the codec
 * knows, throws a WheelhouseError `internal` naming the actor and the version.
 */
export function readSnapshot<Snap>(codec: SnapshotCodec<Snap>, stored: unknown, address: string): Snap | null {
  const found = unwrapSnapshot(stored);
  if (found === null) return null;
  const { version } = found;
  const details = { address, version, knownVersion: codec.version };
  if (version > codec.version) {
    throw new WheelhouseError(
      'internal',
      `${address}: its snapshot was written with version ${version}, newer than this node knows (${codec.version}).`,
      { details },
    );
  }
  try {
    return codec.decode(found.state, version);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new WheelhouseError(
      'internal',
      `${address}: its snapshot (version ${version}) cannot be decoded: ${reason}`,
      {
        cause: error,
        details,
      },
    );
  }
}
