import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_EVENTS } from '../../src/lib/events.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { DueEntry } from '../../src/domain/model.js';
import { Dispatcher, MAX_CLOCK_SKEW_MS } from '../../src/services/dispatcher.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0, makeTask } from '../support/tasks.js';
import { leaseActors } from '../support/lease-actors.js';

/**
 * A ready entry fired by a wheel whose clock runs further ahead than the claim tolerates is
 * refused by the claim — and it may be the task's only entry: dropping it would leave the task
 * pending with nothing to fire it. The dispatcher puts it back when it falls due on its own
 * clock. A stale entry (its task moved to another due time) is still dropped.
 */
describe.each(sqlBackends)('Dispatcher and entries fired early, on $name', ({ open }) => {
  let testDb: TestDb;
  beforeAll(async () => {
    testDb = await open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  function setup() {
    const clock = new FakeClock(T0);
    const tasks = new SqlTaskStore(testDb.db);
    const ready = new MemoryReadyQueue();
    const { leases } = leaseActors(clock, tasks);
    const dispatcher = new Dispatcher({ tasks, ready, clock, leases, pollMaxWaitMs: 0, events: NO_EVENTS });
    const poll = (type: string) => dispatcher.poll({ workerId: 'w', taskTypes: [type], maxTasks: 10, waitMs: 0 });
    return { clock, tasks, ready, dispatcher, poll };
  }

  it('puts back the only entry of a task that is not yet due here, and claims it once due', async () => {
    const { clock, tasks, ready, poll } = setup();
    const aheadMs = MAX_CLOCK_SKEW_MS + 2_000;
    const task = makeTask({ taskType: 'early.only', dueMs: T0 + aheadMs });
    await tasks.submit([task], T0);
    const entry: DueEntry = { taskId: task.id, taskType: task.taskType, priority: task.priority, dueMs: task.dueMs };
    await ready.push([entry]);
    expect(await poll('early.only')).toEqual([]);
    await clock.advance(aheadMs - 1);
    expect(await poll('early.only')).toEqual([]);
    await clock.advance(1);
    const claimed = await poll('early.only');
    expect(claimed.map((t) => [t.id, t.attempt])).toEqual([[task.id, 1]]);
  });

  it('drops an entry whose task is due at another time (a stale one)', async () => {
    const { clock, tasks, ready, poll } = setup();
    const task = makeTask({ taskType: 'early.stale', dueMs: T0 + 10_000 });
    await tasks.submit([task], T0);
    const stale: DueEntry = { taskId: task.id, taskType: task.taskType, priority: task.priority, dueMs: T0 + 3_000 };
    await ready.push([stale]);
    expect(await poll('early.stale')).toEqual([]);
    await clock.advance(3_000);
    expect(await ready.held([stale])).toEqual(new Set());
    expect(await ready.backlog()).toBe(0);
  });

  it('forgets the entries waiting to be put back when it stops (they stay in flight for requeueStale)', async () => {
    const { clock, tasks, ready, dispatcher, poll } = setup();
    const task = makeTask({ taskType: 'early.stop', dueMs: T0 + 5_000 });
    await tasks.submit([task], T0);
    const entry: DueEntry = { taskId: task.id, taskType: task.taskType, priority: task.priority, dueMs: task.dueMs };
    await ready.push([entry]);
    expect(await poll('early.stop')).toEqual([]);
    dispatcher.stop();
    await clock.advance(5_000);
    expect(await ready.backlog()).toBe(0);
    expect(await ready.held([entry])).toEqual(new Set([task.id]));
    expect(await ready.requeueStale(clock.now() + 1)).toBe(1);
  });
});
