import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WHEEL, wheelPartitionBehavior } from '../../src/actors/wheel-partition.js';
import type { DueEntry } from '../../src/domain/model.js';
import { TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { ActorSystem } from '../../src/runtime/system.js';
import type { PushFence } from '../../src/store/coalescing-ready-queue.js';
import { PartitionMarks } from '../../src/store/fences.js';
import { MemoryBucketStore } from '../../src/store/memory-buckets.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';
import { createTestSchema, type TestDb } from '../support/postgres.js';
import { CLOCK_BACK_MODELS } from '../support/wall-clock.js';

/**
 * A wheel partition whose clock is set back (NTP stepping a fast clock back by 30 s), then
 * runs on: no entry reaches the ready queue before the clock reads its due time, and none
 * reaches it twice — neither one that fired before the step (its due time comes round
 * again) nor one whose timer was already armed. Both models of timers: timers due at a wall
 * time (FakeClock set back), and Node's, which count elapsed time and so run "early" by the
 * wall clock after a step back.
 */
const SECOND = 1000;

describe.each(CLOCK_BACK_MODELS)('WheelPartition when the clock goes back: $name', (model) => {
  let pg: TestDb;
  beforeAll(async () => {
    pg = await createTestSchema(2);
  });
  afterAll(async () => {
    await pg?.drop();
  });

  it('fires nothing early and nothing twice', async () => {
    const t0 = Date.UTC(2026, 10, 30, 11, 0, 0) + 250;
    const { clock, advance, back } = model.make(t0);
    const pushed = new Map<string, number[]>();
    const marks = new PartitionMarks();
    const ready = new MemoryReadyQueue(marks);
    const recording = Object.create(ready) as MemoryReadyQueue;
    recording.push = async (entries: DueEntry[], fence?: PushFence) => {
      for (const e of entries) pushed.set(e.taskId, [...(pushed.get(e.taskId) ?? []), clock.now()]);
      return ready.push(entries, fence);
    };
    const errors: unknown[] = [];
    const events = new TypedEvents<NodeEvents>();
    const rebuilt = new Promise<void>((resolve) => events.on('partition:rebuilt', () => resolve()));
    const system = new ActorSystem({
      nodeId: 'n1',
      clock,
      snapshots: new MemorySnapshotStore(),
      placement: new LocalPlacement('n1'),
      onError: (error) => errors.push(error),
    });
    system.register(
      wheelPartitionBehavior({
        tasks: new SqlTaskStore(pg.db),
        schedules: new SqlScheduleStore(pg.db),
        wakes: { wake: () => undefined }, // no schedules here
        buckets: new MemoryBucketStore(marks),
        ready: recording,
        slotMs: 10,
        nearWindowMs: 60_000,
        events,
        onError: (error) => errors.push(error),
      }),
    );
    const wheel = system.ref(WHEEL, '900');
    // Its activation rebuilds in full (the store has no stamp for it): the far part's page reads
    // are real I/O the fake clock cannot wait for, so the test starts once they are done.
    await wheel.ask({ type: 'schedule', entries: [] });
    await rebuilt;
    const entry = (taskId: string, dueMs: number): DueEntry => ({ taskId, taskType: 'back', priority: 5, dueMs });
    const due = new Map<string, number>();
    const schedule = async (entries: DueEntry[]): Promise<void> => {
      for (const e of entries) due.set(e.taskId, Math.max(e.dueMs, clock.now()));
      await wheel.ask({ type: 'schedule', entries });
    };
    /** What has been pushed so far, by task id, with the wall time of each push. */
    const pushedSoFar = (): Record<string, number[]> =>
      Object.fromEntries([...pushed].sort(([a], [b]) => a.localeCompare(b)));

    // Near entries (on the wheel) and far ones (in their minute buckets).
    await schedule([
      entry('a', t0 + 10 * SECOND),
      entry('b', t0 + 20 * SECOND),
      entry('c', t0 + 45 * SECOND),
      entry('d', t0 + 90 * SECOND),
      entry('e', t0 + 200 * SECOND),
    ]);
    await advance(12 * SECOND);
    expect(pushedSoFar()).toEqual({ a: [t0 + 10 * SECOND] });

    // The clock goes back 30 s: a's due time comes round again, b's timer is armed.
    await back(30 * SECOND);
    expect(clock.now()).toBe(t0 - 18 * SECOND);
    // Something scheduled now is due by this clock.
    await schedule([entry('f', clock.now() + 5 * SECOND)]);
    for (let i = 0; i < 25; i++) await advance(SECOND); // up to t0 + 7 s by the wall clock
    expect(clock.now()).toBe(t0 + 7 * SECOND);
    expect(pushedSoFar()).toEqual({ a: [t0 + 10 * SECOND], f: [t0 - 13 * SECOND] });

    // Forward past d, back again, then on past every due time.
    for (let i = 0; i < 95; i++) await advance(SECOND);
    expect(clock.now()).toBe(t0 + 102 * SECOND);
    expect(Object.keys(pushedSoFar())).toEqual(['a', 'b', 'c', 'd', 'f']);
    await back(30 * SECOND);
    for (let i = 0; i < 150; i++) await advance(SECOND);
    expect(clock.now()).toBe(t0 + 222 * SECOND);
    await system.shutdown();

    // Each exactly once, exactly at its due time by the wall clock.
    expect(pushedSoFar()).toEqual(
      Object.fromEntries([...due].sort(([a], [b]) => a.localeCompare(b)).map(([id, at]) => [id, [at]])),
    );
    expect(errors).toEqual([]);
  });
});
