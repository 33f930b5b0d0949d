/**
 * The reads every wheel partition makes as it activates — its first page of pending tasks and
 * its running tasks — asked by many partitions in one turn (64 at a node's start) go to the
 * database as one statement each, and each asker gets what it would have read alone. Runs
 * against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/db.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0, makeTask } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: reads of partitions activating together', ({ open }) => {
  let testDb: TestDb;

  beforeAll(async () => {
    testDb = await open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** The database, counting the statements run under each name. */
  function counting(db: Db): { db: Db; counts: Map<string, number> } {
    const counts = new Map<string, number>();
    const query: Db['query'] = (text, params, statement) => {
      const name = statement ?? 'unnamed';
      counts.set(name, (counts.get(name) ?? 0) + 1);
      return db.query(text, params, statement);
    };
    return { db: Object.assign(Object.create(db) as Db, { query }), counts };
  }

  it('answers the first pages asked in one turn in one statement, each with its own bound and limit', async () => {
    const store = new SqlTaskStore(testDb.db);
    const partitions = Array.from({ length: 16 }, (_, i) => 700 + i);
    // Partition p holds p % 5 tasks, due a second apart, plus one it must not see (blocked).
    const tasks = partitions.flatMap((p) =>
      Array.from({ length: p % 5 }, (_, i) => makeTask({ partition: p, dueMs: T0 + (i + 1) * 1000 })),
    );
    const blocked = partitions.map((p) => makeTask({ partition: p, status: 'blocked', dueMs: T0 + 500 }));
    await store.submit([...tasks, ...blocked], T0);
    const asks = partitions.map((partition, i) => ({ partition, toMs: T0 + (i % 4) * 1000 + 1, limit: 1 + (i % 3) }));
    // The same partition twice in one turn, with another bound: answered apart.
    asks.push({ partition: 704, toMs: T0 + 10_000, limit: 10 }, { partition: 704, toMs: T0 + 10_000, limit: 0 });

    const alone = [];
    for (const a of asks) alone.push(await store.pendingInPartition(a.partition, null, a.toMs, a.limit));
    const { db, counts } = counting(testDb.db);
    const batched = new SqlTaskStore(db);
    const together = await Promise.all(asks.map((a) => batched.pendingInPartition(a.partition, null, a.toMs, a.limit)));

    expect(together).toEqual(alone);
    expect(alone.flat().length).toBeGreaterThan(10);
    expect(together.at(-2)!.map((e) => e.dueMs)).toEqual([T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000]);
    expect(counts.get('wh_pending_in_partition_first_many')).toBe(1);
    expect(counts.get('wh_pending_in_partition')).toBeUndefined();
  });

  it('answers the running tasks asked partition by partition in one turn in one statement', async () => {
    const store = new SqlTaskStore(testDb.db);
    const partitions = [800, 801, 802, 803];
    const tasks = partitions.flatMap((p) => Array.from({ length: p - 799 }, () => makeTask({ partition: p })));
    await store.submit(tasks, T0);
    const claimed = await store.claim(
      tasks.filter((_, i) => i % 2 === 0).map((t) => t.id),
      'w',
      T0,
    );
    expect(claimed.length).toBeGreaterThan(2);

    const alone = [];
    for (const p of partitions) alone.push(await store.runningInPartitions([p]));
    const { db, counts } = counting(testDb.db);
    const batched = new SqlTaskStore(db);
    const together = await Promise.all(partitions.map((p) => batched.runningInPartitions([p])));

    const byId = (list: { taskId: string }[]) => [...list].sort((a, b) => a.taskId.localeCompare(b.taskId));
    expect(together.map(byId)).toEqual(alone.map(byId));
    expect(
      together
        .flat()
        .map((r) => r.taskId)
        .sort(),
    ).toEqual(claimed.map((c) => c.id).sort());
    expect(counts.get('wh_running_in_partitions_by_part')).toBe(1);
    expect(counts.get('wh_running_in_partitions')).toBeUndefined();
  });
});
