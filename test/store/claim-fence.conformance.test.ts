/**
 * The fenced claim of flow control (docs/decisions/0023-flow-control.md): a task that holds
 * limit grants is claimed only while every grant's epoch is still its key's row in
 * `actor_snapshots`. A new activation of a key takes the row over (epoch + 1) and then reads
 * the key's running tasks; a grant of the old activation can never start a task after that —
 * the over-admission after a failover that a limit of 1 must never show. Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0, makeTask } from '../support/tasks.js';

describe.each(sqlBackends)('the fenced claim on $name', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;
  let snapshots: SqlSnapshotStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
    snapshots = new SqlSnapshotStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('claims a task whose every grant carries its key’s current epoch', async () => {
    const a = await snapshots.acquire('limit', 'fence-a', 'n1', T0);
    const b = await snapshots.acquire('limit', 'fence-b', 'n1', T0);
    const t = makeTask({});
    await store.submit([t], T0);
    const claimed = await store.claim([t.id], 'w', T0 + 1, [
      { taskId: t.id, key: 'fence-a', epoch: a.epoch },
      { taskId: t.id, key: 'fence-b', epoch: b.epoch },
    ]);
    expect(claimed.map((c) => c.id)).toEqual([t.id]);
  });

  it('refuses a task one of whose grants is from an activation that is gone', async () => {
    const old = await snapshots.acquire('limit', 'fence-c', 'n1', T0);
    const other = await snapshots.acquire('limit', 'fence-d', 'n1', T0);
    await snapshots.acquire('limit', 'fence-c', 'n2', T0 + 1); // the key moved: epoch + 1
    const refused = makeTask({});
    const free = makeTask({});
    await store.submit([refused, free], T0);
    const claimed = await store.claim([refused.id, free.id], 'w', T0 + 2, [
      { taskId: refused.id, key: 'fence-c', epoch: old.epoch },
      { taskId: refused.id, key: 'fence-d', epoch: other.epoch },
    ]);
    // The task without grants is claimed as ever; the one with a stale grant stays pending.
    expect(claimed.map((c) => c.id)).toEqual([free.id]);
    expect((await store.get(refused.id))?.status).toBe('pending');
  });

  it('refuses a grant of a key that never had an activation', async () => {
    const t = makeTask({});
    await store.submit([t], T0);
    expect(await store.claim([t.id], 'w', T0 + 1, [{ taskId: t.id, key: 'fence-none', epoch: 1 }])).toEqual([]);
  });

  it('claims for several workers with grants', async () => {
    const k = await snapshots.acquire('limit', 'fence-e', 'n1', T0);
    const t1 = makeTask({});
    const t2 = makeTask({});
    await store.submit([t1, t2], T0);
    const claimed = await store.claimForWorkers([t1.id, t2.id], ['w1', 'w2'], T0 + 1, [
      { taskId: t1.id, key: 'fence-e', epoch: k.epoch },
      { taskId: t2.id, key: 'fence-e', epoch: k.epoch - 1 },
    ]);
    expect(claimed.map((c) => c.id)).toEqual([t1.id]);
  });

  it('refuses only the tasks of a stale pair among many tasks sharing their keys', async () => {
    const live = await snapshots.acquire('limit', 'fence-f', 'n1', T0);
    const gone = await snapshots.acquire('limit', 'fence-g', 'n1', T0);
    await snapshots.acquire('limit', 'fence-g', 'n2', T0 + 1);
    const tasks = Array.from({ length: 6 }, () => makeTask({}));
    await store.submit(tasks, T0);
    const [stale1, stale2, ...fresh] = tasks;
    const grants = [
      ...tasks.map((t) => ({ taskId: t.id, key: 'fence-f', epoch: live.epoch })),
      { taskId: stale1!.id.toUpperCase(), key: 'fence-g', epoch: gone.epoch },
      { taskId: stale2!.id, key: 'fence-g', epoch: gone.epoch },
      // A grant of a task this claim does not take changes nothing.
      { taskId: makeTask({}).id, key: 'fence-g', epoch: gone.epoch },
    ];
    const claimed = await store.claim(
      tasks.map((t) => t.id),
      'w',
      T0 + 2,
      grants,
    );
    expect(claimed.map((c) => c.id).sort()).toEqual(fresh.map((t) => t.id).sort());
    expect((await store.get(stale1!.id))?.status).toBe('pending');
  });
});
