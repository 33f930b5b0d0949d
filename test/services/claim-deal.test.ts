import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deal } from '../../src/services/dispatcher.js';

/**
 * How a claim for several sockets splits what one take found (`deal`): against an oracle that
 * hands out one entry at a time to the share holding the fewest of those not yet full.
 */
describe('deal: the entries of a claim for several workers, split among their shares', () => {
  const oracle = (n: number, wants: readonly number[]): number[] => {
    const counts = wants.map(() => 0);
    for (let k = 0; k < n; k++) {
      let best = -1;
      for (let i = 0; i < wants.length; i++)
        if (counts[i]! < wants[i]! && (best === -1 || counts[i]! < counts[best]!)) best = i;
      if (best === -1) break;
      counts[best]!++;
    }
    return counts;
  };

  it('never gives a share more than it wants, gives out every entry it can, and spreads them evenly', () => {
    fc.assert(
      fc.property(fc.array(fc.nat(30), { minLength: 1, maxLength: 12 }), fc.nat(400), (wants, extra) => {
        const total = wants.reduce((a, b) => a + b, 0);
        const n = Math.min(total, extra);
        const shares = wants.map((maxTasks, i) => ({ workerId: `w${i}`, maxTasks }));
        const owners = deal(n, shares);
        expect(owners).toHaveLength(n);
        const counts = wants.map((_, i) => owners.filter((o) => o === i).length);
        for (const [i, want] of wants.entries()) expect(counts[i]).toBeLessThanOrEqual(want);
        // Even: the same counts as the one-at-a-time oracle, in contiguous runs in share order.
        expect([...counts].sort((a, b) => a - b)).toEqual(oracle(n, wants).sort((a, b) => a - b));
        expect(owners).toEqual([...owners].sort((a, b) => a - b));
      }),
    );
  });

  it('splits 100 entries among 8 sockets of 250 credits 13 or 12 each, and 2 000 all 250', () => {
    const shares = Array.from({ length: 8 }, (_, i) => ({ workerId: `w${i}`, maxTasks: 250 }));
    const count = (owners: number[]) => shares.map((_, i) => owners.filter((o) => o === i).length);
    expect(count(deal(100, shares)).sort()).toEqual([12, 12, 12, 12, 13, 13, 13, 13]);
    expect(count(deal(2000, shares))).toEqual(shares.map(() => 250));
  });
});
