import { isUuid } from '../../lib/ids.js';
import type { Db } from '../db.js';
import type { ListFilter, TaskListPage } from '../types.js';
import { taskColumns, toTaskRecord, tsParam, type TaskRow } from './columns.js';

/**
 * Listing tasks, newest first, in pages whose work is bounded whatever the filter.
 *
 * The order is `id DESC` (UUID v7 ids sort by creation time) and a page goes on below the last
 * id the previous one reached. The rows are found through an index only: the primary key, or
 * with `scheduleId` the (schedule_id, id) index. Status and task type have no index of their
 * own (each would be written on the hot path of every claim and completion, for the sake of a
 * listing; see migrations/000001_init.sql): they filter the rows of that walk, and a page walks
 * at most `scanRows` of them. A filter that matches nothing in a large table therefore answers
 * an empty page that says where to go on, rather than reading the whole table.
 *
 * A page also stops once its tasks pass `maxBytes` of JSON (payload, last error, result,
 * progress and a fixed share for the other fields, as Postgres writes them), keeping at least one task, so a
 * thousand 256 KiB payloads are not one answer.
 */

/** The largest `limit` a listing honours. */
const MAX_LIST = 1000;

/** What a task's JSON holds besides its payload and last error, bytes, at most (ids, times, …). */
const TASK_JSON_BYTES = 1024;

const ROW_BYTES = `octet_length(w.payload::text) + coalesce(octet_length(w.last_error), 0)
  + coalesce(octet_length(w.result::text), 0) + coalesce(octet_length(w.progress::text), 0) + ${TASK_JSON_BYTES}`;

interface ListRow extends TaskRow {
  /** The page's bytes up to and including this row. */
  page_bytes: number;
}

/** See `TaskStore.list`. */
export async function listTasks(db: Db, filter: ListFilter, nowMs: number): Promise<TaskListPage> {
  const limit = Math.max(0, Math.min(MAX_LIST, Math.floor(filter.limit)));
  if (limit === 0) return { tasks: [], nextBeforeId: null };
  if (filter.scheduleId !== undefined && !isUuid(filter.scheduleId)) return { tasks: [], nextBeforeId: null };
  if (filter.beforeId !== undefined && !isUuid(filter.beforeId)) return { tasks: [], nextBeforeId: null };
  const maxBytes = filter.maxBytes ?? Number.MAX_SAFE_INTEGER;
  const params: unknown[] = [];
  const param = (value: unknown): number => params.push(value);

  // The walk: an index range, newest first.
  const range: string[] = [];
  if (filter.scheduleId !== undefined) range.push(`schedule_id = $${param(filter.scheduleId)}::uuid`);
  if (filter.beforeId !== undefined) range.push(`id < $${param(filter.beforeId)}::uuid`);
  const rangeWhere = range.length > 0 ? `WHERE ${range.join(' AND ')}` : '';

  // The filters on the walked rows.
  const where: string[] = [];
  if (filter.status === 'ready') {
    where.push(`w.status = 'pending' AND w.due_time <= ${tsParam(param(nowMs))}`);
  } else if (filter.status === 'pending') {
    where.push(`w.status = 'pending' AND w.due_time > ${tsParam(param(nowMs))}`);
  } else if (filter.status !== undefined) {
    where.push(`w.status = $${param(filter.status)}`);
  }
  if (filter.taskType !== undefined) where.push(`w.task_type = $${param(filter.taskType)}`);
  const scanRows =
    where.length > 0 && filter.scanRows !== undefined ? Math.max(limit, Math.floor(filter.scanRows)) : null;

  // With filters the walk is a subquery with its own LIMIT: Postgres cannot push the filters
  // into it, so it reads at most `scanRows` index entries whatever the filters match.
  const walk =
    scanRows === null ? 'tasks w' : `(SELECT * FROM tasks ${rangeWhere} ORDER BY id DESC LIMIT $${param(scanRows)}) w`;
  const conditions = scanRows === null ? [...range, ...where] : where;
  const text = `
    SELECT ${taskColumns('p')}, p.page_bytes FROM (
      SELECT w.*, ${ROW_BYTES} AS row_bytes,
             sum(${ROW_BYTES}) OVER (ORDER BY w.id DESC ROWS UNBOUNDED PRECEDING) AS page_bytes
      FROM ${walk}
      ${conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : ''}
      ORDER BY w.id DESC
      LIMIT $${param(limit)}
    ) p
    WHERE p.page_bytes - p.row_bytes <= $${param(maxBytes)}
    ORDER BY p.id DESC`;
  const { rows } = await db.query<ListRow>(text, params);

  // The rows that start within the bound came back; the last may end past it. It is left for
  // the next page unless it is the only one.
  let full = rows.length === limit;
  const last = rows[rows.length - 1];
  if (last !== undefined && Number(last.page_bytes) > maxBytes) {
    if (rows.length > 1) rows.pop();
    full = true;
  }
  const tasks = rows.map(toTaskRecord);
  if (full) return { tasks, nextBeforeId: tasks[tasks.length - 1]?.id ?? null };
  if (scanRows === null) return { tasks, nextBeforeId: null };
  return { tasks, nextBeforeId: await walkEnd(db, filter, scanRows) };
}

/**
 * Where a filtered page's walk ended when it found fewer tasks than asked: the id of the
 * `scanRows`-th row of the range (the next page goes on below it), or null when the range
 * holds fewer rows (the walk reached the end). An index-only scan of the walked range.
 */
async function walkEnd(db: Db, filter: ListFilter, scanRows: number): Promise<string | null> {
  const params: unknown[] = [];
  const param = (value: unknown): number => params.push(value);
  const range: string[] = [];
  if (filter.scheduleId !== undefined) range.push(`schedule_id = $${param(filter.scheduleId)}::uuid`);
  if (filter.beforeId !== undefined) range.push(`id < $${param(filter.beforeId)}::uuid`);
  const text = `SELECT id FROM tasks ${range.length > 0 ? `WHERE ${range.join(' AND ')}` : ''}
    ORDER BY id DESC OFFSET $${param(scanRows - 1)} LIMIT 1`;
  const { rows } = await db.query<{ id: string }>(text, params);
  return rows[0]?.id ?? null;
}
