/**
 * TaskStore conformance, start deadlines: `start_by` follows the due time (written at insert by
 * the trigger of migrations/000011_deadlines.sql, by each statement that moves it after: 000025), the claim refuses a task past it, `expireUnstarted` ends
 * such tasks `expired` (final: their dependents hear of it, history shows the attempt that
 * never started, retention removes them, a retry runs them again). Runs against Postgres and
 * PGlite (one SQL for both).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { NOT_STARTED } from '../../src/domain/attempt-errors.js';
import type { Completion } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, expectLegal, makeTask, tokenDigest } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: start deadlines', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;
  /** Each test uses its own partition, so one test's expiries never show in another's. */
  let partition = 0;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const task = (overrides: Parameters<typeof makeTask>[0] = {}) =>
    makeTask({ partition, startDeadlineSeconds: 10, ...overrides });

  it('keeps start_by at the due time + the start deadline as the due time moves', async () => {
    partition = 1;
    const t = task({ dueMs: T0 + 5000, maxRetries: 2 });
    const plain = task({ startDeadlineSeconds: null });
    await store.submit([t, plain], T0);
    expect(await store.get(t.id)).toMatchObject({ startDeadlineSeconds: 10, startByMs: T0 + 15_000 });
    expect(await store.get(plain.id)).toMatchObject({ startDeadlineSeconds: null, startByMs: null });

    // A failed attempt's retry moves the due time by the backoff; start_by moves with it.
    const [c] = await store.claim([t.id], 'w', T0 + 6000);
    const fail: Completion = {
      taskId: t.id,
      tokenDigest: tokenDigest(c!.leaseToken),
      outcome: 'failed',
      error: 'boom',
      retryable: true,
    };
    const [retried] = await store.complete([fail], T0 + 7000, BACKOFF);
    expect(retried!.status).toBe('pending');
    expect(await store.get(t.id)).toMatchObject({ startByMs: retried!.requeued!.dueMs + 10_000 });
  });

  it('moves start_by with the due time of a retry after an expired lease and of a debounced merge', async () => {
    partition = 9;
    // Every update of a task passes a due time it moves on to start_by itself (no row trigger,
    // migrations/000025_start_by_without_trigger.sql).
    const t = task({ maxRetries: 2, timeoutSeconds: 5 });
    await store.submit([t], T0);
    const [c] = await store.claim([t.id], 'w', T0 + 1000);
    const expired = await store.expireLease(t.id, c!.version, T0 + 7000, BACKOFF);
    expect(expired!.status).toBe('pending');
    expect(expired!.requeued!.dueMs).toBeGreaterThan(T0 + 7000);
    expect(await store.get(t.id)).toMatchObject({ startByMs: expired!.requeued!.dueMs + 10_000 });

    const debounce = { key: `k-${t.id}`, seconds: 5, maxWaitSeconds: 60 };
    const first = task({ taskType: 'dl.debounced', dueMs: T0 + 5000, debounce });
    await store.submit([first], T0);
    expect(await store.get(first.id)).toMatchObject({ startByMs: T0 + 15_000 });
    const second = task({ taskType: 'dl.debounced', dueMs: T0 + 8000, debounce });
    const [merged] = await store.submit([second], T0 + 3000);
    expect(merged).toMatchObject({ debounced: true, task: { id: first.id } });
    expect(await store.get(first.id)).toMatchObject({ dueMs: T0 + 8000, startByMs: T0 + 18_000 });
  });

  it('moves start_by with the due time of a parent whose wait for its children found none unfinished', async () => {
    partition = 10;
    const parent = task({ timeoutSeconds: 30 });
    await store.submit([parent], T0);
    const [c] = await store.claim([parent.id], 'w', T0 + 1000);
    const resumed = await store.waitForChildren(
      { taskId: parent.id, tokenDigest: tokenDigest(c!.leaseToken), onChildFailure: 'fail' },
      T0 + 4000,
    );
    expect(resumed).toMatchObject({ status: 'pending', requeued: { dueMs: T0 + 4000 } });
    expect(await store.get(parent.id)).toMatchObject({ dueMs: T0 + 4000, startByMs: T0 + 14_000 });
  });

  it('claims a task before its start deadline and never after', async () => {
    partition = 2;
    const early = task();
    const late = task();
    await store.submit([early, late], T0);
    expect(await store.claim([early.id], 'w', T0 + 9999)).toHaveLength(1);
    expect(await store.claim([late.id], 'w', T0 + 10_000)).toEqual([]);
    expect((await store.get(late.id))!.status).toBe('pending');
  });

  it('ends pending tasks past their start deadline expired, in the partitions asked, at most limit each', async () => {
    partition = 3;
    const due = [task(), task({ dueMs: T0 + 1 }), task({ dueMs: T0 + 2 })];
    const notYet = task({ dueMs: T0 + 60_000 });
    const started = task();
    const elsewhere = makeTask({ partition: 4, startDeadlineSeconds: 10 });
    const noDeadline = task({ startDeadlineSeconds: null });
    await store.submit([...due, notYet, started, elsewhere, noDeadline], T0);
    await store.claim([started.id], 'w', T0 + 100);

    const first = await store.expireUnstarted([3], T0 + 11_000, 2);
    expect(first.map((t) => t.taskId)).toEqual([due[0]!.id, due[1]!.id]);
    expect(first[0]).toEqual({
      taskId: due[0]!.id,
      status: 'expired',
      version: 1,
      requeued: null,
      notifyDependents: false,
      taskType: 'test.task',
      startedMs: null,
      endedMs: T0 + 11_000,
    });
    expectLegal('pending', 'expired');
    const second = await store.expireUnstarted([3], T0 + 11_000, 10);
    expect(second.map((t) => t.taskId)).toEqual([due[2]!.id]);
    expect(await store.expireUnstarted([3], T0 + 11_000, 10)).toEqual([]);

    expect(await store.get(due[0]!.id)).toMatchObject({
      status: 'expired',
      completedMs: T0 + 11_000,
      lastError: `${NOT_STARTED} (10 s after its due time)`,
      attempts: 0,
    });
    for (const id of [notYet.id, elsewhere.id, noDeadline.id]) expect((await store.get(id))!.status).toBe('pending');
    expect((await store.get(started.id))!.status).toBe('running');
  });

  it('shows the attempt that never started in the history, and retries an expired task', async () => {
    partition = 5;
    const t = task();
    await store.submit([t], T0);
    await store.expireUnstarted([5], T0 + 20_000, 10);
    expect(await store.history(t.id, 10)).toMatchObject([
      {
        attempt: 1,
        status: 'expired',
        dueMs: T0,
        startedMs: null,
        completedMs: T0 + 20_000,
        error: `${NOT_STARTED} (10 s after its due time)`,
      },
    ]);
    const retried = await store.retry(t.id, T0 + 30_000);
    expect(retried).toMatchObject({ kind: 'retried', task: { status: 'pending', dueMs: T0 + 30_000 } });
    // Due now: a new start deadline from the new due time.
    expect(await store.get(t.id)).toMatchObject({ startByMs: T0 + 40_000 });
    expect(await store.history(t.id, 10)).toEqual([]);
    expect(await store.claim([t.id], 'w', T0 + 31_000)).toHaveLength(1);
  });

  it('writes the outbox event of an expired task that has dependents', async () => {
    partition = 6;
    const predecessor = task();
    const dependent = makeTask({ partition: 6, dependsOn: [predecessor.id] });
    await store.submit([predecessor, dependent], T0);
    const [expired] = await store.expireUnstarted([6], T0 + 10_000, 10);
    expect(expired).toMatchObject({ taskId: predecessor.id, status: 'expired', notifyDependents: true });
    const events = await testDb.db.query<{ predecessor_id: string; status: string }>(
      'SELECT predecessor_id, status FROM dag_events WHERE predecessor_id = $1',
      [predecessor.id],
    );
    expect(events.rows).toEqual([{ predecessor_id: predecessor.id, status: 'expired' }]);
  });

  it('leaves a blocked task alone: its start deadline counts from when its predecessors let it be due', async () => {
    partition = 7;
    const blocked = task({ status: 'blocked' });
    await store.submit([blocked], T0);
    expect(await store.expireUnstarted([7], T0 + 60_000, 10)).toEqual([]);
    expect((await store.get(blocked.id))!.status).toBe('blocked');
  });

  it('lets retention remove an expired task like any finished one', async () => {
    partition = 8;
    const t = task();
    await store.submit([t], T0);
    await store.expireUnstarted([8], T0 + 10_000, 10);
    const batch = await store.removeFinished({
      partition: 8,
      horizonMs: T0 + 20_000,
      nowMs: T0 + 20_000,
      after: null,
      limit: 10,
    });
    expect(batch.removed).toBe(1);
    expect(await store.get(t.id)).toBeNull();
  });
});
