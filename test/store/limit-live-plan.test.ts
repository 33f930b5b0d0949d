/**
 * The plan of a limit key's activation read (src/store/sql/limits.ts) while another key floods:
 * a quiet key's read of its waiting tasks must go through the GIN index on `tasks.limits`,
 * costing its own rows, not scan every due pending row (`tasks_pending_due_idx`) for its one;
 * the read of holders goes through the running rows' GIN index (`tasks_running_limits_idx`),
 * one scan for every key asked about, never the table. Planners choose on statistics, and W6's flood was inserted seconds before the
 * quiet keys activated (never analysed): that is the case here. Postgres only (PGlite plans
 * its own way, and holds no flood).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RUNNING_NAMED_MANY, WAITING_NAMED_MANY } from '../../src/store/sql/limits.js';
import { createTestSchema, type TestDb } from '../support/postgres.js';

/** The flood: enough due rows of one key that scanning them all is the costly plan. */
const FLOOD = 20_000;
/** Finished rows, the bulk of a table in use: a read of holders must not scan them. */
const FINISHED = 50_000;

describe('a limit key activation read during another key flood', () => {
  let testDb: TestDb;

  beforeAll(async () => {
    testDb = await createTestSchema(1);
    const insert = (status: string, key: string, n: number): string => `
      INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                         timeout_seconds, created_at, updated_at, limits)
      SELECT gen_random_uuid(), 'plan.test', '${status}', 'delayed', now() - interval '1 second', 0, g % 64, 3,
             60, now(), now(), ARRAY['${key}']
      FROM generate_series(1, ${n}) g`;
    await testDb.db.exec(
      [
        insert('pending', 'customer:0', FLOOD),
        insert('running', 'customer:0', 50),
        insert('pending', 'customer:7', 1),
        insert('succeeded', 'customer:7', FINISHED),
      ]
        .map((s) => `${s};`)
        .join('\n'),
    );
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function plan(text: string, params: unknown[]): Promise<string> {
    const { rows } = await testDb.db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${text}`, params);
    return JSON.stringify(rows[0]?.['QUERY PLAN']);
  }

  it('reads a quiet key through the GIN index, not the due pending rows of every key', async () => {
    const waiting = await plan(WAITING_NAMED_MANY, [['customer:7', 'customer:8'], Date.now(), 100_001]);
    expect(waiting).toContain('tasks_pending_limits_idx');
    expect(waiting).not.toContain('tasks_pending_due_idx');
    const running = await plan(RUNNING_NAMED_MANY, [['customer:7', 'customer:8']]);
    expect(running).toContain('tasks_running_limits_idx');
    expect(running).not.toContain('Seq Scan');
  });

  it("reads the flood key's holders from its running rows alone, not through its pending ones", async () => {
    const { rows } = await testDb.db.query<{ 'QUERY PLAN': unknown }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${RUNNING_NAMED_MANY}`,
      [['customer:0']],
    );
    // Every index the plan read, with the rows it found there: 50 running, not 20 050 live nor
    // the finished ones.
    const found: [string, number][] = [];
    const walk = (node: Record<string, unknown>): void => {
      if (typeof node['Index Name'] === 'string') found.push([node['Index Name'], node['Actual Rows'] as number]);
      for (const child of (node['Plans'] as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]?.['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    expect(found).toEqual([['tasks_running_limits_idx', 50]]);
  });

  it('still answers the quiet key its one due task', async () => {
    const { rows } = await testDb.db.query<{ key: string }>(WAITING_NAMED_MANY, [
      ['customer:7', 'customer:8'],
      Date.now(),
      100_001,
    ]);
    expect(rows.map((r) => r.key)).toEqual(['customer:7']);
  });
});
