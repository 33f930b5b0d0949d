/**
 * ScheduleStore conformance: reading cron schedule rows, the compare-and-set write with the
 * instance changes that go with it (insert never twice, cancel, release of a held instance),
 * and a schedule's execution history. Runs against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceId, partitionOf } from '../../src/lib/ids.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import {
  isScheduleWake,
  scheduleWake,
  type ClaimedTask,
  type Completion,
  type CronDefinition,
  type ExecutionRecord,
  type NewTask,
} from '../../src/domain/model.js';
import type {
  NewInstance,
  ScheduleStore,
  ScheduleWrite,
  ScheduleWriteResult,
  TaskStore,
} from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, nextId, tokenDigest, uniqueType } from '../support/tasks.js';

const MINUTE_MS = 60_000;

/** The nth nominal fire time of the tests' schedules: one a minute after T0. */
const fire = (n: number): number => T0 + n * MINUTE_MS;

const DEFINITION: CronDefinition = {
  cronExpression: '*/1 * * * *',
  timezone: 'Europe/Berlin',
  jitterSeconds: 7,
  misfirePolicy: 'skip',
  overlapPolicy: 'skip',
  endMs: T0 + 24 * 60 * MINUTE_MS,
};

describe.each(sqlBackends)('ScheduleStore on $name', ({ open }) => {
  let testDb: TestDb;
  let tasks: TaskStore;
  let schedules: ScheduleStore;

  beforeAll(async () => {
    testDb = await open();
    tasks = new SqlTaskStore(testDb.db);
    schedules = new SqlScheduleStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Submits an active cron row whose first nominal fire time is `fire(1)`; returns its id. */
  async function createSchedule(overrides: Partial<NewTask> = {}, definition = DEFINITION): Promise<string> {
    const task = makeTask({
      taskType: uniqueType('cron'),
      scheduleType: 'cron',
      status: 'active',
      schedule: definition,
      dueMs: fire(1),
      ...overrides,
    });
    await tasks.submit([task], T0);
    return task.id;
  }

  /** An instance of `scheduleId` for the fire time `fireMs`. */
  function instance(
    scheduleId: string,
    fireMs: number,
    status: NewInstance['status'] = 'pending',
    { generation = 0, jitterMs = 0 } = {},
  ): NewInstance {
    const id = instanceId(scheduleId, generation, fireMs);
    return { id, fireMs, dueMs: fireMs + jitterMs, partition: partitionOf(id, 64), status };
  }

  /** A write that changes nothing but the version unless `change` says so. */
  function write(scheduleId: string, version: number, change: Partial<ScheduleWrite> = {}): ScheduleWrite {
    return {
      scheduleId,
      version,
      status: 'active',
      nextFireMs: null,
      lastFiredMs: null,
      generation: null,
      wakeMs: null,
      ensure: null,
      release: null,
      instances: [],
      cancel: null,
      ...change,
    };
  }

  async function writeOne(w: ScheduleWrite, nowMs = T0): Promise<ScheduleWriteResult> {
    const [result] = await schedules.write([w], nowMs);
    if (result === undefined) throw new Error('no result');
    return result;
  }

  /** Creates a schedule and its instances in one write at version 0; the row is at version 1 after. */
  async function withInstances(
    ...make: ((scheduleId: string) => NewInstance)[]
  ): Promise<{ id: string; instances: NewInstance[] }> {
    // A day's deadline: the instances' attempts are completed minutes after their claims.
    const id = await createSchedule({ timeoutSeconds: 86_400 });
    const instances = make.map((m) => m(id));
    expect((await writeOne(write(id, 0, { instances }))).ok).toBe(true);
    return { id, instances };
  }

  async function claimAt(taskId: string, nowMs: number): Promise<ClaimedTask> {
    const [claimed] = await tasks.claim([taskId], 'worker-1', nowMs);
    if (claimed === undefined) throw new Error(`could not claim ${taskId}`);
    return claimed;
  }

  const succeeded = (c: ClaimedTask): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: 'succeeded',
    error: null,
    retryable: true,
  });
  const failed = (c: ClaimedTask, error: string, retryable: boolean): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: 'failed',
    error,
    retryable,
  });

  const statusOf = async (taskId: string): Promise<string | undefined> => (await tasks.get(taskId))?.status;

  async function instanceCount(scheduleId: string): Promise<number> {
    const { rows } = await testDb.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM tasks WHERE schedule_id = $1',
      [scheduleId],
    );
    return rows[0]!.n;
  }

  describe('get', () => {
    it('reads back the definition, status, version, next and last fire times and generation', async () => {
      const id = await createSchedule();
      expect(await schedules.get(id)).toEqual({
        id,
        status: 'active',
        version: 0,
        definition: DEFINITION,
        nextFireMs: fire(1),
        lastFiredMs: null,
        generation: 0,
        // A new schedule's actor must act at once: its wake is its submission time.
        wakeMs: T0,
      });
    });

    it('answers null for an unknown id, a malformed id, an ordinary task and an instance', async () => {
      const plain = makeTask();
      await tasks.submit([plain], T0);
      const { instances } = await withInstances((s) => instance(s, fire(1)));
      expect(await schedules.get(nextId())).toBeNull();
      expect(await schedules.get('not-a-uuid')).toBeNull();
      expect(await schedules.get(plain.id)).toBeNull();
      expect(await schedules.get(instances[0]!.id)).toBeNull();
    });
  });

  describe('getMany', () => {
    it('reads schedules by id in the order asked, null for what is not a schedule', async () => {
      const [a, b] = [await createSchedule(), await createSchedule()];
      const plain = makeTask();
      await tasks.submit([plain], T0);
      const got = await schedules.getMany([b, 'not-a-uuid', plain.id, a.toUpperCase(), nextId(), b]);
      expect(got.map((r) => r?.id ?? null)).toEqual([b, null, null, a, null, b]);
      expect(got[0]).toEqual(await schedules.get(b));
      expect(await schedules.getMany([])).toEqual([]);
    });
  });

  describe('wakesInPartition', () => {
    // Partitions of this test alone: every other schedule of the file is made in the random
    // partition makeTask picks, below 64, and one that fell in this test's partition (61, as it
    // was) showed as an extra wake here.
    const PARTITION = 65;

    it("lists the wakes of a partition's active schedules before a time, oldest first, paging by cursor", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push(await createSchedule({ partition: PARTITION }));
      const elsewhere = await createSchedule({ partition: PARTITION - 1 });
      const [a, b, c, d, e, f] = ids as [string, string, string, string, string, string];
      // Wakes out of id order; b paused, d cancelled: they have none that counts.
      const wakes: [string, number][] = [
        [a, fire(3)],
        [b, fire(1)],
        [c, fire(1)],
        [d, fire(1)],
        [e, fire(2)],
        [f, fire(9)],
        [elsewhere, fire(1)],
      ];
      const results = await schedules.write(
        wakes.map(([id, wakeMs]) =>
          write(id, 0, { wakeMs, status: id === b ? 'paused' : id === d ? 'cancelled' : 'active' }),
        ),
        T0,
      );
      expect(results.every((r) => r.ok)).toBe(true);

      const wake = (id: string, at: number) => scheduleWake(id, at);
      const all = await schedules.wakesInPartition(PARTITION, null, fire(9), 100);
      expect(all).toEqual([wake(c, fire(1)), wake(e, fire(2)), wake(a, fire(3))]);
      expect(all.every(isScheduleWake)).toBe(true);
      // The bound is exclusive; a page goes on after its last entry.
      const first = await schedules.wakesInPartition(PARTITION, null, fire(9) + 1, 2);
      expect(first).toEqual([wake(c, fire(1)), wake(e, fire(2))]);
      const second = await schedules.wakesInPartition(PARTITION, { dueMs: fire(2), taskId: e }, fire(9) + 1, 2);
      expect(second).toEqual([wake(a, fire(3)), wake(f, fire(9))]);
      expect(await schedules.wakesInPartition(PARTITION, { dueMs: fire(9), taskId: f }, fire(9) + 1, 2)).toEqual([]);
      expect(await schedules.wakesInPartition(PARTITION, null, fire(1), 100)).toEqual([]);
      expect(await schedules.wakesInPartition(PARTITION, null, fire(9), 0)).toEqual([]);
      // Several partitions in one call: each its own first page, by partition.
      const across = await schedules.wakesInPartitions([PARTITION, PARTITION - 1, PARTITION + 1], fire(9), 2);
      expect([...across.keys()].sort()).toEqual([PARTITION - 1, PARTITION]);
      expect(across.get(PARTITION)).toEqual([wake(c, fire(1)), wake(e, fire(2))]);
      expect(across.get(PARTITION - 1)).toEqual([wake(elsewhere, fire(1))]);
    });
  });

  describe('write: the compare-and-set', () => {
    it('applies a write at the right version: version + 1, the fields it sets, the others kept', async () => {
      const id = await createSchedule();
      const first = await writeOne(write(id, 0, { nextFireMs: fire(2), lastFiredMs: fire(1) }), T0 + 100);
      expect(first).toEqual({ ok: true, version: 1, due: [], skipped: false, cancelled: 0 });
      const kept = { nextFireMs: fire(2), lastFiredMs: fire(1), generation: 0 };
      expect(await schedules.get(id)).toMatchObject({ version: 1, status: 'active', ...kept });
      expect(await tasks.get(id)).toMatchObject({ updatedMs: T0 + 100, completedMs: null });

      expect((await writeOne(write(id, 1, { status: 'paused' }))).version).toBe(2);
      expect(await schedules.get(id)).toMatchObject({ version: 2, status: 'paused', ...kept });

      expect((await writeOne(write(id, 2, { status: 'active', nextFireMs: fire(5), generation: 1 }))).version).toBe(3);
      expect(await schedules.get(id)).toEqual({
        id,
        status: 'active',
        version: 3,
        definition: DEFINITION,
        nextFireMs: fire(5),
        lastFiredMs: fire(1),
        generation: 1,
        wakeMs: T0,
      });
    });

    it('moves the wake when a write names one, and keeps it otherwise', async () => {
      const id = await createSchedule();
      expect((await writeOne(write(id, 0, { nextFireMs: fire(2), wakeMs: fire(2) + 500 }))).ok).toBe(true);
      expect(await schedules.get(id)).toMatchObject({ nextFireMs: fire(2), wakeMs: fire(2) + 500 });
      expect((await writeOne(write(id, 1, { lastFiredMs: fire(2) }))).ok).toBe(true);
      expect((await schedules.get(id))!.wakeMs).toBe(fire(2) + 500);
    });

    it('refuses a write at the wrong version and does none of it, while the rest of the batch applies', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2), 'blocked'),
      );
      const [pending, held] = instances as [NewInstance, NewInstance];
      const before = await tasks.get(id);
      const other = await createSchedule();
      const fresh = instance(id, fire(3));
      const otherInstance = instance(other, fire(1));

      for (const version of [0, 2]) {
        const results = await schedules.write(
          [
            write(id, version, {
              status: 'paused',
              nextFireMs: fire(9),
              lastFiredMs: fire(8),
              generation: 5,
              instances: [fresh],
              cancel: { instanceId: null, reason: 'paused' },
              release: held.id,
            }),
            write(other, version === 0 ? 0 : 1, { instances: [otherInstance] }),
          ],
          T0 + 500,
        );
        expect(results[0]).toEqual({ ok: false, version, due: [], skipped: false, cancelled: 0 });
        expect(results[1]!.ok).toBe(true);
      }
      expect(await tasks.get(id)).toEqual(before);
      expect(await statusOf(pending.id)).toBe('pending');
      expect(await statusOf(held.id)).toBe('blocked');
      expect(await tasks.get(fresh.id)).toBeNull();
      expect(await instanceCount(id)).toBe(2);
      expect(await statusOf(otherInstance.id)).toBe('pending');
    });

    it('refuses a write to an unknown schedule or to a task that is not a cron schedule', async () => {
      const plain = makeTask({ status: 'blocked' });
      await tasks.submit([plain], T0);
      const results = await schedules.write(
        [write(nextId(), 0, { instances: [instance(nextId(), fire(1))] }), write(plain.id, 0, { status: 'cancelled' })],
        T0,
      );
      expect(results.map((r) => r.ok)).toEqual([false, false]);
      expect(await tasks.get(plain.id)).toMatchObject({ status: 'blocked', version: 0, completedMs: null });
      expect(await schedules.write([], T0)).toEqual([]);
    });

    it('applies only one of two writes to the same schedule at the same version in one batch', async () => {
      const id = await createSchedule();
      const a = instance(id, fire(1));
      const b = instance(id, fire(2));
      const results = await schedules.write([write(id, 0, { instances: [a] }), write(id, 0, { instances: [b] })], T0);
      // Applied in order, the second finds the row at version 1: refused, and none of it written.
      expect.soft(results.filter((r) => r.ok)).toHaveLength(1);
      expect.soft((await schedules.get(id))!.version).toBe(1);
      expect.soft(await instanceCount(id)).toBe(1);
    });

    it('sets completed_at when the schedule ends (cancelled or succeeded), not when it pauses', async () => {
      const [deleted, ended, paused] = [await createSchedule(), await createSchedule(), await createSchedule()];
      await schedules.write(
        [
          write(deleted, 0, { status: 'cancelled' }),
          write(ended, 0, { status: 'succeeded' }),
          write(paused, 0, { status: 'paused' }),
        ],
        T0 + 2000,
      );
      expect(await tasks.get(deleted)).toMatchObject({ status: 'cancelled', completedMs: T0 + 2000 });
      expect(await tasks.get(ended)).toMatchObject({ status: 'succeeded', completedMs: T0 + 2000 });
      expect(await tasks.get(paused)).toMatchObject({ status: 'paused', completedMs: null });
    });
  });

  describe('write: instances', () => {
    it('inserts instances from the schedule row as template and lists the pending ones as due', async () => {
      const template = { payload: { report: 'daily', n: [1, 2] }, priority: 2, maxRetries: 4, timeoutSeconds: 90 };
      const id = await createSchedule(template);
      const schedule = (await tasks.get(id))!;
      const now = instance(id, fire(1), 'pending', { jitterMs: 1234 });
      const held = instance(id, fire(2), 'blocked', { jitterMs: 56 });

      const result = await writeOne(write(id, 0, { nextFireMs: fire(2), instances: [now, held] }), T0 + 10);
      expect(result).toEqual({
        ok: true,
        version: 1,
        due: [{ taskId: now.id, taskType: schedule.taskType, priority: 2, dueMs: fire(1) + 1234 }],
        skipped: false,
        cancelled: 0,
      });
      for (const i of [now, held]) {
        expect(await tasks.get(i.id)).toMatchObject({
          id: i.id,
          taskType: schedule.taskType,
          payload: { report: 'daily', n: [1, 2] },
          status: i.status,
          version: 0,
          scheduleType: 'delayed',
          schedule: null,
          dueMs: i.dueMs,
          priority: 2,
          maxRetries: 4,
          timeoutSeconds: 90,
          attempts: 0,
          partition: i.partition,
          createdMs: T0 + 10,
          completedMs: null,
          scheduleId: id,
          fireMs: i.fireMs,
        });
      }
    });

    it('never inserts an instance twice: a later write with the same id creates and lists nothing', async () => {
      const { id, instances } = await withInstances((s) => instance(s, fire(1)));
      const first = instances[0]!;
      const original = await tasks.get(first.id);
      const next = instance(id, fire(2));

      const again = await writeOne(
        write(id, 1, { instances: [{ ...first, dueMs: first.dueMs + 999 }, next] }),
        T0 + 50,
      );
      expect(again.ok).toBe(true);
      expect(again.due.map((d) => d.taskId)).toEqual([next.id]);
      expect(await tasks.get(first.id)).toEqual(original);

      // Not even once it has finished: a cancelled instance is not brought back.
      await tasks.cancel(first.id, T0 + 60);
      const third = await writeOne(write(id, 2, { instances: [first] }), T0 + 70);
      expect(third.due).toEqual([]);
      expect(await statusOf(first.id)).toBe('cancelled');
      expect(await instanceCount(id)).toBe(2);
    });

    it('inserts the instance of the same fire time again under a new generation', async () => {
      const { id, instances } = await withInstances((s) => instance(s, fire(1)));
      await writeOne(write(id, 1, { status: 'paused', cancel: { instanceId: null, reason: 'paused' } }));
      const resumed = instance(id, fire(1), 'pending', { generation: 1 });
      expect(resumed.id).not.toBe(instances[0]!.id);
      const result = await writeOne(write(id, 2, { generation: 1, instances: [resumed] }));
      expect(result.due.map((d) => d.taskId)).toEqual([resumed.id]);
      expect(await statusOf(instances[0]!.id)).toBe('cancelled');
      expect((await schedules.get(id))!.generation).toBe(1);
    });
  });

  describe('write: cancel', () => {
    it('cancels one pending or held instance by id, with the reason as last error', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2), 'blocked'),
        (s) => instance(s, fire(3)),
      );
      const [a, b, c] = instances as [NewInstance, NewInstance, NewInstance];
      const one = await writeOne(write(id, 1, { cancel: { instanceId: a.id, reason: 'misfire: skipped' } }), T0 + 300);
      expect(one).toMatchObject({ ok: true, cancelled: 1 });
      expect(await tasks.get(a.id)).toMatchObject({
        status: 'cancelled',
        lastError: 'misfire: skipped',
        completedMs: T0 + 300,
      });
      const held = await writeOne(write(id, 2, { cancel: { instanceId: b.id, reason: 'held' } }));
      expect(held.cancelled).toBe(1);
      expect(await statusOf(b.id)).toBe('cancelled');
      expect(await statusOf(c.id)).toBe('pending');
    });

    it('cancels all pending and held instances of the schedule, leaving running and finished ones alone', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2)),
        (s) => instance(s, fire(3)),
        (s) => instance(s, fire(4), 'blocked'),
      );
      const [done, running, pending, held] = instances as [NewInstance, NewInstance, NewInstance, NewInstance];
      const claimedDone = await claimAt(done.id, fire(1));
      await tasks.complete([succeeded(claimedDone)], fire(1) + 5, BACKOFF);
      await claimAt(running.id, fire(2));
      const { instances: others } = await withInstances((s) => instance(s, fire(3)));

      const reason = 'the schedule was paused';
      const result = await writeOne(
        write(id, 1, { status: 'paused', cancel: { instanceId: null, reason } }),
        fire(2) + 10,
      );
      expect(result).toMatchObject({ ok: true, cancelled: 2, due: [] });
      for (const i of [pending, held]) {
        expect(await tasks.get(i.id)).toMatchObject({
          status: 'cancelled',
          lastError: reason,
          completedMs: fire(2) + 10,
        });
      }
      expect(await statusOf(done.id)).toBe('succeeded');
      expect(await statusOf(running.id)).toBe('running');
      expect(await statusOf(others[0]!.id)).toBe('pending');

      // A running instance named by id, and another schedule's instance, are not cancelled either.
      const named = await schedules.write(
        [write(id, 2, { status: 'paused', cancel: { instanceId: running.id, reason: 'x' } })],
        fire(2) + 20,
      );
      expect(named[0]).toMatchObject({ ok: true, cancelled: 0 });
      const foreign = await writeOne(
        write(id, 3, { status: 'paused', cancel: { instanceId: others[0]!.id, reason: 'x' } }),
      );
      expect(foreign.cancelled).toBe(0);
      expect(await statusOf(running.id)).toBe('running');
      expect(await statusOf(others[0]!.id)).toBe('pending');
    });
  });

  describe('write: release of a held instance', () => {
    it('makes it pending and lists it as due when no other instance is pending or running', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2), 'blocked', { jitterMs: 40 }),
        (s) => instance(s, fire(3), 'blocked'),
      );
      const [done, held] = instances as [NewInstance, NewInstance, NewInstance];
      const claimed = await claimAt(done.id, fire(1));
      await tasks.complete([failed(claimed, 'no', false)], fire(1) + 5, BACKOFF);

      const schedule = (await tasks.get(id))!;
      const result = await writeOne(write(id, 1, { release: held.id, lastFiredMs: fire(2) }), fire(2));
      expect(result).toEqual({
        ok: true,
        version: 2,
        due: [{ taskId: held.id, taskType: schedule.taskType, priority: schedule.priority, dueMs: fire(2) + 40 }],
        skipped: false,
        cancelled: 0,
      });
      expect(await tasks.get(held.id)).toMatchObject({ status: 'pending', lastError: null, completedMs: null });
      // Released once only: a second release of the same instance lists nothing.
      expect((await writeOne(write(id, 2, { release: held.id }), fire(2))).due).toEqual([]);
    });

    it('skips it (cancelled, skipped: true) while another instance is running', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2), 'blocked'),
      );
      const [busy, held] = instances as [NewInstance, NewInstance];
      await claimAt(busy.id, fire(1));
      const result = await writeOne(write(id, 1, { release: held.id }), fire(2) + 3);
      expect(result).toEqual({ ok: true, version: 2, due: [], skipped: true, cancelled: 0 });
      const skipped = (await tasks.get(held.id))!;
      expect(skipped).toMatchObject({ status: 'cancelled', completedMs: fire(2) + 3 });
      expect(skipped.lastError).toMatch(/previous instance .*still running/);
      expect(await statusOf(busy.id)).toBe('running');
    });

    it('makes sure of an `ensure` instance first, so that the same write releases or cancels it', async () => {
      const id = await createSchedule();
      const schedule = (await tasks.get(id))!;
      const held = instance(id, fire(1), 'blocked');
      const released = await writeOne(write(id, 0, { ensure: held, release: held.id }), fire(1));
      expect(released).toMatchObject({ ok: true, skipped: false, due: [expect.objectContaining({ taskId: held.id })] });
      expect(await statusOf(held.id)).toBe('pending');
      // One that exists is left as it is (its release above stands), and one the write
      // cancels is created and cancelled: either way the row and its instances agree.
      const again = await writeOne(write(id, 1, { ensure: instance(id, fire(1)) }), fire(1));
      expect(again).toMatchObject({ ok: true, due: [] });
      expect(await statusOf(held.id)).toBe('pending');
      const skipped = instance(id, fire(2));
      const cancelled = await writeOne(
        write(id, 2, { ensure: skipped, cancel: { instanceId: skipped.id, reason: 'misfire: skipped' } }),
        fire(2),
      );
      expect(cancelled).toMatchObject({ ok: true, cancelled: 1 });
      expect(await tasks.get(skipped.id)).toMatchObject({ status: 'cancelled', taskType: schedule.taskType });
      expect(await instanceCount(id)).toBe(2);
    });

    it('skips it while another instance is still pending', async () => {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2), 'blocked'),
      );
      const [waiting, held] = instances as [NewInstance, NewInstance];
      const result = await writeOne(write(id, 1, { release: held.id }), fire(2));
      expect(result).toMatchObject({ ok: true, due: [], skipped: true });
      expect(await statusOf(held.id)).toBe('cancelled');
      expect(await statusOf(waiting.id)).toBe('pending');
    });
  });

  describe('history', () => {
    /**
     * Four started instances of one schedule — retried then succeeded, succeeded, failed,
     * running — one never started, and another schedule's executed instance.
     */
    async function executedSchedule() {
      const { id, instances } = await withInstances(
        (s) => instance(s, fire(1)),
        (s) => instance(s, fire(2)),
        (s) => instance(s, fire(3)),
        (s) => instance(s, fire(4)),
        (s) => instance(s, fire(5)),
      );
      const [retried, ok, broken, running] = instances as [NewInstance, NewInstance, NewInstance, NewInstance];
      const r1 = await claimAt(retried.id, fire(1));
      const [requeue] = await tasks.complete([failed(r1, 'flaky', true)], fire(1) + 100, BACKOFF);
      const r2 = await claimAt(retried.id, requeue!.requeued!.dueMs);
      const s1 = await claimAt(ok.id, fire(2));
      const f1 = await claimAt(broken.id, fire(3));
      await tasks.complete([succeeded(r2), succeeded(s1), failed(f1, 'broken', false)], fire(3) + 100, BACKOFF);
      await claimAt(running.id, fire(4));

      const { instances: foreign } = await withInstances((s) => instance(s, fire(2)));
      await claimAt(foreign[0]!.id, fire(2));
      const expected = [
        [running.id, 1, 'running'],
        [broken.id, 1, 'failed'],
        [ok.id, 1, 'succeeded'],
        [retried.id, 2, 'succeeded'],
        [retried.id, 1, 'failed'],
      ];
      return { id, expected };
    }

    const brief = (page: ExecutionRecord[]) => page.map((e) => [e.taskId, e.attempt, e.status]);

    it("lists the instances' executions newest first, with retried and running attempts, not unstarted ones", async () => {
      const { id, expected } = await executedSchedule();
      const history = await schedules.history(id, 100);
      expect(brief(history)).toEqual(expected);
      const runningAttempt = {
        dueMs: fire(4),
        startedMs: fire(4),
        completedMs: null,
        workerId: 'worker-1',
        error: null,
      };
      expect(history[0]).toMatchObject(runningAttempt);
      expect(history[4]).toMatchObject({
        dueMs: fire(1),
        startedMs: fire(1),
        completedMs: fire(1) + 100,
        error: 'flaky',
      });
      expect(history[1]!.error).toBe('broken');
      expect(await schedules.history(nextId(), 10)).toEqual([]);
      expect(await schedules.history(id, 0)).toEqual([]);
    });

    // Every page but the last is full: a short page is read as the end (`Scheduler.history`
    // hands out a next token only after a full one).
    it.each([1, 2, 3, 5])(
      'pages by %i with the last execution returned as `before`: no repeat, no gap',
      async (limit) => {
        const { id, expected } = await executedSchedule();
        const pages: unknown[][] = [];
        let before: { taskId: string; attempt: number } | undefined;
        for (let i = 0; i < 10; i++) {
          const page = await schedules.history(id, limit, before);
          if (page.length === 0) break;
          pages.push(brief(page));
          const last = page[page.length - 1]!;
          before = { taskId: last.taskId, attempt: last.attempt };
        }
        const want: unknown[][] = [];
        for (let i = 0; i < expected.length; i += limit) want.push(expected.slice(i, i + limit));
        expect(pages).toEqual(want);
      },
    );
  });
});
