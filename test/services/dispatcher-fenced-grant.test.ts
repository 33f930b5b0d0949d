import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_EVENTS } from '../../src/lib/events.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import type { DueEntry } from '../../src/domain/model.js';
import { Dispatcher } from '../../src/services/dispatcher.js';
import type { Admission } from '../../src/services/limit-gate.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0, makeTask } from '../support/tasks.js';
import { leaseActors } from '../support/lease-actors.js';

/**
 * A grant whose key has a newer activation than the one that granted it is refused by the
 * claim (docs/decisions/0023-flow-control.md), and the task is offered to its key again. The
 * key that answers may be that same stale activation (nemesis run D: a node back in the ring
 * after a cut from Redis kept its own): the dispatcher also asks it to check it owns itself,
 * or it grants the task under its old epoch for ever (test/actors/limit-key-verify.test.ts).
 */
describe.each(sqlBackends)('Dispatcher and a grant of a fenced limit key, on $name', ({ open }) => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('offers the task to its key again and asks the key to verify its ownership', async () => {
    const clock = new FakeClock(T0);
    const tasks = new SqlTaskStore(testDb.db);
    const ready = new MemoryReadyQueue();
    const { leases } = leaseActors(clock, tasks);
    const key = 'fence:1';
    const snapshots = new SqlSnapshotStore(testDb.db);
    const stale = await snapshots.acquire('limit', key, 'n1', T0);
    await snapshots.acquire('limit', key, 'n2', T0); // another node's activation: epoch + 1
    const task = makeTask({ taskType: 'fence.t', limits: [key] });
    await tasks.submit([task], T0);
    const entry: DueEntry = { taskId: task.id, taskType: task.taskType, priority: 5, dueMs: T0, limits: [key] };
    const calls = { verified: [] as string[], offered: [] as string[], givenBack: [] as string[] };
    const gate = {
      admit: async (entries: readonly DueEntry[]): Promise<Admission> => ({
        claimable: [...entries],
        grants: entries.map((e) => ({ taskId: e.taskId, key, epoch: stale.epoch })),
        parked: [],
        unanswered: [],
        duplicates: [],
        grantedAtMs: T0,
      }),
      giveBackGrants: (grants: readonly { taskId: string }[]) => calls.givenBack.push(...grants.map((g) => g.taskId)),
      offer: (entries: readonly DueEntry[]) => calls.offered.push(...entries.map((e) => e.taskId)),
      verify: (keys: Iterable<string>) => calls.verified.push(...keys),
    };
    const dispatcher = new Dispatcher({ tasks, ready, clock, leases, pollMaxWaitMs: 0, events: NO_EVENTS, gate });
    await ready.push([entry]);
    const claimed = await dispatcher.poll({ workerId: 'w', taskTypes: ['fence.t'], maxTasks: 10, waitMs: 0 });
    expect(claimed).toEqual([]);
    expect(calls.givenBack).toEqual([task.id]);
    expect(calls.offered).toEqual([task.id]);
    expect(calls.verified).toEqual([key]);
    dispatcher.stop();
  });
});
