/**
 * Limits read from the task row (issue 28, decision 0023): every statement that builds a due
 * entry or a transition from a task carries the task's `limits`, so the wheel, the limit
 * actors and the permits given back never read the row again — a wheel partition's rebuild,
 * a result (retry and end), a lease expiry, a start deadline, a hand-back, a manual retry, a
 * cancel, a DAG release and a cron instance (created or released). A task that names none
 * carries none (no `limits` key). The column is written directly here: submitting with
 * limits is another change's. Runs against Postgres and PGlite.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceId, partitionOf } from '../../src/lib/ids.js';
import { SqlDagStore } from '../../src/store/dag-store.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ClaimedTask, Completion, CronDefinition, NewTask } from '../../src/domain/model.js';
import type { DagStore } from '../../src/store/dag-types.js';
import type { NewInstance, ScheduleStore, ScheduleWrite, TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, tokenDigest, uniqueType } from '../support/tasks.js';

const LIMITS = ['customer:42', 'stripe-api'];

/** A partition no other task of this file is placed in, so a rebuild's page holds only ours. */
const PARTITION = 61;

const DEFINITION: CronDefinition = {
  cronExpression: '*/1 * * * *',
  timezone: 'UTC',
  jitterSeconds: 0,
  misfirePolicy: 'skip',
  overlapPolicy: 'skip',
  endMs: T0 + 86_400_000,
};

describe.each(sqlBackends)('TaskStore on $name: limits in entries and transitions', ({ open }) => {
  let testDb: TestDb;
  let tasks: TaskStore;
  let dags: DagStore;
  let schedules: ScheduleStore;

  beforeAll(async () => {
    testDb = await open();
    tasks = new SqlTaskStore(testDb.db);
    dags = new SqlDagStore(testDb.db);
    schedules = new SqlScheduleStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Submits a task, then gives it `limits` in the column (NULL: none). */
  async function submit(limits: string[] | null, overrides: Partial<NewTask> = {}): Promise<NewTask> {
    const task = makeTask({ taskType: uniqueType('limits'), ...overrides });
    await tasks.submit([task], T0);
    await testDb.db.query('UPDATE tasks SET limits = $2::text[] WHERE id = $1', [task.id, limits]);
    return task;
  }
  async function claim(id: string, nowMs = T0 + 10): Promise<ClaimedTask> {
    const [claimed] = await tasks.claim([id], 'worker-1', nowMs);
    if (claimed === undefined) throw new Error(`could not claim ${id}`);
    return claimed;
  }
  const result = (c: ClaimedTask, ok: boolean, retryable = true): Completion => ({
    taskId: c.id,
    tokenDigest: tokenDigest(c.leaseToken),
    outcome: ok ? 'succeeded' : 'failed',
    error: ok ? null : 'boom',
    retryable,
  });
  const entryOf = (task: NewTask, dueMs: number, limits?: string[]) => ({
    taskId: task.id,
    taskType: task.taskType,
    priority: task.priority,
    dueMs,
    ...(limits === undefined ? {} : { limits }),
  });

  it("rebuilds a partition's entries with their limits, and reads them with the task", async () => {
    const limited = await submit(LIMITS, { partition: PARTITION });
    const plain = await submit(null, { partition: PARTITION, dueMs: T0 + 1 });
    expect(await tasks.pendingInPartition(PARTITION, null, T0 + 10, 10)).toStrictEqual([
      entryOf(limited, T0, LIMITS),
      entryOf(plain, T0 + 1),
    ]);
    expect((await tasks.get(limited.id))?.limits).toEqual(LIMITS);
    expect((await tasks.get(plain.id))?.limits).toEqual([]);
  });

  it('carries the limits in the transitions of results: a retry (and its entry) and an end', async () => {
    const limited = await submit(LIMITS);
    const plain = await submit(null);
    const [retried, plainRetried] = await tasks.complete(
      [result(await claim(limited.id), false), result(await claim(plain.id), false)],
      T0 + 100,
      BACKOFF,
    );
    expect(retried).toMatchObject({ taskId: limited.id, status: 'pending', limits: LIMITS });
    expect(retried?.requeued).toStrictEqual(entryOf(limited, retried?.requeued?.dueMs ?? 0, LIMITS));
    expect(plainRetried).toMatchObject({ taskId: plain.id, status: 'pending' });
    expect('limits' in (plainRetried ?? {})).toBe(false);
    expect('limits' in (plainRetried?.requeued ?? {})).toBe(false);

    const [ended] = await tasks.complete([result(await claim(limited.id, T0 + 60_000), true)], T0 + 60_100, BACKOFF);
    expect(ended).toMatchObject({ status: 'succeeded', requeued: null, limits: LIMITS });
  });

  it('carries the limits when a lease expires and when a start deadline passes', async () => {
    const leased = await submit(LIMITS);
    const claimed = await claim(leased.id);
    const expired = await tasks.expireLease(leased.id, claimed.version, claimed.leaseExpiresMs + 1, BACKOFF);
    expect(expired).toMatchObject({ status: 'pending', limits: LIMITS });
    expect(expired?.requeued?.limits).toEqual(LIMITS);

    const late = await submit(LIMITS, { startDeadlineSeconds: 1 });
    const transitions = await tasks.expireUnstarted([late.partition], T0 + 5_000, 100);
    expect(transitions.find((t) => t.taskId === late.id)).toMatchObject({ status: 'expired', limits: LIMITS });
  });

  it('hands an entry back with its limits, and retries and cancels a task with them', async () => {
    const handed = await submit(LIMITS);
    const claimed = await claim(handed.id);
    expect(await tasks.release([{ taskId: handed.id, version: claimed.version }], T0 + 20)).toStrictEqual([
      entryOf(handed, T0, LIMITS),
    ]);

    const failed = await submit(LIMITS, { maxRetries: 0 });
    await tasks.complete([result(await claim(failed.id), false, false)], T0 + 100, BACKOFF);
    const retried = await tasks.retry(failed.id, T0 + 5_000);
    expect(retried).toMatchObject({ kind: 'retried', task: { status: 'pending', limits: LIMITS } });

    const waiting = await submit(LIMITS);
    expect(await tasks.cancel(waiting.id, T0 + 30)).toMatchObject({ kind: 'cancelled', task: { limits: LIMITS } });
  });

  it('releases a DAG dependent with its limits', async () => {
    const predecessor = await submit(null);
    const dependent = await submit(LIMITS, { dependsOn: [predecessor.id] });
    await tasks.complete([result(await claim(predecessor.id), true)], T0 + 100, BACKOFF);
    const [released] = await dags.reconcile([dependent.id], T0 + 200);
    expect(released?.due).toStrictEqual(entryOf(dependent, T0 + 200, LIMITS));
  });

  it("gives a cron instance its schedule's limits, in its entry when created and when released", async () => {
    const schedule = await submit(LIMITS, { scheduleType: 'cron', status: 'active', schedule: DEFINITION });
    const instance = (fireMs: number, status: NewInstance['status']): NewInstance => {
      const id = instanceId(schedule.id, 0, fireMs);
      return { id, fireMs, dueMs: fireMs, partition: partitionOf(id, 64), status };
    };
    const write = (version: number, change: Partial<ScheduleWrite>): ScheduleWrite => ({
      scheduleId: schedule.id,
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
    });
    const now = instance(T0 + 60_000, 'pending');
    const held = instance(T0 + 120_000, 'blocked');
    const [created] = await schedules.write([write(0, { instances: [now, held] })], T0 + 10);
    const dueOf = (i: NewInstance) => ({ taskId: i.id, taskType: schedule.taskType, priority: 5, dueMs: i.dueMs });
    expect(created?.due).toStrictEqual([{ ...dueOf(now), limits: LIMITS }]);
    expect((await tasks.get(held.id))?.limits).toEqual(LIMITS);

    await tasks.cancel(now.id, T0 + 20);
    const [released] = await schedules.write([write(1, { release: held.id })], T0 + 120_000);
    expect(released?.due).toStrictEqual([{ ...dueOf(held), limits: LIMITS }]);
  });
});
