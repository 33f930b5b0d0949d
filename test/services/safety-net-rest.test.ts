/**
 * The safety net's pending pass leaves alone, for `GATED_REST_MS`, a partition whose whole page
 * of overdue tasks was held by limit keys (a key that binds keeps thousands waiting, the
 * oldest page of every partition at every pass): it reads the other partitions as before, a
 * short page or one with a task no key gates never rests, a partition where something was
 * recovered never rests, and a ring change wakes every partition. Over a recording store and
 * wheel; the pass end to end is in test/e2e/safety-net.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import { GATED_REST_MS, SafetyNet } from '../../src/services/safety-net.js';

const PAGE = 100;

function entries(partition: number, n: number, gated: boolean): DueEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    taskId: `p${partition}-${i}`,
    taskType: 't',
    priority: 0,
    dueMs: i,
    ...(gated ? { limits: ['customer:0'] } : {}),
  }));
}

/** Partition 1: a full page of gated tasks; 2: a full page, one task not gated; 3: a short gated page; 4: full, gated, one recovered. */
function net(clock: FakeClock, random = () => 0, owned: readonly number[] = [1, 2, 3, 4]) {
  const pages = new Map<number, DueEntry[]>([
    [1, entries(1, PAGE, true)],
    [2, [...entries(2, PAGE - 1, true), ...entries(20, 1, false)]],
    [3, entries(3, 5, true)],
    [4, entries(4, PAGE, true)],
  ]);
  const reads: number[][] = [];
  const system = {
    ref: (_kind: unknown, key: string) => ({
      ask: async () => (key === '4' ? 1 : 0),
    }),
  } as unknown as ActorSystemApi;
  const safetyNet = new SafetyNet({
    tasks: {
      async expiredLeases() {
        return [];
      },
      async expireLease() {
        return null;
      },
      async pendingInPartitions(partitions: readonly number[]) {
        reads.push([...partitions]);
        return new Map(partitions.map((p) => [p, pages.get(p) ?? []]));
      },
    },
    schedules: {
      async wakesInPartitions() {
        return new Map();
      },
    },
    wakes: { wake: () => undefined },
    system,
    clock,
    backoff: { baseMs: 1_000, maxMs: 60_000 },
    graceMs: 10_000,
    ownedPartitions: () => [...owned],
    placement: { requeue: async () => undefined },
    dependents: { transitions: () => undefined },
    allGated: (page: readonly DueEntry[]) => page.every((e) => e.limits !== undefined),
    random,
    events: new TypedEvents<NodeEvents>(() => undefined),
  });
  return { safetyNet, reads };
}

/** The partitions each pass read, a pass after each wait (ms) in turn. */
async function passesAfter(waits: readonly number[], random?: () => number): Promise<number[][]> {
  const clock = new FakeClock();
  const { safetyNet, reads } = net(clock, random);
  for (const wait of waits) {
    await clock.advance(wait);
    await safetyNet.sweep();
  }
  return reads;
}

describe('the safety net and a flood held by its limit key', () => {
  it('rests a partition whose full page its keys hold, and reads it again after the rest', async () => {
    expect(await passesAfter([0, 5_000, GATED_REST_MS - 5_000 - 1, 1])).toEqual([
      [1, 2, 3, 4],
      [2, 3, 4],
      [2, 3, 4],
      [1, 2, 3, 4],
    ]);
  });

  it('spreads the rests over half the rest time, so that the partitions of a flood do not wake together', async () => {
    // random 0.5: a rest of three quarters of GATED_REST_MS.
    expect(await passesAfter([0, (GATED_REST_MS * 3) / 4 - 1, 1], () => 0.5)).toEqual([
      [1, 2, 3, 4],
      [2, 3, 4],
      [1, 2, 3, 4],
    ]);
  });

  it('reads every partition again at the next pass after the ring changed', async () => {
    const clock = new FakeClock();
    const { safetyNet, reads } = net(clock);
    await safetyNet.sweep();
    safetyNet.wake();
    await safetyNet.sweep();
    expect(reads).toEqual([
      [1, 2, 3, 4],
      [1, 2, 3, 4],
    ]);
  });

  it('reads four partitions a statement', async () => {
    // On the embedded default's one connection, one statement for 64 partitions held everything
    // 40–120 ms, and one for 16 still 20–27 ms.
    const clock = new FakeClock();
    const owned = Array.from({ length: 10 }, (_, i) => i + 10);
    const { safetyNet, reads } = net(clock, () => 0, owned);
    await safetyNet.sweep();
    expect(reads).toEqual([owned.slice(0, 4), owned.slice(4, 8), owned.slice(8)]);
  });
});
