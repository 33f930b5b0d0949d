/**
 * The safety net's pending pass over a backlog its limit keys hold (a key that binds keeps
 * thousands waiting, the oldest page of every partition at every pass): a partition whose full
 * page is all held is read on from the page's end at the next pass, to the end of its overdue
 * tasks, so a task lost behind the backlog is found; a walk that found only gated tasks held
 * rests the partition for `GATED_REST_MS`, then starts again from the oldest; a short page, a
 * walk through free tasks, or a page where something was recovered never rests; a ring change
 * starts every partition from the oldest. Over a recording store and wheel; the pass end to end
 * is in test/e2e/safety-net.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { TypedEvents } from '../../src/lib/events.js';
import type { NodeEvents } from '../../src/domain/events.js';
import type { DueEntry } from '../../src/domain/model.js';
import type { ActorSystemApi } from '../../src/runtime/actor.js';
import { GATED_REST_MS, SafetyNet } from '../../src/services/safety-net.js';

const PAGE = 100;

function entries(partition: number, n: number, gated: boolean, from = 0): DueEntry[] {
  return Array.from({ length: n }, (_, i) => ({
    taskId: `p${partition}-${from + i}`,
    taskType: 't',
    priority: 0,
    dueMs: from + i,
    ...(gated ? { limits: ['customer:0'] } : {}),
  }));
}

/** A task no key holds, behind partition 5's backlog: the wheel recovers it when asked. */
const LOST: DueEntry = { taskId: 'lost', taskType: 't', priority: 0, dueMs: 10_000 };

/**
 * Partition 1: 250 gated tasks, all held; 2: a full page, one task not gated, and nothing
 * after it; 3: a short gated page; 4: full, gated, one recovered at every pass; 5: 300 gated
 * tasks held, then one lost.
 */
function net(clock: FakeClock, random = () => 0, owned: readonly number[] = [1, 2, 3, 4]) {
  const tasks = new Map<number, DueEntry[]>([
    [1, entries(1, 250, true)],
    [2, [...entries(2, PAGE - 1, true), ...entries(20, 1, false, PAGE - 1)]],
    [3, entries(3, 5, true)],
    [4, entries(4, PAGE, true)],
    [5, [...entries(5, 300, true), LOST]],
  ]);
  const reads: number[][] = [];
  /** Each read's first task, by partition. */
  const firsts: Map<number, string>[] = [];
  const recovered: string[] = [];
  const system = {
    ref: (_kind: unknown, key: string) => ({
      ask: async (message: { entries: DueEntry[] }) => {
        if (key === '4') return 1;
        const lost = message.entries.filter((e) => e === LOST);
        recovered.push(...lost.map((e) => e.taskId));
        return lost.length;
      },
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
      async pendingInPartitions(partitions, _toMs, limit, after) {
        reads.push([...partitions]);
        const out = new Map<number, DueEntry[]>();
        const first = new Map<number, string>();
        for (const p of partitions) {
          const cursor = after?.get(p);
          const all = tasks.get(p) ?? [];
          const from = cursor === undefined ? 0 : all.findIndex((e) => e.taskId === cursor.taskId) + 1;
          const page = all.slice(from, from + limit);
          if (page.length > 0) {
            out.set(p, page);
            first.set(p, page[0]!.taskId);
          }
        }
        firsts.push(first);
        return out;
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
  return { safetyNet, reads, firsts, recovered };
}

/** The partitions each pass read, a pass after each wait (ms) in turn, and where each read began. */
async function passesAfter(
  waits: readonly number[],
  random?: () => number,
): Promise<{ reads: number[][]; firsts: Map<number, string>[] }> {
  const clock = new FakeClock();
  const { safetyNet, reads, firsts } = net(clock, random);
  for (const wait of waits) {
    await clock.advance(wait);
    await safetyNet.sweep();
  }
  return { reads, firsts };
}

describe('the safety net and a backlog held by its limit keys', () => {
  it('walks a partition whose full page its keys hold to the end, rests it, then reads it from the oldest', async () => {
    const { reads, firsts } = await passesAfter([0, 5_000, 5_000, 5_000, GATED_REST_MS - 5_000 - 1, 1]);
    expect(reads).toEqual([
      [1, 2, 3, 4],
      [1, 2, 3, 4],
      [1, 2, 3, 4],
      [2, 3, 4],
      [2, 3, 4],
      [1, 2, 3, 4],
    ]);
    // Partition 1's pages: 0–99, 100–199, 200–249 (short: the walk ends, all held), then from 0.
    expect(firsts.map((f) => f.get(1))).toEqual(['p1-0', 'p1-100', 'p1-200', undefined, undefined, 'p1-0']);
    // Partition 2 (a task no key gates): walked past its full page, found nothing after, never rests.
    expect(firsts.map((f) => f.get(2))).toEqual(['p2-0', undefined, 'p2-0', undefined, 'p2-0', undefined]);
    // Short, or recovering: read from the oldest at every pass.
    expect(firsts.map((f) => f.get(3))).toEqual(Array(6).fill('p3-0'));
    expect(firsts.map((f) => f.get(4))).toEqual(Array(6).fill('p4-0'));
  });

  it('finds a task lost behind a held backlog of its partition', async () => {
    const clock = new FakeClock();
    const { safetyNet, recovered } = net(clock, () => 0, [5]);
    const passes: number[] = [];
    for (let pass = 0; pass < 5; pass++) {
      await clock.advance(5_000);
      passes.push((await safetyNet.sweep()).pending);
    }
    // 300 held tasks ahead of it: three pages, then the lost one.
    expect(passes).toEqual([0, 0, 0, 1, 0]);
    expect(recovered).toEqual(['lost']);
  });

  it('spreads the rests over half the rest time, so that the partitions of a flood do not wake together', async () => {
    // random 0.5: a rest of three quarters of GATED_REST_MS, from the pass that ended the walk.
    const { reads } = await passesAfter([0, 0, 0, (GATED_REST_MS * 3) / 4 - 1, 1], () => 0.5);
    expect(reads.map((r) => r.includes(1))).toEqual([true, true, true, false, true]);
  });

  it('reads every partition from the oldest at the next pass after the ring changed', async () => {
    const clock = new FakeClock();
    const { safetyNet, reads, firsts } = net(clock);
    await safetyNet.sweep();
    safetyNet.wake();
    await safetyNet.sweep();
    expect(reads).toEqual([
      [1, 2, 3, 4],
      [1, 2, 3, 4],
    ]);
    expect(firsts.map((f) => f.get(1))).toEqual(['p1-0', 'p1-0']);
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
