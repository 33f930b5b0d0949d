/**
 * What the safety net's look at expired leases reads (src/store/sql/claim.ts, EXPIRED_LEASES):
 * only the entries whose lease ran out, not the entries every claim leaves in the running
 * tasks' index until VACUUM (migrations/000010_running_lease_idx.sql). With the old index of
 * the partition alone, the statement below read every claimed-and-finished task's page since
 * the last VACUUM: at 2 000 claims a second, 200 – 450 ms a pass. Both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPIRED_LEASES } from '../../src/store/sql/claim.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, makeTasks, tokenDigest } from '../support/tasks.js';

const PARTITION = 7;
const FINISHED = 3_000;

interface PlanNode {
  'Shared Hit Blocks': number;
  'Shared Read Blocks': number;
}

describe.each(sqlBackends)('expired leases on $name', ({ open }) => {
  let testDb: TestDb;
  let store: SqlTaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
    // Nothing may clean the finished tasks' entries away during the test (PGlite has no autovacuum).
    if (testDb.schema !== 'wheelhouse') await testDb.db.query('ALTER TABLE tasks SET (autovacuum_enabled = false)');
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('reads the expired leases only, however many claims finished since the last VACUUM', async () => {
    // 3 000 tasks claimed and finished: each left its running row version's index entries behind.
    const done = makeTasks(FINISHED, { partition: PARTITION, dueMs: T0, timeoutSeconds: 60 });
    await store.submit(done, T0);
    const claimed = await store.claim(
      done.map((t) => t.id),
      'worker-1',
      T0,
    );
    expect(claimed).toHaveLength(FINISHED);
    const results = claimed.map((c) => ({
      taskId: c.id,
      tokenDigest: tokenDigest(c.leaseToken),
      outcome: 'succeeded' as const,
      error: null,
      retryable: true,
    }));
    expect(await store.complete(results, T0 + 1_000, BACKOFF)).toHaveLength(FINISHED);
    // One task still running, its lease run out; one running within its lease.
    const [expired, live] = [
      makeTask({ partition: PARTITION, timeoutSeconds: 5 }),
      makeTask({ partition: PARTITION, timeoutSeconds: 600 }),
    ];
    await store.submit([expired, live], T0);
    const [held] = await store.claim([expired.id, live.id], 'worker-2', T0 + 2_000);
    expect(held).toBeDefined();
    await testDb.db.query('ANALYZE tasks');

    // The plan first: a scan of the old index that visits the dead entries marks them dead for
    // the scans after it (a bitmap scan, which the busy table's plan was, never does).
    const params = [[PARTITION], T0 + 20_000, 500];
    const { rows } = await testDb.db.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] | string }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${EXPIRED_LEASES}`,
      params,
    );
    const raw = rows[0]?.['QUERY PLAN'];
    const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }];
    const blocks = plan[0].Plan['Shared Hit Blocks'] + plan[0].Plan['Shared Read Blocks'];
    // A few index pages and the expired task's heap page (6 – 9 blocks); the finished tasks' pages
    // are what it read when the expiry was not in the index's key (186 – 189).
    expect(blocks).toBeLessThan(25);
    expect((await store.expiredLeases([PARTITION], T0 + 20_000, 500)).map((l) => l.taskId)).toEqual([expired.id]);
  });
});
