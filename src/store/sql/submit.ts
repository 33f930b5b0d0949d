import { WheelhouseError } from '../../lib/errors.js';
import type { Db, DbTx } from '../db.js';
import type { NewTask, SubmitResult } from '../../domain/model.js';
import { hasDependencies, insertWithDependencies } from './dag-submit.js';
import { insertTasks } from './insert.js';
import { isDebounced, submitWithDebounced } from './debounce.js';
import { IDEMPOTENCY_WINDOW_MS, taskColumns, toTaskRecord, tsParam, type TaskRow } from './columns.js';

/**
 * Submitting tasks. A batch without idempotency keys or dependencies is one statement (the
 * benchmark path: 1 000 tasks, one round trip, no explicit transaction). Otherwise it is one
 * transaction: claim the keys, read the ones already taken, then insert the tasks — for tasks
 * with dependencies, after locking their predecessors (`dag-submit.ts`).
 */

/**
 * Takes idempotency keys. A new key is inserted; an expired one is taken over (DO UPDATE …
 * WHERE expired); a live one is left alone. RETURNING therefore names exactly the keys this
 * batch now owns. A concurrent batch holding the same key makes this wait for its commit,
 * then see the key as taken. Rows are inserted in key order so two batches sharing keys
 * lock them in the same order and cannot deadlock.
 */
export const CLAIM_KEYS = `
  INSERT INTO idempotency_keys AS k (task_type, key, request_hash, task_id, expires_at)
  SELECT u.task_type, u.key, u.request_hash, u.task_id, ${tsParam(5)}
  FROM unnest($1::text[], $2::text[], $3::text[], $4::uuid[]) AS u(task_type, key, request_hash, task_id)
  ORDER BY u.task_type, u.key
  ON CONFLICT (task_type, key) DO UPDATE
    SET request_hash = excluded.request_hash, task_id = excluded.task_id, expires_at = excluded.expires_at
    WHERE k.expires_at <= ${tsParam(6)}
  RETURNING k.task_type, k.key`;

/**
 * Reads keys this batch could not take, with the task each one names. A separate statement
 * (not a CTE of CLAIM_KEYS) so that its snapshot includes keys committed by a concurrent
 * batch that CLAIM_KEYS waited for.
 */
const READ_KEYS = `
  SELECT k.task_type AS key_task_type, k.key AS key_name, k.request_hash, ${taskColumns('t')}
  FROM unnest($1::text[], $2::text[]) AS u(task_type, key)
  JOIN idempotency_keys k ON k.task_type = u.task_type AND k.key = u.key
  JOIN tasks t ON t.id = k.task_id`;

interface KeyRow extends TaskRow {
  key_task_type: string;
  key_name: string;
  request_hash: string;
}

const keyOf = (taskType: string, key: string): string => `${taskType}\u0000${key}`;

function conflict(index: number, key: string): WheelhouseError {
  return new WheelhouseError(
    'idempotency_conflict',
    `idempotency key "${key}" was used before with a different request`,
    { details: { index, idempotency_key: key } },
  );
}

/** See `TaskStore.submit`. */
export async function submitTasks(db: Db, tasks: NewTask[], nowMs: number): Promise<SubmitResult[]> {
  if (tasks.length === 0) return [];
  // Debounced tasks merge or insert in a statement of their own, in one transaction with the rest.
  if (tasks.some(isDebounced)) {
    return db.transaction((tx) => submitWithDebounced(tx, tasks, nowMs, (rest) => submitIn(tx, rest, nowMs)));
  }
  return submitIn(db, tasks, nowMs, (fn) => db.transaction(fn));
}

/**
 * `submitTasks` without debounced tasks. `begin` opens the transaction the keys and the
 * dependencies need; without it `db` is already a transaction (a spawn of children,
 * src/store/sql/children.ts, inserts its new children this way, in its own transaction).
 */
export async function submitIn(
  db: DbTx,
  tasks: NewTask[],
  nowMs: number,
  begin?: (fn: (tx: DbTx) => Promise<SubmitResult[]>) => Promise<SubmitResult[]>,
): Promise<SubmitResult[]> {
  if (tasks.length === 0) return [];
  // Keys inside the batch first: the first task with a key leads; a later one with the same
  // key is a replay of it (same hash) or a conflict, found before anything is written.
  const leaderOf = new Map<string, number>();
  const followerOf = new Array<number | undefined>(tasks.length);
  tasks.forEach((t, i) => {
    if (t.idempotencyKey === null) return;
    const k = keyOf(t.taskType, t.idempotencyKey);
    const leader = leaderOf.get(k);
    if (leader === undefined) {
      leaderOf.set(k, i);
    } else if ((tasks[leader]!.requestHash ?? '') === (t.requestHash ?? '')) {
      followerOf[i] = leader;
    } else {
      throw conflict(i, t.idempotencyKey);
    }
  });

  const withDependencies = tasks.some(hasDependencies);
  if (leaderOf.size === 0 && !withDependencies) {
    const records = await insertTasks(db, tasks, nowMs);
    return records.map((task) => ({ task, created: true }));
  }

  const body = async (tx: DbTx): Promise<SubmitResult[]> => {
    const leaders = [...leaderOf.values()].map((i) => tasks[i]!);
    const claimed =
      leaders.length === 0
        ? { rows: [] }
        : await tx.query<{ task_type: string; key: string }>(
            CLAIM_KEYS,
            [
              leaders.map((t) => t.taskType),
              leaders.map((t) => t.idempotencyKey),
              leaders.map((t) => t.requestHash ?? ''),
              leaders.map((t) => t.id),
              nowMs + IDEMPOTENCY_WINDOW_MS,
              nowMs,
            ],
            'wh_claim_keys',
          );
    const fresh = new Set(claimed.rows.map((r) => keyOf(r.task_type, r.key)));

    const results = new Array<SubmitResult | undefined>(tasks.length);
    const taken = leaders.filter((t) => !fresh.has(keyOf(t.taskType, t.idempotencyKey!)));
    if (taken.length > 0) {
      const existing = await tx.query<KeyRow>(
        READ_KEYS,
        [taken.map((t) => t.taskType), taken.map((t) => t.idempotencyKey)],
        'wh_read_keys',
      );
      const byKey = new Map(existing.rows.map((r) => [keyOf(r.key_task_type, r.key_name), r]));
      for (const t of taken) {
        const k = keyOf(t.taskType, t.idempotencyKey!);
        const index = leaderOf.get(k)!;
        const row = byKey.get(k);
        if (row === undefined) {
          throw new WheelhouseError(
            'internal',
            `idempotency key "${t.idempotencyKey}" names a task that does not exist`,
          );
        }
        if (row.request_hash !== (t.requestHash ?? '')) throw conflict(index, t.idempotencyKey!);
        results[index] = { task: toTaskRecord(row), created: false };
      }
    }

    const toInsert: number[] = [];
    tasks.forEach((_, i) => {
      if (results[i] === undefined && followerOf[i] === undefined) toInsert.push(i);
    });
    if (toInsert.length > 0) {
      const rows = toInsert.map((i) => tasks[i]!);
      const records = withDependencies
        ? await insertWithDependencies(tx, rows, nowMs)
        : await insertTasks(tx, rows, nowMs);
      toInsert.forEach((i, j) => {
        results[i] = { task: records[j]!, created: true };
      });
    }
    return tasks.map((_, i) => {
      const leader = followerOf[i];
      if (leader === undefined) return results[i]!;
      return { task: results[leader]!.task, created: false };
    });
  };
  return begin === undefined ? body(db) : begin(body);
}

/**
 * `$1` now, `$2` limit. Deletes a bounded batch, oldest expiry first, through
 * `idempotency_keys_expires_idx` (000008_retention): the batch reads only the keys it deletes.
 * The node drains a backlog batch after batch, each its own short statement.
 */
export const PURGE_EXPIRED_KEYS = `
  DELETE FROM idempotency_keys
  WHERE ctid IN (SELECT ctid FROM idempotency_keys WHERE expires_at < ${tsParam(1)} ORDER BY expires_at LIMIT $2)`;

/** See `TaskStore.purgeExpiredIdempotencyKeys`. */
export async function purgeExpiredIdempotencyKeys(db: Db, nowMs: number, limit: number): Promise<number> {
  if (limit <= 0) return 0;
  const { rowCount } = await db.query(PURGE_EXPIRED_KEYS, [nowMs, Math.floor(limit)], 'wh_purge_expired_keys');
  return rowCount;
}
