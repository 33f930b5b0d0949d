import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LimitInbox } from '../../src/actors/limit-inbox.js';
import { compareUrgency } from '../../src/actors/limit-waiting.js';
import type { DueEntry } from '../../src/domain/model.js';

/**
 * A limit key's inbox (decision 0042) against a simple oracle, the multiset of what was kept:
 * offers large enough to be kept (a slice of 2 here), in any order of urgency, small offers
 * staged (a queue key's fired ones), and takes of
 * any size with or without a bound, interleaved. Every take must answer the most urgent
 * entries kept (ties in any order), in order of urgency, each once, and with a bound none
 * less urgent than it — and stop only when the next is less urgent than the bound.
 */
type Op =
  | { kind: 'offer'; entries: { priority: number; dueMs: number }[] }
  | { kind: 'stage'; entries: { priority: number; dueMs: number }[] }
  | { kind: 'take'; max: number; bound?: { priority: number; dueMs: number } };

const urgency = fc.record({ priority: fc.integer({ min: 0, max: 2 }), dueMs: fc.integer({ min: 0, max: 20 }) });
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('offer' as const), entries: fc.array(urgency, { maxLength: 12 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('stage' as const), entries: fc.array(urgency, { maxLength: 4 }) }),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      { kind: fc.constant('take' as const), max: fc.integer({ min: 0, max: 15 }), bound: urgency },
      { requiredKeys: ['kind', 'max'] },
    ),
  },
);

describe('LimitInbox (property, against a multiset oracle)', () => {
  it('takes the most urgent kept entries in order, each once, and none past a bound', () => {
    fc.assert(
      fc.property(fc.array(op, { minLength: 1, maxLength: 200 }), (ops) => {
        const inbox = new LimitInbox(2);
        let kept: DueEntry[] = [];
        let n = 0;
        for (const o of ops) {
          if (o.kind === 'stage') {
            // A queue key's small fired offer: kept whatever its size, read with the rest.
            const entries = o.entries.map((u) => ({ taskId: `t${n++}`, taskType: 't', ...u }));
            inbox.stage(entries);
            kept.push(...entries);
          } else if (o.kind === 'offer') {
            const entries = o.entries.map((u) => ({ taskId: `t${n++}`, taskType: 't', ...u }));
            const direct = inbox.takeIn({ type: 'offer', entries }, true);
            if (entries.length > 2) {
              expect(direct).toEqual([]);
              kept.push(...entries);
            } else expect(direct).toBe(entries);
          } else {
            const bound = o.bound && { taskId: '', taskType: 't', ...o.bound };
            const sorted = [...kept].sort(compareUrgency);
            expect(inbox.peek() && compareUrgency(inbox.peek()!, sorted[0]!)).toBe(sorted.length > 0 ? 0 : undefined);
            const taken = inbox.take(o.max, bound);
            // In order, the most urgent there were, and each one kept and taken once.
            for (let i = 1; i < taken.length; i++)
              expect(compareUrgency(taken[i - 1]!, taken[i]!)).toBeLessThanOrEqual(0);
            for (let i = 0; i < taken.length; i++) expect(compareUrgency(taken[i]!, sorted[i]!)).toBe(0);
            const ids = new Set(taken.map((e) => e.taskId));
            expect(ids.size).toBe(taken.length);
            expect(taken.every((e) => kept.includes(e))).toBe(true);
            kept = kept.filter((e) => !ids.has(e.taskId));
            if (bound) for (const e of taken) expect(compareUrgency(e, bound)).toBeLessThanOrEqual(0);
            // It stops early only at the end, or where the next is less urgent than the bound.
            if (taken.length < o.max && kept.length > 0) {
              expect(bound).toBeDefined();
              expect(compareUrgency(inbox.peek()!, bound!)).toBeGreaterThan(0);
            }
          }
          expect(inbox.size).toBe(kept.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('reads a flood offered in 64 lists of equal urgency as one chain, in the order offered', () => {
    const inbox = new LimitInbox();
    const lists = Array.from({ length: 64 }, (_, l) =>
      Array.from({ length: 3_125 }, (_, i) => ({ taskId: `p${l}-${i}`, taskType: 't', priority: 0, dueMs: 1_000 })),
    );
    for (const entries of lists) expect(inbox.takeIn({ type: 'offer', entries }, true)).toEqual([]);
    expect(inbox.size).toBe(200_000);
    const taken = inbox.take(200_000);
    expect(taken.map((e) => e.taskId)).toEqual(lists.flat().map((e) => e.taskId));
    expect(inbox.size).toBe(0);
  });
});
