/**
 * A limit key offered a flood takes it in a slice at a time, so that a claim's `grant` asked
 * meanwhile is answered behind one slice, not behind the whole flood (W6: 200 000 due tasks
 * offered at the top of the hour held a claim of the only worker socket, and every quiet key's
 * task behind it, for 399 ms). Nothing offered is lost or reordered by waiting there.
 */
import { describe, expect, it } from 'vitest';
import { LIMIT } from '../../src/actors/limit-key.js';
import { ABSORB_SLICE } from '../../src/actors/limit-inbox.js';
import type { DueEntry } from '../../src/domain/model.js';
import { limitKeySystem } from './limit-key-system.js';

const nextTick = () => new Promise<void>((resolve) => setTimeout(resolve, 1));

const KEY = 'k:1';
const entry = (n: number, priority = 5): DueEntry => ({
  taskId: `task-${String(n).padStart(6, '0')}`,
  taskType: 't',
  priority,
  dueMs: n,
  limits: [KEY],
});
const FLOOD = ABSORB_SLICE * 8;

function floodKey() {
  const pushed: DueEntry[] = [];
  const system = limitKeySystem(
    {
      waitingTasks: async () => ({ waiting: [], truncated: false }),
      ready: {
        push: async (entries: DueEntry[]) => {
          pushed.push(...entries);
          return entries.length;
        },
      },
    },
    2,
  );
  return { system, pushed, ref: system.ref(LIMIT, KEY) };
}

/** What the key's describe says is offered and not yet taken in. */
function offeredNotTakenIn(system: ReturnType<typeof floodKey>['system']): number {
  const state = system.inspect(LIMIT.name, KEY)?.state as { offered: number } | undefined;
  return state?.offered ?? 0;
}

describe('a limit key offered a flood', () => {
  it('answers a grant asked during the flood before it has taken the flood in', async () => {
    const { system, ref } = floodKey();
    // The first offer activates the key; the flood comes in four large messages after it.
    ref.tell({ type: 'offer', entries: [entry(0)] });
    await ref.ask({ type: 'inspect' }, 1_000);
    for (let m = 0; m < 4; m++)
      ref.tell({ type: 'offer', entries: Array.from({ length: FLOOD / 4 }, (_, i) => entry(1 + m * (FLOOD / 4) + i)) });
    let leftAtAnswer = -1;
    const granted = await ref.ask({ type: 'grant', entries: [entry(0)] }, 1_000).then((answer) => {
      leftAtAnswer = offeredNotTakenIn(system);
      return answer.granted;
    });
    expect(granted).toEqual([entry(0).taskId]);
    // Four messages of two slices each: the grant came after at most the first slice.
    expect(leftAtAnswer).toBeGreaterThanOrEqual(FLOOD - ABSORB_SLICE);
    const view = await ref.ask({ type: 'inspect' }, 1_000);
    expect(view.waiting).toBe(FLOOD + 0); // all taken in by now (or still offered: both count)
    await system.shutdown();
  });

  it('lets the event loop turn between two slices of a flood (one slice a turn, not ten)', async () => {
    const { system, ref } = floodKey();
    ref.tell({ type: 'offer', entries: Array.from({ length: FLOOD }, (_, i) => entry(i)) });
    await ref.ask({ type: 'inspect' }, 1_000);
    // What an I/O callback of this turn would find still to be taken in, turn after turn.
    const leftEachTurn: number[] = [];
    while (leftEachTurn.at(-1) !== 0) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      leftEachTurn.push(offeredNotTakenIn(system));
    }
    // Eight slices: taken in over at least eight turns of the loop, never two in one.
    const steps = leftEachTurn.map((left, i) => (i === 0 ? FLOOD - left : leftEachTurn[i - 1]! - left));
    expect(Math.max(...steps)).toBeLessThanOrEqual(ABSORB_SLICE);
    await system.shutdown();
  });

  it('takes every offered task in, in order of urgency, none twice', async () => {
    const { system, ref, pushed } = floodKey();
    ref.tell({ type: 'offer', entries: Array.from({ length: FLOOD }, (_, i) => entry(i)) });
    // A more urgent one behind the flood, and a duplicate of a flood task.
    ref.tell({ type: 'offer', entries: [entry(FLOOD, 0), entry(7)] });
    // Everything taken in before any claim: the slices come a timer tick apart.
    await ref.ask({ type: 'inspect' }, 1_000);
    while (offeredNotTakenIn(system) > 0) await nextTick();
    const seen: string[] = [];
    for (let round = 0; seen.length < FLOOD + 1 && round < FLOOD; round++) {
      await ref.ask({ type: 'inspect' }, 1_000);
      const admitted = pushed.splice(0);
      if (admitted.length === 0) {
        await nextTick(); // the next slice of the offer comes by a timer
        continue;
      }
      const answer = await ref.ask({ type: 'grant', entries: admitted }, 1_000);
      seen.push(...answer.granted);
      ref.tell({ type: 'returned', taskIds: answer.granted });
    }
    expect(new Set(seen).size).toBe(FLOOD + 1);
    expect(seen).toHaveLength(FLOOD + 1);
    expect(offeredNotTakenIn(system)).toBe(0);
    // The urgent one went before the flood tasks taken in after it.
    expect(seen.indexOf(entry(FLOOD, 0).taskId)).toBeLessThan(seen.indexOf(entry(FLOOD - 1).taskId));
    await system.shutdown();
  });
});
