import type { Db } from '../db.js';
import { msOf, tsParam } from './columns.js';

/**
 * The failed tasks grouped by task type and last error: the dead-letter view of the dashboard
 * (`GET /admin/failures`).
 *
 * Bounded: the newest `scanRows` failures since `sinceMs` are read through tasks_failed_idx
 * (migrations/000021_failed_idx.sql: failed tasks only, by completion time, newest first), then
 * grouped. An error is grouped by its first `ERROR_KEY_CHARS` characters, which an operation's
 * `error_equals` compares the same way (src/store/sql/operation-page.ts), so a group's text is the
 * filter that retries that group and no other.
 * `scanned` says how many failures were read; `scanned === scanRows` means older ones were left out.
 */

/** Characters of an error a group is keyed by, and that `error_equals` compares: the bound of both error filters. */
export const ERROR_KEY_CHARS = 1000;

export interface FailureGroup {
  taskType: string;
  /** The error's first ERROR_KEY_CHARS characters; '' when the task failed without one. */
  error: string;
  count: number;
  /** The newest failure of the group, Unix ms. */
  newestMs: number;
  /** The task of that failure. */
  sampleId: string;
}

export interface FailureGroups {
  groups: FailureGroup[];
  /** Failures read (at most `scanRows`). */
  scanned: number;
  /** Groups found among them (more than `groups` holds when `limit` cut them). */
  groupCount: number;
}

interface GroupRow {
  task_type: string;
  error: string;
  count: number | string;
  newest_ms: number | string;
  sample_id: string;
  scanned: number | string;
  group_count: number | string;
}

export async function failureGroups(
  db: Db,
  query: { sinceMs: number; limit: number; scanRows: number },
): Promise<FailureGroups> {
  const text = `
    SELECT task_type, error, count(*) AS count, ${msOf('max(completed_at)')} AS newest_ms,
           (array_agg(id ORDER BY completed_at DESC, id DESC))[1]::text AS sample_id,
           sum(count(*)) OVER () AS scanned, count(*) OVER () AS group_count
    FROM (
      SELECT id, task_type, left(coalesce(last_error, ''), ${ERROR_KEY_CHARS}) AS error, completed_at
      FROM tasks
      WHERE status = 'failed' AND completed_at >= ${tsParam(1)}
      ORDER BY completed_at DESC, id DESC
      LIMIT $2
    ) f
    GROUP BY task_type, error
    ORDER BY count(*) DESC, max(completed_at) DESC, task_type, error
    LIMIT $3`;
  const { rows } = await db.query<GroupRow>(text, [query.sinceMs, query.scanRows, query.limit]);
  const first = rows[0];
  return {
    groups: rows.map((r) => ({
      taskType: r.task_type,
      error: r.error,
      count: Number(r.count),
      newestMs: Number(r.newest_ms),
      sampleId: r.sample_id,
    })),
    scanned: first === undefined ? 0 : Number(first.scanned),
    groupCount: first === undefined ? 0 : Number(first.group_count),
  };
}
