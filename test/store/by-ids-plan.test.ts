/**
 * The statements that act on tasks named by id — an operation's page (retry, cancel, delete)
 * and the history read — find them through the primary key, however the statuses skew and
 * whatever the statistics say. Their status tests are fenced (`statusIn`, `statusIs`): an
 * unfenced `status IN ('failed', 'cancelled', 'expired')` matched `tasks_ended_idx`'s
 * predicate, and on a table never analysed (PGlite has no autovacuum; this server runs without
 * it) the planner walked that whole index for 20 ids — 45–60 ms a page with 100 000 failed
 * tasks instead of ~3, and the node's submits waited behind it (issue 30's bulk retry).
 * Both backends, as a bulk retry meets them: many finished tasks, never analysed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CANCEL_MANY } from '../../src/store/sql/cancel.js';
import { HEARTBEATS, RUNNING_LEASE } from '../../src/store/sql/claim.js';
import { DELETE_MANY } from '../../src/store/sql/operation-page.js';
import { HISTORY } from '../../src/store/sql/read.js';
import { RETRY_MANY } from '../../src/store/sql/retry.js';
import { tableReads } from '../support/plans.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';

/** Enough ended (and pending) rows that walking an index of them all is the costly plan. */
const ROWS = 20_000;

describe.each(sqlBackends)('statements on tasks named by id, on $name', ({ open }) => {
  let testDb: TestDb;
  let ids: string[];
  /** Running tasks, for the statements on leases. */
  let runningIds: string[];

  beforeAll(async () => {
    testDb = await open();
    const insert = (status: string): string => `
      INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                         timeout_seconds, attempts, created_at, updated_at, started_at, completed_at, last_error,
                         lease_expires_at, deadline_at, lease_token_hash)
      SELECT gen_random_uuid(), 'plan.ids', '${status}', 'immediate', now() - interval '1 minute', 5, g % 64, 0,
             60, 1, now(), now(), now() - interval '30 seconds',
             CASE WHEN '${status}' IN ('failed', 'cancelled') THEN now() END, 'down',
             CASE WHEN '${status}' = 'running' THEN now() + interval '1 minute' END,
             CASE WHEN '${status}' = 'running' THEN now() + interval '1 minute' END,
             CASE WHEN '${status}' = 'running' THEN decode(md5(g::text) || md5(g::text), 'hex') END
      FROM generate_series(1, ${ROWS}) g`;
    await testDb.db.exec([insert('failed'), insert('pending'), insert('running')].map((s) => `${s};`).join('\n'));
    // A bulk retry meets the table vacuumed (PGlite's own pass, decision 0046) but never analysed.
    await testDb.db.exec('VACUUM tasks');
    const { rows } = await testDb.db.query<{ id: string }>(
      "SELECT id::text AS id FROM tasks WHERE status = 'failed' ORDER BY id LIMIT 20 OFFSET 5000",
    );
    ids = rows.map((r) => r.id);
    const held = await testDb.db.query<{ id: string }>(
      "SELECT id::text AS id FROM tasks WHERE status = 'running' ORDER BY id LIMIT 20 OFFSET 5000",
    );
    runningIds = held.rows.map((r) => r.id);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** How the plan reads `tasks` under each alias: `Index Scan tasks_pkey`, `Seq Scan`, … */
  function readsOfTasks(text: string, params: unknown[]): Promise<string[]> {
    return tableReads(testDb.db, 'tasks', text, params);
  }

  /** Every read of the rows named by id (alias `t`, and the retry's own copy `o`) uses the primary key. */
  function byPrimaryKey(reads: string[], aliases = ['t']): void {
    const named = reads.filter((r) => aliases.some((a) => r.startsWith(`${a}: `)));
    expect(named.length).toBeGreaterThan(0);
    for (const read of named) expect(read).toMatch(/: (Index Scan|Bitmap Index Scan|Index Only Scan) tasks_pkey$/);
  }

  it('retries a page of failed tasks through the primary key', async () => {
    byPrimaryKey(await readsOfTasks(RETRY_MANY, [ids, Date.now()]), ['t', 'o']);
  });

  it('cancels a page through the primary key', async () => {
    byPrimaryKey(await readsOfTasks(CANCEL_MANY, [ids, Date.now(), null]));
  });

  it('deletes a page of finished tasks through the primary key', async () => {
    byPrimaryKey(await readsOfTasks(DELETE_MANY, [ids]));
  });

  it("extends the leases of a worker's heartbeat through the primary key", async () => {
    const digests = Buffer.alloc(32 * runningIds.length);
    byPrimaryKey(await readsOfTasks(HEARTBEATS, [runningIds, digests, Date.now(), runningIds.map(() => null)]));
  });

  it("reads a lease actor's running task through the primary key", async () => {
    byPrimaryKey(await readsOfTasks(RUNNING_LEASE, [runningIds[0]]));
  });

  it('reads the history of tasks through the primary key', async () => {
    byPrimaryKey(await readsOfTasks(HISTORY, [ids, 2, 100]));
  });
});
