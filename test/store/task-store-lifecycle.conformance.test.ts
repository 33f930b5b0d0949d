/**
 * TaskStore conformance, part 2: completing attempts, lease expiry, cancel, history, the
 * state machine's illegal edges and the partition scans. Runs against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nameUuid } from '../../src/lib/ids.js';
import { LEASE_EXPIRED, TIMED_OUT } from '../../src/domain/attempt-errors.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ClaimedTask, Completion, NewTask } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, expectLegal, makeTask, makeTasks, nextId, tokenDigest } from '../support/tasks.js';

describe.each(sqlBackends)('TaskStore on $name: lifecycle', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Submits one task and claims it at `atMs`. */
  async function running(overrides: Partial<NewTask> = {}, atMs = T0): Promise<ClaimedTask> {
    const task = makeTask(overrides);
    await store.submit([task], T0);
    const [claimed] = await store.claim([task.id], 'worker-1', atMs);
    if (claimed === undefined) throw new Error('claim failed');
    return claimed;
  }

  const ok = (c: ClaimedTask): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: 'succeeded',
    error: null,
    retryable: true,
  });
  const failed = (c: ClaimedTask, retryable = true): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: 'failed',
    error: `boom ${c.attempt}`,
    retryable,
  });

  describe('complete', () => {
    it('records a success: succeeded, completed, lease cleared, one execution row', async () => {
      const c = await running({}, T0 + 100);
      const [transition] = await store.complete([ok(c)], T0 + 2000, BACKOFF);
      expect(transition).toEqual({
        taskId: c.id,
        status: 'succeeded',
        version: c.version + 1,
        requeued: null,
        notifyDependents: false,
        taskType: 'test.task',
        startedMs: T0 + 100,
        endedMs: T0 + 2000,
      });
      expect(await store.get(c.id)).toMatchObject({
        status: 'succeeded',
        version: c.version + 1,
        completedMs: T0 + 2000,
        leaseExpiresMs: null,
        lastError: null,
        attempts: 1,
      });
      expect(await store.history(c.id, 10)).toEqual([
        {
          executionId: nameUuid(`${c.id}:1`),
          taskId: c.id,
          attempt: 1,
          status: 'succeeded',
          dueMs: T0,
          startedMs: T0 + 100,
          completedMs: T0 + 2000,
          workerId: 'worker-1',
          error: null,
          result: null,
        },
      ]);
    });

    it('sends a retryable failure back to pending after a bounded backoff, then runs attempt 2', async () => {
      const c1 = await running({ maxRetries: 3 });
      const now1 = T0 + 1000;
      const [t1] = await store.complete([failed(c1)], now1, BACKOFF);
      expect(t1!.status).toBe('pending');
      expect(t1!.version).toBe(c1.version + 1);
      const due1 = t1!.requeued!.dueMs;
      // attempt 1: base · 2⁰ = 1 000 ms, scaled by 0.5…1
      expect(due1).toBeGreaterThanOrEqual(now1 + 500);
      expect(due1).toBeLessThanOrEqual(now1 + 1000);
      expect(Number.isInteger(due1)).toBe(true);
      expect(t1!.requeued).toEqual({ taskId: c1.id, taskType: 'test.task', priority: 5, dueMs: due1 });
      expect(await store.get(c1.id)).toMatchObject({
        status: 'pending',
        dueMs: due1,
        lastError: 'boom 1',
        completedMs: null,
        leaseExpiresMs: null,
      });

      expect(await store.claim([c1.id], 'worker-2', due1 - 1)).toEqual([]);
      const [c2] = await store.claim([c1.id], 'worker-2', due1);
      expect(c2!.attempt).toBe(2);
      const now2 = due1 + 10;
      const [t2] = await store.complete([failed(c2!)], now2, BACKOFF);
      // attempt 2: base · 2¹ = 2 000 ms, scaled by 0.5…1
      expect(t2!.requeued!.dueMs).toBeGreaterThanOrEqual(now2 + 1000);
      expect(t2!.requeued!.dueMs).toBeLessThanOrEqual(now2 + 2000);

      const history = await store.history(c1.id, 10);
      expect(history.map((h) => [h.attempt, h.status, h.dueMs, h.workerId, h.error])).toEqual([
        [2, 'failed', due1, 'worker-2', 'boom 2'],
        [1, 'failed', T0, 'worker-1', 'boom 1'],
      ]);
    });

    it('caps the backoff at maxMs', async () => {
      let c = await running({ maxRetries: 10, timeoutSeconds: 86_400 });
      let now = T0;
      for (let attempt = 1; attempt <= 6; attempt++) {
        now += 100_000;
        const [t] = await store.complete([failed(c)], now, BACKOFF);
        const delay = t!.requeued!.dueMs - now;
        const expected = Math.min(BACKOFF.baseMs * 2 ** (attempt - 1), BACKOFF.maxMs);
        expect(delay).toBeGreaterThanOrEqual(expected * 0.5);
        expect(delay).toBeLessThanOrEqual(expected);
        now = t!.requeued!.dueMs;
        [c] = (await store.claim([c.id], 'w', now)) as [ClaimedTask];
      }
    });

    it('fails for good once the retries are spent', async () => {
      const c1 = await running({ maxRetries: 1 });
      const [t1] = await store.complete([failed(c1)], T0 + 10, BACKOFF);
      expect(t1!.status).toBe('pending');
      const [c2] = await store.claim([c1.id], 'w', T0 + 60_000);
      const [t2] = await store.complete([failed(c2!)], T0 + 60_010, BACKOFF);
      expect(t2).toEqual({
        taskId: c1.id,
        status: 'failed',
        version: c2!.version + 1,
        requeued: null,
        notifyDependents: false,
        taskType: 'test.task',
        startedMs: T0 + 60_000,
        endedMs: T0 + 60_010,
      });
      expect(await store.get(c1.id)).toMatchObject({ status: 'failed', completedMs: T0 + 60_010, lastError: 'boom 2' });
    });

    it('fails at once when the failure is not retryable', async () => {
      const c = await running({ maxRetries: 5 });
      const [t] = await store.complete([failed(c, false)], T0 + 10, BACKOFF);
      expect(t!.status).toBe('failed');
      expect((await store.history(c.id, 10))[0]!.status).toBe('failed');
    });

    it('records a cancelled task whose worker reports, success or failure', async () => {
      const a = await running();
      const b = await running();
      await store.cancel(a.id, T0 + 1);
      await store.cancel(b.id, T0 + 1);
      const transitions = await store.complete([ok(a), failed(b)], T0 + 5, BACKOFF);
      expect(transitions.map((t) => [t.taskId, t.status, t.requeued])).toEqual(
        expect.arrayContaining([
          [a.id, 'cancelled', null],
          [b.id, 'cancelled', null],
        ]),
      );
      expect((await store.history(a.id, 1))[0]!.status).toBe('cancelled');
      expect((await store.history(b.id, 1))[0]).toMatchObject({ status: 'cancelled', error: 'boom 1' });
      expect(await store.get(a.id)).toMatchObject({ status: 'cancelled', completedMs: T0 + 5 });
    });

    it('leaves out results whose lease is no longer held, and writes no execution for them', async () => {
      const c = await running();
      const other = await running();
      const othersToken = { ...ok(c), tokenDigest: tokenDigest(other.leaseToken) };
      const noLeases = { ...ok(c), tokenDigest: Buffer.alloc(32) };
      expect(await store.complete([othersToken, noLeases, ok({ ...c, id: nextId() })], T0 + 5, BACKOFF)).toEqual([]);
      expect((await store.get(c.id))!.status).toBe('running');
      expect(await store.history(c.id, 10)).toHaveLength(1); // only the running attempt
      // The lease holder still can.
      expect(await store.complete([ok(c)], T0 + 6, BACKOFF)).toHaveLength(1);
    });

    it('completes a large batch in one call', async () => {
      const tasks = makeTasks(600);
      await store.submit(tasks, T0);
      const claimed = await store.claim(
        tasks.map((t) => t.id),
        'w',
        T0,
      );
      expect(claimed).toHaveLength(600);
      const transitions = await store.complete(
        claimed.map((c, i) => (i % 2 === 0 ? ok(c) : failed(c))),
        T0 + 1,
        BACKOFF,
      );
      expect(transitions.filter((t) => t.status === 'succeeded')).toHaveLength(300);
      expect(transitions.filter((t) => t.status === 'pending')).toHaveLength(300);
    });
  });

  describe('expireLease', () => {
    it('does nothing before the lease runs out', async () => {
      const c = await running({ timeoutSeconds: 30 });
      expect(await store.expireLease(c.id, c.version, c.leaseExpiresMs - 1, BACKOFF)).toBeNull();
      expect((await store.get(c.id))!.status).toBe('running');
    });

    it('puts a task whose deadline came back to pending with a backoff; the next claim is attempt 2', async () => {
      const c = await running({ timeoutSeconds: 30 });
      const now = c.leaseExpiresMs;
      expect(c.deadlineMs).toBe(now);
      const t = await store.expireLease(c.id, c.version, now, BACKOFF);
      expect(t).toMatchObject({ taskId: c.id, status: 'pending', version: c.version + 1 });
      // The attempt that ran out: for the run-time histogram.
      expect(t).toMatchObject({ taskType: 'test.task', startedMs: T0, endedMs: now });
      expect(t!.requeued!.dueMs).toBeGreaterThanOrEqual(now + 500);
      expect(t!.requeued!.dueMs).toBeLessThanOrEqual(now + 1000);
      expect(await store.get(c.id)).toMatchObject({
        status: 'pending',
        lastError: TIMED_OUT,
        leaseExpiresMs: null,
      });
      expect(await store.history(c.id, 10)).toMatchObject([
        { attempt: 1, status: 'timed_out', error: TIMED_OUT, completedMs: now },
      ]);
      // The worker that lost the lease is refused.
      expect(await store.heartbeat(c.id, tokenDigest(c.leaseToken), now + 1)).toBeNull();
      expect(await store.complete([ok(c)], now + 1, BACKOFF)).toEqual([]);
      const [again] = await store.claim([c.id], 'w2', t!.requeued!.dueMs);
      expect(again).toMatchObject({ attempt: 2, version: c.version + 2 });
    });

    it('fails the task once its retries are spent', async () => {
      const c = await running({ maxRetries: 0 });
      const t = await store.expireLease(c.id, c.version, c.leaseExpiresMs + 5, BACKOFF);
      expect(t).toEqual({
        taskId: c.id,
        status: 'failed',
        version: c.version + 1,
        requeued: null,
        notifyDependents: false,
        taskType: 'test.task',
        startedMs: T0,
        endedMs: c.leaseExpiresMs + 5,
      });
      expect(await store.get(c.id)).toMatchObject({ status: 'failed', lastError: TIMED_OUT });
    });

    it('says "lease expired" when the lease ran out before the deadline (the worker went silent)', async () => {
      const c = await running({ timeoutSeconds: 30, maxTimeoutSeconds: 600 });
      const extended = await store.heartbeat(c.id, tokenDigest(c.leaseToken), T0 + 1000, 300);
      expect(extended).toEqual({ leaseExpiresMs: T0 + 31_000, deadlineMs: T0 + 301_000, cancelRequested: false });
      const t = await store.expireLease(c.id, c.version, T0 + 31_000, BACKOFF);
      expect(t).toMatchObject({ status: 'pending' });
      expect(await store.get(c.id)).toMatchObject({ lastError: LEASE_EXPIRED });
      expect(await store.history(c.id, 10)).toMatchObject([{ attempt: 1, status: 'timed_out', error: LEASE_EXPIRED }]);
    });

    it('cancels a task whose cancel was requested', async () => {
      const c = await running();
      await store.cancel(c.id, T0 + 1);
      const t = await store.expireLease(c.id, c.version, c.leaseExpiresMs, BACKOFF);
      expect(t!.status).toBe('cancelled');
      expect((await store.history(c.id, 1))[0]!.status).toBe('cancelled');
    });

    it('refuses a stale version and a lease a heartbeat extended', async () => {
      const c = await running({ timeoutSeconds: 30, maxTimeoutSeconds: 60 });
      expect(await store.expireLease(c.id, c.version - 1, c.leaseExpiresMs, BACKOFF)).toBeNull();
      await store.heartbeat(c.id, tokenDigest(c.leaseToken), c.leaseExpiresMs - 1000, 30);
      expect(await store.expireLease(c.id, c.version, c.leaseExpiresMs, BACKOFF)).toBeNull();
    });
  });

  describe('cancel', () => {
    it('cancels pending and blocked tasks at once', async () => {
      const pending = makeTask();
      const blocked = makeTask({ status: 'blocked' });
      await store.submit([pending, blocked], T0);
      for (const task of [pending, blocked]) {
        const result = await store.cancel(task.id, T0 + 50);
        expect(result.kind).toBe('cancelled');
        if (result.kind !== 'cancelled') continue;
        expect(result.task).toMatchObject({
          status: 'cancelled',
          version: 1,
          completedMs: T0 + 50,
          updatedMs: T0 + 50,
        });
        expect(await store.get(task.id)).toEqual(result.task);
      }
    });

    it('marks a running task; the lease token stays valid', async () => {
      const c = await running();
      const result = await store.cancel(c.id, T0 + 50);
      expect(result.kind).toBe('cancel_requested');
      if (result.kind === 'cancel_requested') {
        expect(result.task).toMatchObject({ status: 'running', cancelRequested: true, version: c.version });
      }
      expect((await store.cancel(c.id, T0 + 60)).kind).toBe('cancel_requested');
      expect(await store.heartbeat(c.id, tokenDigest(c.leaseToken), T0 + 70)).toMatchObject({ cancelRequested: true });
    });

    it('reports a finished task unchanged, and an unknown one as not found', async () => {
      const c = await running();
      await store.complete([ok(c)], T0 + 10, BACKOFF);
      const before = await store.get(c.id);
      const result = await store.cancel(c.id, T0 + 20);
      expect(result).toEqual({ kind: 'finished', task: before });
      expect(await store.get(c.id)).toEqual(before);
      expect(await store.cancel(nextId(), T0)).toEqual({ kind: 'not_found' });
      expect(await store.cancel('garbage', T0)).toEqual({ kind: 'not_found' });

      const pending = makeTask();
      await store.submit([pending], T0);
      await store.cancel(pending.id, T0);
      expect((await store.cancel(pending.id, T0 + 1)).kind).toBe('finished');
    });
  });

  describe('history', () => {
    it('shows the running attempt first, with the id its row will get', async () => {
      const c1 = await running({ maxRetries: 3 }, T0 + 10);
      const [t1] = await store.complete([failed(c1)], T0 + 20, BACKOFF);
      const [c2] = await store.claim([c1.id], 'worker-2', t1!.requeued!.dueMs);
      const live = await store.history(c1.id, 10);
      expect(live.map((h) => [h.attempt, h.status])).toEqual([
        [2, 'running'],
        [1, 'failed'],
      ]);
      expect(live[0]).toEqual({
        executionId: nameUuid(`${c1.id}:2`),
        taskId: c1.id,
        attempt: 2,
        status: 'running',
        dueMs: t1!.requeued!.dueMs,
        startedMs: t1!.requeued!.dueMs,
        completedMs: null,
        workerId: 'worker-2',
        error: null,
        result: null,
      });
      await store.complete([ok(c2!)], t1!.requeued!.dueMs + 5, BACKOFF);
      const done = await store.history(c1.id, 10);
      expect(done[0]).toMatchObject({ executionId: live[0]!.executionId, status: 'succeeded', attempt: 2 });
    });

    it('pages newest first with limit and beforeAttempt', async () => {
      let c = await running({ maxRetries: 10, timeoutSeconds: 86_400 });
      for (let i = 0; i < 4; i++) {
        const [t] = await store.complete([failed(c)], T0 + i * 100_000, BACKOFF);
        [c] = (await store.claim([c.id], 'w', t!.requeued!.dueMs)) as [ClaimedTask];
      }
      const attempts = async (limit: number, before?: number) =>
        (await store.history(c.id, limit, before)).map((h) => h.attempt);
      expect(await attempts(10)).toEqual([5, 4, 3, 2, 1]);
      expect(await attempts(2)).toEqual([5, 4]);
      expect(await attempts(2, 4)).toEqual([3, 2]);
      expect(await attempts(10, 2)).toEqual([1]);
      expect(await attempts(10, 1)).toEqual([]);
      expect(await store.history(nextId(), 10)).toEqual([]);
    });
  });

  describe('the state machine', () => {
    it('refuses every illegal edge, and each legal one moves along TRANSITIONS', async () => {
      const pending = makeTask();
      await store.submit([pending], T0);
      // pending → succeeded / failed: complete on a task never claimed.
      expect(
        await store.complete(
          [{ taskId: pending.id, tokenDigest: Buffer.alloc(32), outcome: 'succeeded', error: null, retryable: true }],
          T0,
          BACKOFF,
        ),
      ).toEqual([]);
      expect(await store.expireLease(pending.id, 0, T0 + 10 ** 9, BACKOFF)).toBeNull();
      expect(await store.heartbeat(pending.id, Buffer.alloc(32), T0)).toBeNull();

      // pending → running, then running → running is not a claim.
      const [c] = await store.claim([pending.id], 'w', T0);
      expectLegal('pending', 'running');
      expect(await store.claim([pending.id], 'w2', T0)).toEqual([]);

      // running → succeeded, then nothing leaves succeeded.
      const [done] = await store.complete([ok(c!)], T0 + 1, BACKOFF);
      expectLegal('running', done!.status);
      const final = await store.get(pending.id);
      expect(await store.claim([pending.id], 'w', T0 + 10 ** 9)).toEqual([]);
      expect(await store.complete([ok({ ...c!, version: done!.version })], T0 + 2, BACKOFF)).toEqual([]);
      expect(await store.expireLease(pending.id, done!.version, T0 + 10 ** 9, BACKOFF)).toBeNull();
      expect((await store.cancel(pending.id, T0 + 3)).kind).toBe('finished');
      expect(await store.get(pending.id)).toEqual(final);

      // blocked → running is not an edge either.
      const blocked = makeTask({ status: 'blocked' });
      await store.submit([blocked], T0);
      expect(await store.claim([blocked.id], 'w', T0 + 10 ** 9)).toEqual([]);
    });
  });

  describe('partition scans', () => {
    it('lists a partition’s pending tasks due before a bound, in (due, id) order, paged by cursor', async () => {
      const partition = 900;
      const dues = [T0 + 5000, T0 + 1000, T0 + 3000, T0 + 2000, T0 + 4000, T0 + 9000];
      const tasks = dues.map((dueMs, i) => makeTask({ partition, dueMs, priority: i % 10 }));
      const elsewhere = makeTask({ partition: 901, dueMs: T0 + 1000 });
      const blocked = makeTask({ partition, status: 'blocked', dueMs: T0 + 1500 });
      await store.submit([...tasks, elsewhere, blocked], T0);
      const runningOne = makeTask({ partition, dueMs: T0 });
      await store.submit([runningOne], T0);
      await store.claim([runningOne.id], 'w', T0);

      const entries = await store.pendingInPartition(partition, null, T0 + 5000, 10);
      expect(entries.map((e) => e.dueMs)).toEqual([T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000]);
      expect(entries[0]).toEqual({ taskId: tasks[1]!.id, taskType: 'test.task', priority: 1, dueMs: T0 + 1000 });
      const first = await store.pendingInPartition(partition, null, T0 + 100_000, 2);
      expect(first.map((e) => e.dueMs)).toEqual([T0 + 1000, T0 + 2000]);
      const next = await store.pendingInPartition(partition, first[1]!, T0 + 100_000, 2);
      expect(next.map((e) => e.dueMs)).toEqual([T0 + 3000, T0 + 4000]);
      expect(
        await store.pendingInPartition(partition, { dueMs: T0 + 9000, taskId: tasks[5]!.id }, T0 + 100_000, 10),
      ).toEqual([]);
      expect(await store.pendingInPartition(partition, null, T0 + 1000, 10)).toEqual([]);
    });

    it('reads the first page of each of several partitions in one call, by partition', async () => {
      const [p1, p2, empty] = [905, 906, 907];
      const inP1 = [T0 + 3000, T0 + 1000, T0 + 2000].map((dueMs) => makeTask({ partition: p1, dueMs }));
      const inP2 = makeTask({ partition: p2, dueMs: T0 + 500 });
      const later = makeTask({ partition: p2, dueMs: T0 + 60_000 });
      const blocked = makeTask({ partition: p1, status: 'blocked', dueMs: T0 + 100 });
      const outside = makeTask({ partition: 908, dueMs: T0 + 100 });
      await store.submit([...inP1, inP2, later, blocked, outside], T0);
      const read = await store.pendingInPartitions([p1, p2, empty], T0 + 10_000, 2);
      expect([...read.keys()].sort()).toEqual([p1, p2]);
      expect(read.get(p1)!.map((e) => e.dueMs)).toEqual([T0 + 1000, T0 + 2000]);
      expect(read.get(p2)).toEqual([
        { taskId: inP2.id, taskType: 'test.task', priority: inP2.priority, dueMs: T0 + 500 },
      ]);
      expect(await store.pendingInPartitions([], T0 + 10_000, 2)).toEqual(new Map());
    });

    it('reads each partition after its own cursor, and the others from the oldest, in one call', async () => {
      // The safety net walking a held backlog (src/services/safety-net.ts).
      const [p1, p2] = [909, 910];
      const inP1 = [T0 + 1000, T0 + 2000, T0 + 3000, T0 + 4000].map((dueMs) => makeTask({ partition: p1, dueMs }));
      // Two due in the same millisecond: the cursor's id decides between them.
      const sameMs = [makeTask({ partition: p2, dueMs: T0 + 500 }), makeTask({ partition: p2, dueMs: T0 + 500 })];
      await store.submit([...inP1, ...sameMs], T0);
      const [lowId, highId] = sameMs.map((t) => t.id).sort();
      const read = await store.pendingInPartitions(
        [p1, p2],
        T0 + 10_000,
        2,
        new Map([[p1, { dueMs: T0 + 2000, taskId: inP1[1]!.id }]]),
      );
      expect(read.get(p1)!.map((e) => e.dueMs)).toEqual([T0 + 3000, T0 + 4000]);
      expect(read.get(p2)!.map((e) => e.taskId)).toEqual([lowId, highId]);
      const after = await store.pendingInPartitions(
        [p1, p2],
        T0 + 10_000,
        2,
        new Map([
          [p1, { dueMs: T0 + 4000, taskId: inP1[3]!.id }],
          [p2, { dueMs: T0 + 500, taskId: lowId! }],
        ]),
      );
      expect([...after.keys()]).toEqual([p2]);
      expect(after.get(p2)!.map((e) => e.taskId)).toEqual([highId]);
    });

    it('pages exactly through many tasks due in the same millisecond', async () => {
      const partition = 902;
      const herd = Array.from({ length: 25 }, () => makeTask({ partition, dueMs: T0 + 777 }));
      await store.submit(herd, T0);
      const seen: string[] = [];
      let after: { dueMs: number; taskId: string } | null = null;
      for (;;) {
        const page: { dueMs: number; taskId: string }[] = await store.pendingInPartition(
          partition,
          after,
          T0 + 10_000,
          7,
        );
        seen.push(...page.map((e) => e.taskId));
        if (page.length < 7) break;
        after = page[page.length - 1]!;
      }
      expect(seen).toHaveLength(25);
      expect(new Set(seen)).toEqual(new Set(herd.map((t) => t.id)));
    });

    it('lists the running tasks of some partitions with their leases, in one read', async () => {
      const partition = 902;
      const a = makeTask({ partition, timeoutSeconds: 10 });
      const b = makeTask({ partition });
      const c = makeTask({ partition: 904, timeoutSeconds: 20 });
      await store.submit([a, b, c], T0);
      const claimed = await store.claim([a.id, c.id], 'w', T0);
      const version = (id: string) => claimed.find((t) => t.id === id)!.version;
      expect(await store.runningInPartitions([partition])).toEqual([
        { taskId: a.id, version: version(a.id), leaseExpiresMs: T0 + 10_000 },
      ]);
      const both = await store.runningInPartitions([partition, 903, 904]);
      expect(both.sort((x, y) => (x.taskId < y.taskId ? -1 : 1))).toEqual([
        { taskId: a.id, version: version(a.id), leaseExpiresMs: T0 + 10_000 },
        { taskId: c.id, version: version(c.id), leaseExpiresMs: T0 + 20_000 },
      ]);
      expect(await store.runningInPartitions([903])).toEqual([]);
      expect(await store.runningInPartitions([])).toEqual([]);
    });
  });
});
