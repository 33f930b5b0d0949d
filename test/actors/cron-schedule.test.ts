/**
 * The cron-schedule actor against a real ScheduleStore (Postgres and PGlite), on a
 * FakeClock, with two actor systems standing for two nodes: a second activation of the
 * same schedule fences the first, so that an activation that comes back from a pause
 * (a SIGSTOPped node) cannot fire a single fire time again or write over its successor.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_EVENTS } from '../../src/lib/events.js';
import { CRON, cronScheduleBehavior } from '../../src/actors/cron-schedule.js';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { FakeClock, type Clock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { isScheduleWake, type DueEntry } from '../../src/domain/model.js';
import type { ScheduleStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { makeTask, uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';
import { CLOCK_BACK_MODELS } from '../support/wall-clock.js';

const SECOND = 1000;

describe.each(sqlBackends)('cron-schedule actor on $name', ({ open }) => {
  let testDb: TestDb;
  let schedules: ScheduleStore;

  beforeAll(async () => {
    testDb = await open();
    schedules = new SqlScheduleStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Schedule writes of every node: started, and not yet answered. */
  const writes = { started: 0, inFlight: 0 };
  /** Each fire time a node's actor handled (wrote as the last fired), with the time it did. */
  interface Fired {
    fireMs: number;
    atMs: number;
  }

  /** One "node": an actor system hosting the cron behavior; what it placed, fired and reported. */
  function node(name: string, clock: Clock) {
    const placed: DueEntry[] = [];
    const fired: Fired[] = [];
    const errors: unknown[] = [];
    const system = new ActorSystem({
      nodeId: name,
      clock,
      snapshots: new SqlSnapshotStore(testDb.db),
      placement: new LocalPlacement(name),
      onError: (error) => errors.push(error),
    });
    system.register(
      cronScheduleBehavior({
        schedules,
        write: async (w) => {
          writes.started++;
          writes.inFlight++;
          try {
            const result = (await schedules.write([w], clock.now()))[0]!;
            if (result.ok && w.lastFiredMs !== null) fired.push({ fireMs: w.lastFiredMs, atMs: clock.now() });
            return result;
          } finally {
            writes.inFlight--;
          }
        },
        placement: { placeSoon: (entries) => void placed.push(...entries) },
        partitions: 8,
        misfireThresholdMs: 60_000,
        fireAllLimit: 100,
        advanceSpreadMs: 0,
        // Per-second schedules stay in memory on their own timers (the production default):
        // no wheel here wakes them (test/actors/cron-passivation.test.ts has one).
        awakeIntervalMs: 2_000,
        preloaded: { take: () => undefined },
        events: NO_EVENTS,
        onError: (error) => errors.push(error),
      }),
    );
    return { system, placed, fired, errors };
  }

  const instanceFires = async (scheduleId: string): Promise<number[]> => {
    const { rows } = await testDb.db.query<{ fire_ms: number }>(
      `SELECT round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms FROM tasks WHERE schedule_id = $1 ORDER BY fire_time`,
      [scheduleId],
    );
    return rows.map((r) => Number(r.fire_ms));
  };

  /**
   * Lets due timers run and the writes they start land (the fake clock does not wait for
   * I/O). A look with no write in flight fires the due timers; settled once the next look
   * finds no write in flight and none started since — none by those timers either.
   */
  const settle = async (clock: { advance(ms: number): Promise<void> }): Promise<void> => {
    let mark: number | null = null;
    await eventually(
      async () => {
        if (writes.inFlight > 0) {
          mark = null;
          return undefined;
        }
        if (mark !== null && writes.started === mark) return true;
        mark = writes.started;
        await clock.advance(0);
        return undefined;
      },
      10_000,
      'the schedule writes to settle',
      5,
    );
  };

  it('a second activation fences the first: the first stops at its next write, nothing fires twice', async () => {
    const t0 = Date.UTC(2026, 10, 30, 10, 0, 0, 500);
    const clock = new FakeClock(t0);
    const task = makeTask({
      taskType: uniqueType('fence'),
      scheduleType: 'cron',
      status: 'active',
      dueMs: t0 + 500,
      schedule: {
        cronExpression: '* * * * * *',
        timezone: 'UTC',
        jitterSeconds: 0,
        misfirePolicy: 'fire_once',
        overlapPolicy: 'allow',
        endMs: null,
      },
    });
    await new SqlTaskStore(testDb.db).submit([task], t0);

    const a = node('a', clock);
    await a.system.ensureActive(CRON, task.id);
    await clock.advance(SECOND);
    await settle(clock);
    expect(await instanceFires(task.id)).toEqual([t0 + 500, t0 + 1500]);

    // Node A "freezes" (its actor stays in memory, holding version v); node B takes over.
    const b = node('b', clock);
    await b.system.ensureActive(CRON, task.id);
    await clock.advance(2 * SECOND);
    await settle(clock);

    // Both actors' timers ran; only B's writes landed. A was refused at its first write
    // and left memory; every fire time has exactly one instance.
    expect(a.system.inspect(CRON, task.id)).toBeNull();
    expect(a.errors.some((e) => isWheelhouseError(e, 'stale_epoch'))).toBe(true);
    expect(b.system.inspect(CRON, task.id)).not.toBeNull();
    expect(await instanceFires(task.id)).toEqual([t0 + 500, t0 + 1500, t0 + 2500, t0 + 3500]);
    const placedIds = [...a.placed, ...b.placed].filter((e) => !isScheduleWake(e)).map((e) => e.taskId);
    expect(new Set(placedIds).size).toBe(placedIds.length);

    // A command sent to a fenced activation answers stale_epoch and the next one works.
    const c = node('c', clock);
    await c.system.ensureActive(CRON, task.id);
    const paused = await b.system
      .ref(CRON, task.id)
      .ask({ type: 'pause' })
      .catch((e: unknown) => e);
    expect(isWheelhouseError(paused, 'stale_epoch')).toBe(true);
    expect(await b.system.ref(CRON, task.id).ask({ type: 'pause' })).toMatchObject({ ok: true, status: 'paused' });

    await Promise.all([a.system.shutdown(), b.system.shutdown(), c.system.shutdown()]);
  });

  describe.each(CLOCK_BACK_MODELS)('when the clock goes back ($name)', (model) => {
    const cronTask = (t0: number, type: string) =>
      makeTask({
        taskType: uniqueType(type),
        scheduleType: 'cron',
        status: 'active',
        dueMs: t0 + 500,
        schedule: {
          cronExpression: '* * * * * *',
          timezone: 'UTC',
          jitterSeconds: 0,
          misfirePolicy: 'fire_once',
          overlapPolicy: 'allow',
          endMs: null,
        },
      });
    /** Moves on second by second, letting the actor catch up after each. */
    const run = async (clock: { advance(ms: number): Promise<void> }, seconds: number): Promise<void> => {
      for (let i = 0; i < seconds; i++) {
        await clock.advance(SECOND);
        await settle(clock);
      }
    };
    const liveInstanceFires = async (scheduleId: string): Promise<number[]> => {
      const { rows } = await testDb.db.query<{ fire_ms: number }>(
        `SELECT round(date_part('epoch', fire_time) * 1000)::float8 AS fire_ms FROM tasks
         WHERE schedule_id = $1 AND status <> 'cancelled' ORDER BY fire_time`,
        [scheduleId],
      );
      return rows.map((r) => Number(r.fire_ms));
    };

    it('does not fire a fire time again when the clock goes back across it, nor any early', async () => {
      const t0 = Date.UTC(2026, 10, 30, 10, 0, 0, 500);
      const time = model.make(t0);
      const task = cronTask(t0, 'back');
      await new SqlTaskStore(testDb.db).submit([task], t0);
      const a = node('a', time.clock);
      await a.system.ensureActive(CRON, task.id);
      await run(time, 3);
      const first = [t0 + 500, t0 + 1500, t0 + 2500];
      expect(a.fired.map((f) => f.fireMs)).toEqual(first);
      expect(await instanceFires(task.id)).toEqual([...first, t0 + 3500]);

      // 30 s back: the three fire times come round again, and the next one's timer is armed.
      await time.back(30 * SECOND);
      await settle(time);
      await run(time, 30);
      expect(time.clock.now()).toBe(t0 + 3000);
      expect(a.fired.map((f) => f.fireMs)).toEqual(first);
      expect(await instanceFires(task.id)).toEqual([...first, t0 + 3500]);

      await run(time, 2);
      expect(a.fired.map((f) => f.fireMs)).toEqual([...first, t0 + 3500, t0 + 4500]);
      expect(await instanceFires(task.id)).toEqual([...first, t0 + 3500, t0 + 4500, t0 + 5500]);
      for (const f of a.fired) expect(f.atMs).toBeGreaterThanOrEqual(f.fireMs);
      expect(a.errors).toEqual([]);
      await a.system.shutdown();
    });

    it('does not fire a fire time again when paused and resumed while the clock is back', async () => {
      const t0 = Date.UTC(2026, 10, 30, 10, 0, 0, 500);
      const time = model.make(t0);
      const task = cronTask(t0, 'back-resume');
      await new SqlTaskStore(testDb.db).submit([task], t0);
      const a = node('a', time.clock);
      await a.system.ensureActive(CRON, task.id);
      await run(time, 3);
      const first = [t0 + 500, t0 + 1500, t0 + 2500];
      expect(a.fired.map((f) => f.fireMs)).toEqual(first);

      const ref = a.system.ref(CRON, task.id);
      expect(await ref.ask({ type: 'pause' })).toMatchObject({ ok: true, status: 'paused' });
      await time.back(30 * SECOND);
      expect(await ref.ask({ type: 'resume' })).toMatchObject({ ok: true, status: 'active' });
      await settle(time);
      await run(time, 33);
      expect(time.clock.now()).toBe(t0 + 6000);

      // Every fire time handled once, none before its time.
      const fires = a.fired.map((f) => f.fireMs);
      expect(fires).toEqual([...new Set(fires)].sort((x, y) => x - y));
      for (const f of a.fired) expect(f.atMs).toBeGreaterThanOrEqual(f.fireMs);
      const live = await liveInstanceFires(task.id);
      expect(live).toEqual([...new Set(live)].sort((x, y) => x - y));
      expect(a.errors).toEqual([]);
      await a.system.shutdown();
    });
  });
});
