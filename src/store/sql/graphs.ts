import type { Db } from '../db.js';

/**
 * The newest graphs, from the graphs themselves: their ids in descending order, below `beforeId`.
 * A graph's id is a UUID v7 made when it was submitted, so id order is submission order.
 *
 * A loose index scan of tasks_dag_idx (migrations/000003_dags.sql): each step of the recursion
 * is one probe for the next lower `dag_id`, so `limit` graphs cost `limit` probes however many
 * tasks each graph has and however many other tasks there are. (`SELECT DISTINCT dag_id … ORDER
 * BY dag_id DESC LIMIT n` would read every task of those graphs.)
 */
export async function newestGraphs(db: Db, limit: number, beforeId?: string): Promise<string[]> {
  const text = `
    WITH RECURSIVE g(dag_id) AS (
      (SELECT dag_id FROM tasks
        WHERE dag_id IS NOT NULL AND ($2::uuid IS NULL OR dag_id < $2::uuid)
        ORDER BY dag_id DESC LIMIT 1)
      UNION ALL
      SELECT (SELECT t.dag_id FROM tasks t
               WHERE t.dag_id IS NOT NULL AND t.dag_id < g.dag_id
               ORDER BY t.dag_id DESC LIMIT 1)
      FROM g WHERE g.dag_id IS NOT NULL
    )
    SELECT dag_id::text AS dag_id FROM g WHERE dag_id IS NOT NULL LIMIT $1`;
  const { rows } = await db.query<{ dag_id: string }>(text, [limit, beforeId ?? null]);
  return rows.map((r) => r.dag_id);
}
