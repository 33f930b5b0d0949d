import type pg from 'pg';

/** One table of a run's schema with its indexes, bytes. */
export interface TableSize {
  table: string;
  rows: number;
  heapBytes: number;
  /** Each index of the table, by name. */
  indexes: Record<string, number>;
  /** Heap + indexes + TOAST. */
  totalBytes: number;
}

/**
 * The tables of one schema and their indexes, largest first. `rows` is the planner's
 * estimate (`reltuples`, after ANALYZE when `analyze` is set), not a count: counting 10
 * million rows would take longer than everything else measured.
 */
export async function tableSizes(pool: pg.Pool, schema: string, analyze = false): Promise<TableSize[]> {
  if (analyze) await pool.query(`ANALYZE "${schema}".tasks`);
  const { rows } = await pool.query<{ table: string; rows: string; heap: string; total: string; indexes: unknown }>(
    `SELECT c.relname AS table, greatest(c.reltuples, 0)::bigint AS rows,
            pg_relation_size(c.oid) AS heap, pg_total_relation_size(c.oid) AS total,
            coalesce((SELECT json_object_agg(i.relname, pg_relation_size(i.oid))
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = c.oid), '{}'::json) AS indexes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
      ORDER BY pg_total_relation_size(c.oid) DESC`,
    [schema],
  );
  return rows.map((r) => ({
    table: r.table,
    rows: Number(r.rows),
    heapBytes: Number(r.heap),
    indexes: Object.fromEntries(Object.entries(r.indexes as Record<string, number>).map(([k, v]) => [k, Number(v)])),
    totalBytes: Number(r.total),
  }));
}

/** The server's current WAL insert position, bytes since the cluster began (for WAL per task). */
export async function walPosition(pool: pg.Pool): Promise<bigint> {
  const { rows } = await pool.query<{ lsn: string }>(
    "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text AS lsn",
  );
  return BigInt(rows[0]?.lsn.split('.')[0] ?? '0');
}

export function mib(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

/** "tasks 3 512.0 MiB (heap 2 900.1, tasks_pkey 300.2, …)" lines for a report. */
export function describeSizes(sizes: readonly TableSize[], limit = 6): string[] {
  return sizes.slice(0, limit).map((s) => {
    const parts = [`heap ${mib(s.heapBytes)}`, ...Object.entries(s.indexes).map(([name, b]) => `${name} ${mib(b)}`)];
    return `${s.table}: ${mib(s.totalBytes)} MiB, ~${s.rows} rows (${parts.join(', ')})`;
  });
}
