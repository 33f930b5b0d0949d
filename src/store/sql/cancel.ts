import { WheelhouseError } from '../../lib/errors.js';
import type { Db, DbTx } from '../db.js';
import type { StoredStatus, TaskRecord } from '../../domain/model.js';
import type { CancelResult } from '../types.js';
import { statusIn, taskColumns, toTaskRecord, tsParam, validIds, type TaskRow } from './columns.js';
import { dagEventsCte } from './outbox.js';
import { getTask } from './read.js';

/**
 * Cancelling one task: a compare-and-set on the status alone (the caller holds no
 * version). The edges, all in one UPDATE:
 * - blocked | pending | active | paused | waiting → cancelled at once, version + 1;
 * - running → stays running with `cancel_requested`; the version is kept so the worker's
 *   lease token stays valid, and its completion (or the lease's expiry) records `cancelled`.
 * Finished tasks do not match the WHERE clause: they are reported, not changed.
 * `$3`, the reason (NULL: none, as for DELETE), becomes the task's `last_error` (a limit's
 * `on_limit` strategy says why it cancelled); a running task's result keeps it unless the
 * attempt failed with an error of its own.
 */
const CANCELLABLE: readonly StoredStatus[] = ['blocked', 'pending', 'active', 'paused', 'running', 'waiting'];

/** `reason`: the SQL of the `last_error` a cancel sets (`$3`, or one of the row's own that needs no `$3`). */
function cancelStatement(ids: string, reason = '$3::text'): string {
  return `
  WITH done AS (
  UPDATE tasks t
  SET status = CASE WHEN t.status = 'running' THEN 'running' ELSE 'cancelled' END,
      cancel_requested = t.cancel_requested OR t.status = 'running',
      version = CASE WHEN t.status = 'running' THEN t.version ELSE t.version + 1 END,
      completed_at = CASE WHEN t.status = 'running' THEN t.completed_at ELSE ${tsParam(2)} END,
      last_error = coalesce(${reason}, t.last_error),
      updated_at = ${tsParam(2)}
  WHERE ${ids} AND ${statusIn('t', CANCELLABLE)}
  RETURNING ${taskColumns('t')}
  ),
  ${dagEventsCte(2)}
  SELECT * FROM done`;
}

const CANCEL = cancelStatement('t.id = $1');
/** The same edges for many tasks at once (an operation's page): `$1` their ids. */
export const CANCEL_MANY = cancelStatement('t.id = ANY($1::uuid[])');

/**
 * Tries the UPDATE a few times: when it matches nothing, the task is read to tell
 * "not found" from "finished". A task seen unfinished by that read was inserted (or changed)
 * between the two statements, so the edge is tried again.
 */
const ATTEMPTS = 3;

/** See `TaskStore.cancel`. */
export async function cancelTask(db: Db, taskId: string, nowMs: number, reason?: string): Promise<CancelResult> {
  if (validIds([taskId]).length === 0) return { kind: 'not_found' };
  for (let attempt = 1; ; attempt++) {
    const updated = await db.query<TaskRow>(CANCEL, [taskId, nowMs, reason ?? null], 'wh_cancel');
    const row = updated.rows[0];
    if (row !== undefined) {
      const task = toTaskRecord(row);
      return task.status === 'running' ? { kind: 'cancel_requested', task } : { kind: 'cancelled', task };
    }
    const current = await getTask(db, taskId);
    if (current === null) return { kind: 'not_found' };
    if (!CANCELLABLE.includes(current.status)) return { kind: 'finished', task: current };
    if (attempt >= ATTEMPTS) {
      throw new WheelhouseError('internal', `task ${taskId} kept changing while being cancelled`);
    }
  }
}

/**
 * Cancels the tasks of `taskIds` that are still unfinished, as {@link cancelTask} cancels one
 * (no reason): answers the rows it changed, running ones with `cancel_requested`. For an
 * operation's page, inside its transaction.
 */
export async function cancelMany(db: DbTx, taskIds: readonly string[], nowMs: number): Promise<TaskRecord[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<TaskRow>(CANCEL_MANY, [taskIds, nowMs, null], 'wh_cancel_many');
  return rows.map(toTaskRecord);
}

/** The same edges for the unfinished children of the tasks `$1`, each naming its parent. */
const CANCEL_CHILDREN = cancelStatement('t.parent_id = ANY($1::uuid[])', `'parent ' || t.parent_id || ' cancelled'`);

/** Most generations a cascade goes down (a deeper tree is cut there; nothing makes one that deep). */
const MAX_GENERATIONS = 32;

/**
 * Cancels the unfinished descendants of cancelled parents, as {@link cancelTask} cancels one,
 * each child's `last_error` naming its parent (`parent <id> cancelled`): a child cancelled at
 * once takes its own children with it, generation after generation; a running one is only
 * marked (`cancel_requested`) and takes its children when its attempt ends cancelled. Answers
 * the rows it changed. Runs inside the caller's transaction when given one.
 */
export async function cancelChildren(db: DbTx, parentIds: readonly string[], nowMs: number): Promise<TaskRecord[]> {
  const changed: TaskRecord[] = [];
  let parents = validIds([...parentIds]);
  for (let generation = 0; parents.length > 0 && generation < MAX_GENERATIONS; generation++) {
    const { rows } = await db.query<TaskRow>(CANCEL_CHILDREN, [parents, nowMs], 'wh_cancel_children');
    const records = rows.map(toTaskRecord);
    changed.push(...records);
    parents = records.filter((t) => t.status === 'cancelled').map((t) => t.id);
  }
  return changed;
}
