import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { openPglite } from '../../src/store/db-pglite.js';
import { migrate } from '../../src/store/migrate.js';
import { expiredLeases } from '../../src/store/sql/claim.js';
import { vacuumDeadTables } from '../../src/store/sql/vacuum.js';

/**
 * The embedded default's VACUUM (decision 0046): PGlite runs no autovacuum, so the node
 * vacuums the tables autovacuum would (dead rows over 50 + 20 % of the live ones), one at a
 * time, and the index the lease safety net reads no longer holds an entry for every claim.
 */

const SCHEMA = 'wh_vacuum';
let db: Db;

beforeAll(async () => {
  db = await openPglite({ dataDir: null, schema: SCHEMA });
  await migrate(db);
}, 60_000);

afterAll(async () => {
  await db?.close();
});

async function dead(table: string): Promise<number> {
  await db.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await db.query<{ n: number }>(
    'SELECT n_dead_tup::int AS n FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2',
    [SCHEMA, table],
  );
  return rows[0]?.n ?? 0;
}

describe('the embedded vacuum', () => {
  it('vacuums a table past autovacuum’s threshold, and the expired-leases read stops walking its claims', async () => {
    await db.query(`
      INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                         timeout_seconds, created_at, updated_at)
      SELECT gen_random_uuid(), 'v', 'pending', 'immediate', now(), 5, i % 4, 0, 30, now(), now()
      FROM generate_series(1, 2000) i`);
    // Claimed with leases that ran out long ago, then failed: 2 000 dead versions in the running index.
    await db.query(
      `UPDATE tasks SET status = 'running', lease_expires_at = now() - interval '1 hour', version = version + 1`,
    );
    await db.query(`UPDATE tasks SET status = 'failed', lease_expires_at = NULL, version = version + 1`);
    expect(await dead('tasks')).toBeGreaterThanOrEqual(4_000);
    const turns: number[] = [];
    const vacuumed = await vacuumDeadTables(db, async () => {
      turns.push(1);
    });
    expect(vacuumed).toContain('tasks');
    expect(turns).toHaveLength(vacuumed.length);
    expect(await dead('tasks')).toBe(0);
    // Nothing is running: the read finds nothing, as before, without the dead entries to walk.
    expect(await expiredLeases(db, [0, 1, 2, 3], Date.now(), 100)).toEqual([]);
    const { rows } = await db.query<{ vacuumed: boolean }>(
      'SELECT last_vacuum IS NOT NULL AS vacuumed FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = $2',
      [SCHEMA, 'tasks'],
    );
    expect(rows[0]?.vacuumed).toBe(true);
  }, 60_000);

  it('leaves a table below the threshold alone', async () => {
    // 10 dead rows among 2 000 live ones: under 50 + 20 %.
    await db.query(`UPDATE tasks SET version = version + 1 WHERE id IN (SELECT id FROM tasks ORDER BY id LIMIT 10)`);
    expect(await dead('tasks')).toBe(10);
    expect(await vacuumDeadTables(db, async () => undefined)).not.toContain('tasks');
    expect(await dead('tasks')).toBe(10);
  }, 60_000);
});
