import { WheelhouseError } from '../../src/lib/errors.js';
import type { AcquiredSnapshot, SnapshotOwner, SnapshotRow, SnapshotStore } from '../../src/runtime/snapshots.js';

/** One call the store received, for tests that check what the runtime did. */
export interface SnapshotCall {
  op: 'acquire' | 'save' | 'release' | 'read' | 'owners';
  kind: string;
  key: string;
  nodeId?: string;
  epoch?: number;
}

/**
 * An in-memory `SnapshotStore` for runtime tests, faithful to the SQL one where it matters:
 * acquire creates the row at epoch 1 (version 0, state null) or takes it over at epoch + 1;
 * save is a compare-and-set on the epoch (refused with `stale_epoch` otherwise) and bumps the
 * version; release clears the owner only if the epoch still holds. State is stored as JSON,
 * so a test sees exactly what survives a round trip through Postgres.
 *
 * Every operation first awaits `beforeEach` (a test can hold one open to widen a race) and
 * then checks-and-sets in one synchronous step, as one SQL statement would.
 */
export class MemorySnapshotStore implements SnapshotStore {
  readonly calls: SnapshotCall[] = [];
  /** Awaited at the start of every operation; tests replace it to delay or fail calls. */
  beforeEach: (call: SnapshotCall) => Promise<void> | void = () => {};
  private readonly rows = new Map<string, SnapshotRow>();

  async acquire(kind: string, key: string, nodeId: string, nowMs: number): Promise<AcquiredSnapshot> {
    await this.enter({ op: 'acquire', kind, key, nodeId });
    const id = rowId(kind, key);
    const row = this.rows.get(id);
    if (row === undefined) {
      this.rows.set(id, { kind, key, ownerNode: nodeId, epoch: 1, version: 0, state: null, updatedMs: nowMs });
      return { epoch: 1, version: 0, state: null };
    }
    row.ownerNode = nodeId;
    row.epoch += 1;
    row.updatedMs = nowMs;
    return { epoch: row.epoch, version: row.version, state: fromJson(row.state) };
  }

  async save(kind: string, key: string, epoch: number, state: unknown, nowMs: number): Promise<number> {
    await this.enter({ op: 'save', kind, key, epoch });
    const row = this.rows.get(rowId(kind, key));
    if (row === undefined || row.epoch !== epoch) {
      throw new WheelhouseError('stale_epoch', `${kind}/${key}: epoch ${epoch} is no longer the owner's`, {
        details: { kind, key, epoch },
      });
    }
    row.state = JSON.stringify(state ?? null);
    row.version += 1;
    row.updatedMs = nowMs;
    return row.version;
  }

  async release(kind: string, key: string, epoch: number, nowMs: number): Promise<void> {
    await this.enter({ op: 'release', kind, key, epoch });
    const row = this.rows.get(rowId(kind, key));
    if (row === undefined || row.epoch !== epoch) return;
    row.ownerNode = null;
    row.updatedMs = nowMs;
  }

  async read(kind: string, key: string): Promise<SnapshotRow | null> {
    await this.enter({ op: 'read', kind, key });
    const row = this.rows.get(rowId(kind, key));
    return row === undefined ? null : { ...row, state: fromJson(row.state) };
  }

  async owners(kind: string): Promise<SnapshotOwner[]> {
    await this.enter({ op: 'owners', kind, key: '' });
    return [...this.rows.values()]
      .filter((row) => row.kind === kind)
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map(({ key, ownerNode, epoch, version, updatedMs }) => ({ key, ownerNode, epoch, version, updatedMs }));
  }

  /** Calls of one operation, in order. */
  callsOf(op: SnapshotCall['op']): SnapshotCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  private async enter(call: SnapshotCall): Promise<void> {
    this.calls.push(call);
    await this.beforeEach(call);
  }
}

function rowId(kind: string, key: string): string {
  return `${kind}\u0000${key}`;
}

function fromJson(stored: unknown): unknown {
  return typeof stored === 'string' ? JSON.parse(stored) : stored;
}
