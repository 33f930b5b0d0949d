import v8 from 'node:v8';
import { describe, expect, it } from 'vitest';
import {
  fullCollection,
  IdleCollector,
  MAX_ROUNDS,
  MIN_DEPARTED,
  MIN_GARBAGE_BYTES,
  MIN_SHRINK_BYTES,
  QUIET_UTILIZATION,
  type IdleCollectDeps,
} from '../../src/node/idle-collect.js';

const MiB = 1024 * 1024;

/**
 * A collector over a made-up node: its departures, heap and loop are set by the test. A
 * collection leaves `liveAfter` used and gives back `shrinkBy` committed bytes, down to what is used.
 */
function fakeNode(start: { heap: number }) {
  const node = {
    departed: 0,
    used: start.heap,
    committed: start.heap,
    busy: 0,
    collections: 0,
    liveAfter: start.heap,
    shrinkBy: Number.POSITIVE_INFINITY,
    pauses: 0,
  };
  const deps: IdleCollectDeps = {
    departed: () => node.departed,
    heap: () => ({ used: node.used, committed: node.committed }),
    utilization: () => node.busy,
    collect: () => {
      node.collections++;
      node.used = node.liveAfter;
      node.committed = Math.max(node.used, node.committed - node.shrinkBy);
      return Promise.resolve();
    },
    pause: () => {
      node.pauses++;
      return Promise.resolve();
    },
  };
  /** The heap grew by `garbage` bytes that the node no longer holds. */
  const grow = (garbage: number): void => {
    node.used += garbage;
    node.committed = Math.max(node.committed, node.used);
  };
  return { node, grow, collector: new IdleCollector(deps) };
}

describe('IdleCollector', () => {
  it('collects once many actors left, the node is quiet and the heap grew by their garbage', async () => {
    const { node, grow, collector } = fakeNode({ heap: 60 * MiB });
    node.departed = MIN_DEPARTED;
    grow(MIN_GARBAGE_BYTES);
    const done = await collector.check();
    expect(node.collections).toBe(1);
    expect(done).toMatchObject({
      before: { used: 60 * MiB + MIN_GARBAGE_BYTES },
      after: { used: 60 * MiB, committed: 60 * MiB },
      departed: MIN_DEPARTED,
      rounds: 1,
    });
    // The next check starts counting anew: the same departures do not collect twice.
    grow(2 * MIN_GARBAGE_BYTES);
    expect(await collector.check()).toBeNull();
    expect(node.collections).toBe(1);
  });

  it('collects again while the pages the survivors are scattered over shrink, and no more', async () => {
    const { node, grow, collector } = fakeNode({ heap: 60 * MiB });
    node.departed = MIN_DEPARTED;
    grow(500 * MiB);
    node.shrinkBy = 40 * MiB; // 560 MiB committed, 60 used: 11 rounds to come within 64 MiB
    const done = await collector.check();
    expect(done?.rounds).toBe(11);
    expect(node.committed - node.used).toBeLessThan(MIN_GARBAGE_BYTES);
    expect(node.pauses).toBe(10);

    // Pages that no longer shrink: one more round to see it, then it stops.
    node.departed += MIN_DEPARTED;
    grow(500 * MiB);
    node.shrinkBy = 0;
    expect((await collector.check())?.rounds).toBe(2);

    // Never more than MAX_ROUNDS in one check.
    node.departed += MIN_DEPARTED;
    grow(5_000 * MiB);
    node.shrinkBy = MIN_SHRINK_BYTES;
    expect((await collector.check())?.rounds).toBe(MAX_ROUNDS);
  });

  it('leaves a busy node to V8', async () => {
    const { node, grow, collector } = fakeNode({ heap: 60 * MiB });
    node.departed = 10 * MIN_DEPARTED;
    grow(540 * MiB);
    node.busy = QUIET_UTILIZATION;
    expect(await collector.check()).toBeNull();
    node.busy = QUIET_UTILIZATION / 2;
    expect(await collector.check()).not.toBeNull();
    expect(node.collections).toBe(1);
  });

  it('does not collect for a few departures or a little garbage', async () => {
    const { node, grow, collector } = fakeNode({ heap: 60 * MiB });
    node.departed = MIN_DEPARTED - 1;
    grow(540 * MiB);
    expect(await collector.check()).toBeNull();
    node.departed = MIN_DEPARTED;
    node.used = 60 * MiB + MIN_GARBAGE_BYTES - 1;
    expect(await collector.check()).toBeNull();
    expect(node.collections).toBe(0);
  });

  it('measures garbage against what its last collection left, not against the start', async () => {
    const { node, grow, collector } = fakeNode({ heap: 60 * MiB });
    node.departed = MIN_DEPARTED;
    grow(340 * MiB);
    node.liveAfter = 300 * MiB; // actors that stay
    await collector.check();
    node.departed += MIN_DEPARTED;
    grow(MIN_GARBAGE_BYTES - 1);
    expect(await collector.check()).toBeNull();
    grow(1);
    expect(await collector.check()).not.toBeNull();
    expect(node.collections).toBe(2);
  });

  it('does nothing when the process cannot be asked to collect', async () => {
    const collector = new IdleCollector({
      departed: () => 10 * MIN_DEPARTED,
      heap: () => ({ used: 1024 * MiB, committed: 1024 * MiB }),
      utilization: () => 0,
      collect: null,
    });
    expect(await collector.check()).toBeNull();
  });
});

describe('fullCollection', () => {
  it("runs V8's full collection in a process started without --expose-gc, and exposes nothing", async () => {
    const collect = fullCollection();
    expect(collect).not.toBeNull();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    // Garbage that survived the young generation: V8 would keep it until its next full collection.
    let hold: object[] | null = Array.from({ length: 400_000 }, (_, i) => ({ i, s: `garbage ${i}` }));
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setTimeout(resolve, 0));
    const before = v8.getHeapStatistics().used_heap_size;
    expect(hold.length).toBe(400_000);
    hold = null;
    await collect?.();
    const after = v8.getHeapStatistics().used_heap_size;
    expect(before - after).toBeGreaterThan(16 * MiB);
  });
});
