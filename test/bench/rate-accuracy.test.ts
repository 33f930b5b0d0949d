import { describe, expect, it } from 'vitest';
import { maxInWindow } from '../../bench/stats.js';

describe('maxInWindow (the RATE workload)', () => {
  it('counts the most values in any half-open window', () => {
    expect(maxInWindow([], 1000)).toBe(0);
    expect(maxInWindow([0, 999, 1000, 1999], 1000)).toBe(2);
    expect(maxInWindow([0, 10, 20, 1005, 1010, 1015], 1000)).toBe(4);
  });

  it('finds a clump at the edge of two fixed windows (what a fixed-window limiter lets through)', () => {
    const late = Array.from({ length: 100 }, (_, i) => 900 + i);
    const early = Array.from({ length: 100 }, (_, i) => 1000 + i);
    expect(maxInWindow([...late, ...early], 1000)).toBe(200);
  });
});
