import type { Db } from '../db.js';
import { LEASE_DIGEST_BYTES } from '../../domain/lease-token.js';
import type { ProgressUpdate } from '../../domain/model.js';
import { statusIs, tsParam, validIds } from './columns.js';

/**
 * Recording the latest progress of running attempts: one UPDATE for a whole batch, each row a
 * compare-and-set on (`running`, lease token digest), as for a result. It writes no indexed
 * column, so like a heartbeat it can be a HOT update; it leaves the lease alone (the heartbeat
 * extends it).
 *
 * `$1` ids (sorted, once each: two batches that share rows lock them in the same order, as
 * claims do), `$2` lease token digests end to end (32 bytes each, one binary parameter, in the
 * order of `$1`), `$3` progress as JSON text (cast per row), `$4` now.
 */
const PROGRESS = `
  UPDATE tasks t
  SET progress = u.progress::jsonb,
      progress_at = ${tsParam(4)},
      updated_at = ${tsParam(4)}
  FROM unnest($1::uuid[], $3::text[]) WITH ORDINALITY AS u(id, progress, n)
  WHERE t.id = u.id AND ${statusIs('t', 'running')}
    AND t.lease_token_hash = substring($2::bytea FROM (u.n::int4 - 1) * ${LEASE_DIGEST_BYTES} + 1 FOR ${LEASE_DIGEST_BYTES})
  RETURNING t.id`;

/** See `TaskStore.progress`. */
export async function recordProgress(db: Db, updates: readonly ProgressUpdate[], nowMs: number): Promise<Set<string>> {
  // The last update of a task wins: an UPDATE … FROM would apply one of several at random.
  const latest = new Map<string, ProgressUpdate>();
  for (const u of updates) {
    const id = validIds([u.taskId])[0];
    if (id !== undefined && u.tokenDigest.length === LEASE_DIGEST_BYTES) latest.set(id, u);
  }
  if (latest.size === 0) return new Set();
  const ids = [...latest.keys()].sort();
  const batch = ids.map((id) => latest.get(id) as ProgressUpdate);
  const { rows } = await db.query<{ id: string }>(
    PROGRESS,
    [
      ids,
      Buffer.concat(batch.map((u) => u.tokenDigest)),
      batch.map((u) => JSON.stringify(u.progress) ?? 'null'),
      nowMs,
    ],
    'wh_progress',
  );
  return new Set(rows.map((r) => r.id));
}
