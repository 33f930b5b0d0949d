/**
 * TaskStore conformance, retention: `removeFinished` removes exactly the finished tasks that
 * ended before the horizon, with their executions and their own edges, a bounded batch at a
 * time; it leaves every unfinished task, live schedules, graphs not wholly finished and past
 * retention, predecessors of tasks still waiting, and tasks whose idempotency key is live.
 * Expired keys are purged in bounded batches; the horizon record only moves forward. Runs
 * against Postgres and PGlite (one SQL for both).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidv7 } from '../../src/lib/ids.js';
import { SqlDagStore } from '../../src/store/dag-store.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { CronDefinition, NewTask } from '../../src/domain/model.js';
import type { DagStore } from '../../src/store/dag-types.js';
import type { RetentionCursor, ScheduleStore, ScheduleWrite, TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, nextId, tokenDigest, uniqueType } from '../support/tasks.js';

const DAY_MS = 86_400_000;
/** The horizon of most sweeps here: a week after T0, where everything below ended. */
const HORIZON = T0 + 7 * DAY_MS;

const CRON: CronDefinition = {
  cronExpression: '0 * * * *',
  timezone: 'UTC',
  jitterSeconds: 0,
  misfirePolicy: 'skip',
  overlapPolicy: 'skip',
  endMs: null,
};

describe.each(sqlBackends)('TaskStore on $name: retention', ({ open }) => {
  let testDb: TestDb;
  let tasks: TaskStore;
  let schedules: ScheduleStore;
  let dags: DagStore;

  beforeAll(async () => {
    testDb = await open();
    tasks = new SqlTaskStore(testDb.db);
    schedules = new SqlScheduleStore(testDb.db);
    dags = new SqlDagStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const q = async <R extends Record<string, unknown>>(text: string, params: unknown[] = []): Promise<R[]> =>
    (await testDb.db.query<R>(text, params)).rows;
  const present = async (ids: readonly string[]): Promise<Set<string>> =>
    new Set((await q<{ id: string }>('SELECT id::text FROM tasks WHERE id = ANY($1::uuid[])', [ids])).map((r) => r.id));
  const executionsOf = async (ids: readonly string[]): Promise<number> =>
    (await q<{ n: number }>('SELECT count(*)::int AS n FROM executions WHERE task_id = ANY($1::uuid[])', [ids]))[0]!.n;
  const edgesOf = async (ids: readonly string[]): Promise<number> =>
    (
      await q<{ n: number }>('SELECT count(*)::int AS n FROM task_dependencies WHERE task_id = ANY($1::uuid[])', [ids])
    )[0]!.n;

  /**
   * Every partition that holds a task swept to `horizonMs`, batch after batch (as a node sweeps
   * the partitions it owns): answers how many went.
   */
  async function sweep(horizonMs = HORIZON, nowMs = horizonMs, limit = 1000): Promise<number> {
    let removed = 0;
    const partitions = await q<{ partition: number }>('SELECT DISTINCT partition FROM tasks ORDER BY partition');
    for (const { partition } of partitions) {
      let after: RetentionCursor | null = null;
      do {
        const batch = await tasks.removeFinished({ partition, horizonMs, nowMs, after, limit });
        expect(batch.removed).toBeLessThanOrEqual(limit);
        removed += batch.removed;
        after = batch.next;
      } while (after !== null);
    }
    return removed;
  }

  async function submit(overrides: Partial<NewTask> = {}, atMs = T0): Promise<string> {
    const task = makeTask(overrides);
    await tasks.submit([task], atMs);
    return task.id;
  }

  /** Claims `id` at `atMs` and reports `outcome` 10 ms later. */
  async function finish(id: string, atMs: number, outcome: 'succeeded' | 'failed' = 'succeeded', retryable = false) {
    const [claimed] = await tasks.claim([id], 'w-retention', atMs);
    if (claimed === undefined) throw new Error(`could not claim ${id}`);
    const [transition] = await tasks.complete(
      [
        {
          taskId: id,
          tokenDigest: tokenDigest(claimed.leaseToken),
          outcome,
          error: outcome === 'failed' ? 'boom' : null,
          retryable,
        },
      ],
      atMs + 10,
      BACKOFF,
    );
    if (transition === undefined) throw new Error(`could not complete ${id}`);
    return transition;
  }

  it('removes the finished tasks that ended before the horizon with their executions, and nothing else', async () => {
    // Gone: succeeded after a retried failure (an execution row), failed, cancelled while pending.
    const succeeded = await submit();
    expect((await finish(succeeded, T0, 'failed', true)).status).toBe('pending');
    await finish(succeeded, T0 + 5000);
    expect(await executionsOf([succeeded])).toBe(1);
    const failed = await submit({ maxRetries: 0 });
    await finish(failed, T0);
    const cancelled = await submit();
    expect((await tasks.cancel(cancelled, T0)).kind).toBe('cancelled');
    const scheduleCancelled = await submit({
      taskType: uniqueType('cron'),
      scheduleType: 'cron',
      status: 'active',
      schedule: CRON,
    });
    expect((await schedules.write([scheduleWrite(scheduleCancelled, 'cancelled')], T0))[0]?.ok).toBe(true);

    // Kept: finished after the horizon, unfinished of any age, live schedules, a retried one.
    const recent = await submit();
    await finish(recent, HORIZON);
    const farFuture = await submit({ scheduleType: 'delayed', dueMs: T0 + 30 * DAY_MS });
    const running = await submit();
    await tasks.claim([running], 'w-retention', T0);
    const blocked = await submit({ dependsOn: [farFuture] });
    expect((await tasks.get(blocked))?.status).toBe('blocked');
    const active = await submit({
      taskType: uniqueType('cron'),
      scheduleType: 'cron',
      status: 'active',
      schedule: CRON,
    });
    const paused = await submit({
      taskType: uniqueType('cron'),
      scheduleType: 'cron',
      status: 'active',
      schedule: CRON,
    });
    expect((await schedules.write([scheduleWrite(paused, 'paused')], T0))[0]?.ok).toBe(true);
    const retried = await submit({ maxRetries: 0 });
    await finish(retried, T0, 'failed');
    expect((await tasks.retry(retried, T0 + DAY_MS)).kind).toBe('retried');

    const gone = [succeeded, failed, cancelled, scheduleCancelled];
    const kept = [recent, farFuture, running, blocked, active, paused, retried];
    expect(await sweep()).toBe(gone.length);
    expect(await present([...gone, ...kept])).toEqual(new Set(kept));
    expect(await executionsOf(gone)).toBe(0);
    // The retried task's ended attempt stays with it.
    expect(await executionsOf([retried])).toBe(1);
    expect((await tasks.get(paused))?.status).toBe('paused');
    // A second pass finds nothing more; the recent one goes once the horizon passes it.
    expect(await sweep()).toBe(0);
    expect(await sweep(HORIZON + 1000)).toBe(1);
    expect(await present([recent])).toEqual(new Set());
  });

  it('removes at most `limit` tasks a batch, and the cursor passes over the ones that must stay', async () => {
    const partition = 7;
    // Oldest first: three that must stay (their idempotency keys are live), then 25 that go.
    const held: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await submit({ partition, idempotencyKey: `held-${i}-${nextId()}`, requestHash: 'h' });
      await finish(id, T0 + i);
      held.push(id);
    }
    const doomed: string[] = [];
    for (let i = 0; i < 25; i++) {
      const id = await submit({ partition });
      await finish(id, T0 + 100 + i);
      doomed.push(id);
    }
    const elsewhere = await submit({ partition: 8 });
    await finish(elsewhere, T0);
    const horizonMs = T0 + 2 * DAY_MS;
    const nowMs = T0 + 1000; // the keys are live

    const first = await tasks.removeFinished({ partition, horizonMs, nowMs, after: null, limit: 3 });
    expect(first).toMatchObject({ removed: 0, examined: 3 });
    expect(first.next).not.toBeNull();
    const second = await tasks.removeFinished({ partition, horizonMs, nowMs, after: first.next, limit: 10 });
    expect(second).toMatchObject({ removed: 10, examined: 10 });
    expect(await present(doomed.slice(0, 10))).toEqual(new Set());
    expect(await present(doomed.slice(10))).toEqual(new Set(doomed.slice(10)));
    const third = await tasks.removeFinished({ partition, horizonMs, nowMs, after: second.next, limit: 10 });
    expect(third).toMatchObject({ removed: 10, examined: 10 });
    const last = await tasks.removeFinished({ partition, horizonMs, nowMs, after: third.next, limit: 10 });
    expect(last).toEqual({ removed: 5, examined: 5, next: null });
    expect(await present([...held, ...doomed, elsewhere])).toEqual(new Set([...held, elsewhere]));
    // A batch of 0 does nothing.
    expect(await tasks.removeFinished({ partition: 8, horizonMs, nowMs, after: null, limit: 0 })).toEqual({
      removed: 0,
      examined: 0,
      next: null,
    });
  });

  it('answers the partitions that hold a finished task past the horizon, in one probe', async () => {
    // 40: finished before the horizon; 41: finished after it; 42: pending and old; 43: empty.
    const past = await submit({ partition: 40 });
    await finish(past, T0);
    const within = await submit({ partition: 41 });
    await finish(within, T0 + 2 * DAY_MS);
    await submit({ partition: 42, scheduleType: 'delayed', dueMs: T0 - DAY_MS });
    const horizonMs = T0 + DAY_MS;
    expect(await tasks.partitionsPastHorizon([43, 42, 41, 40], horizonMs)).toEqual([40]);
    expect(await tasks.partitionsPastHorizon([40, 41], T0 + 3 * DAY_MS)).toEqual([40, 41]);
    expect(await tasks.partitionsPastHorizon([], horizonMs)).toEqual([]);
  });

  it('keeps a graph until every task of it has finished and passed retention, then removes it whole with its edges', async () => {
    const dagId = uuidv7(T0);
    const a = nextId();
    const b = nextId();
    const c = nextId();
    await dags.submitGraph(
      [
        makeTask({ id: a, dagId, dagRef: 'a' }),
        makeTask({ id: b, dagId, dagRef: 'b', dependsOn: [a] }),
        makeTask({ id: c, dagId, dagRef: 'c', dependsOn: [b] }),
      ],
      { id: dagId, idempotencyKey: null, requestHash: '' },
      T0,
    );
    await finish(a, T0);
    await dags.reconcile([b], T0 + 100);
    await finish(b, T0 + 200);
    await dags.reconcile([c], T0 + 300);
    expect((await tasks.get(c))?.status).toBe('pending');
    await dags.clearEvents([a, b]);

    // c is pending: nothing of the graph goes, though a and b ended long before the horizon.
    await sweep();
    expect(await present([a, b, c])).toEqual(new Set([a, b, c]));
    expect(await edgesOf([b, c])).toBe(2);

    // c ends after the horizon: still nothing; once the horizon passes it, all three go.
    await finish(c, HORIZON);
    await sweep();
    expect(await present([a, b, c])).toEqual(new Set([a, b, c]));
    expect(await sweep(HORIZON + 1000)).toBe(3);
    expect(await present([a, b, c])).toEqual(new Set());
    expect(await edgesOf([a, b, c])).toBe(0);
    expect(await dags.graph(dagId)).toBeNull();
  });

  it('keeps a predecessor while a dependent waits or its outbox event is undelivered', async () => {
    const p = await submit();
    const q2 = await submit({ scheduleType: 'delayed', dueMs: T0 + 1000 });
    await finish(p, T0);
    const dependent = await submit({ dependsOn: [p, q2] }, T0 + 100);
    expect((await tasks.get(dependent))?.status).toBe('blocked');
    await dags.clearEvents([p]);

    // The dependent waits (on q2): p stays, its edge to p with it.
    await sweep();
    expect(await present([p, dependent])).toEqual(new Set([p, dependent]));

    // q2 and then the dependent finish; q2's outbox event is still there, so q2 stays.
    await finish(q2, T0 + 2000);
    await dags.reconcile([dependent], T0 + 3000);
    await finish(dependent, T0 + 4000);
    await sweep();
    expect(await present([p, q2, dependent])).toEqual(new Set([q2]));
    expect(await edgesOf([dependent])).toBe(0);
    await dags.clearEvents([q2]);
    expect(await sweep()).toBe(1);
    expect(await present([q2])).toEqual(new Set());
  });

  it('keeps a task while its idempotency key is live; the key expires and is purged in bounded batches', async () => {
    const taskType = uniqueType('keys');
    const key = `order-${nextId()}`;
    const keyed = await submit({ taskType, idempotencyKey: key, requestHash: 'h1' });
    await finish(keyed, T0);
    for (let i = 0; i < 4; i++) await submit({ taskType, idempotencyKey: `other-${i}`, requestHash: 'h' });
    await submit({ taskType, idempotencyKey: 'later', requestHash: 'h' }, T0 + 20 * 3_600_000);

    // The horizon has passed it, but its key lives until T0 + 24 h.
    await sweep(T0 + 1000, T0 + 23 * 3_600_000);
    expect(await present([keyed])).toEqual(new Set([keyed]));
    await sweep(T0 + 1000, T0 + 25 * 3_600_000);
    expect(await present([keyed])).toEqual(new Set());

    // Keys whose 24 h ended go, `limit` at a time; the one taken at T0 + 20 h stays.
    const allKeys = async () => (await q<{ n: number }>('SELECT count(*)::int AS n FROM idempotency_keys'))[0]!.n;
    const keys = async () =>
      (await q<{ key: string }>('SELECT key FROM idempotency_keys WHERE task_type = $1 ORDER BY key', [taskType])).map(
        (r) => r.key,
      );
    const purgeAt = T0 + 25 * 3_600_000;
    const before = await allKeys();
    expect(await tasks.purgeExpiredIdempotencyKeys(purgeAt, 2)).toBe(2);
    expect(await allKeys()).toBe(before - 2);
    while ((await tasks.purgeExpiredIdempotencyKeys(purgeAt, 2)) === 2);
    expect(await keys()).toEqual(['later']);

    // The key of the removed task is free again: a new submission with it makes a new task.
    const [again] = await tasks.submit([makeTask({ taskType, idempotencyKey: key, requestHash: 'h1' })], purgeAt);
    expect(again?.created).toBe(true);
  });

  it('records the horizon it applies; an earlier one never moves it back', async () => {
    await tasks.recordRetentionHorizon(T0, DAY_MS);
    expect(await tasks.retentionHorizon()).toEqual({ horizonMs: T0, retentionMs: DAY_MS });
    await tasks.recordRetentionHorizon(T0 - 1000, 2 * DAY_MS);
    expect(await tasks.retentionHorizon()).toEqual({ horizonMs: T0, retentionMs: DAY_MS });
    await tasks.recordRetentionHorizon(T0 + 1000, 7 * DAY_MS);
    expect(await tasks.retentionHorizon()).toEqual({ horizonMs: T0 + 1000, retentionMs: 7 * DAY_MS });
  });
});

/** A schedule write that only changes the status (the row is at version 0 after its submit). */
function scheduleWrite(scheduleId: string, status: 'paused' | 'cancelled'): ScheduleWrite {
  return {
    scheduleId,
    version: 0,
    status,
    nextFireMs: null,
    lastFiredMs: null,
    generation: null,
    wakeMs: null,
    ensure: null,
    release: null,
    instances: [],
    cancel: null,
  };
}
