import { WheelhouseError } from '../lib/errors.js';
import type { AcquiredSnapshot, SnapshotOwner, SnapshotRow, SnapshotStore } from '../runtime/snapshots.js';
import type { Db } from './db.js';
import { trace, tracing } from '../lib/trace.js';
import { msOf } from './sql/columns.js';
import { acquireSnapshots, releaseSnapshots, saveSnapshots, SnapshotBatches } from './snapshot-batches.js';

const READ = `
  SELECT s.kind, s.key, s.owner_node, s.epoch, s.version, s.state, ${msOf('s.updated_at')} AS updated_ms
  FROM actor_snapshots s
  WHERE s.kind = $1 AND s.key = $2`;

const OWNERS = `
  SELECT s.key, s.owner_node, s.epoch, s.version, ${msOf('s.updated_at')} AS updated_ms
  FROM actor_snapshots s
  WHERE s.kind = $1
  ORDER BY s.key`;

interface SnapshotDbRow {
  kind: string;
  key: string;
  owner_node: string | null;
  epoch: number;
  version: number;
  state: unknown;
  updated_ms: number;
}

/**
 * Actor snapshots with fenced ownership over SQL (Postgres or PGlite), in the
 * `actor_snapshots` table. A save carrying an epoch older than the row's is refused with
 * `stale_epoch`, so a node that was paused and wakes up cannot overwrite the new owner.
 *
 * Acquires, fenced saves and releases made in one event-loop turn go to the database together
 * (see `snapshot-batches.ts`): ten thousand limit keys activating at a wheel's fire take their
 * rows in ten statements, not ten thousand commits queued behind the pool.
 */
export class SqlSnapshotStore implements SnapshotStore {
  private readonly batches: SnapshotBatches;

  constructor(
    private readonly db: Db,
    /** The priority lane: acquires, which an activating actor's first messages wait on. */
    lane: Db = db,
  ) {
    this.batches = new SnapshotBatches(
      (acquires) => acquireSnapshots(lane, acquires),
      (saves) => saveSnapshots(db, saves),
      (releases) => releaseSnapshots(db, releases),
    );
  }

  acquire(kind: string, key: string, nodeId: string, nowMs: number): Promise<AcquiredSnapshot> {
    if (!tracing) return this.batches.acquire({ kind, key, nodeId, nowMs });
    const t0 = Date.now();
    return this.batches.acquire({ kind, key, nodeId, nowMs }).then((a) => {
      trace('acquire', { kind, key, ms: Date.now() - t0 });
      return a;
    });
  }

  async save(kind: string, key: string, epoch: number, state: unknown, nowMs: number): Promise<number> {
    const version = await this.batches.save({ kind, key, epoch, state: JSON.stringify(state ?? null), nowMs });
    if (version === null) {
      throw new WheelhouseError('stale_epoch', `${kind}/${key}: epoch ${epoch} is no longer the owner's`, {
        details: { kind, key, epoch },
      });
    }
    return version;
  }

  release(kind: string, key: string, epoch: number, nowMs: number): Promise<void> {
    return this.batches.release({ kind, key, epoch, nowMs });
  }

  async owners(kind: string): Promise<SnapshotOwner[]> {
    const { rows } = await this.db.query<Omit<SnapshotDbRow, 'kind' | 'state'>>(OWNERS, [kind], 'wh_snapshot_owners');
    return rows.map((row) => ({
      key: row.key,
      ownerNode: row.owner_node,
      epoch: row.epoch,
      version: row.version,
      updatedMs: row.updated_ms,
    }));
  }

  async read(kind: string, key: string): Promise<SnapshotRow | null> {
    const { rows } = await this.db.query<SnapshotDbRow>(READ, [kind, key], 'wh_snapshot_read');
    const row = rows[0];
    if (row === undefined) return null;
    return {
      kind: row.kind,
      key: row.key,
      ownerNode: row.owner_node,
      epoch: row.epoch,
      version: row.version,
      state: row.state,
      updatedMs: row.updated_ms,
    };
  }
}
