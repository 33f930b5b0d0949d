/**
 * TaskStore conformance, listings: what bounds one page. A filter on a column without an index
 * (status, task type) walks at most `scanRows` rows of the primary key and says where to go on;
 * a page stops at `maxBytes` of JSON. Runs against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ListFilter, TaskListPage, TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0, makeTasks, uniqueType } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: list pages', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Every page of a listing, following `nextBeforeId` until it is null. */
  async function pages(filter: ListFilter): Promise<TaskListPage[]> {
    const out: TaskListPage[] = [];
    let beforeId: string | undefined;
    for (let i = 0; i < 1000; i++) {
      const page = await store.list({ ...filter, ...(beforeId === undefined ? {} : { beforeId }) }, T0);
      out.push(page);
      if (page.nextBeforeId === null) return out;
      beforeId = page.nextBeforeId;
    }
    throw new Error('the listing did not end');
  }

  it('walks at most scanRows rows for a filter on an unindexed column, and says where to go on', async () => {
    const rare = uniqueType('rare');
    const common = uniqueType('common');
    const wanted = makeTasks(3, { taskType: rare });
    await store.submit(wanted, T0);
    // Newer than the rare ones: a page of the rare type must walk past them first.
    await store.submit(makeTasks(2500, { taskType: common }), T0);

    const first = await store.list({ taskType: rare, limit: 10, scanRows: 1000 }, T0);
    expect(first.tasks, 'the first 1 000 rows walked hold none of them').toEqual([]);
    expect(first.nextBeforeId, 'an empty page that goes on').not.toBeNull();

    const all = await pages({ taskType: rare, limit: 10, scanRows: 1000 });
    expect(all.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(wanted.map((t) => t.id).reverse());
    expect(all.length, '2 500 newer rows, 1 000 a page, then the rare ones').toBeGreaterThanOrEqual(3);

    // The same through the status filter, which has no index of its own either.
    const byStatus = await store.list({ taskType: rare, status: 'ready', limit: 10, scanRows: 1000 }, T0);
    expect(byStatus.tasks).toEqual([]);
    expect(byStatus.nextBeforeId).toBe(first.nextBeforeId);
  });

  it('ends a filtered listing with null once the walk reaches the oldest row', async () => {
    const none = uniqueType('none');
    const all = await pages({ taskType: none, limit: 10, scanRows: 1000 });
    expect(all.flatMap((p) => p.tasks)).toEqual([]);
    expect(all[all.length - 1]!.nextBeforeId).toBeNull();
  });

  it('stops a page at maxBytes, keeping at least one task, and goes on from there', async () => {
    const big = uniqueType('big');
    const tasks = makeTasks(5, { taskType: big, payload: { blob: 'x'.repeat(4000) } });
    await store.submit(tasks, T0);

    const first = await store.list({ taskType: big, limit: 10, maxBytes: 12_000 }, T0);
    // Each task counts its payload (4 000+ bytes) and 1 KiB for the rest: two fit in 12 000.
    expect(first.tasks.map((t) => t.id)).toEqual(
      tasks
        .map((t) => t.id)
        .reverse()
        .slice(0, 2),
    );
    expect(first.nextBeforeId).toBe(first.tasks[1]!.id);

    const one = await store.list({ taskType: big, limit: 10, maxBytes: 1000 }, T0);
    expect(one.tasks, 'one task larger than the bound is a page of its own').toHaveLength(1);
    expect(one.nextBeforeId).toBe(one.tasks[0]!.id);

    const all = await pages({ taskType: big, limit: 10, maxBytes: 12_000 });
    expect(all.flatMap((p) => p.tasks.map((t) => t.id))).toEqual(tasks.map((t) => t.id).reverse());
    for (const page of all) expect(page.tasks.length).toBeLessThanOrEqual(2);
  });

  it('without bounds, answers the page and the next start as before', async () => {
    const plain = uniqueType('plain');
    const tasks = makeTasks(3, { taskType: plain });
    await store.submit(tasks, T0);
    const page = await store.list({ taskType: plain, limit: 2 }, T0);
    expect(page.tasks).toHaveLength(2);
    expect(page.nextBeforeId).toBe(page.tasks[1]!.id);
    const last = await store.list({ taskType: plain, limit: 2, beforeId: page.nextBeforeId! }, T0);
    expect(last.tasks).toHaveLength(1);
    expect(last.nextBeforeId).toBeNull();
  });
});
