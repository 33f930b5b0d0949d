/**
 * The two statements on every step of a DAG read the rows they need through the primary key,
 * in the generic plan a named statement settles on: the resolver's lookup of a predecessor's
 * blocked dependents, and the claim's `inputs` (each predecessor's result). As plain joins both
 * hashed a sequential scan of the whole task table — the lookup once (8.6 ms on 10 000 tasks,
 * 100–230 ms in W5's chain of fans), the claim once per claimed row (221 ms for 99 dependents
 * over 10 000 tasks). Issue 31, W5's edge. Both backends, many blocked tasks, never vacuumed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEPENDENTS } from '../../src/store/sql/dag.js';
import { INPUTS } from '../../src/store/sql/handed-on.js';
import { tableReads } from '../support/plans.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';

/** Blocked tasks, each waiting on one of PREDECESSORS pending ones. */
const BLOCKED = 20_000;
const PREDECESSORS = 100;

describe.each(sqlBackends)('the statements of a DAG step, on $name', ({ open }) => {
  let testDb: TestDb;
  let predecessors: string[];
  let dependents: string[];

  beforeAll(async () => {
    testDb = await open();
    const insert = (status: string, n: number, type: string): string => `
      INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                         timeout_seconds, attempts, created_at, updated_at, deps_total)
      SELECT gen_random_uuid(), '${type}', '${status}', 'immediate', now(), 5, g % 64, 0, 60, 0, now(), now(),
             CASE WHEN '${status}' = 'blocked' THEN 1 ELSE 0 END
      FROM generate_series(1, ${n}) g`;
    await testDb.db.exec(
      `${insert('pending', PREDECESSORS, 'plan.pred')};
       ${insert('blocked', BLOCKED, 'plan.dep')};
       INSERT INTO task_dependencies (task_id, predecessor_id)
       SELECT d.id, p.id FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM tasks WHERE task_type = 'plan.dep') d
       JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM tasks WHERE task_type = 'plan.pred') p
         ON p.n = d.n % ${PREDECESSORS};`,
    );
    // Never vacuumed nor analysed, as W5's tables were (this server runs without autovacuum; a
    // table that grew since its last pass looks the same): the planner guesses their size.
    const { rows } = await testDb.db.query<{ id: string }>(
      "SELECT id::text AS id FROM tasks WHERE task_type = 'plan.pred'",
    );
    predecessors = rows.map((r) => r.id);
    const deps = await testDb.db.query<{ id: string }>(
      "SELECT id::text AS id FROM tasks WHERE task_type = 'plan.dep' ORDER BY id LIMIT 99",
    );
    dependents = deps.rows.map((r) => r.id);
  });

  /** How `text` reads `tasks` in the generic plan. */
  function genericReads(text: string, params: unknown[]): Promise<string[]> {
    return testDb.db.transaction(async (tx) => {
      await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
      return tableReads(tx, 'tasks', text, params);
    });
  }
  afterAll(async () => {
    await testDb?.drop();
  });

  it('reads the dependents through the primary key in the generic plan', async () => {
    const reads = await genericReads(DEPENDENTS, [predecessors.slice(0, 99)]);
    expect(reads.length).toBeGreaterThan(0);
    for (const read of reads) expect(read).toMatch(/: (Index Scan|Index Only Scan) tasks_pkey$/);
  });

  it("reads a claimed dependent's predecessors through the primary key in the generic plan", async () => {
    const reads = await genericReads(`SELECT t.id, ${INPUTS} FROM tasks t WHERE t.id = ANY($1::uuid[])`, [dependents]);
    // The predecessors' rows (alias `p`); the claim reads its own rows (`t`) through its join with the ids.
    const predecessorReads = reads.filter((r) => r.startsWith('p: '));
    expect(predecessorReads).not.toHaveLength(0);
    for (const read of predecessorReads) expect(read).toMatch(/: (Index Scan|Index Only Scan) tasks_pkey$/);
  });

  it('finds each blocked dependent of the predecessors once', async () => {
    const { rows } = await testDb.db.query<{ task_id: string; predecessor_ids: string[] }>(DEPENDENTS, [
      predecessors.slice(0, 3),
    ]);
    expect(rows).toHaveLength((3 * BLOCKED) / PREDECESSORS);
    for (const row of rows) expect(row.predecessor_ids).toHaveLength(1);
  });
});
