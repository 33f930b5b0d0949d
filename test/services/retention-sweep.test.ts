/**
 * The retention pass of one node, over a recording store: it records the horizon (now minus
 * the retention) before it removes anything, sweeps only the partitions the node owns, batch
 * after batch until a batch says it reached the end, purges expired keys only on the owner of
 * partition 0 (until a batch is not full), and stops between batches when told. The statements
 * themselves are tested on both backends in test/store/task-store-retention.conformance.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import { RetentionSweep } from '../../src/services/retention-sweep.js';
import type { FinishedBatch, RemoveFinished } from '../../src/store/types.js';

const DAY_MS = 86_400_000;

/** A store whose partitions hold `batchesPerPartition` batches each, except those in `empty`. */
function recordingStore(batchesPerPartition: number, keyBatches: number[], empty: readonly number[] = []) {
  const calls: string[] = [];
  const left = new Map<number, number>();
  return {
    calls,
    store: {
      async recordRetentionHorizon(horizonMs: number, retentionMs: number): Promise<void> {
        calls.push(`horizon ${horizonMs} ${retentionMs}`);
      },
      async partitionsPastHorizon(partitions: readonly number[], horizonMs: number): Promise<number[]> {
        const holding = partitions.filter((p) => !empty.includes(p));
        calls.push(`probe ${partitions.join(',')} before ${horizonMs} -> ${holding.join(',')}`);
        return holding;
      },
      async removeFinished(batch: RemoveFinished): Promise<FinishedBatch> {
        const n = left.get(batch.partition) ?? batchesPerPartition;
        left.set(batch.partition, n - 1);
        calls.push(`remove p${batch.partition} after ${batch.after?.taskId ?? '-'} limit ${batch.limit}`);
        return {
          removed: batch.limit,
          examined: batch.limit,
          next: n > 1 ? { completedUs: 1, taskId: `c${n - 1}` } : null,
        };
      },
      async purgeExpiredIdempotencyKeys(nowMs: number, limit: number): Promise<number> {
        const n = keyBatches.shift() ?? 0;
        calls.push(`keys ${nowMs} ${limit} -> ${n}`);
        return n;
      },
    },
  };
}

describe('RetentionSweep', () => {
  it('records the horizon, then sweeps each owned partition that holds something past it to its end, then purges keys on the owner of partition 0', async () => {
    const clock = new FakeClock();
    const { calls, store } = recordingStore(2, [3, 3, 1], [9]);
    const events = new TypedEvents<NodeEvents>(() => undefined);
    const seen: NodeEvents['retention:removed'][] = [];
    events.on('retention:removed', (e) => seen.push(e));
    const sweep = new RetentionSweep({
      tasks: store,
      clock,
      retentionMs: 7 * DAY_MS,
      ownedPartitions: () => [0, 5, 9],
      events,
      taskBatch: 10,
      keyBatch: 3,
    });
    expect(await sweep.sweep()).toEqual({ tasks: 40, idempotencyKeys: 7 });
    const now = clock.now();
    expect(calls).toEqual([
      `horizon ${now - 7 * DAY_MS} ${7 * DAY_MS}`,
      `probe 0,5,9 before ${now - 7 * DAY_MS} -> 0,5`,
      'remove p0 after - limit 10',
      'remove p0 after c1 limit 10',
      'remove p5 after - limit 10',
      'remove p5 after c1 limit 10',
      `keys ${now} 3 -> 3`,
      `keys ${now} 3 -> 3`,
      `keys ${now} 3 -> 1`,
    ]);
    expect(seen).toEqual([{ tasks: 40, idempotencyKeys: 7 }]);
  });

  it('leaves the keys to the owner of partition 0, and a node that owns nothing does nothing', async () => {
    const clock = new FakeClock();
    const events = new TypedEvents<NodeEvents>(() => undefined);
    const a = recordingStore(1, [5]);
    await new RetentionSweep({ tasks: a.store, clock, retentionMs: 1000, ownedPartitions: () => [3], events }).sweep();
    expect(a.calls.filter((c) => c.startsWith('keys'))).toEqual([]);
    const b = recordingStore(1, []);
    const pass = await new RetentionSweep({
      tasks: b.store,
      clock,
      retentionMs: 1000,
      ownedPartitions: () => [],
      events,
    }).sweep();
    expect(pass).toEqual({ tasks: 0, idempotencyKeys: 0 });
    expect(b.calls).toEqual([]);
  });

  it('stops between batches once told', async () => {
    const clock = new FakeClock();
    const events = new TypedEvents<NodeEvents>(() => undefined);
    const { calls, store } = recordingStore(1000, []);
    let sweep: RetentionSweep | null = null;
    const stopping = {
      ...store,
      async removeFinished(batch: RemoveFinished): Promise<FinishedBatch> {
        if (calls.filter((c) => c.startsWith('remove')).length === 2) sweep!.stop();
        return store.removeFinished(batch);
      },
    };
    sweep = new RetentionSweep({ tasks: stopping, clock, retentionMs: 1000, ownedPartitions: () => [0, 1], events });
    await sweep.sweep();
    expect(calls.filter((c) => c.startsWith('remove'))).toHaveLength(3);
    expect(calls.filter((c) => c.startsWith('keys'))).toEqual([]);
    expect(await sweep.sweep()).toEqual({ tasks: 0, idempotencyKeys: 0 });
  });
});
