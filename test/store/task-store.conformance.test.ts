/**
 * TaskStore conformance, part 1: submitting, reading, idempotency keys, claiming and
 * heartbeats. Runs against Postgres and PGlite. Part 2 (`task-store-lifecycle…`) covers
 * completion, lease expiry, cancel, history and the partition scans.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { NewTask } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, makeTasks, nextId, tokenDigest, uniqueType } from '../support/tasks.js';

const DAY_MS = 24 * 60 * 60 * 1000;

describe.each(sqlBackends)('TaskStore on $name: submit, read, claim', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function countOfType(taskType: string): Promise<number> {
    const { rows } = await testDb.db.query<{ n: number }>('SELECT count(*) AS n FROM tasks WHERE task_type = $1', [
      taskType,
    ]);
    return rows[0]!.n;
  }

  async function conflictOf(promise: Promise<unknown>): Promise<Record<string, unknown>> {
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    if (!isWheelhouseError(error, 'idempotency_conflict')) throw new Error(`expected a conflict, got ${String(error)}`);
    return error.details;
  }

  describe('submit and get', () => {
    it('writes a batch and reads each task back as submitted', async () => {
      const tasks = [
        makeTask({ payload: { to: 'a@example.com', quote: 'say "hi" \\ bye', n: [1, 2.5, null] } }),
        makeTask({ payload: null, priority: 0, maxRetries: 0, timeoutSeconds: 5 }),
        makeTask({
          status: 'blocked',
          scheduleType: 'delayed',
          dueMs: T0 + 30_000,
          payload: 'just a string ✓',
        }),
      ];
      const results = await store.submit(tasks, T0);
      expect(results.map((r) => r.created)).toEqual([true, true, true]);
      for (const [i, result] of results.entries()) {
        const t = tasks[i]!;
        expect(result.task).toMatchObject({
          id: t.id,
          taskType: t.taskType,
          payload: t.payload,
          status: t.status,
          version: 0,
          scheduleType: t.scheduleType,
          schedule: t.schedule,
          dueMs: t.dueMs,
          priority: t.priority,
          maxRetries: t.maxRetries,
          timeoutSeconds: t.timeoutSeconds,
          attempts: 0,
          leaseExpiresMs: null,
          workerId: null,
          cancelRequested: false,
          partition: t.partition,
          createdMs: T0,
          updatedMs: T0,
          startedMs: null,
          completedMs: null,
          lastError: null,
        });
        expect(await store.get(t.id)).toEqual(result.task);
      }
    });

    it('answers null for an unknown or malformed id', async () => {
      expect(await store.get(nextId())).toBeNull();
      expect(await store.get('not-a-uuid')).toBeNull();
    });

    it('writes a 1 000-task batch in one call', async () => {
      const taskType = uniqueType('bulk');
      const results = await store.submit(makeTasks(1000, { taskType }), T0);
      expect(results).toHaveLength(1000);
      expect(await countOfType(taskType)).toBe(1000);
    });

    it('stores the last payload of a debounce key named twice in one call, from the JSON text that came with it', async () => {
      const debounce = { key: 'k', seconds: 5, maxWaitSeconds: 60 };
      // As validation hands them over: each payload with the JSON it wrote to measure it.
      const first = makeTask({ taskType: 'db.merge', payload: { n: 1 }, payloadJson: '{"n":1}', debounce });
      const second = makeTask({ taskType: 'db.merge', payload: { n: 2 }, payloadJson: '{"n":2}', debounce });
      const [a, b] = await store.submit([first, second], T0);
      expect(a).toMatchObject({ debounced: false, task: { id: first.id } });
      expect(b).toMatchObject({ debounced: true, task: { id: first.id } });
      expect((await store.get(first.id))!.payload).toEqual({ n: 2 });
    });

    it('answers an empty batch with nothing', async () => {
      expect(await store.submit([], T0)).toEqual([]);
    });
  });

  describe('list', () => {
    it('lists newest first, pages with beforeId, and filters by type', async () => {
      const taskType = uniqueType('list');
      const tasks = makeTasks(5, { taskType });
      await store.submit(tasks, T0);
      await store.submit([makeTask()], T0);
      const newestFirst = tasks.map((t) => t.id).reverse();

      const { tasks: first } = await store.list({ taskType, limit: 2 }, T0);
      expect(first.map((t) => t.id)).toEqual(newestFirst.slice(0, 2));
      const { tasks: second } = await store.list({ taskType, limit: 2, beforeId: first[1]!.id }, T0);
      expect(second.map((t) => t.id)).toEqual(newestFirst.slice(2, 4));
      const { tasks: rest } = await store.list({ taskType, limit: 10, beforeId: second[1]!.id }, T0);
      expect(rest.map((t) => t.id)).toEqual(newestFirst.slice(4));

      const { tasks: unfiltered } = await store.list({ limit: 3 }, T0);
      expect(unfiltered).toHaveLength(3);
      expect(unfiltered.map((t) => t.id)).toEqual([...unfiltered.map((t) => t.id)].sort().reverse());
    });

    it('derives ready (pending and due) from pending (not yet due)', async () => {
      const taskType = uniqueType('ready');
      const due = makeTask({ taskType, dueMs: T0 - 1000 });
      const dueNow = makeTask({ taskType, dueMs: T0 });
      const later = makeTask({ taskType, dueMs: T0 + 60_000 });
      const blocked = makeTask({ taskType, status: 'blocked' });
      await store.submit([due, dueNow, later, blocked], T0);

      const ids = async (status: 'ready' | 'pending' | 'blocked', nowMs: number) =>
        (await store.list({ taskType, status, limit: 10 }, nowMs)).tasks.map((t) => t.id).sort();
      expect(await ids('ready', T0)).toEqual([due.id, dueNow.id].sort());
      expect(await ids('pending', T0)).toEqual([later.id]);
      expect(await ids('blocked', T0)).toEqual([blocked.id]);
      expect(await ids('ready', T0 + 60_000)).toEqual([due.id, dueNow.id, later.id].sort());
      expect(await ids('pending', T0 + 60_000)).toEqual([]);
    });

    it('filters by a stored status', async () => {
      const taskType = uniqueType('running');
      const [a, b] = makeTasks(2, { taskType });
      await store.submit([a!, b!], T0);
      await store.claim([a!.id], 'w1', T0);
      const { tasks: running } = await store.list({ taskType, status: 'running', limit: 10 }, T0);
      expect(running.map((t) => t.id)).toEqual([a!.id]);
    });
  });

  describe('idempotency keys', () => {
    const keyed = (taskType: string, key: string, hash: string, overrides: Partial<NewTask> = {}) =>
      makeTask({ taskType, idempotencyKey: key, requestHash: hash, ...overrides });

    it('returns the first task for an identical replay and writes nothing', async () => {
      const taskType = uniqueType('replay');
      const [first] = await store.submit([keyed(taskType, 'order-42', 'h1')], T0);
      const [replay] = await store.submit([keyed(taskType, 'order-42', 'h1')], T0 + 1000);
      expect(first!.created).toBe(true);
      expect(replay!.created).toBe(false);
      expect(replay!.task).toEqual(await store.get(first!.task.id));
      expect(await countOfType(taskType)).toBe(1);
    });

    it('keeps input order when a batch mixes replays, keyed and plain tasks', async () => {
      const taskType = uniqueType('mixed');
      const [original] = await store.submit([keyed(taskType, 'k1', 'h1')], T0);
      const batch = [
        makeTask({ taskType }),
        keyed(taskType, 'k1', 'h1'),
        keyed(taskType, 'k2', 'h2'),
        makeTask({ taskType }),
      ];
      const results = await store.submit(batch, T0);
      expect(results.map((r) => r.created)).toEqual([true, false, true, true]);
      expect(results.map((r) => r.task.id)).toEqual([batch[0]!.id, original!.task.id, batch[2]!.id, batch[3]!.id]);
      expect(await countOfType(taskType)).toBe(4);
    });

    it('refuses a key reused with a different request, and writes nothing of the batch', async () => {
      const taskType = uniqueType('conflict');
      await store.submit([keyed(taskType, 'order-7', 'h1')], T0);
      const batch = [makeTask({ taskType }), keyed(taskType, 'fresh', 'hx'), keyed(taskType, 'order-7', 'h2')];
      const details = await conflictOf(store.submit(batch, T0 + 1000));
      expect(details).toEqual({ index: 2, idempotency_key: 'order-7' });
      expect(await countOfType(taskType)).toBe(1);
      // The fresh key was rolled back with the rest: it can be used for a new request.
      const [reuse] = await store.submit([keyed(taskType, 'fresh', 'other')], T0 + 2000);
      expect(reuse!.created).toBe(true);
    });

    it('scopes keys by task type', async () => {
      const [a] = await store.submit([keyed(uniqueType('scope'), 'same-key', 'h1')], T0);
      const [b] = await store.submit([keyed(uniqueType('scope'), 'same-key', 'h2')], T0);
      expect(a!.created && b!.created).toBe(true);
    });

    it('lets a key be taken over once its 24 h have passed', async () => {
      const taskType = uniqueType('expiry');
      const [first] = await store.submit([keyed(taskType, 'daily', 'h1')], T0);
      const [stillLive] = await store.submit([keyed(taskType, 'daily', 'h1')], T0 + DAY_MS - 1);
      expect(stillLive!.created).toBe(false);
      await conflictOf(store.submit([keyed(taskType, 'daily', 'h2')], T0 + DAY_MS - 1));

      const [afterExpiry] = await store.submit([keyed(taskType, 'daily', 'h2')], T0 + DAY_MS);
      expect(afterExpiry!.created).toBe(true);
      expect(afterExpiry!.task.id).not.toBe(first!.task.id);
      const [replay] = await store.submit([keyed(taskType, 'daily', 'h2')], T0 + DAY_MS + 1);
      expect(replay!.task.id).toBe(afterExpiry!.task.id);
      expect(await countOfType(taskType)).toBe(2);
    });

    it('purges keys whose window has ended, in bounded batches, and only those', async () => {
      const taskType = uniqueType('purge');
      await store.submit([keyed(taskType, 'k1', 'h'), keyed(taskType, 'k2', 'h'), keyed(taskType, 'k3', 'h')], T0);
      const [late] = await store.submit([keyed(taskType, 'k4', 'h')], T0 + 1000);
      const keysOfType = async (): Promise<number> =>
        (
          await testDb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM idempotency_keys WHERE task_type = $1', [
            taskType,
          ])
        ).rows[0]!.n;
      expect(await store.purgeExpiredIdempotencyKeys(T0 + DAY_MS - 1, 100)).toBe(0);
      expect(await keysOfType()).toBe(4);
      // Other tests' keys may expire too; bounded batches remove at most `limit` each.
      expect(await store.purgeExpiredIdempotencyKeys(T0 + DAY_MS + 1, 1)).toBe(1);
      while ((await store.purgeExpiredIdempotencyKeys(T0 + DAY_MS + 1, 100)) > 0) {
        // drain
      }
      expect(await keysOfType()).toBe(1);
      // The task stays; only its key went. The live key still replays.
      const [replay] = await store.submit([keyed(taskType, 'k4', 'h')], T0 + DAY_MS + 2);
      expect(replay!.created).toBe(false);
      expect(replay!.task.id).toBe(late!.task.id);
      expect(await countOfType(taskType)).toBe(4);
    });

    it('treats the same key twice in one batch as a replay of the first', async () => {
      const taskType = uniqueType('twice');
      const results = await store.submit([keyed(taskType, 'dup', 'h1'), keyed(taskType, 'dup', 'h1')], T0);
      expect(results.map((r) => r.created)).toEqual([true, false]);
      expect(results[1]!.task).toEqual(results[0]!.task);
      expect(await countOfType(taskType)).toBe(1);
    });

    it('refuses the same key twice in one batch with different requests', async () => {
      const taskType = uniqueType('twice-conflict');
      const batch = [makeTask({ taskType }), keyed(taskType, 'dup', 'h1'), keyed(taskType, 'dup', 'h2')];
      expect(await conflictOf(store.submit(batch, T0))).toEqual({ index: 2, idempotency_key: 'dup' });
      expect(await countOfType(taskType)).toBe(0);
    });

    it('gives concurrent identical submissions one task', async () => {
      const taskType = uniqueType('race');
      const results = await Promise.all(
        Array.from({ length: 4 }, () => store.submit([keyed(taskType, 'race', 'h1')], T0)),
      );
      expect(new Set(results.map((r) => r[0]!.task.id)).size).toBe(1);
      expect(results.filter((r) => r[0]!.created)).toHaveLength(1);
      expect(await countOfType(taskType)).toBe(1);
    });
  });

  describe('claim', () => {
    it('claims due pending tasks: running, attempt 1, version + 1, a lease of the timeout', async () => {
      const task = makeTask({ timeoutSeconds: 45, payload: { job: 1 } });
      await store.submit([task], T0);
      const [claimed] = await store.claim([task.id], 'worker-1', T0 + 500);
      expect(claimed).toEqual({
        id: task.id,
        taskType: task.taskType,
        payload: { job: 1 },
        attempt: 1,
        version: 1,
        leaseToken: expect.stringMatching(/^lt2\.[0-9a-f]{32}$/) as string,
        leaseTokenDigest: expect.any(Buffer) as Buffer,
        leaseExpiresMs: T0 + 500 + 45_000,
        deadlineMs: T0 + 500 + 45_000,
        timeoutSeconds: 45,
        partition: task.partition,
        dueMs: T0,
      });
      // What the row keeps of the token, as minted (the node checks a result against it).
      expect(claimed!.leaseTokenDigest).toEqual(tokenDigest(claimed!.leaseToken));
      expect(await store.get(task.id)).toMatchObject({
        status: 'running',
        attempts: 1,
        version: 1,
        workerId: 'worker-1',
        startedMs: T0 + 500,
        leaseExpiresMs: T0 + 45_500,
        deadlineMs: T0 + 45_500,
        updatedMs: T0 + 500,
      });
    });

    it('is a compare-and-set: a second claim gets nothing', async () => {
      const task = makeTask();
      await store.submit([task], T0);
      expect(await store.claim([task.id], 'w1', T0)).toHaveLength(1);
      expect(await store.claim([task.id], 'w2', T0)).toEqual([]);
      expect((await store.get(task.id))!.workerId).toBe('w1');
    });

    it('hands each task to one of several concurrent claimers', async () => {
      const tasks = makeTasks(60);
      await store.submit(tasks, T0);
      const ids = tasks.map((t) => t.id);
      const batches = await Promise.all(
        [0, 1, 2].map((w) => store.claim(w === 1 ? [...ids].reverse() : ids, `w${w}`, T0)),
      );
      const claimed = batches.flat().map((c) => c.id);
      expect(claimed).toHaveLength(60);
      expect(new Set(claimed).size).toBe(60);
    });

    it('leaves out tasks not yet due, blocked, cancelled, unknown or malformed', async () => {
      const later = makeTask({ dueMs: T0 + 10_000 });
      const blocked = makeTask({ status: 'blocked' });
      const cancelled = makeTask();
      const ok = makeTask();
      await store.submit([later, blocked, cancelled, ok], T0);
      await store.cancel(cancelled.id, T0);
      const ids = [later.id, blocked.id, cancelled.id, ok.id, nextId(), 'nope', ok.id];
      expect((await store.claim(ids, 'w', T0)).map((c) => c.id)).toEqual([ok.id]);
      expect((await store.claim([later.id], 'w', T0 + 9_999)).length).toBe(0);
      expect((await store.claim([later.id], 'w', T0 + 10_000)).map((c) => c.id)).toEqual([later.id]);
    });

    it('answers an empty id list with nothing', async () => {
      expect(await store.claim([], 'w', T0)).toEqual([]);
    });
  });

  describe('claimForWorkers', () => {
    it('claims for many workers in one statement: each task gets the worker named beside it, and its own token', async () => {
      const tasks = makeTasks(7);
      await store.submit(tasks, T0);
      // Unsorted, workers interleaved, a worker id that needs quoting in an array literal.
      const ids = tasks.map((t) => t.id).reverse();
      const workers = ['w-a', 'w "b", {c}', 'w-a', 'w\\d', 'w "b", {c}', 'w-a', 'w-e'];
      const claimed = await store.claimForWorkers(ids, workers, T0);
      expect(claimed.map((c) => c.id).sort()).toEqual([...ids].sort());
      expect(new Set(claimed.map((c) => c.leaseToken)).size).toBe(7);
      for (const [i, id] of ids.entries()) {
        const record = await store.get(id);
        expect(record).toMatchObject({ status: 'running', attempts: 1, workerId: workers[i] });
        const token = claimed.find((c) => c.id === id)!.leaseToken;
        expect(await store.heartbeat(id, tokenDigest(token), T0 + 1)).not.toBeNull();
      }
    });

    it('leaves out what is not claimable, an id named twice goes to its first worker, and a claimed task is not claimed again', async () => {
      const [ok, later, taken] = makeTasks(3);
      const notYet = { ...later!, dueMs: T0 + 10_000 };
      await store.submit([ok!, notYet, taken!], T0);
      await store.claim([taken!.id], 'w-first', T0);
      const claimed = await store.claimForWorkers(
        [taken!.id, ok!.id, notYet.id, 'nope', ok!.id],
        ['w1', 'w2', 'w3', 'w4', 'w5'],
        T0,
      );
      expect(claimed.map((c) => c.id)).toEqual([ok!.id]);
      expect((await store.get(ok!.id))!.workerId).toBe('w2');
      expect((await store.get(taken!.id))!.workerId).toBe('w-first');
    });

    it('refuses worker ids not aligned with the ids', async () => {
      const [task] = makeTasks(1);
      await store.submit([task!], T0);
      await expect(store.claimForWorkers([task!.id], ['w1', 'w2'], T0)).rejects.toThrow(/named 2 workers/);
      expect((await store.get(task!.id))!.status).toBe('pending');
    });
  });

  describe('heartbeat', () => {
    it('extends a held lease by the timeout but never past the deadline, and reports cancel requests', async () => {
      const task = makeTask({ timeoutSeconds: 20, maxTimeoutSeconds: 60 });
      await store.submit([task], T0);
      const [claimed] = await store.claim([task.id], 'w', T0);
      const digest = tokenDigest(claimed!.leaseToken);
      // The lease runs to the deadline already: a heartbeat alone cannot move it.
      expect(await store.heartbeat(task.id, digest, T0 + 5000)).toEqual({
        leaseExpiresMs: T0 + 20_000,
        deadlineMs: T0 + 20_000,
        cancelRequested: false,
      });
      expect((await store.get(task.id))!.version).toBe(claimed!.version);
      // An extension moves the deadline to now + 30 s; the lease follows, by the timeout.
      expect(await store.heartbeat(task.id, digest, T0 + 6000, 30)).toEqual({
        leaseExpiresMs: T0 + 26_000,
        deadlineMs: T0 + 36_000,
        cancelRequested: false,
      });
      // A smaller extension keeps the later deadline; a larger one is capped at start + 60 s.
      expect(await store.heartbeat(task.id, digest, T0 + 7000, 1)).toMatchObject({ deadlineMs: T0 + 36_000 });
      expect(await store.heartbeat(task.id, digest, T0 + 8000, 600)).toEqual({
        leaseExpiresMs: T0 + 28_000,
        deadlineMs: T0 + 60_000,
        cancelRequested: false,
      });
      await store.cancel(task.id, T0 + 9000);
      expect(await store.heartbeat(task.id, digest, T0 + 45_000)).toEqual({
        leaseExpiresMs: T0 + 60_000,
        deadlineMs: T0 + 60_000,
        cancelRequested: true,
      });
      // At the deadline the attempt is over: no heartbeat, no result, however alive the worker is.
      expect(await store.heartbeat(task.id, digest, T0 + 60_000, 600)).toBeNull();
      expect(
        await store.complete(
          [{ taskId: task.id, tokenDigest: digest, outcome: 'succeeded', error: null, retryable: true }],
          T0 + 60_000,
          BACKOFF,
        ),
      ).toEqual([]);
      expect(await store.get(task.id)).toMatchObject({ status: 'running', deadlineMs: T0 + 60_000 });
    });

    it('without max_timeout_seconds, an extension cannot move the deadline', async () => {
      const task = makeTask({ timeoutSeconds: 20 });
      await store.submit([task], T0);
      const [claimed] = await store.claim([task.id], 'w', T0);
      expect(await store.heartbeat(task.id, tokenDigest(claimed!.leaseToken), T0 + 5000, 3600)).toEqual({
        leaseExpiresMs: T0 + 20_000,
        deadlineMs: T0 + 20_000,
        cancelRequested: false,
      });
    });

    it("answers null for another lease's token, a task not running, or an unknown task", async () => {
      const task = makeTask();
      const other = makeTask();
      const pending = makeTask();
      await store.submit([task, other, pending], T0);
      const [claimed, otherClaimed] = await store.claim([task.id, other.id], 'w', T0);
      const [mine, theirs] = claimed!.id === task.id ? [claimed!, otherClaimed!] : [otherClaimed!, claimed!];
      const before = await store.get(task.id);
      expect(await store.heartbeat(task.id, tokenDigest(theirs.leaseToken), T0 + 1000)).toBeNull();
      expect(await store.heartbeat(task.id, Buffer.alloc(32), T0 + 1000)).toBeNull();
      expect(await store.heartbeat(task.id, Buffer.alloc(3), T0 + 1000)).toBeNull();
      expect(await store.get(task.id)).toEqual(before);
      expect(await store.heartbeat(pending.id, tokenDigest(mine.leaseToken), T0)).toBeNull();
      expect(await store.heartbeat(nextId(), tokenDigest(mine.leaseToken), T0)).toBeNull();
      expect(await store.heartbeat('bad', tokenDigest(mine.leaseToken), T0)).toBeNull();
    });
  });

  describe('heartbeats (many in one statement)', () => {
    it('judges each heartbeat on its own digest and answers each in order', async () => {
      const tasks = makeTasks(4, { timeoutSeconds: 30 });
      const pending = makeTask();
      await store.submit([...tasks, pending], T0);
      const claimed = await store.claim(
        tasks.map((t) => t.id),
        'w',
        T0,
      );
      const [a, b, c, d] = tasks.map((t) => claimed.find((x) => x.id === t.id)!);
      await store.cancel(c!.id, T0 + 1);
      const bBefore = await store.get(b!.id);
      const answers = await store.heartbeats(
        [
          { taskId: a!.id, tokenDigest: tokenDigest(a!.leaseToken) },
          { taskId: b!.id, tokenDigest: tokenDigest(c!.leaseToken) }, // c's token on b
          { taskId: c!.id, tokenDigest: tokenDigest(c!.leaseToken) },
          { taskId: nextId(), tokenDigest: tokenDigest(a!.leaseToken) },
          { taskId: 'bad', tokenDigest: tokenDigest(a!.leaseToken) },
          { taskId: d!.id, tokenDigest: Buffer.alloc(3) },
          { taskId: pending.id, tokenDigest: tokenDigest(d!.leaseToken) },
          { taskId: d!.id.toUpperCase(), tokenDigest: tokenDigest(d!.leaseToken) },
          { taskId: d!.id, tokenDigest: tokenDigest(d!.leaseToken) }, // the same lease twice
        ],
        T0 + 5000,
      );
      // Capped at the deadline, the claim's time + 30 s.
      const extended = { leaseExpiresMs: T0 + 30_000, deadlineMs: T0 + 30_000, cancelRequested: false };
      expect(answers).toEqual([
        extended,
        null,
        { leaseExpiresMs: T0 + 30_000, deadlineMs: T0 + 30_000, cancelRequested: true },
        null,
        null,
        null,
        null,
        extended,
        extended,
      ]);
      expect(await store.get(b!.id)).toEqual(bBefore);
      for (const task of [a!, c!, d!]) {
        expect((await store.get(task.id))!).toMatchObject({ leaseExpiresMs: T0 + 30_000, version: task.version });
      }
    });

    it('takes the largest extension of one lease named twice, and none from a wrong token', async () => {
      const [task, other] = makeTasks(2, { timeoutSeconds: 10, maxTimeoutSeconds: 1000 });
      await store.submit([task!, other!], T0);
      const claimed = await store.claim([task!.id, other!.id], 'w', T0);
      const mine = claimed.find((c) => c.id === task!.id)!;
      const theirs = claimed.find((c) => c.id === other!.id)!;
      const answers = await store.heartbeats(
        [
          { taskId: task!.id, tokenDigest: tokenDigest(theirs.leaseToken), extendSeconds: 900 },
          { taskId: task!.id, tokenDigest: tokenDigest(mine.leaseToken), extendSeconds: 50 },
          { taskId: task!.id, tokenDigest: tokenDigest(mine.leaseToken), extendSeconds: 100 },
          { taskId: task!.id, tokenDigest: tokenDigest(mine.leaseToken) },
        ],
        T0 + 1000,
      );
      const extended = { leaseExpiresMs: T0 + 11_000, deadlineMs: T0 + 101_000, cancelRequested: false };
      expect(answers).toEqual([null, extended, extended, extended]);
    });

    it('extends a thousand leases in one call', async () => {
      const tasks = makeTasks(1000, { timeoutSeconds: 10 });
      await store.submit(tasks, T0);
      const claimed = await store.claim(
        tasks.map((t) => t.id),
        'w',
        T0,
      );
      expect(claimed).toHaveLength(1000);
      const answers = await store.heartbeats(
        claimed.map((c) => ({ taskId: c.id, tokenDigest: tokenDigest(c.leaseToken) })),
        T0 + 2000,
      );
      // Extended by the timeout from now, capped at the deadline (the claim + 10 s).
      expect(answers.every((x) => x?.leaseExpiresMs === T0 + 10_000)).toBe(true);
    });

    it('answers an empty list with nothing', async () => {
      expect(await store.heartbeats([], T0)).toEqual([]);
    });
  });
});
