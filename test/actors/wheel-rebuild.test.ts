import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WHEEL, wheelPartitionBehavior } from '../../src/actors/wheel-partition.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { NodeEvents } from '../../src/domain/events.js';
import { TypedEvents } from '../../src/lib/events.js';
import { FakeClock } from '../../src/runtime/clock.js';
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
import { eventually } from '../support/waits.js';

/**
 * A full rebuild (the bucket store lost a partition) of a partition holding more far tasks
 * than one page: the overdue task fires first, the far pages follow one message each, the
 * snapshot says far entries are owed until the last page is written, and every far task ends
 * in its bucket exactly once.
 */
const T0 = Date.UTC(2026, 11, 2, 6, 0, 0);
const PARTITION = 7;
const FAR = 12_000; // more than two pages of 5 000

describe('WheelPartition full rebuild: near first, far a page a message', () => {
  let pg: TestDb;
  beforeAll(async () => {
    pg = await createTestSchema(2);
    const at = (expr: string): string => `to_timestamp((${T0} + ${expr})::float8 / 1000)`;
    // The far tasks, due from 10 minutes on (one every 100 ms), and one overdue task.
    await pg.db.query(
      `INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                          timeout_seconds, created_at, updated_at)
       SELECT gen_random_uuid(), 'far', 'pending', 'delayed', ${at('600000 + i * 100')}, 5, ${PARTITION}, 0, 30,
              ${at('0')}, ${at('0')}
         FROM generate_series(1, ${FAR}) AS i
       UNION ALL
       SELECT gen_random_uuid(), 'overdue', 'pending', 'delayed', ${at('-1000')}, 5, ${PARTITION}, 0, 30,
              ${at('0')}, ${at('0')}`,
    );
  });
  afterAll(async () => {
    await pg?.drop();
  });

  /**
   * Activates the partition (a full rebuild: the store has no stamp for it) and waits until its
   * rebuild is done, moving the fake clock on a second at a time for retries. `failReads` far
   * page reads and `failAdds` bucket writes of the far part fail first.
   */
  async function rebuildPartition(failReads = 0, failAdds = 0) {
    const clock = new FakeClock(T0);
    const tasks = new SqlTaskStore(pg.db);
    const failing = Object.create(tasks) as SqlTaskStore;
    failing.pendingInPartition = async (...args) => {
      if (args[1] !== null && failReads-- > 0) throw new Error('the page read failed');
      return tasks.pendingInPartition(...args);
    };
    const errors: unknown[] = [];
    const order: string[] = [];
    const marks = new PartitionMarks();
    const buckets = new MemoryBucketStore(marks);
    const add = buckets.add.bind(buckets);
    let farAdds = 0;
    buckets.add = async (partition: number, entries: DueEntry[], epoch?: number) => {
      if (entries.length === 5_000 && farAdds++ < failAdds) throw new Error('the bucket write failed');
      order.push(`add ${entries.length}`);
      return add(partition, entries, epoch);
    };
    const ready = new MemoryReadyQueue(marks);
    const push = ready.push.bind(ready);
    ready.push = async (entries: DueEntry[], fence?: PushFence) => {
      order.push(`push ${entries.map((e) => e.taskType).join(',')}`);
      return push(entries, fence);
    };
    const snapshots = new MemorySnapshotStore();
    const save = snapshots.save.bind(snapshots);
    snapshots.save = async (kind: string, key: string, epoch: number, state: unknown, nowMs: number) => {
      order.push(`snapshot unplaced=${String((state as { state: { unplaced: boolean } }).state.unplaced)}`);
      return save(kind, key, epoch, state, nowMs);
    };
    const events = new TypedEvents<NodeEvents>();
    const rebuilt = new Promise<void>((resolve) => events.on('partition:rebuilt', () => resolve()));
    const system = new ActorSystem({
      nodeId: 'n1',
      clock,
      snapshots,
      placement: new LocalPlacement('n1'),
      onError: (error) => {
        throw error;
      },
    });
    system.register(
      wheelPartitionBehavior({
        tasks: failing,
        schedules: new SqlScheduleStore(pg.db),
        wakes: { wake: () => undefined },
        buckets,
        ready,
        slotMs: 10,
        nearWindowMs: 60_000,
        rebuildConcurrency: 1,
        events,
        onError: (error) => void errors.push(error),
      }),
    );
    // The store has no stamp for the partition: its activation rebuilds in full.
    await system.ref(WHEEL, String(PARTITION)).ask({ type: 'schedule', entries: [] });
    let done = false;
    void rebuilt.then(() => (done = true));
    // Each look moves the fake clock on a second, so that a page retried after a failure runs.
    await eventually(
      async () => {
        if (done) return true;
        await clock.advance(1_000);
        return undefined;
      },
      30_000,
      'the partition:rebuilt event',
    );
    await system.shutdown();
    return { order, buckets, errors };
  }

  it('fires the overdue task before the far pages are written, then places every far task once', async () => {
    const { order, buckets, errors } = await rebuildPartition();
    expect(errors).toEqual([]);

    const firstPush = order.indexOf('push overdue');
    const adds = order.flatMap((o, i) => (o.startsWith('add ') ? [i] : []));
    expect(firstPush).toBeGreaterThanOrEqual(0);
    expect(adds.length).toBeGreaterThanOrEqual(3); // a page a write
    expect(firstPush).toBeLessThan(adds[0] as number);
    // Owed far entries are in every snapshot before the last page, and cleared after it.
    const lastAdd = adds[adds.length - 1] as number;
    expect(order.slice(0, lastAdd).filter((o) => o.startsWith('snapshot'))).toContain('snapshot unplaced=true');
    expect(order.slice(0, lastAdd)).not.toContain('snapshot unplaced=false');
    expect(order.slice(lastAdd)).toContain('snapshot unplaced=false');

    const { entries } = await buckets.takeUntil(PARTITION, T0 + 24 * 3_600_000);
    expect(entries).toHaveLength(FAR);
    expect(new Set(entries.map((e) => e.taskId)).size).toBe(FAR);
    expect(entries.every((e) => e.taskType === 'far')).toBe(true);
  });

  it('reads or writes a far page again after it failed, and still places every far task once', async () => {
    const { buckets, errors } = await rebuildPartition(2, 1);
    expect(errors.map((e) => (e as Error).message)).toEqual([
      'the page read failed',
      'the page read failed',
      'the bucket write failed',
    ]);
    const { entries } = await buckets.takeUntil(PARTITION, T0 + 24 * 3_600_000);
    expect(new Set(entries.map((e) => e.taskId)).size).toBe(FAR);
    expect(entries).toHaveLength(FAR);
  });
});
