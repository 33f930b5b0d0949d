import type { Db } from '../db.js';

/**
 * VACUUM for the embedded default (docs/decisions/0046-embedded-vacuum.md). PGlite is Postgres
 * in single-user mode: no autovacuum runs, and nothing else removes the row versions and index
 * entries every claim, completion and retry leaves behind. The index the lease safety net
 * reads (partition, lease expiry) WHERE running kept one for every claim ever made: after
 * 100 000 claims its read took 25–55 ms every pass instead of ~1, on the one connection every
 * other statement waits for. This applies autovacuum's own rule (`autovacuum_vacuum_threshold`
 * 50, `autovacuum_vacuum_scale_factor` 0.2) to the schema's tables, one table a statement.
 */

/** Autovacuum's defaults: a table is vacuumed once its dead rows pass 50 + 20 % of its live ones. */
const THRESHOLD = 50;
const SCALE_FACTOR = 0.2;

/** The schema's tables whose dead rows pass autovacuum's threshold, most dead first. */
const DUE = `
  SELECT relname
  FROM pg_stat_user_tables
  WHERE schemaname = $1 AND n_dead_tup > ${THRESHOLD} + ${SCALE_FACTOR} * n_live_tup
  ORDER BY n_dead_tup DESC`;

/**
 * Vacuums each table of `db`'s schema that autovacuum would, `between` awaited after each (the
 * node's loop turns there). Answers the tables vacuumed.
 */
export async function vacuumDeadTables(db: Db, between: () => Promise<void>): Promise<string[]> {
  // The counts this connection has not yet reported are reported when this statement ends.
  await db.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await db.query<{ relname: string }>(DUE, [db.schema]);
  const vacuumed: string[] = [];
  for (const { relname } of rows) {
    await between();
    await db.query(`VACUUM ${db.schema}."${relname.replace(/"/g, '""')}"`);
    vacuumed.push(relname);
  }
  return vacuumed;
}
