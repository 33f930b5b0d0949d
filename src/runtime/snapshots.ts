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
