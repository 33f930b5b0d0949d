/**
 * Retention against a retry that commits mid-delete: the sweep's DELETE re-tests the status
 * and the completion time on the row it locks (src/store/sql/retention.ts, `removed`), so a
 * task retried between the sweep's read and its delete — pending again — stays.
 *
 * The window is real only under READ COMMITTED with two connections: the sweep's statement
 * reads the task as failed from its snapshot, then waits for the row lock the retry holds;
 * when the retry commits, the DELETE finds a newer row and checks it again. Sequential calls
 * never open it, so the test forces it: the retry runs in a transaction of its own and stays
 * uncommitted until the sweep, on a connection of its own, is seen waiting for that row's
 * lock; then it commits.
 *
 * Postgres only: PGlite has one connection, so a sweep and a retry there run one after the
 * other and cannot race (task-store-retention.conformance.test.ts covers the rest on both).
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Db } from '../../src/store/db.js';
import { retryTask } from '../../src/store/sql/retry.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { FinishedBatch, TaskStore } from '../../src/store/types.js';
import { TEST_POSTGRES_URL, createTestSchema, type TestDb } from '../support/postgres.js';
import { eventually } from '../support/waits.js';
import { BACKOFF, T0, makeTask, tokenDigest } from '../support/tasks.js';

const DAY_MS = 86_400_000;
const HORIZON = T0 + 7 * DAY_MS;
/** A partition of this test's tasks only. */
const PARTITION = 7;

describe('retention against a retry that commits mid-delete (postgres)', () => {
  let testDb: TestDb;
  let tasks: TaskStore;

  beforeAll(async () => {
    testDb = await createTestSchema();
    tasks = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** A task of the partition that failed for good at `T0 + 10`. */
  const failedTask = async (): Promise<string> => {
    const task = makeTask({ partition: PARTITION, maxRetries: 0 });
    await tasks.submit([task], T0);
    const [claimed] = await tasks.claim([task.id], 'w-race', T0);
    if (claimed === undefined) throw new Error(`could not claim ${task.id}`);
    await tasks.complete(
      [
        {
          taskId: task.id,
          tokenDigest: tokenDigest(claimed.leaseToken),
          outcome: 'failed',
          error: 'boom',
          retryable: false,
        },
      ],
      T0 + 10,
      BACKOFF,
    );
    expect(await tasks.get(task.id)).toMatchObject({ status: 'failed', completedMs: T0 + 10 });
    return task.id;
  };

  it('keeps a task whose retry commits while the sweep waits to delete it, and removes the rest', async () => {
    const retried = await failedTask();
    const other = await failedTask();

    // The sweep's connection, named so that pg_stat_activity shows its session.
    const name = `retention_race_${randomBytes(4).toString('hex')}`;
    const url = new URL(TEST_POSTGRES_URL);
    url.searchParams.set('application_name', name);
    const sweeper = openPostgres({ url: url.toString(), schema: testDb.schema, poolSize: 1 });
    let sweep: Promise<FinishedBatch> | undefined;
    try {
      await testDb.db.transaction(async (tx) => {
        // The retry, uncommitted: the row is locked and still failed to every other snapshot.
        const retry = await retryTask(tx as Db, retried, HORIZON + 1);
        expect(retry.kind).toBe('retried');
        sweep = new SqlTaskStore(sweeper).removeFinished({
          partition: PARTITION,
          horizonMs: HORIZON,
          nowMs: HORIZON,
          after: null,
          limit: 100,
        });
        await eventually(
          async () => {
            const { rows } = await testDb.db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
              [name],
            );
            return rows[0]!.n === 1 ? true : undefined;
          },
          10_000,
          "the sweep waiting on the retried task's lock",
        );
      });
      // Both were candidates from the sweep's snapshot; only the one still failed went.
      expect(await sweep).toMatchObject({ examined: 2, removed: 1 });
    } finally {
      await sweep?.catch(() => undefined);
      await sweeper.close();
    }
    expect(await tasks.get(retried)).toMatchObject({ status: 'pending', completedMs: null });
    expect(await tasks.get(other)).toBeNull();
  });
});
