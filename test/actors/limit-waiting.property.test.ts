import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WaitingTasks } from '../../src/actors/limit-waiting.js';
import type { DueEntry } from '../../src/domain/model.js';

/**
 * A limit key's waiting tasks against a simple oracle: a list sorted by priority, due time
 * and arrival. Arrivals mostly in order (the run) and out of order (the heap), repeats,
 * deletions from the middle and takes of any size, interleaved: every take must answer
 * exactly the oracle's most urgent live tasks, in its order.
 */
type Op =
  | { kind: 'add'; id: number; priority: number; dueMs: number }
  | { kind: 'delete'; id: number }
  | { kind: 'take'; max: number; before?: { priority: number; dueMs: number } };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('add' as const),
      id: fc.integer({ min: 0, max: 80 }),
      priority: fc.integer({ min: 0, max: 2 }),
      dueMs: fc.integer({ min: 0, max: 20 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), id: fc.integer({ min: 0, max: 80 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('take' as const), max: fc.integer({ min: 0, max: 12 }) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('take' as const),
      max: fc.integer({ min: 0, max: 12 }),
      before: fc.record({ priority: fc.integer({ min: 0, max: 2 }), dueMs: fc.integer({ min: 0, max: 20 }) }),
    }),
  },
);

interface OracleItem {
  entry: DueEntry;
  seq: number;
}

describe('WaitingTasks (property, against a sorted-list oracle)', () => {
  it('takes the most urgent live tasks in order, each once', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 400 }), (ops) => {
        const waiting = new WaitingTasks();
        let oracle: OracleItem[] = [];
        let seq = 0;
        for (const o of ops) {
          const id = `t${String(o.kind === 'take' ? 0 : o.id).padStart(3, '0')}`;
          if (o.kind === 'add') {
            const entry: DueEntry = { taskId: id, taskType: 't', priority: o.priority, dueMs: o.dueMs };
            const fresh = !oracle.some((x) => x.entry.taskId === id);
            expect(waiting.add(entry)).toBe(fresh);
            if (fresh) oracle.push({ entry, seq: seq++ });
          } else if (o.kind === 'delete') {
            const present = oracle.some((x) => x.entry.taskId === id);
            expect(waiting.delete(id)).toBe(present);
            oracle = oracle.filter((x) => x.entry.taskId !== id);
          } else {
            oracle.sort(
              (a, b) => a.entry.priority - b.entry.priority || a.entry.dueMs - b.entry.dueMs || a.seq - b.seq,
            );
            expect(waiting.peek()?.taskId).toBe(oracle[0]?.entry.taskId);
            // With `before`: only those strictly more urgent than it.
            const b = o.before;
            const count = oracle
              .slice(0, o.max)
              .filter((x) => b === undefined || (x.entry.priority - b.priority || x.entry.dueMs - b.dueMs) < 0).length;
            const expected = oracle.slice(0, count).map((x) => x.entry.taskId);
            oracle = oracle.slice(count);
            const taken =
              b === undefined ? waiting.take(o.max) : waiting.take(o.max, { ...b, taskId: '', taskType: 't' });
            expect(taken.map((e) => e.taskId)).toEqual(expected);
          }
          expect(waiting.size).toBe(oracle.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('keeps order across a long in-order run with late arrivals among it', () => {
    const waiting = new WaitingTasks();
    for (let i = 0; i < 10_000; i++) waiting.add({ taskId: `a${i}`, taskType: 't', priority: 5, dueMs: 1_000 + i });
    // Late: more urgent than most of the run (due earlier), and a higher priority.
    waiting.add({ taskId: 'late', taskType: 't', priority: 5, dueMs: 1_500 });
    waiting.add({ taskId: 'urgent', taskType: 't', priority: 0, dueMs: 9_999_999 });
    const first = waiting.take(5_000).map((e) => e.taskId);
    expect(first[0]).toBe('urgent');
    expect(first.indexOf('late')).toBe(502); // after a0 … a500 (due 1 500 came first)
    expect(first.at(-1)).toBe('a4997');
    const rest = waiting.take(10_000).map((e) => e.taskId);
    expect(rest[0]).toBe('a4998');
    expect(rest).toHaveLength(5_002);
    expect(waiting.size).toBe(0);
  });
});
