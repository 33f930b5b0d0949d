import type { Db, DbTx } from '../db.js';
import type { NewTask, StoredStatus, SubmitResult } from '../../domain/model.js';
import type { ChildPage, ChildrenFilter, SpawnResult } from '../children-types.js';
import { msOf, taskColumns, toTaskRecord, tsParam, validIds, type TaskRow } from './columns.js';
import { submitIn } from './submit.js';

/**
 * Children of a running task (migrations/000017_children.sql): spawning them, and listing them.
 *
 * A spawn is one transaction: the parent's row locked (`FOR NO KEY UPDATE`, as an UPDATE of a
 * heartbeat or a result would lock it), its lease checked as a heartbeat checks it (running,
 * this token's digest, deadline not passed), the children already made under the keys asked
 * for read, and the others inserted by the submission's own path (`submitIn`, so idempotency
 * keys and the one-statement insert are the same as for `POST /api/tasks/batch`). The lock is
 * why a key is never inserted twice: two spawns of one parent take turns, and the second reads
 * what the first committed. A result that ends the attempt waits for the spawn, or the spawn
 * for it (and then finds the lease gone): no child is added to a task that has ended.
 */

/**
 * `$1` parent id, `$2` the token's digest, `$3` now. Also the parent's trace context, which a
 * child that came without one inherits (docs/decisions/0038-tracing.md): read with the lock
 * the spawn takes anyway, so it costs no statement.
 */
const LOCK_PARENT = `
  SELECT t.status = 'running' AND t.deadline_at > ${tsParam(3)} AND t.lease_token_hash = $2::bytea AS held,
         t.traceparent
  FROM tasks t WHERE t.id = $1::uuid FOR NO KEY UPDATE`;

/** `$1` parent id, `$2` child keys: the children already made under them. */
const EXISTING_CHILDREN = `
  SELECT ${taskColumns('t')} FROM tasks t WHERE t.parent_id = $1::uuid AND t.child_key = ANY($2::text[])`;

/** See `TaskStore.spawnChildren`. `children` carry `parentId` and (when named) `childKey`. */
export async function spawnChildren(
  db: Db,
  parentId: string,
  tokenDigest: Buffer,
  children: NewTask[],
  nowMs: number,
): Promise<SpawnResult> {
  const [id] = validIds([parentId]);
  if (id === undefined) return { kind: 'not_found' };
  return db.transaction(async (tx) => {
    const parent = (
      await tx.query<{ held: boolean; traceparent: string | null }>(
        LOCK_PARENT,
        [id, tokenDigest, nowMs],
        'wh_lock_parent',
      )
    ).rows[0];
    if (parent === undefined) return { kind: 'not_found' };
    if (parent.held !== true) return { kind: 'lease_not_held' };
    return { kind: 'spawned', results: await insertChildren(tx, id, parent.traceparent, children, nowMs) };
  });
}

/**
 * The children in request order: a key already taken (before, or earlier in this request)
 * answers its child, `created: false`; the rest are inserted, those without a trace context
 * with their parent's (`parentTrace`; a node that traces has given each its own already).
 */
async function insertChildren(
  tx: DbTx,
  parentId: string,
  parentTrace: string | null,
  children: NewTask[],
  nowMs: number,
): Promise<SubmitResult[]> {
  const keys = [...new Set(children.flatMap((c) => (c.childKey == null ? [] : [c.childKey])))];
  const results = new Array<SubmitResult | undefined>(children.length);
  const existing = new Map<string, SubmitResult>();
  if (keys.length > 0) {
    const { rows } = await tx.query<TaskRow>(EXISTING_CHILDREN, [parentId, keys], 'wh_existing_children');
    for (const row of rows) existing.set(row.child_key as string, { task: toTaskRecord(row), created: false });
  }
  const leadOf = new Map<string, number>();
  const fresh: NewTask[] = [];
  const freshAt: number[] = [];
  children.forEach((child, i) => {
    const key = child.childKey ?? null;
    if (key !== null) {
      results[i] = existing.get(key);
      if (results[i] !== undefined || leadOf.has(key)) return;
      leadOf.set(key, i);
    }
    fresh.push({ ...child, parentId, traceparent: child.traceparent ?? parentTrace });
    freshAt.push(i);
  });
  const inserted = fresh.length === 0 ? [] : await submitIn(tx, fresh, nowMs);
  freshAt.forEach((i, j) => (results[i] = inserted[j]));
  return children.map(
    (child, i) => results[i] ?? { task: results[leadOf.get(child.childKey as string) as number]!.task, created: false },
  );
}

/** What a child adds to a page besides its result and error, bytes (id, key, status, …). */
const ROW_BYTES = `coalesce(octet_length(c.result::text), 0) + coalesce(octet_length(c.last_error), 0)
  + coalesce(octet_length(c.child_key), 0) + 256`;

/**
 * `$1` parent, `$2` after this id (exclusive; the nil UUID for the first page), `$3` statuses
 * (NULL: any), `$4` `due` or `later` (for `ready` and `pending`) or NULL, `$5` limit, `$6`
 * bytes, `$7` now. Through `tasks_parent_idx`, in id order (the order they were spawned in). As
 * a listing does (src/store/sql/list.ts), a page stops once its results and errors pass `$6`
 * bytes, keeping at least one child: a thousand results of 1 MiB are not one answer. A status
 * filters the parent's children as the index yields them: a page reads at most the parent's
 * children, never the table.
 */
const LIST_CHILDREN = `
  SELECT p.id, p.child_key, p.status, p.due_ms, p.result, p.last_error, p.page_bytes FROM (
    SELECT c.id, c.child_key, c.status, ${msOf('c.due_time')} AS due_ms, c.result, c.last_error,
           ${ROW_BYTES} AS row_bytes, sum(${ROW_BYTES}) OVER (ORDER BY c.id ROWS UNBOUNDED PRECEDING) AS page_bytes
    FROM tasks c
    WHERE c.parent_id = $1::uuid AND c.id > $2::uuid
      AND ($3::text[] IS NULL OR c.status = ANY($3::text[]))
      AND ($4::text IS NULL OR ($4 = 'due') = (c.due_time <= ${tsParam(7)}))
    ORDER BY c.id
    LIMIT $5
  ) p
  WHERE p.page_bytes - p.row_bytes <= $6
  ORDER BY p.id`;

const NIL_UUID = '00000000-0000-0000-0000-000000000000';

interface ChildRow {
  id: string;
  child_key: string | null;
  status: StoredStatus;
  due_ms: number;
  result: unknown;
  last_error: string | null;
  page_bytes: string | number;
}

/** See `TaskStore.listChildren`. */
export async function listChildren(
  db: Db,
  parentId: string,
  filter: ChildrenFilter,
  nowMs: number,
): Promise<ChildPage> {
  const [id] = validIds([parentId]);
  const after = filter.afterId === undefined ? NIL_UUID : validIds([filter.afterId])[0];
  if (id === undefined || after === undefined) return { children: [], nextAfterId: null };
  const limit = Math.max(1, Math.min(1000, Math.floor(filter.limit)));
  const maxBytes = filter.maxBytes ?? Number.MAX_SAFE_INTEGER;
  const { status } = filter;
  const waiting = status === 'ready' || status === 'pending';
  const statuses = status === undefined ? null : [waiting ? 'pending' : status];
  const due = !waiting ? null : status === 'ready' ? 'due' : 'later';
  const { rows } = await db.query<ChildRow>(
    LIST_CHILDREN,
    [id, after, statuses, due, limit, maxBytes, nowMs],
    'wh_list_children',
  );
  let full = rows.length === limit;
  const last = rows[rows.length - 1];
  if (last !== undefined && Number(last.page_bytes) > maxBytes) {
    if (rows.length > 1) rows.pop();
    full = true;
  }
  const children = rows.map((r) => ({
    taskId: r.id,
    childKey: r.child_key,
    status: r.status,
    dueMs: r.due_ms,
    result: r.result,
    lastError: r.last_error,
  }));
  return { children, nextAfterId: full ? (children[children.length - 1]?.taskId ?? null) : null };
}
