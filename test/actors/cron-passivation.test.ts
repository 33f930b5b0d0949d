/**
 * Cron schedules that leave memory between fires, on a FakeClock, against a real
 * ScheduleStore and TaskStore (Postgres and PGlite): the schedule's actor, the wheel
 * partitions that hold its wakes (with in-process buckets and ready queues), the placement
 * that puts wakes and instances on them, and the safety net under the wakes — one node's
 * pieces, wired as the node wires them, with a way to make a schedule's read fail.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CronActivation } from '../../src/actors/cron-activation.js';
import { CRON, cronScheduleBehavior } from '../../src/actors/cron-schedule.js';
import { WHEEL, wheelPartitionBehavior } from '../../src/actors/wheel-partition.js';
import { WheelPlacement } from '../../src/actors/wheel-placement.js';
import { scheduleRecord } from '../../src/domain/new-task.js';
import { NO_EVENTS, TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import { partitionOf } from '../../src/lib/ids.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { SafetyNet } from '../../src/services/safety-net.js';
import { PartitionMarks } from '../../src/store/fences.js';
import { MemoryBucketStore } from '../../src/store/memory-buckets.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { CronDefinition } from '../../src/domain/model.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { makeTask, nextId, uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const PARTITIONS = 4;
const GRACE_MS = 10_000;

const definition = (cronExpression: string): CronDefinition => ({
  cronExpression,
  timezone: 'UTC',
  jitterSeconds: 0,
  misfirePolicy: 'fire_once',
  overlapPolicy: 'allow',
  endMs: null,
});

describe.each(sqlBackends)('cron schedules between fires, on $name', ({ open }) => {
  let testDb: TestDb;

  beforeAll(async () => {
    testDb = await open();
  });
  afterAll(async () => {
    await testDb?.drop();
  });
  // Each test's node sees one schedule: those of the tests before it end with them.
  afterEach(async () => {
    await testDb.db.query(
      `UPDATE tasks SET status = 'cancelled' WHERE status IN ('active', 'paused', 'pending', 'blocked')`,
    );
  });

  /** A node's cron pieces on `clock`. `failReads`: how many schedule reads fail next. */
  function node(clock: FakeClock, awakeIntervalMs: number) {
    const errors: unknown[] = [];
    const onError = (error: unknown): void => void errors.push(error);
    const tasks = new SqlTaskStore(testDb.db);
    const schedules = new SqlScheduleStore(testDb.db);
    const marks = new PartitionMarks();
    const buckets = new MemoryBucketStore(marks);
    const ready = new MemoryReadyQueue(marks);
    const system = new ActorSystem({
      nodeId: 'n1',
      clock,
      snapshots: new SqlSnapshotStore(testDb.db),
      placement: new LocalPlacement('n1'),
      onError,
    });
    const activation = new CronActivation(system, onError);
    const placement = new WheelPlacement({ system, buckets, clock, partitions: PARTITIONS, onDutyFailure: onError });
    /** Schedules whose next read fails. */
    const failRead = new Set<string>();
    // Each partition's first activation rebuilds in full (the store has no stamp for it).
    const wheelEvents = new TypedEvents<NodeEvents>();
    let rebuilt = 0;
    wheelEvents.on('partition:rebuilt', () => void rebuilt++);
    system.register(
      wheelPartitionBehavior({
        tasks,
        schedules,
        wakes: activation,
        buckets,
        ready,
        slotMs: 10,
        nearWindowMs: MINUTE,
        events: wheelEvents,
        onError,
      }),
    );
    system.register(
      cronScheduleBehavior({
        schedules: {
          get: async (id) => {
            if (failRead.delete(id)) throw new Error('the read failed');
            return schedules.get(id);
          },
        },
        write: async (w) => (await schedules.write([w], clock.now()))[0]!,
        placement,
        partitions: PARTITIONS,
        misfireThresholdMs: MINUTE,
        fireAllLimit: 100,
        advanceSpreadMs: 0,
        awakeIntervalMs,
        preloaded: activation,
        events: NO_EVENTS,
        onError,
      }),
    );
    const safetyNet = new SafetyNet({
      tasks,
      schedules,
      wakes: activation,
      system,
      clock,
      backoff: { baseMs: 1000, maxMs: 1000 },
      graceMs: GRACE_MS,
      ownedPartitions: () => Array.from({ length: PARTITIONS }, (_, p) => p),
      placement,
      dependents: { transitions: () => undefined },
      events: NO_EVENTS,
    });
    /** Submits a schedule whose first fire time is `firstMs`, and activates it as a submit does. */
    const submit = async (cron: string, firstMs: number): Promise<{ id: string; type: string }> => {
      // The node keeps its partitions active; so does this one, from the first submit.
      await Promise.all(Array.from({ length: PARTITIONS }, (_, p) => system.ensureActive(WHEEL, String(p))));
      // Their far pages are real reads the fake clock cannot wait for: done before going on.
      await eventually(async () => (rebuilt >= PARTITIONS ? true : undefined), 10_000, 'the partitions to rebuild');
      const id = nextId();
      const task = makeTask({
        id,
        partition: partitionOf(id, PARTITIONS),
        taskType: uniqueType('passive'),
        scheduleType: 'cron',
        status: 'active',
        dueMs: firstMs,
        schedule: definition(cron),
      });
      const [created] = await tasks.submit([task], clock.now());
      await activation.records([scheduleRecord(created!.task)]);
      return { id: task.id, type: task.taskType };
    };
    /** How many instances of `type` are in its ready queue. */
    const readied = async (type: string): Promise<number> => (await ready.take([type], 1000, clock.now())).length;
    return { system, errors, failRead, safetyNet, readied, submit };
  }

  const fireTimes = async (scheduleId: string): Promise<number[]> => {
    const { rows } = await testDb.db.query<{ fire_ms: number }>(
      `SELECT round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms FROM tasks
       WHERE schedule_id = $1 ORDER BY fire_time`,
      [scheduleId],
    );
    return rows.map((r) => Number(r.fire_ms));
  };
  /** Waits until the schedule has an instance for `fireMs` and its actor has left memory. */
  const handled = async (n: ReturnType<typeof node>, clock: FakeClock, id: string, fireMs: number): Promise<void> => {
    await eventually(
      async () => {
        await clock.advance(0);
        return (await fireTimes(id)).includes(fireMs) && !n.system.holds(CRON, id) ? true : undefined;
      },
      10_000,
      `schedule ${id} to create its instance for ${new Date(fireMs).toISOString()} and leave memory`,
    );
  };

  it("a per-minute schedule's actor leaves memory after each fire; the wheel wakes it for the next", async () => {
    const t0 = Date.UTC(2026, 10, 30, 8, 0, 30);
    const clock = new FakeClock(t0);
    const n = node(clock, 2 * SECOND);
    const minute = (i: number): number => Date.UTC(2026, 10, 30, 8, 1 + i);
    const { id, type } = await n.submit('* * * * *', minute(0));
    await handled(n, clock, id, minute(0));
    for (let i = 1; i <= 4; i++) {
      await clock.advanceTo(minute(i - 1));
      await handled(n, clock, id, minute(i));
      expect(n.system.holds(CRON, id)).toBe(false);
    }
    expect(await fireTimes(id)).toEqual([0, 1, 2, 3, 4].map(minute));
    // Each instance that came due went to its ready queue once.
    expect(await n.readied(type)).toBe(4);
    expect(n.errors).toEqual([]);
    await n.system.shutdown();
  });

  it('a per-second schedule fires every second once, leaving memory between fires', async () => {
    const t0 = Date.UTC(2026, 10, 30, 9, 0, 0, 500);
    const clock = new FakeClock(t0);
    const n = node(clock, 0);
    const second = (i: number): number => t0 + 500 + i * SECOND;
    const { id, type } = await n.submit('* * * * * *', second(0));
    await handled(n, clock, id, second(0));
    for (let i = 1; i <= 15; i++) {
      await clock.advanceTo(second(i - 1));
      await handled(n, clock, id, second(i));
    }
    expect(await fireTimes(id)).toEqual(Array.from({ length: 16 }, (_, i) => second(i)));
    expect(await n.readied(type)).toBe(15);
    expect(n.errors).toEqual([]);
    await n.system.shutdown();
  });

  it('a wake its actor did not act on is found by the safety net a grace later, and caught up once', async () => {
    const t0 = Date.UTC(2026, 10, 30, 10, 0, 5);
    const clock = new FakeClock(t0);
    const n = node(clock, 0);
    const tenth = (i: number): number => Date.UTC(2026, 10, 30, 10, 0, 10 + 10 * i);
    const { id } = await n.submit('*/10 * * * * *', tenth(0));
    await handled(n, clock, id, tenth(0));
    // At its wake the schedule's row cannot be read: the activation fails, the wake is spent.
    n.failRead.add(id);
    await clock.advanceTo(tenth(0));
    await eventually(async () => (n.errors.length > 0 ? true : undefined), 10_000, 'the failed activation');
    n.errors.length = 0;
    await clock.advance(GRACE_MS - 1);
    expect(await n.safetyNet.sweep()).toMatchObject({ schedules: 0 });
    expect(await fireTimes(id)).toEqual([tenth(0)]);

    await clock.advance(2);
    expect(await n.safetyNet.sweep()).toMatchObject({ schedules: 1 });
    await handled(n, clock, id, tenth(2));
    // The fire time it was late for got its instance, late; none twice.
    expect(await fireTimes(id)).toEqual([tenth(0), tenth(1), tenth(2)]);
    expect(clock.now()).toBeLessThan(tenth(2));
    expect(await n.safetyNet.sweep()).toMatchObject({ schedules: 0 });
    expect(n.errors).toEqual([]);
    await n.system.shutdown();
  });
});
