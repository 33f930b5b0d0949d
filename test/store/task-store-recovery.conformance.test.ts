/**
 * TaskStore conformance, part 3: what the recovery paths read and write — handing back
 * claims no worker received, the safety net's look at expired leases, the pending check of
 * the net and the claim. Runs against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ClaimedTask, NewTask } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, expectLegal, makeTask, makeTasks, tokenDigest } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: recovery', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function running(overrides: Partial<NewTask> = {}, atMs = T0): Promise<ClaimedTask> {
    const task = makeTask(overrides);
    await store.submit([task], T0);
    const [claimed] = await store.claim([task.id], 'worker-1', atMs);
    if (claimed === undefined) throw new Error('claim failed');
    return claimed;
  }

  describe('release', () => {
    it('puts a claim back as if it had not happened: pending, attempt not counted, due time kept, token dead', async () => {
      const c = await running({ dueMs: T0 - 5_000 }, T0);
      expectLegal('running', 'pending');
      const released = await store.release([{ taskId: c.id, version: c.version }], T0 + 10);
      expect(released).toEqual([{ taskId: c.id, taskType: 'test.task', priority: 5, dueMs: T0 - 5_000 }]);
      expect(await store.get(c.id)).toMatchObject({
        status: 'pending',
        attempts: 0,
        version: c.version + 1,
        leaseExpiresMs: null,
        startedMs: null,
      });
      expect(await store.heartbeat(c.id, tokenDigest(c.leaseToken), T0 + 20)).toBeNull();
      expect(await store.history(c.id, 10)).toEqual([]);
      const [again] = await store.claim([c.id], 'worker-2', T0 + 30);
      expect(again).toMatchObject({ attempt: 1, version: c.version + 2 });
    });

    it('releases nothing at a version no longer held, or of a task whose cancel was requested', async () => {
      const moved = await running();
      await store.complete(
        [
          {
            taskId: moved.id,
            tokenDigest: tokenDigest(moved.leaseToken),
            outcome: 'succeeded',
            error: null,
            retryable: true,
          },
        ],
        T0 + 5,
        BACKOFF,
      );
      const cancelling = await running();
      expect((await store.cancel(cancelling.id, T0 + 5)).kind).toBe('cancel_requested');
      const fine = await running();
      const released = await store.release(
        [
          { taskId: moved.id, version: moved.version },
          { taskId: cancelling.id, version: cancelling.version },
          { taskId: fine.id, version: fine.version },
          { taskId: 'not-a-uuid', version: 1 },
        ],
        T0 + 10,
      );
      expect(released.map((e) => e.taskId)).toEqual([fine.id]);
      expect((await store.get(moved.id))?.status).toBe('succeeded');
      expect((await store.get(cancelling.id))?.status).toBe('running');
      expect(await store.release([], T0)).toEqual([]);
    });
  });

  describe('expiredLeases', () => {
    it('lists the running tasks of the partitions whose lease ran out before the bound, oldest first', async () => {
      // Partitions of this test alone (makeTask picks below 64): the other tests' running tasks
      // stay out of its listing whatever their leases.
      const partition = 65;
      const a = await running({ partition, timeoutSeconds: 10 }, T0);
      const b = await running({ partition, timeoutSeconds: 5 }, T0);
      const live = await running({ partition, timeoutSeconds: 60 }, T0);
      const elsewhere = await running({ partition: 66, timeoutSeconds: 5 }, T0);
      const found = await store.expiredLeases([partition], T0 + 20_000, 10);
      expect(found).toEqual([
        { taskId: b.id, version: b.version, leaseExpiresMs: T0 + 5_000 },
        { taskId: a.id, version: a.version, leaseExpiresMs: T0 + 10_000 },
      ]);
      expect(found.map((f) => f.taskId)).not.toContain(live.id);
      expect((await store.expiredLeases([partition, 66], T0 + 20_000, 10)).map((f) => f.taskId)).toContain(
        elsewhere.id,
      );
      expect(await store.expiredLeases([partition], T0 + 20_000, 1)).toHaveLength(1);
      expect(await store.expiredLeases([partition], T0 + 5_000, 10)).toEqual([]);
      expect(await store.expiredLeases([], T0 + 20_000, 10)).toEqual([]);
    });
  });

  describe('pendingDueTimes', () => {
    it('answers the pending tasks among the ids, with their due times', async () => {
      const [pending, other] = makeTasks(2, { dueMs: T0 + 7 });
      await store.submit([pending!, other!], T0);
      await store.claim([other!.id], 'w', T0 + 10);
      const due = await store.pendingDueTimes([pending!.id, other!.id, 'nope']);
      expect([...due]).toEqual([[pending!.id, T0 + 7]]);
      expect(await store.pendingDueTimes([])).toEqual(new Map());
    });
  });
});
