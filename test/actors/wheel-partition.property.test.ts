import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import { WHEEL, wheelPartitionBehavior } from '../../src/actors/wheel-partition.js';
import { FakeClock } from '../../src/runtime/clock.js';
import { LocalPlacement } from '../../src/runtime/placement.js';
import { SqlScheduleStore } from '../../src/store/schedule-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { ActorSystem } from '../../src/runtime/system.js';
import type { PushFence } from '../../src/store/coalescing-ready-queue.js';
import { PartitionMarks } from '../../src/store/fences.js';
import { MemoryBucketStore } from '../../src/store/memory-buckets.js';
import { MemoryReadyQueue } from '../../src/store/memory-ready-queue.js';
import type { DueEntry } from '../../src/domain/model.js';
import { MemorySnapshotStore } from '../runtime/memory-snapshots.js';
import { createTestSchema, type TestDb } from '../support/postgres.js';

/**
 * The wheel-partition actor against an oracle, on a fake clock: random tasks scheduled at
 * random moments — due in the past, in the slot the clock is passing, in the near window,
 * or minutes ahead in the far buckets — interleaved with random clock advances that cross
 * cascades. Each task must reach the ready queue exactly once, at exactly
 * max(due time, the moment it was scheduled): never early, never late, never twice.
 */
type Op = { kind: 'schedule'; offsetMs: number } | { kind: 'advance'; byMs: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('schedule' as const),
      offsetMs: fc.integer({ min: -200, max: 5 * 60_000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('schedule' as const), offsetMs: fc.integer({ min: -5, max: 25 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('advance' as const), byMs: fc.integer({ min: 0, max: 90_000 }) }),
  },
);

describe('WheelPartition (property, fake clock, against an oracle)', () => {
  let pg: TestDb;
  beforeAll(async () => {
    pg = await createTestSchema(2);
  });
  afterAll(async () => {
    await pg?.drop();
  });

  it('pushes every task at exactly max(due, scheduled), once', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 60 }),
        fc.integer({ min: 0, max: 59_999 }),
        async (ops, startOffsetMs) => {
          run++;
          const clock = new FakeClock(Date.UTC(2026, 10, 30, 11, 0, 0) + startOffsetMs);
          const pushed = new Map<string, number[]>();
          // One set of fences and stamps for both, as the embedded backend has.
          const marks = new PartitionMarks();
          const ready = new MemoryReadyQueue(marks);
          const recording = Object.create(ready) as MemoryReadyQueue;
          recording.push = async (entries: DueEntry[], fence?: PushFence) => {
            for (const e of entries) pushed.set(e.taskId, [...(pushed.get(e.taskId) ?? []), clock.now()]);
            return ready.push(entries, fence);
          };
          const events = new TypedEvents<NodeEvents>();
          const rebuilt = new Promise<void>((resolve) => events.on('partition:rebuilt', () => resolve()));
          const system = new ActorSystem({
            nodeId: 'n1',
            clock,
            snapshots: new MemorySnapshotStore(),
            placement: new LocalPlacement('n1'),
            onError: (error) => {
              throw error;
            },
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
              onError: (error) => {
                throw error;
              },
            }),
          );
          // A partition of its own per run: the task table has nothing pending for it. Its
          // activation rebuilds in full (the store has no stamp for it); the far part's page
          // reads are real I/O the fake clock cannot wait for, so the run starts once it is done.
          const wheel = system.ref(WHEEL, String(1000 + run));
          await wheel.ask({ type: 'schedule', entries: [] });
          await rebuilt;
          const expected = new Map<string, number>();
          let seq = 0;
          for (const o of ops) {
            if (o.kind === 'advance') {
              await clock.advance(o.byMs);
              continue;
            }
            const now = clock.now();
            const entry: DueEntry = {
              taskId: `r${run}-t${seq++}`,
              taskType: 'p',
              priority: 5,
              dueMs: now + o.offsetMs,
            };
            await wheel.ask({ type: 'schedule', entries: [entry] });
            expected.set(entry.taskId, Math.max(entry.dueMs, now));
          }
          const lastDue = Math.max(clock.now(), ...expected.values());
          await clock.advanceTo(lastDue + 1);
          await system.shutdown();

          for (const [taskId, at] of expected)
            expect({ taskId, pushedAt: pushed.get(taskId) }).toEqual({ taskId, pushedAt: [at] });
          expect(pushed.size).toBe(expected.size);
        },
      ),
      { numRuns: 60 },
    );
  });
});
