/**
 * A named statement whose plan Postgres settled on while the task table was nearly empty is
 * prepared again, under a name with the table's size class, once the table has doubled: the
 * new plan is costed with the table as it is. Without that, a claim, a completion or a release
 * of one task read the whole table until the next ANALYZE (W5's chain of fans, issue 31).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Db } from '../../src/store/db.js';
import { migrate } from '../../src/store/migrate.js';
import { MAX_SIZE_CLASS, PlanGenerations, sizeClass } from '../../src/store/plan-generations.js';
import { TEST_POSTGRES_URL } from '../support/postgres.js';
import { eventually } from '../support/waits.js';

describe('the size class in a statement’s name', () => {
  it('is the doublings to reach the table’s pages, up to a bound', () => {
    expect(MAX_SIZE_CLASS).toBe(14);
    expect([0, 1, 2, 3, 4, 5, 1024, 1025, 16_384, 16_385, 1e9].map(sizeClass)).toEqual([
      0, 0, 1, 2, 2, 3, 10, 11, 14, 14, 14,
    ]);
  });

  it('follows the table’s size, read at most once per interval', async () => {
    let pages = 1;
    let reads = 0;
    let now = 0;
    const plans = new PlanGenerations(
      () => {
        reads++;
        return Promise.resolve(pages);
      },
      5_000,
      () => now,
    );
    expect(plans.name('wh_claim')).toBe('wh_claim');
    await new Promise((resolve) => setImmediate(resolve));
    pages = 600;
    now = 4_999;
    expect(plans.name('wh_claim')).toBe('wh_claim');
    expect(reads).toBe(1);
    now = 5_000;
    plans.name('wh_claim');
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads).toBe(2);
    expect(plans.name('wh_claim')).toBe('wh_claim.g10');
    expect(plans.name('wh_complete')).toBe('wh_complete.g10');
  });

  it('keeps the names it has when the size cannot be read', async () => {
    let now = 0;
    const plans = new PlanGenerations(
      () => Promise.reject(new Error('no table yet')),
      1_000,
      () => now,
    );
    plans.name('x');
    await new Promise((resolve) => setImmediate(resolve));
    now = 1_000;
    expect(plans.name('x')).toBe('x');
  });
});

describe('a named statement on a task table that grew, on Postgres', () => {
  const schema = `t_${randomBytes(6).toString('hex')}`;
  let db: Db;
  /** A claim's shape: the rows of the given ids, joined with their unnest. */
  const BY_ID = `UPDATE tasks t SET version = t.version + 1 FROM unnest($1::uuid[]) AS c(id) WHERE t.id = c.id`;
  const insert = (n: number): string => `
    INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                       timeout_seconds, attempts, created_at, updated_at)
    SELECT gen_random_uuid(), 'plan.grow', 'pending', 'immediate', now(), 5, g % 64, 0, 60, 0, now(), now()
    FROM generate_series(1, ${n}) g`;

  beforeAll(async () => {
    // One connection, so every run of the statement meets the plan that connection keeps.
    db = openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize: 1, planCheckMs: 200 });
    await migrate(db);
  });
  afterAll(async () => {
    try {
      await db?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await db?.close();
    }
  });

  /** The statements of the connection named `wh_probe…`, and how each reads `tasks` in the plan it keeps now. */
  async function keptPlans(id: string): Promise<Record<string, string>> {
    const { rows } = await db.query<{ name: string }>(
      "SELECT name FROM pg_prepared_statements WHERE name LIKE 'wh\\_probe%' ORDER BY name",
    );
    const plans: Record<string, string> = {};
    for (const { name } of rows) {
      const plan = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE "${name}"('{${id}}')`);
      plans[name] = plan.rows.map((r) => r['QUERY PLAN']).find((line) => /Scan.* on tasks t\b/.test(line)) ?? '';
    }
    return plans;
  }

  it('is planned again with the table as it is once the table has doubled', async () => {
    await db.exec(insert(3));
    const { rows } = await db.query<{ id: string }>('SELECT id::text AS id FROM tasks LIMIT 1');
    const id = rows[0]!.id;
    // Settled on the nearly empty table: a generic plan after the fifth run.
    for (let i = 0; i < 8; i++) await db.query(BY_ID, [[id]], 'wh_probe');
    const before = await keptPlans(id);
    expect(Object.keys(before)).toEqual(['wh_probe']);
    expect(before.wh_probe).toMatch(/Seq Scan on tasks t/);

    await db.exec(insert(30_000));
    // The size is read in the background at most every 200 ms; the name changes once it is.
    await eventually(
      async () => {
        await db.query(BY_ID, [[id]], 'wh_probe');
        return Object.keys(await keptPlans(id)).length > 1 ? true : undefined;
      },
      5_000,
      'the statement prepared under a new name',
    );
    for (let i = 0; i < 8; i++) await db.query(BY_ID, [[id]], 'wh_probe');
    const after = await keptPlans(id);
    const grown = Object.keys(after).find((name) => name !== 'wh_probe')!;
    expect(grown).toMatch(/^wh_probe\.g\d+$/);
    // The new name's plan reads one row by the key. (The old name's plan is not checked: a busy
    // server resets its backends' caches now and then, which plans it again too.)
    expect(after[grown]).toMatch(/Index Scan using tasks_pkey on tasks t/);
  });
});
