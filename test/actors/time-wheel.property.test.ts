import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TimeWheel } from '../../src/actors/time-wheel.js';
import type { DueEntry } from '../../src/domain/model.js';

/**
 * The near wheel against a simple oracle: a list sorted by due time. Random adds (including
 * entries for slots the clock is already passing or has passed) interleaved with random
 * clock advances; after each advance the wheel must hand out exactly the oracle's due
 * entries — none early, none late, none twice.
 */
type Op = { kind: 'add'; offsetMs: number } | { kind: 'advance'; byMs: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  // Offsets relative to now: negative = a slot already passed or passing.
  fc.record({ kind: fc.constant('add' as const), offsetMs: fc.integer({ min: -50, max: 3000 }) }),
  fc.record({ kind: fc.constant('advance' as const), byMs: fc.integer({ min: 0, max: 400 }) }),
);

describe('TimeWheel (property, against a sorted-list oracle)', () => {
  it('takes exactly the entries due, never early, never twice', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 300 }), fc.integer({ min: 1, max: 50 }), (ops, slotMs) => {
        const wheel = new TimeWheel(slotMs);
        let oracle: DueEntry[] = [];
        let nowMs = 1_764_504_000_000 + 3; // not slot-aligned on purpose
        let seq = 0;
        const taken = new Set<string>();
        for (const o of ops) {
          if (o.kind === 'add') {
            const entry = { taskId: `t${seq++}`, taskType: 'x', priority: 5, dueMs: nowMs + o.offsetMs };
            wheel.add(entry);
            oracle.push(entry);
            continue;
          }
          nowMs += o.byMs;
          const got = wheel.takeDue(nowMs);
          const expected = oracle.filter((e) => e.dueMs <= nowMs);
          oracle = oracle.filter((e) => e.dueMs > nowMs);
          expect(got.map((e) => e.taskId).sort()).toEqual(expected.map((e) => e.taskId).sort());
          for (const e of got) {
            expect(e.dueMs).toBeLessThanOrEqual(nowMs);
            expect(taken.has(e.taskId)).toBe(false);
            taken.add(e.taskId);
          }
          expect(wheel.size).toBe(oracle.length);
          const min = oracle.reduce((m, e) => Math.min(m, e.dueMs), Infinity);
          expect(wheel.nextDueMs()).toBe(oracle.length === 0 ? null : min);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('holds a 300 000-entry slot and drains it in one take', () => {
    const wheel = new TimeWheel(10);
    const dueMs = 1_764_547_200_000;
    for (let i = 0; i < 300_000; i++) wheel.add({ taskId: `t${i}`, taskType: 'x', priority: 5, dueMs });
    expect(wheel.takeDue(dueMs - 1)).toHaveLength(0);
    expect(wheel.takeDue(dueMs)).toHaveLength(300_000);
    expect(wheel.size).toBe(0);
  });
});
