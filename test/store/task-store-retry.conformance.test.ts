/**
 * TaskStore conformance, retry: a failed or cancelled task goes back to pending as a new
 * attempt, its ended attempt kept in the history; every other status is refused and left as
 * it was. Runs against Postgres and PGlite (one SQL for both).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ClaimedTask, Completion, NewTask } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, expectLegal, makeTask, nextId, tokenDigest } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: retry', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function running(overrides: Partial<NewTask> = {}): Promise<ClaimedTask> {
    const task = makeTask(overrides);
    await store.submit([task], T0);
    const [claimed] = await store.claim([task.id], 'worker-1', T0 + 10);
    if (claimed === undefined) throw new Error('claim failed');
    return claimed;
  }
  const result = (c: ClaimedTask, ok: boolean, retryable = true): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: ok ? 'succeeded' : 'failed',
    error: ok ? null : `boom ${c.attempt}`,
    retryable,
    ...(ok ? { result: { n: c.attempt } } : {}),
  });

  it('puts a failed task back to pending due now, attempts and last error kept, the ended attempt in the history', async () => {
    const c = await running({ maxRetries: 0 });
    await store.complete([result(c, false)], T0 + 100, BACKOFF);
    const failed = await store.get(c.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1, lastError: 'boom 1' });

    const retried = await store.retry(c.id, T0 + 5000);
    expect(retried.kind).toBe('retried');
    if (retried.kind !== 'retried') return;
    expectLegal('failed', retried.task.status);
    expect(retried.task).toMatchObject({
      status: 'pending',
      dueMs: T0 + 5000,
      attempts: 1,
      lastError: 'boom 1',
      completedMs: null,
      cancelRequested: false,
      result: null,
      progress: null,
      leaseExpiresMs: null,
      version: failed!.version + 1,
    });
    expect(await store.history(c.id, 10)).toEqual([
      expect.objectContaining({
        attempt: 1,
        status: 'failed',
        error: 'boom 1',
        startedMs: T0 + 10,
        completedMs: T0 + 100,
      }),
    ]);

    // The next claim is attempt 2; once it succeeds, both attempts are in the history.
    const [again] = await store.claim([c.id], 'worker-2', T0 + 5000);
    expect(again).toMatchObject({ attempt: 2 });
    await store.complete([result(again!, true)], T0 + 6000, BACKOFF);
    const history = await store.history(c.id, 10);
    expect(history.map((h) => [h.attempt, h.status, h.workerId])).toEqual([
      [2, 'succeeded', 'worker-2'],
      [1, 'failed', 'worker-1'],
    ]);
    expect(await store.get(c.id)).toMatchObject({ status: 'succeeded', attempts: 2, result: { n: 2 } });
  });

  it('retries a cancelled task: one cancelled while pending has no attempt to record', async () => {
    const task = makeTask({ dueMs: T0 + 60_000 });
    await store.submit([task], T0);
    expect((await store.cancel(task.id, T0 + 1)).kind).toBe('cancelled');
    const retried = await store.retry(task.id, T0 + 2);
    expect(retried).toMatchObject({ kind: 'retried', task: { status: 'pending', dueMs: T0 + 2, attempts: 0 } });
    expect(await store.history(task.id, 10)).toEqual([]);
  });

  it('keeps the row a lease expiry wrote, and a cancelled running attempt, without writing them twice', async () => {
    const c = await running({ maxRetries: 0, timeoutSeconds: 1 });
    await store.cancel(c.id, T0 + 20);
    const expired = await store.expireLease(c.id, c.version, T0 + 10_000, BACKOFF);
    expect(expired?.status).toBe('cancelled');
    expect((await store.retry(c.id, T0 + 20_000)).kind).toBe('retried');
    expect((await store.history(c.id, 10)).map((h) => [h.attempt, h.status])).toEqual([[1, 'cancelled']]);
  });

  it('refuses pending, running, succeeded and blocked tasks and leaves them as they were', async () => {
    const pending = makeTask();
    const blocked = makeTask({ status: 'blocked' });
    await store.submit([pending, blocked], T0);
    const run = await running();
    const done = await running();
    await store.complete([result(done, true)], T0 + 50, BACKOFF);
    for (const id of [pending.id, blocked.id, run.id, done.id]) {
      const before = await store.get(id);
      const answer = await store.retry(id, T0 + 1000);
      expect(answer).toEqual({ kind: 'refused', task: before });
      expect(await store.get(id)).toEqual(before);
    }
  });

  it('answers not_found for an unknown or malformed id', async () => {
    expect(await store.retry(nextId(), T0)).toEqual({ kind: 'not_found' });
    expect(await store.retry('not-a-uuid', T0)).toEqual({ kind: 'not_found' });
  });

  it('refuses a second retry of the same failure: the first made it pending', async () => {
    const c = await running({ maxRetries: 0 });
    await store.complete([result(c, false, false)], T0 + 100, BACKOFF);
    const [first, second] = await Promise.all([store.retry(c.id, T0 + 200), store.retry(c.id, T0 + 200)]);
    expect([first.kind, second.kind].sort()).toEqual(['refused', 'retried']);
    expect((await store.history(c.id, 10)).map((h) => h.attempt)).toEqual([1]);
  });
});
