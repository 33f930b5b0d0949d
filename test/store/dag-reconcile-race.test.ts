/**
 * DagStore: reconciles of one blocked task that really run at the same time count each edge
 * once (the `AND NOT d.satisfied` guard of `flipped` in src/store/sql/dag.ts, re-checked on
 * the row each run waited for). The rest of reconcile is in dag-store.conformance.test.ts.
 *
 * Starting several reconciles with `Promise.all` does not make them race: the statement
 * takes well under a millisecond, and the first one usually commits before the next is on
 * the server (the guard's removal survived that test 5 runs of 5). So on Postgres the test
 * holds the task's edges locked in a transaction of its own until every reconcile, each on
 * a connection of its own, has taken its snapshot and waits for that lock; then it lets go.
 * They go on one at a time, each after the previous committed, every one with a snapshot
 * from before any of them wrote: the interleaving the guard exists for.
 *
 * PGlite has one connection: its reconciles run one after another and cannot race. There
 * the same test checks only that repeated reconciles count each edge once.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlDagStore } from '../../src/store/dag-store.js';
import type { DagOutcome, DagStore } from '../../src/store/dag-types.js';
import { openPostgres } from '../../src/store/db.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { TaskStore } from '../../src/store/types.js';
import { eventually } from '../support/waits.js';
import { TEST_POSTGRES_URL, sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, tokenDigest } from '../support/tasks.js';

/** Reconciles started at once in each round. */
const RACERS = 6;
/** Rounds on fresh tasks: each one a separate chance for a double count to show. */
const ROUNDS = 3;

describe.each(sqlBackends)('DagStore reconcile under concurrency on $name', ({ open }) => {
  let testDb: TestDb;
  let tasks: TaskStore;
  let dags: DagStore;

  beforeAll(async () => {
    testDb = await open();
    tasks = new SqlTaskStore(testDb.db);
    dags = new SqlDagStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Claims `id` and reports success at `atMs`. */
  const succeed = async (id: string, atMs: number): Promise<void> => {
    const [claimed] = await tasks.claim([id], 'w-race', atMs);
    if (claimed === undefined) throw new Error(`could not claim ${id}`);
    const [transition] = await tasks.complete(
      [
        {
          taskId: id,
          tokenDigest: tokenDigest(claimed.leaseToken),
          outcome: 'succeeded',
          error: null,
          retryable: false,
        },
      ],
      atMs + 10,
      BACKOFF,
    );
    if (transition === undefined) throw new Error(`could not complete ${id}`);
  };

  /**
   * `RACERS` reconciles of `taskId` at `nowMs`, each one's answer. On Postgres they start
   * together behind a lock on the task's edges (see the header); on PGlite, one by one.
   */
  const reconcileAtOnce = async (taskId: string, nowMs: number): Promise<DagOutcome[][]> => {
    if (testDb.db.driver !== 'postgres')
      return Promise.all(Array.from({ length: RACERS }, () => dags.reconcile([taskId], nowMs)));
    // A pool of its own, one connection per racer, named so that pg_stat_activity shows its sessions.
    const name = `dag_race_${randomBytes(4).toString('hex')}`;
    const url = new URL(TEST_POSTGRES_URL);
    url.searchParams.set('application_name', name);
    const racers = openPostgres({ url: url.toString(), schema: testDb.schema, poolSize: RACERS });
    const runs: Promise<DagOutcome[]>[] = [];
    try {
      await testDb.db.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM task_dependencies WHERE task_id = $1 FOR UPDATE', [taskId]);
        const store = new SqlDagStore(racers);
        for (let i = 0; i < RACERS; i++) runs.push(store.reconcile([taskId], nowMs));
        await eventually(
          async () => {
            const { rows } = await testDb.db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
              [name],
            );
            return rows[0]!.n === RACERS ? true : undefined;
          },
          10_000,
          `${RACERS} reconciles waiting on the edges' lock`,
        );
      });
      return await Promise.all(runs);
    } finally {
      await Promise.allSettled(runs);
      await racers.close();
    }
  };

  it('counts each edge once when reconciles of one task run at the same time', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const preds = [makeTask(), makeTask(), makeTask()];
      await tasks.submit(preds, T0);
      const waiter = makeTask({ dependsOn: preds.map((p) => p.id) });
      await tasks.submit([waiter], T0);
      await succeed(preds[0]!.id, T0 + 1000);
      await succeed(preds[1]!.id, T0 + 1000);

      // Two of three edges satisfied: whoever flips them counts them, nobody counts them again.
      const outcomes = (await reconcileAtOnce(waiter.id, T0 + 3000)).flat();
      expect(outcomes.length, `round ${round}`).toBeGreaterThanOrEqual(1);
      expect(outcomes.length, `round ${round}`).toBeLessThanOrEqual(2);
      expect(
        outcomes.every((o) => o.status === 'blocked'),
        `round ${round}: ${JSON.stringify(outcomes)}`,
      ).toBe(true);
      expect(await tasks.get(waiter.id), `round ${round}`).toMatchObject({ status: 'blocked', depsSatisfied: 2 });

      // The last edge: exactly one run releases the task.
      await succeed(preds[2]!.id, T0 + 4000);
      const last = (await reconcileAtOnce(waiter.id, T0 + 5000)).flat();
      expect(
        last.map((o) => o.status),
        `round ${round}`,
      ).toEqual(['pending']);
      expect(await tasks.get(waiter.id), `round ${round}`).toMatchObject({
        status: 'pending',
        depsSatisfied: 3,
        dueMs: T0 + 5000,
      });
    }
  });
});
