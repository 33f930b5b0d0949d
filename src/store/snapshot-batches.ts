import { WriteBatcher } from '../lib/write-batcher.js';
import type { AcquiredSnapshot } from '../runtime/snapshots.js';
import type { Db } from './db.js';
import { isRetryableConflict } from './db-errors.js';

/** One activation taking its row: `(nodeId, epoch + 1)`. */
export interface AcquireRequest {
  kind: string;
  key: string;
  nodeId: string;
  nowMs: number;
}

/** One snapshot written, if `epoch` still holds (`state`: JSON text). */
export interface SaveRequest {
  kind: string;
  key: string;
  epoch: number;
  state: string;
  nowMs: number;
}

/** One deactivation giving its row up, if `epoch` still holds. */
export interface ReleaseRequest {
  kind: string;
  key: string;
  epoch: number;
  nowMs: number;
}

/**
 * Many acquires in one statement: each row is created at epoch 1 or taken over at epoch + 1
 * by its own ON CONFLICT DO UPDATE, so every activation still gets a distinct epoch under the
 * row's lock, exactly as one statement per row did. The rows are taken in key order, the order
 * in which a claim locks the rows of its grants' keys FOR SHARE (`sql/claim.ts`) and a release
 * batch locks them: two statements that lock many rows never wait on each other in a cycle.
 * A key may appear once per statement (Postgres refuses to update a row twice in one).
 */
const ACQUIRE_MANY = `
  INSERT INTO actor_snapshots AS s (kind, key, owner_node, epoch, version, state, updated_at)
  SELECT a.kind, a.key, a.node, 1, 0, NULL, to_timestamp(round(a.now_ms) / 1000)
  FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[]) AS a(kind, key, node, now_ms)
  ORDER BY a.kind, a.key
  ON CONFLICT (kind, key) DO UPDATE
    SET owner_node = excluded.owner_node, epoch = s.epoch + 1, updated_at = excluded.updated_at
  RETURNING s.kind, s.key, s.epoch, s.version, s.state`;

/**
 * Many releases in one statement: the rows whose epoch still holds are locked in key order
 * (see ACQUIRE_MANY), then their owner is cleared. A row a newer activation took meanwhile
 * no longer matches its epoch and is left alone.
 */
const RELEASE_MANY = `
  WITH r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::float8[]) AS r(kind, key, epoch, now_ms)
  ), held AS (
    SELECT s.kind, s.key FROM actor_snapshots s JOIN r ON s.kind = r.kind AND s.key = r.key AND s.epoch = r.epoch
    ORDER BY s.kind, s.key
    FOR UPDATE OF s
  )
  UPDATE actor_snapshots s
  SET owner_node = NULL, updated_at = to_timestamp(round(r.now_ms) / 1000)
  FROM held h, r
  WHERE s.kind = h.kind AND s.key = h.key AND r.kind = s.kind AND r.key = s.key AND s.epoch = r.epoch`;

/**
 * Many fenced saves in one statement (see `SqlSnapshotStore.save`): the rows whose epoch
 * still holds are locked in key order (see ACQUIRE_MANY) and written; a row a newer
 * activation took meanwhile no longer matches and is not returned, which refuses that save
 * alone. At a start the 64 wheel partitions each save as they activate: a few statements,
 * not 64 one after another on PGlite's one connection.
 */
const SAVE_MANY = `
  WITH r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::text[], $5::float8[])
      AS r(kind, key, epoch, state, now_ms)
  ), held AS (
    SELECT s.kind, s.key FROM actor_snapshots s JOIN r ON s.kind = r.kind AND s.key = r.key AND s.epoch = r.epoch
    ORDER BY s.kind, s.key
    FOR UPDATE OF s
  )
  UPDATE actor_snapshots s
  SET state = r.state::jsonb, version = s.version + 1, updated_at = to_timestamp(round(r.now_ms) / 1000)
  FROM held h, r
  WHERE s.kind = h.kind AND s.key = h.key AND r.kind = s.kind AND r.key = s.key AND s.epoch = r.epoch
  RETURNING s.kind, s.key, s.version`;

/** How often a batch aborted as a deadlock or serialization failure is run again. */
const CONFLICT_RETRIES = 3;

const rowId = (kind: string, key: string): string => `${kind}\u0000${key}`;

/** Takes the rows of `requests`, each key at most once; answers in their order. */
export async function acquireSnapshots(db: Db, requests: readonly AcquireRequest[]): Promise<AcquiredSnapshot[]> {
  const { rows } = await retryingConflicts(() =>
    db.query<{ kind: string; key: string; epoch: number; version: number; state: unknown }>(
      ACQUIRE_MANY,
      columnsOf(requests, ['kind', 'key', 'nodeId', 'nowMs']),
      'wh_snapshot_acquire_many',
    ),
  );
  const byId = new Map(rows.map((row) => [rowId(row.kind, row.key), row]));
  return requests.map((r) => {
    const row = byId.get(rowId(r.kind, r.key))!;
    return { epoch: row.epoch, version: row.version, state: row.state };
  });
}

/** Writes the saves of `requests` whose epoch still holds, each key at most once: the new version, or null (stale). */
export async function saveSnapshots(db: Db, requests: readonly SaveRequest[]): Promise<(number | null)[]> {
  const { rows } = await retryingConflicts(() =>
    db.query<{ kind: string; key: string; version: number }>(
      SAVE_MANY,
      columnsOf(requests, ['kind', 'key', 'epoch', 'state', 'nowMs']),
      'wh_snapshot_save_many',
    ),
  );
  const byId = new Map(rows.map((row) => [rowId(row.kind, row.key), row.version]));
  return requests.map((r) => byId.get(rowId(r.kind, r.key)) ?? null);
}

/** Gives up the rows of `requests` whose epoch still holds, each key at most once. */
export async function releaseSnapshots(db: Db, requests: readonly ReleaseRequest[]): Promise<void[]> {
  await retryingConflicts(() =>
    db.query(RELEASE_MANY, columnsOf(requests, ['kind', 'key', 'epoch', 'nowMs']), 'wh_snapshot_release_many'),
  );
  return requests.map(() => undefined);
}

/** The requests as a statement's parameters: one array per field, aligned (for `unnest`). */
function columnsOf<R>(requests: readonly R[], fields: readonly (keyof R)[]): unknown[][] {
  return fields.map((field) => requests.map((r) => r[field]));
}

/** An aborted statement changed nothing: running it again is safe. */
async function retryingConflicts<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (attempt > CONFLICT_RETRIES || !isRetryableConflict(error)) throw error;
    }
  }
}

/**
 * The acquires, saves and releases of one event-loop turn (and those made while earlier batches are
 * in flight), merged into few statements. A batch that names a key twice (two acquirers of one
 * actor in one turn) runs as rounds in which each key appears once, in the order submitted, so
 * the later acquirer gets the higher epoch as it would have one statement at a time.
 */
export class SnapshotBatches {
  private readonly acquires: WriteBatcher<AcquireRequest, AcquiredSnapshot>;
  private readonly saves: WriteBatcher<SaveRequest, number | null>;
  private readonly releases: WriteBatcher<ReleaseRequest, void>;

  constructor(
    acquireMany: (requests: AcquireRequest[]) => Promise<AcquiredSnapshot[]>,
    saveMany: (requests: SaveRequest[]) => Promise<(number | null)[]>,
    releaseMany: (requests: ReleaseRequest[]) => Promise<void[]>,
  ) {
    this.acquires = new WriteBatcher((requests) => inRounds(requests, acquireMany));
    this.saves = new WriteBatcher((requests) => inRounds(requests, saveMany));
    this.releases = new WriteBatcher((requests) => inRounds(requests, releaseMany));
  }

  acquire(request: AcquireRequest): Promise<AcquiredSnapshot> {
    return this.acquires.submit(request);
  }

  /** The new version, or null: the epoch no longer holds. */
  save(request: SaveRequest): Promise<number | null> {
    return this.saves.submit(request);
  }

  release(request: ReleaseRequest): Promise<void> {
    return this.releases.submit(request);
  }
}

/** Runs `items` through `run` in rounds of distinct keys, one round after another; answers in order. */
async function inRounds<I extends { kind: string; key: string }, O>(
  items: I[],
  run: (round: I[]) => Promise<O[]>,
): Promise<O[]> {
  const rounds: { items: I[]; at: number[] }[] = [];
  const seen = new Map<string, number>();
  items.forEach((item, at) => {
    const id = rowId(item.kind, item.key);
    const n = seen.get(id) ?? 0;
    seen.set(id, n + 1);
    const round = (rounds[n] ??= { items: [], at: [] });
    round.items.push(item);
    round.at.push(at);
  });
  const out = new Array<O>(items.length);
  for (const round of rounds) {
    const results = await run(round.items);
    round.at.forEach((at, i) => (out[at] = results[i] as O));
  }
  return out;
}
